"""The command line: ``grpo-rlvr config | demo | serve``, thin adapters over ``skill``.

A caller's mistake prints one message to stderr and exits with status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skill.errors import SkillError, pydantic_error_message
from skill.routing.route import SignalKind
from skill.state import STATE_ROOT_ENV

USAGE_ERROR = 2


def _parse_value(text: str) -> Any:
    """``--set`` values are JSON when they parse as JSON (numbers, booleans, lists), else plain strings."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_reward(text: str) -> dict[str, Any]:
    parts = text.split(",")
    if len(parts) not in (2, 3):
        raise SkillError(
            f"--reward {text!r} is not NAME,ROLE[,WEIGHT].", "Send e.g. --reward exact_match,correctness,1"
        )
    spec: dict[str, Any] = {"name": parts[0], "role": parts[1]}
    if len(parts) == 3:
        try:
            spec["weight"] = float(parts[2])
        except ValueError:
            raise SkillError(f"--reward weight {parts[2]!r} is not a number.", "Send e.g. 0.2.") from None
    return spec


def _read_request(args: argparse.Namespace, contract: str) -> dict[str, Any]:
    """The JSON request of --request (a file, or - for stdin), or an empty one."""
    if not args.request:
        return {}
    text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text()
    try:
        request = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SkillError(f"--request is not valid JSON ({exc}).", f"Send a {contract} as JSON.") from None
    if not isinstance(request, dict):
        raise SkillError("--request must be a JSON object.", f"Send a {contract} as JSON.")
    return request


