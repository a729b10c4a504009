"""The command line: ``grpo-rlvr config | demo | serve``, thin adapters over ``skill``.

A caller's mistake prints one message to stderr and exits with status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.commands import (
    command_cancel,
    command_config,
    command_demo,
    command_inspect,
    command_logs,
    command_memory,
    command_review,
    command_route,
    command_run,
    command_runs,
    command_serve,
    command_status,
)
from server.tool_errors import os_error_message
from skill.errors import SkillError, pydantic_error_message
from skill.routing.route import SignalKind
from skill.state import STATE_ROOT_ENV

USAGE_ERROR = 2


def _add_hardware_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--request", help="request JSON file, or - for stdin; flags override it")
    parser.add_argument("--cpu", action="store_true", help="target this machine's CPU")
    parser.add_argument("--gpu", help="GPU model, e.g. H100, A100-40GB, L4, T4")
    parser.add_argument("--gpus-per-node", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--memory-gib-per-gpu", type=float, help="memory per GPU (on CPU: RAM) in GiB")
    parser.add_argument("--method", choices=["full", "lora", "qlora", "auto"])
    parser.add_argument(
        "--output",
        choices=["summary", "json", "script", "launch"],
        default="summary",
        help="launch: write the launch files (accelerate config, launch_node.sh, script, slurm.sbatch) into --dir",
    )
    parser.add_argument("--dir", default="grpo-launch", help="where --output launch writes the files")


def _add_recipe_commands(commands: Any) -> None:
    """config (emit_grpo_config) and memory (estimate_memory): answers computed here, nothing trained."""
    config = commands.add_parser("config", help="emit a validated GRPO recipe (emit_grpo_config)")
    _add_hardware_flags(config)
    config.add_argument("--model", help="HF id, local directory, or embedded:SmolLM2-135M-Instruct")
    config.add_argument("--parameters-b", type=float, help="billions of parameters (default: the model's config.json)")
    config.add_argument("--reward", action="append", help="NAME,ROLE[,WEIGHT]; repeat for each reward")
    config.add_argument("--dataset", help="dataset id or local file")
    config.add_argument("--column", action="append", help="a dataset column the rewards read; repeatable")
    config.add_argument("--variant", help="named variant, e.g. dr_grpo, dapo, gspo")
    config.add_argument("--symptom", action="append", help="observed symptom; repeatable")
    config.add_argument("--max-steps", type=int)
    config.add_argument("--report-to", choices=["trackio", "wandb", "tensorboard", "none"], help="the tracker")
    config.add_argument("--price-per-gpu-hour", type=float, help="price of one GPU-hour: the time line adds a cost")
    config.add_argument(
        "--sharding", choices=["ddp", "zero2", "zero3", "fsdp2"], help="how several trainers share the state"
    )
    config.add_argument("--set", action="append", help="GRPOConfig override FIELD=VALUE; repeatable")
    config.set_defaults(handler=command_config)

    memory = commands.add_parser("memory", help="estimate GRPO memory per GPU or in CPU RAM (estimate_memory)")
    _add_hardware_flags(memory)
    memory.add_argument("--model", help="HF id, local directory with config.json, or embedded:SmolLM2-135M-Instruct")
    memory.add_argument("--batch", type=int, help="per_device_train_batch_size")
    memory.add_argument("--prompt-length", type=int, help="longest prompt in tokens")
    memory.add_argument("--completion-length", type=int, help="max_completion_length")
    memory.add_argument("--beta", type=float)
    memory.add_argument("--vllm-share", type=float, help="vllm_gpu_memory_utilization")
    memory.add_argument("--sharding", choices=["none", "zero2", "zero3", "fsdp"])
    memory.add_argument("--no-checkpointing", action="store_true")
    memory.add_argument("--no-vllm", action="store_true")
    memory.add_argument("--sleep-mode", action="store_true", help="vllm_enable_sleep_mode")
    memory.set_defaults(handler=command_memory)


def _add_reading_commands(commands: Any) -> None:
    """route (route_check), inspect (inspect_rewards) and review (record_review): the checks before training."""
    route = commands.add_parser("route", help="is GRPO the right tool? measured by sampling (route_check)")
    route.add_argument("--request", help="RouteRequest JSON file, or - for stdin; flags override it")
    route.add_argument("--signal", choices=list(typing.get_args(SignalKind)))
    route.add_argument("--verifier", help="NAME,ROLE of the reward that decides pass/fail")
    route.add_argument("--param", action="append", help="verifier param KEY=VALUE; repeatable")
    route.add_argument("--model", help="model to probe: hub id, local directory (default: the embedded SmolLM2)")
    route.add_argument("--dataset", help="prompts: hub dataset id, .jsonl/.json/.csv/.parquet or embedded:addition")
    route.add_argument("--prompt-column")
    route.add_argument("--engine", choices=["auto", "transformers", "vllm", "endpoint"], help="what samples")
    route.add_argument("--base-url", help="an OpenAI-compatible server's API root (--engine endpoint)")
    route.add_argument("--served-model", help="the name the endpoint serves the model as (default: --model)")
    route.add_argument("--num-prompts", type=int)
    route.add_argument("--n", type=int, help="samples per prompt (default 8)")
    route.add_argument("--k", type=int, help="largest k for pass@k (default n)")
    route.add_argument("--temperature", type=float)
    route.add_argument("--max-new-tokens", type=int)
    route.add_argument("--seed", type=int)
    route.add_argument("--output", choices=["summary", "json"], default="summary")
    route.set_defaults(handler=command_route)

    inspect = commands.add_parser("inspect", help="the mandatory reward read (inspect_rewards)")
    inspect.add_argument("--request", help="InspectionRequest JSON file, or - for stdin; flags override it")
    inspect.add_argument("--reward", action="append", help="NAME,ROLE[,WEIGHT]; repeatable")
    inspect.add_argument("--samples", help="JSONL of {prompt, completion, columns, group}")
    inspect.add_argument("--route", help="reuse the samples of a route_check decision id")
    inspect.add_argument("--samples-of", help="reuse an earlier inspection's samples (its labels carry over)")
    inspect.add_argument("--interactive", action="store_true", help="review in the terminal right away")
    inspect.add_argument("--reviewer")
    inspect.add_argument("--output", choices=["summary", "markdown", "json"], default="summary")
    inspect.set_defaults(handler=command_inspect)

    review = commands.add_parser("review", help="record a reader's blind labels for an inspection (record_review)")
    review.add_argument("report_id")
    review.add_argument("--labels", help="labels (and amendments) JSON exported from the HTML reading page")
    review.add_argument("--reviewer")
    review.add_argument("--kind", choices=["human", "agent", "program"], help="who read (default: human)")
    review.add_argument("--interactive", action="store_true", help="label sample by sample in the terminal, blind")
    review.add_argument(
        "--accept-unread",
        metavar="REASON",
        help="train on these rewards without a read: opens the gate as 'reward not reviewed', stamped on the recipe, "
        "the run and the model card",
    )
    review.set_defaults(handler=command_review)


def _add_run_commands(commands: Any) -> None:
    """run, status, logs, cancel, runs: the runner's job tools."""
    run = commands.add_parser("run", help="start (or resume) a GRPO run of a recipe (run_grpo)")
    run.add_argument("recipe", nargs="?", help="GRPORecipe JSON file (grpo-rlvr config --output json)")
    run.add_argument("--run-id")
    run.add_argument("--resume", metavar="RUN_ID", help="continue this run from its last checkpoint")
    run.add_argument("--force", action="store_true", help="override the memory and route checks")
    run.add_argument("--processes", type=int, default=1, help="CPU recipes: processes (accelerate, gloo)")
    run.add_argument("--nodes", type=int, default=1, help="CPU recipes with --slurm: spread the processes over N nodes")
    run.add_argument(
        "--slurm",
        metavar="JSON",
        help='submit to Slurm with these settings: a JSON object or file, e.g. \'{"partition": "gpu", "time_limit": '
        '"04:00:00", "setup": ["source .venv/bin/activate"]}\' ({} for the cluster\'s defaults)',
    )
    run.add_argument(
        "--sharding", choices=["ddp", "zero2", "zero3", "fsdp2"], help="re-plan the sharding (default: the recipe's)"
    )
    run.add_argument(
        "--rehearse", action="store_true", help="run a GPU recipe's own plan on this machine's CPUs first (minutes)"
    )
    run.add_argument("--force-reason")
    run.set_defaults(handler=command_run)
    status = commands.add_parser("status", help="a run's state, metrics and health (run_status)")
    status.add_argument("run_id")
    status.add_argument("--wait", type=float, default=0.0, help="follow it for up to this many seconds")
    status.add_argument("--until-step", type=int, help="with --wait: stop following once the run reaches this step")
    status.add_argument("--output", choices=["summary", "json"], default="summary")
    status.set_defaults(handler=command_status)
    logs = commands.add_parser("logs", help="tail a run's log (run_logs)")
    logs.add_argument("run_id")
    logs.add_argument("--lines", type=int, default=100)
    logs.set_defaults(handler=command_logs)
    cancel = commands.add_parser("cancel", help="stop a run (cancel_run)")
    cancel.add_argument("run_id")
    cancel.set_defaults(handler=command_cancel)
    runs = commands.add_parser("runs", help="list runs (list_runs)")
    runs.set_defaults(handler=command_runs)


