"""The command-line handlers: one ``command_*`` per subcommand, each a thin adapter over a ``skill`` tool.

``server.cli`` parses the arguments and turns a caller's mistake into exit status 2; these functions
read the parsed flags, call the tool and print its result, and return an exit status where a command can fail
otherwise (None is 0).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from server.http_transport import DEFAULT_HOST, DEFAULT_PORT
from server.mcp_server import serve_http, serve_stdio
from skill.demo.pipeline import DemoStepFailed, demo_recipe_request, run_demo
from skill.errors import SkillError
from skill.inspection.agreement import summarize
from skill.inspection.gate import record_review
from skill.inspection.reports import load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest
from skill.memory.estimate import MemoryRequest, estimate_memory
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import launch_files, write_launch_files
from skill.recipe.launching.script import render_script
from skill.recipe.schema import load_recipe
from skill.routing.route import RouteRequest, route_check
from skill.runs.held_out import summary_line
from skill.runs.jobs import RunRequest, cancel_run, list_runs, run_grpo, run_logs, run_status

DEMO_FAILED = 1  # a step of the demo did not do its part (2 stays a caller's mistake)
INTERRUPTED = 130  # the shell's status for a process ended by Ctrl-C


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
    for name in ("max_steps", "report_to", "price_per_gpu_hour", "sharding"):
        if getattr(args, name, None) is not None:
            request[name] = getattr(args, name)
    for assignment in args.set or []:
        field, sep, value = assignment.partition("=")
        if not sep:
            raise SkillError(f"--set {assignment!r} is not FIELD=VALUE.", "Send e.g. --set learning_rate=1e-6")
        request.setdefault("overrides", {})[field] = _parse_value(value)
    return request


def _print_recipe(recipe: Any, output: str, directory: str = "grpo-launch") -> None:
    if output == "json":
        print(recipe.model_dump_json(indent=2))
    elif output == "script":
        print(render_script(recipe))
    elif output == "launch":
        plan = launch_files(recipe)
        for path in write_launch_files(plan, directory):
            print(f"wrote {path}")
        print(f"sharding: {plan.sharding_reason}")
        for role, command in plan.commands.items():
            print(f"{role}: {command}")
    else:
        print(recipe.summary())


def command_config(args: argparse.Namespace) -> None:

    request = RecipeRequest.model_validate(_request_from_args(args))
    _print_recipe(emit_grpo_config(request), args.output, args.dir)


def command_memory(args: argparse.Namespace) -> None:

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

    request = _read_request(args, "RouteRequest")
    if args.signal:
        request["signal"] = args.signal
    if args.verifier:
        verifier = _parse_reward(args.verifier)
        verifier["params"] = {
            key: _parse_value(value) for key, _, value in (p.partition("=") for p in args.param or [])
        }
        request["verifier"] = verifier
    dataset = {"name": args.dataset} if args.dataset else None
    if dataset and args.prompt_column:
        dataset["prompt_column"] = args.prompt_column
    engine = {"kind": args.engine, "base_url": args.base_url, "served_model": args.served_model}
    probe_flags = {
        "model": args.model,
        "dataset": dataset,
        "prompt_column": None if dataset else args.prompt_column,
        "engine": {key: value for key, value in engine.items() if value is not None} or None,
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
        if e.sampled_with:
            used = e.sampled_with
            revision = f", revision {used.model_revision}" if used.model_revision else ""
            print(f"  sampled by {used.engine} {used.version} on {used.device} ({used.dtype or 'server'}{revision})")
    if decision.completion_lengths:
        print(f"  completion lengths: {decision.completion_lengths.describe()} (they size max_completion_length)")
    for warning in decision.warnings:
        print(f"  warning: {warning}")
    print(f"  next: {decision.next_step}" + (f" (skill {decision.next_skill})" if decision.next_skill else ""))


def command_inspect(args: argparse.Namespace) -> None:

    request = _read_request(args, "InspectionRequest")
    if args.reward:
        request["rewards"] = [_parse_reward(text) for text in args.reward]
    if args.samples:
        request["samples"] = [json.loads(line) for line in Path(args.samples).read_text().splitlines() if line.strip()]
    if args.route:
        request["route_decision_id"] = args.route
    if args.samples_of:
        request["samples_of"] = args.samples_of
    report = inspect_rewards(InspectionRequest.model_validate(request), progress=_print_progress)
    if args.output == "json":
        print(report.model_dump_json(indent=2))
    else:
        print(Path(report.paths["markdown"]).read_text() if args.output == "markdown" else _inspection_summary(report))
        print(f"\nRead and label every sample blind: {report.paths['html']} (or {report.paths['markdown']}).")
        print(f"Then: grpo-rlvr review {report.id} --labels LABELS.json   (or --interactive)")
    if args.interactive:
        _interactive_review(report, args.reviewer or "")


def _inspection_summary(report: Any) -> str:
    lines = [f"inspection {report.id}: {len(report.samples)} samples to read, verdict {report.verdict}"]
    lines.append(f"  drawn: {report.draw}  labelled for: {', '.join(report.read_roles)}")
    for name, stats in report.stats.items():
        mean = "-" if stats.mean is None else f"{stats.mean:.3g}"
        std = "-" if stats.std is None else f"{stats.std:.3g}"
        lines.append(f"  {name:20s} mean {mean}  std {std}  failures {stats.failure_rate:.0%}")
    lines += [f"  {flag.severity:8s} {flag.code}: {flag.message}" for flag in report.flags]
    hacked = [probe for probe in report.probe_results if probe.hacked]
    lines.append(f"  probes: {len(report.probe_results)} tried, {len(hacked)} hacked")
    return "\n".join(lines)


def _interactive_review(report: Any, reviewer: str) -> None:

    if not sys.stdin.isatty():
        raise SkillError("An interactive review needs a terminal.", "Use --labels FILE instead.")
    reviewer = reviewer or input("Your name: ").strip()
    print(f"{report.draw}\nLabel each sample by your own judgment; the scores are shown after.")
    labels: dict[int, dict[str, str]] = {}
    keys = {"p": "pass", "f": "fail", "u": "unsure"}
    for sample in report.samples:
        print(f"\n--- sample {sample.id} --- reference {sample.columns}\n{sample.prompt}\n>>> {sample.completion}")
        labels[sample.id] = {}
        for role in report.read_roles:
            answer = ""
            while answer not in ("p", "f", "u", "q"):
                answer = input(f"{role}: [p]ass, [f]ail, [u]nsure, [q]uit: ").strip().lower()[:1]
            if answer == "q":
                labels.pop(sample.id)
                break
            labels[sample.id][role] = keys[answer]
        if answer == "q":
            break
    _print_review(record_review(ReviewRequest(report_id=report.id, reviewer=reviewer, labels=labels)))


def _print_review(report: Any) -> None:
    print(f"{report.id}: verdict {report.verdict}")
    if report.review is not None:
        for agree in report.review.agreement:
            print(f"  {summarize(agree)}")
    for reason in report.verdict_reasons:
        print(f"  - {reason}")


def command_review(args: argparse.Namespace) -> None:

    if args.interactive:
        _interactive_review(load_report(args.report_id), args.reviewer or "")
        return
    request: dict[str, Any] = {"report_id": args.report_id}
    if args.labels:
        exported = json.loads(Path(args.labels).read_text())
        keys = ("reviewer", "reviewer_kind", "labels", "amendments")
        request.update({key: exported[key] for key in keys if key in exported})
    if args.reviewer:
        request["reviewer"] = args.reviewer
    if args.kind:
        request["reviewer_kind"] = args.kind
    if args.accept_unread is not None:
        request.update(accept_unread=True, accept_unread_reason=args.accept_unread)
    if not request.get("reviewer"):
        raise SkillError("No reviewer named.", "Send --reviewer NAME (or a labels file that has one).")
    _print_review(record_review(ReviewRequest.model_validate(request)))


def _print_status(status: Any) -> None:
    job, scheduler = status.engine_handle.get("job_id"), status.engine_handle.get("scheduler_state")
    print(
        f"{status.run_id}: {status.state}  step {status.step}/{status.max_steps or '?'}"
        + (f"  eta {status.eta_seconds:.0f} s" if status.eta_seconds else "")
        + (f"  slurm job {job} {scheduler or ''}".rstrip() if job else "")
    )
    if status.reason:
        print(f"  reason: {status.reason}")
    if status.reward_review:
        print(f"  reward review: {status.reward_review}")
    if status.held_out:
        print(f"  {summary_line(status.held_out, status.held_out_change)}")
    for point in [row for row in status.last_metrics if "eval_loss" not in row][-3:]:
        rewards = " ".join(
            f"{k.split('/')[1]}={v:.3f}"
            for k, v in point.items()
            if k.startswith("rewards/") and k.endswith("/mean") and isinstance(v, int | float)
        )
        print(f"  step {point.get('step')}: reward {point.get('reward', float('nan')):.3f} {rewards}")
    if status.health_summary:
        print(f"  health: {status.health_summary}")
    for warning in status.health[1:]:
        print(f"  also: {warning['message']}")
    for name, path in status.paths.items():
        print(f"  {name}: {path}")
    for shown in status.tracking:
        opens = f"; open: {shown.command}" if shown.command else ""
        print(f"  {shown.tracker}: {shown.location}{opens}" + (f" ({shown.note})" if shown.note else ""))
    for line in status.rehearsal.describe() if status.rehearsal else []:
        print(f"  {line}")


def command_run(args: argparse.Namespace) -> None:

    recipe = None
    if args.recipe:
        recipe = load_recipe(Path(args.recipe))
    engine: dict[str, Any] = {"kind": "this_machine"}
    if args.slurm is not None:
        text = Path(args.slurm).read_text() if Path(args.slurm).is_file() else args.slurm
        try:
            slurm = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SkillError(
                f"--slurm is neither a JSON object nor a file of one ({exc}).", "Send e.g. --slurm '{}'."
            ) from None
        if not isinstance(slurm, dict):
            raise SkillError(f"--slurm is {text.strip()[:60]!r}, not a JSON object.", "Send e.g. --slurm '{}'.")
        engine = {**slurm, "kind": "slurm"}
    request = RunRequest(
        recipe=recipe,
        run_id=args.run_id,
        resume_run_id=args.resume,
        processes=args.processes,
        nodes=args.nodes,
        engine=engine,
        sharding=args.sharding,
        rehearse=args.rehearse,
        force=args.force,
        force_reason=args.force_reason or "",
    )
    _print_status(run_grpo(request))


def command_status(args: argparse.Namespace) -> None:

    status = run_status(
        args.run_id, args.wait, progress=_print_progress if args.wait else None, until_step=args.until_step
    )
    print(status.model_dump_json(indent=2)) if args.output == "json" else _print_status(status)


def command_logs(args: argparse.Namespace) -> None:

    print("\n".join(run_logs(args.run_id, args.lines).lines))


def command_cancel(args: argparse.Namespace) -> None:

    _print_status(cancel_run(args.run_id))


def command_runs(args: argparse.Namespace) -> None:

    for status in list_runs().runs:
        print(f"{status.run_id:40s} {status.state:10s} step {status.step}/{status.max_steps or '?'}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def command_demo(args: argparse.Namespace) -> int | None:
    """0 when every step did its part; otherwise one line on stderr naming the step and why, and status
    ``DEMO_FAILED`` (``INTERRUPTED`` on Ctrl-C or SIGTERM, either of which cancels the demo's run)."""
    if not args.recipe_only:
        if not args.yes:
            raise SkillError(
                "The demo's reward read is done by a program (its own check of each addition answer, stamped "
                "reviewer kind 'program'), not by you, and needs your explicit --yes for that.",
                "Run grpo-rlvr demo --yes (make demo does), or inspect and review yourself: grpo-rlvr inspect/review.",
            )
        before = signal.signal(signal.SIGTERM, _interrupt)
        try:
            result = run_demo(steps=args.steps)
        except DemoStepFailed as failed:
            print(f"grpo-rlvr demo failed at {failed}", file=sys.stderr)
            return INTERRUPTED if failed.interrupted else DEMO_FAILED
        finally:
            signal.signal(signal.SIGTERM, before)
        if args.output == "json":
            print(result.model_dump_json(indent=2))
        return None
    if args.output == "summary":
        print("grpo-rlvr demo: the embedded SmolLM2-135M-Instruct learning 'What is a + b?' on this CPU.\n")
    recipe = emit_grpo_config(demo_recipe_request())
    _print_recipe(recipe, args.output)
    return None


def command_serve(args: argparse.Namespace) -> None:
    """stdio by default (what a client that spawns the server speaks); --http for a long-lived server."""
    if not args.http:
        if args.host is not None or args.port is not None:
            raise SkillError("--host and --port apply to --http only.", "Add --http, or drop them for stdio.")

        serve_stdio()
        return

    port = DEFAULT_PORT if args.port is None else args.port
    if not 0 < port < 65536:
        raise SkillError(f"--port {port} is not a TCP port.", f"Send 1-65535, e.g. {DEFAULT_PORT}.")
    serve_http(args.host or DEFAULT_HOST, port)