def _add_hardware_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--request", help="request JSON file, or - for stdin; flags override it")
    parser.add_argument("--cpu", action="store_true", help="target this machine's CPU")
    parser.add_argument("--gpu", help="GPU model, e.g. H100, A100-40GB, L4, T4")
    parser.add_argument("--gpus-per-node", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--memory-gib-per-gpu", type=float, help="memory per GPU (on CPU: RAM) in GiB")
    parser.add_argument("--method", choices=["full", "lora", "qlora", "auto"])
    parser.add_argument("--output", choices=["summary", "json", "script"], default="summary")


def _apply_hardware_flags(args: argparse.Namespace, request: dict[str, Any]) -> None:
    hardware = request.setdefault("hardware", {})
    if args.cpu:
        hardware["accelerator"] = "cpu"
    if args.gpu:
        hardware["gpu_model"] = args.gpu
    for key in ("gpus_per_node", "nodes", "memory_gib_per_gpu"):
        if getattr(args, key) is not None:
            hardware[key] = getattr(args, key)
    if args.method:
        request["method"] = args.method


def _request_from_args(args: argparse.Namespace) -> dict[str, Any]:
    request = _read_request(args, "RecipeRequest")
    if args.model:
        request.setdefault("model", {})["name"] = args.model
    if args.parameters_b is not None:
        request.setdefault("model", {})["parameters_billions"] = args.parameters_b
    _apply_hardware_flags(args, request)
    if args.method:
        request["method"] = args.method
    if args.reward:
        request["rewards"] = [_parse_reward(text) for text in args.reward]
    if args.dataset:
        request.setdefault("dataset", {})["name"] = args.dataset
    if args.column:
        request.setdefault("dataset", {})["columns"] = args.column
    if args.variant:
        request["variant"] = args.variant
    if args.symptom:
        request["symptoms"] = args.symptom
    if args.max_steps is not None:
        request["max_steps"] = args.max_steps
    for assignment in args.set or []:
        field, sep, value = assignment.partition("=")
        if not sep:
            raise SkillError(f"--set {assignment!r} is not FIELD=VALUE.", "Send e.g. --set learning_rate=1e-6")
        request.setdefault("overrides", {})[field] = _parse_value(value)
    return request


def _print_recipe(recipe: Any, output: str) -> None:
    if output == "json":
        print(recipe.model_dump_json(indent=2))
    elif output == "script":
        print(recipe.to_script())
    else:
        print(recipe.summary())


def command_config(args: argparse.Namespace) -> None:
    from skill.recipe.emit import RecipeRequest, emit_grpo_config

    request = RecipeRequest.model_validate(_request_from_args(args))
    _print_recipe(emit_grpo_config(request), args.output)


def command_memory(args: argparse.Namespace) -> None:
    from skill.memory.estimate import MemoryRequest, estimate_memory

    request = _read_request(args, "MemoryRequest")
    _apply_hardware_flags(args, request)
    if request.get("method") == "auto":
        raise SkillError("estimate_memory compares methods itself (see its remedies).", "Send full, lora or qlora.")
    flags = {
        "model": args.model,
        "per_device_train_batch_size": args.batch,
        "prompt_length": args.prompt_length,
        "completion_length": args.completion_length,
        "beta": args.beta,
        "vllm_gpu_memory_utilization": args.vllm_share,
        "sharding": args.sharding,
    }
    request.update({key: value for key, value in flags.items() if value is not None})
    if args.no_checkpointing:
        request["activation_checkpointing"] = False
    if args.no_vllm:
        request["use_vllm"] = False
    if args.sleep_mode:
        request["vllm_enable_sleep_mode"] = True
    estimate = estimate_memory(MemoryRequest.model_validate(request))
    print(estimate.model_dump_json(indent=2) if args.output == "json" else estimate.summary())


def _print_progress(done: float, total: float, message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def command_route(args: argparse.Namespace) -> None:
    from skill.routing.route import RouteRequest, route_check

    request = _read_request(args, "RouteRequest")
    if args.signal:
        request["signal"] = args.signal
    if args.verifier:
        verifier = _parse_reward(args.verifier)
        verifier["params"] = {
            key: _parse_value(value) for key, _, value in (p.partition("=") for p in args.param or [])
        }
        request["verifier"] = verifier
    probe_flags = {
        "model": args.model,
        "dataset": args.dataset,
        "prompt_column": args.prompt_column,
        "num_prompts": args.num_prompts,
        "n": args.n,
        "k": args.k,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "seed": args.seed,
    }
    given = {key: value for key, value in probe_flags.items() if value is not None}
    if given:
        request.setdefault("probe", {}).update(given)
    decision = route_check(RouteRequest.model_validate(request), progress=_print_progress)
    if args.output == "json":
        print(decision.model_dump_json(indent=2))
        return
    print(f"route: {decision.route}{' (provisional)' if decision.provisional else ''}   id: {decision.id}")
    for reason in decision.reasons:
        print(f"  because: {reason}")
    if decision.evidence:
        e = decision.evidence
        print(
            f"  pass@1 {e.pass_at_1:.3f}  pass@{e.n} {e.pass_at_k[str(len(e.pass_at_k))]:.3f}  "
            f"learnable {e.learnable_fraction:.2f}  successes per prompt {e.per_prompt_successes}"
        )
    for warning in decision.warnings:
        print(f"  warning: {warning}")
    print(f"  next: {decision.next_step}" + (f" (skill {decision.next_skill})" if decision.next_skill else ""))


def command_inspect(args: argparse.Namespace) -> None:
    from skill.inspection.run import inspect_rewards
    from skill.inspection.schema import InspectionRequest

    request = _read_request(args, "InspectionRequest")
    if args.reward:
        request["rewards"] = [_parse_reward(text) for text in args.reward]
    if args.samples:
        request["samples"] = [json.loads(line) for line in Path(args.samples).read_text().splitlines() if line.strip()]
    if args.route:
        request["route_decision_id"] = args.route
    report = inspect_rewards(InspectionRequest.model_validate(request), progress=_print_progress)
    if args.output == "json":
        print(report.model_dump_json(indent=2))
    else:
        print(Path(report.paths["markdown"]).read_text() if args.output == "markdown" else _inspection_summary(report))
        print(f"\nRead every sample: {report.paths['html']} (or {report.paths['markdown']}).")
        print(f"Then: grpo-rlvr review {report.id} --reviewer NAME --labels LABELS.json   (or --interactive)")
    if args.interactive:
        _interactive_review(report, args.reviewer or "")


def _inspection_summary(report: Any) -> str:
    lines = [f"inspection {report.id}: {len(report.samples)} samples, verdict {report.verdict}"]
    for name, stats in report.stats.items():
        lines.append(f"  {name:20s} mean {stats.mean}  std {stats.std}  failures {stats.failure_rate:.0%}")
    lines += [f"  {flag.severity:8s} {flag.code}: {flag.message}" for flag in report.flags]
    hacked = [probe for probe in report.probe_results if probe.hacked]
    lines.append(f"  probes: {len(report.probe_results)} tried, {len(hacked)} hacked")
    return "\n".join(lines)


def _interactive_review(report: Any, reviewer: str) -> None:
    from skill.inspection.gate import record_review
    from skill.inspection.schema import ReviewRequest

    if not sys.stdin.isatty():
        raise SkillError("An interactive review needs a terminal.", "Use --labels FILE instead.")
    reviewer = reviewer or input("Your name: ").strip()
    labels: dict[int, bool] = {}
    for sample in report.samples:
        scores = ", ".join(f"{name}={value}" for name, value in sample.scores.items())
        print(
            f"\n--- sample {sample.id} --- {scores}  columns {sample.columns}\n{sample.prompt}\n>>> {sample.completion}"
        )
        answer = ""
        while answer not in ("a", "d", "q"):
            answer = input("[a]gree with the judgment, [d]isagree, [q]uit: ").strip().lower()[:1]
        if answer == "q":
            break
        labels[sample.id] = answer == "a"
    result = record_review(ReviewRequest(report_id=report.id, reviewer=reviewer, labels=labels))
    print(f"verdict: {result.verdict}")
    for reason in result.verdict_reasons:
        print(f"  - {reason}")


def command_review(args: argparse.Namespace) -> None:
    from skill.inspection.gate import record_review
    from skill.inspection.run import load_report
    from skill.inspection.schema import ReviewRequest

    if args.interactive:
        _interactive_review(load_report(args.report_id), args.reviewer or "")
        return
    request: dict[str, Any] = {"report_id": args.report_id}
    if args.labels:
        exported = json.loads(Path(args.labels).read_text())
        request.update({key: exported[key] for key in ("reviewer", "reviewer_kind", "labels") if key in exported})
    if args.reviewer:
        request["reviewer"] = args.reviewer
    if args.agent:
        request["reviewer_kind"] = "agent"
    if args.yes:
        request["non_interactive"] = True
    if not request.get("reviewer"):
        raise SkillError("No reviewer named.", "Send --reviewer NAME (or a labels file that has one).")
    report = record_review(ReviewRequest.model_validate(request))
    print(f"{report.id}: verdict {report.verdict}")
    for reason in report.verdict_reasons:
        print(f"  - {reason}")


def _print_status(status: Any) -> None:
    print(
        f"{status.run_id}: {status.state}  step {status.step}/{status.max_steps or '?'}"
        + (f"  eta {status.eta_seconds:.0f} s" if status.eta_seconds else "")
    )
    if status.reason:
        print(f"  reason: {status.reason}")
    for point in status.last_metrics[-3:]:
        rewards = " ".join(
            f"{k.split('/')[1]}={v:.3f}"
            for k, v in point.items()
            if k.startswith("rewards/") and k.endswith("/mean") and isinstance(v, int | float)
        )
        print(f"  step {point.get('step')}: reward {point.get('reward', float('nan')):.3f} {rewards}")
    for warning in status.health:
        print(f"  health: {warning['message']}")
    for name, path in status.paths.items():
        print(f"  {name}: {path}")


def command_run(args: argparse.Namespace) -> None:
    from skill.recipe.schema import GRPORecipe
    from skill.runs.jobs import RunRequest, run_grpo

    recipe = None
    if args.recipe:
        recipe = GRPORecipe.model_validate_json(Path(args.recipe).read_text())
    request = RunRequest(
        recipe=recipe,
        run_id=args.run_id,
        resume_run_id=args.resume,
        processes=args.processes,
        force=args.force,
        force_reason=args.force_reason or "",
    )
    _print_status(run_grpo(request))


def command_status(args: argparse.Namespace) -> None:
    from skill.runs.jobs import run_status

    status = run_status(args.run_id, args.wait, progress=_print_progress if args.wait else None)
    print(status.model_dump_json(indent=2)) if args.output == "json" else _print_status(status)


def command_logs(args: argparse.Namespace) -> None:
    from skill.runs.jobs import run_logs

    print("\n".join(run_logs(args.run_id, args.lines).lines))


def command_cancel(args: argparse.Namespace) -> None:
    from skill.runs.jobs import cancel_run

    _print_status(cancel_run(args.run_id))


def command_runs(args: argparse.Namespace) -> None:
    from skill.runs.jobs import list_runs

    for status in list_runs().runs:
        print(f"{status.run_id:40s} {status.state:10s} step {status.step}/{status.max_steps or '?'}")


def command_demo(args: argparse.Namespace) -> None:
    from skill.demo.pipeline import demo_recipe_request, run_demo
    from skill.recipe.emit import emit_grpo_config

    if not args.recipe_only:
        if not args.yes:
            raise SkillError(
                "The demo reviews its reward inspection non-interactively and needs your explicit --yes for that.",
                "Run grpo-rlvr demo --yes (make demo does), or inspect and review yourself: grpo-rlvr inspect/review.",
            )
        result = run_demo(steps=args.steps, eval_prompts=args.eval_prompts, samples_per_prompt=args.samples)
        if args.output == "json":
            print(result.model_dump_json(indent=2))
        return
    if args.output == "summary":
        print("grpo-rlvr demo: the embedded SmolLM2-135M-Instruct learning 'What is a + b?' on this CPU.\n")
    recipe = emit_grpo_config(demo_recipe_request())
    _print_recipe(recipe, args.output)


def command_serve(args: argparse.Namespace) -> None:
    """stdio by default (what a client that spawns the server speaks); --http for a long-lived server."""
    if not args.http:
        if args.host is not None or args.port is not None:
            raise SkillError("--host and --port apply to --http only.", "Add --http, or drop them for stdio.")
        from server.mcp_server import serve_stdio

        serve_stdio()
        return
    from server.http_transport import DEFAULT_HOST, DEFAULT_PORT
    from server.mcp_server import serve_http

    port = DEFAULT_PORT if args.port is None else args.port
    if not 0 < port < 65536:
        raise SkillError(f"--port {port} is not a TCP port.", f"Send 1-65535, e.g. {DEFAULT_PORT}.")
    serve_http(args.host or DEFAULT_HOST, port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-rlvr", description="GRPO with verifiable rewards on TRL.")
    parser.add_argument("--state-root", help=f"where runs and inspections live (default: ${STATE_ROOT_ENV})")
    commands = parser.add_subparsers(dest="command", required=True)

    config = commands.add_parser("config", help="emit a validated GRPO recipe (emit_grpo_config)")
    _add_hardware_flags(config)
    config.add_argument("--model", help="HF id, local directory, or embedded:SmolLM2-135M-Instruct")
    config.add_argument("--parameters-b", type=float, help="parameter count in billions (unknown models)")
    config.add_argument("--reward", action="append", help="NAME,ROLE[,WEIGHT]; repeat for each reward")
    config.add_argument("--dataset", help="dataset id or local file")
    config.add_argument("--column", action="append", help="a dataset column the rewards read; repeatable")
    config.add_argument("--variant", help="named variant, e.g. dr_grpo, dapo, gspo")
    config.add_argument("--symptom", action="append", help="observed symptom; repeatable")
    config.add_argument("--max-steps", type=int)
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

    route = commands.add_parser("route", help="is GRPO the right tool? measured by sampling (route_check)")
    route.add_argument("--request", help="RouteRequest JSON file, or - for stdin; flags override it")
    route.add_argument("--signal", choices=list(typing.get_args(SignalKind)))
    route.add_argument("--verifier", help="NAME,ROLE of the reward that decides pass/fail")
    route.add_argument("--param", action="append", help="verifier param KEY=VALUE; repeatable")
    route.add_argument("--model", help="model to probe (default: the embedded SmolLM2)")
    route.add_argument("--dataset", help="prompts: .jsonl/.json/.csv/.parquet or embedded:addition")
    route.add_argument("--prompt-column")
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
    inspect.add_argument("--interactive", action="store_true", help="review in the terminal right away")
    inspect.add_argument("--reviewer")
    inspect.add_argument("--output", choices=["summary", "markdown", "json"], default="summary")
    inspect.set_defaults(handler=command_inspect)

    review = commands.add_parser("review", help="record a reader's labels for an inspection (record_review)")
    review.add_argument("report_id")
    review.add_argument("--labels", help="labels JSON exported from the HTML report")
    review.add_argument("--reviewer")
    review.add_argument("--agent", action="store_true", help="the reviewer is an agent, not a person")
    review.add_argument("--interactive", action="store_true", help="label sample by sample in the terminal")
    review.add_argument("--yes", action="store_true", help="accept all without reading (recorded; does not pass)")
    review.set_defaults(handler=command_review)

    run = commands.add_parser("run", help="start (or resume) a GRPO run of a recipe (run_grpo)")
    run.add_argument("recipe", nargs="?", help="GRPORecipe JSON file (grpo-rlvr config --output json)")
    run.add_argument("--run-id")
    run.add_argument("--resume", metavar="RUN_ID", help="continue this run from its last checkpoint")
    run.add_argument("--force", action="store_true", help="override the memory and route checks")
    run.add_argument("--processes", type=int, default=1, help="CPU recipes: training processes (torchrun, gloo)")
    run.add_argument("--force-reason")
    run.set_defaults(handler=command_run)
    status = commands.add_parser("status", help="a run's state, metrics and health (run_status)")
    status.add_argument("run_id")
    status.add_argument("--wait", type=float, default=0.0, help="follow it for up to this many seconds")
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

    demo = commands.add_parser("demo", help="the main flow on the embedded SmolLM2 and its addition task")
    demo.add_argument("--yes", action="store_true", help="accept the reward inspection without reading (recorded)")
    demo.add_argument("--recipe-only", action="store_true", help="only emit and print the demo's recipe")
    demo.add_argument("--steps", type=int, default=40)
    demo.add_argument("--eval-prompts", type=int, default=50)
    demo.add_argument("--samples", type=int, default=4, help="samples per held-out prompt")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.state_root:
        os.environ[STATE_ROOT_ENV] = str(Path(args.state_root).expanduser().resolve())
    try:
        args.handler(args)
    except SkillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except ValidationError as exc:
        print(f"error: {pydantic_error_message(exc, 'request')}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