def _add_demo_and_serve(commands: Any) -> None:
    """demo (the walkthrough on the embedded model) and serve (the MCP server)."""
    demo = commands.add_parser("demo", help="the main flow on the embedded SmolLM2 and its addition task")
    demo.add_argument(
        "--yes", action="store_true", help="let a program read the demo's samples blind (stamped reviewer kind program)"
    )
    demo.add_argument("--recipe-only", action="store_true", help="only emit and print the demo's recipe")
    demo.add_argument("--steps", type=int, default=40)
    demo.add_argument("--output", choices=["summary", "json", "script"], default="summary")
    demo.set_defaults(handler=command_demo)

    serve = commands.add_parser("serve", help="run the MCP server (stdio; --http for streamable HTTP)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp")
    serve.add_argument(
        "--host",
        help="address to bind with --http (default 127.0.0.1; any non-loopback address needs GRPO_RLVR_MCP_TOKEN)",
    )
    serve.add_argument("--port", type=int, help="port with --http (default 8765)")
    serve.set_defaults(handler=command_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-rlvr", description="GRPO with verifiable rewards on TRL.")
    parser.add_argument("--state-root", help=f"where runs and inspections live (default: ${STATE_ROOT_ENV})")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_commands in (_add_recipe_commands, _add_reading_commands, _add_run_commands, _add_demo_and_serve):
        add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.state_root:
        os.environ[STATE_ROOT_ENV] = str(Path(args.state_root).expanduser().resolve())
    try:
        status = args.handler(args)
    except SkillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except ValidationError as exc:
        print(f"error: {pydantic_error_message(exc, 'request')}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as exc:
        print(f"error: {os_error_message(exc)}", file=sys.stderr)
        return USAGE_ERROR
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
