"""`make bench`: every performance figure measured side by side in one run, written to bench/RESULTS.md.

Each figure: the median over repeats, the spread, the reference measured in the same run, the ratio,
and whether the target is met. A figure that cannot be measured here says so ("not measured").
Run: python bench/run_all.py [--quick] [--skip-demo] [--only KEY,KEY]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def _load(name: str):
    return _load_from(BENCH / f"{name}.py")


def _load_from(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine() -> dict[str, str]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    ram = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    versions = {p: importlib.metadata.version(p) for p in ("torch", "trl", "transformers", "mcp")}
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cores": str(os.cpu_count()),
        "ram": f"{ram:.0f} GiB",
        "cpu": cpu,
        "python": platform.python_version(),
        **versions,
    }


def _run(name: str, call) -> dict:
    started = time.perf_counter()
    try:
        result = call()
        return {"ok": True, "result": result, "seconds": time.perf_counter() - started}
    except Exception as exc:  # one failing benchmark must not hide the others
        traceback.print_exc()
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - started}


def memory_accuracy() -> list[dict]:
    """CPU component errors of the memory estimator against real steps (tiny model and SmolLM2-135M)."""
    from datasets import Dataset

    from skill.data import addition_rows
    from skill.memory.measurement import compare_with_estimate, measure_grpo_step
    from skill.models.sources import embedded_model_dir
    from skill.rewards.registry import build_reward_functions
    from skill.rewards.spec import RewardSpec

    rewards = build_reward_functions(
        [RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})]
    )
    kwargs = {
        "use_cpu": True,
        "bf16": False,
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1,
        "num_generations": 8,
        "max_completion_length": 8,
        "beta": 0.0,
        "activation_checkpointing": False,
        "report_to": "none",
        "logging_steps": 1,
    }
    rows = []
    work = Path(os.environ["GRPO_RLVR_HOME"]) / "bench-memory"
    for label, model in (("SmolLM2-135M", embedded_model_dir()),):
        measured = measure_grpo_step(model, kwargs, rewards, Dataset.from_list(addition_rows(32)), work / label)
        for c in compare_with_estimate(model, kwargs, measured):
            rows.append(
                {
                    "model": label,
                    "component": c.component,
                    "estimated": c.estimated_bytes,
                    "measured": c.measured_bytes,
                    "error": c.error,
                    "tolerance": c.tolerance,
                }
            )
    return rows


TARGET_PYTHON = BENCH.parent / ".venv-target" / "bin" / "python"


def vllm_generation(quick: bool) -> dict:
    """vLLM vs transformers on this CPU (bench/vllm_generation.py), run in the target environment that has vLLM."""
    import subprocess
    import tempfile

    if not TARGET_PYTHON.exists():
        raise RuntimeError("no .venv-target (vLLM's CPU build): build it with `make target-env`")
    output = Path(tempfile.mkdtemp(prefix="grpo-bench-vllm-")) / "result.json"
    command = [str(TARGET_PYTHON), str(BENCH / "vllm_generation.py"), "--json", str(output)]
    env = {key: value for key, value in os.environ.items() if key != "GRPO_RLVR_HOME"}  # its own state root
    subprocess.run(command + (["--quick"] if quick else []), check=True, env=env, timeout=3600)
    return json.loads(output.read_text())


def route_probe_engines() -> dict:
    """route_check's default probe through transformers, vLLM and a `vllm serve` endpoint (target environment)."""
    import subprocess
    import tempfile

    if not TARGET_PYTHON.exists():
        raise RuntimeError("no .venv-target (vLLM's CPU build): build it with `make target-env`")
    output = Path(tempfile.mkdtemp(prefix="grpo-bench-engines-")) / "result.json"
    env = {key: value for key, value in os.environ.items() if key != "GRPO_RLVR_HOME"}  # its own state root
    command = [str(TARGET_PYTHON), str(BENCH / "route_probe_engines.py"), "--json", str(output)]
    subprocess.run(command, check=True, env=env, timeout=3600)
    return json.loads(output.read_text())


def _engine_rows(outcome: dict, row, missing) -> None:
    """One row per sampling engine: the default probe's second call (engine loaded) against transformers'."""
    if not outcome.get("ok"):
        missing("route probe through transformers / vLLM / vllm serve", outcome, "reported")
        return
    r = outcome["result"]
    engines = r["engines"]
    base = engines["transformers"][-1]
    load = f"load average {r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f} on {os.cpu_count()} cores"
    for name, (first, warm) in engines.items():
        start = f"first call {first['seconds']:.0f} s"
        if name == "endpoint":
            start = f"server start {r['server_start_s']:.0f} s"
        row(
            f"route_check default probe (8 x 8 x 32 tokens, SmolLM2-135M) by {name} {warm['version']} on "
            f"{warm['device']} ({warm['dtype'] or 'server'}; {start}; pass@1 {warm['pass_at_1']:.3f}); {load}",
            f"{warm['seconds']:.1f} s, {warm['tokens_per_s']:.1f} tok/s",
            "",
            f"transformers {base['seconds']:.1f} s, {base['tokens_per_s']:.1f} tok/s",
            f"{base['seconds'] / warm['seconds']:.2f}x",
            "reported (one run)",
            "n/a",
        )


def _faster(margin: float, *spreads: float) -> str:
    """'yes' when vLLM wins by more than either side's spread, 'within noise' when it wins by less."""
    return "yes" if margin > max(spreads) else "within noise" if margin > 0 else "no"


def _slurm_rows(result: dict, row, missing) -> None:
    """The slurm engine against the same plan submitted by hand, on the two-node CPU cluster."""
    if not result.get("ok"):
        missing("slurm engine, 2 CPU nodes", result, "reported (one run)")
        return
    r = result["result"]
    for what, ours, hand, ratio in (
        ("submit to first step", r["runner_first_step_s"], r["hand_first_step_s"], r["first_step_ratio"]),
        (f"s/step ({r['steps']} steps)", r["runner_s_per_step"], r["hand_s_per_step"], r["step_ratio"]),
    ):
        row(
            f"slurm engine {what}, 2 CPU nodes (gloo), tiny model",
            f"{ours:.2f} s",
            "",
            f"same plan by hand (sbatch slurm.sbatch bare script) {hand:.2f} s",
            f"{ratio:.3f}x",
            "reported (one run)",
            "n/a",
        )


def _rehearsal_rows(outcome: dict, row, missing) -> None:
    """The wall time of rehearsing GPU plans on this machine's CPUs (bench/rehearsal.py)."""
    if not outcome.get("ok"):
        missing("rehearsal of GPU plans on CPU (target env, Slurm cluster)", outcome, "reported (one run)")
        return
    for key, where in (("eight_gpus", "8-rank plan"), ("two_nodes", "2-node plan, test Slurm cluster")):
        r = outcome["result"][key]
        row(
            f"rehearsal wall time, {where}: {r['plan']} ({r['ranks']} ranks, in sync: {r['in_sync']})",
            f"{r['seconds']:.0f} s",
            "",
            "substituted: " + ", ".join(r["substitutions"]),
            "",
            "reported (one run)",
            "n/a",
        )


def _vllm_rows(outcome: dict, row, missing) -> None:
    if not outcome.get("ok"):
        missing("vLLM vs transformers generation (target env)", outcome, "vLLM faster")
        return
    g, r = outcome["result"]["generation"], outcome["result"]["runner"]
    vllm, hf = g["vllm"], g["transformers"]
    stack = ", ".join(f"{name} {version}" for name, version in outcome["result"].get("versions", {}).items())
    load = outcome["result"].get("load_average_5min", {})
    busy = f"; load average {load['before']:.1f} -> {load['after']:.1f} on {os.cpu_count()} cores" if load else ""
    row(
        f"generation tok/s, SmolLM2-135M, {g['prompts']} prompts x {g['n']} x {g['tokens']} tokens: vLLM "
        f"({vllm['dtype'].removeprefix('torch.')}, engine start {vllm['ready_s']:.0f} s) vs transformers generate "
        f"({hf['dtype'].removeprefix('torch.')}); {stack}{busy}",
        f"{vllm['median_tokens_per_s']:.1f} tok/s",
        f"{vllm['spread_tokens_per_s']:.1f} tok/s",
        f"transformers {hf['median_tokens_per_s']:.1f} tok/s (spread {hf['spread_tokens_per_s']:.1f})",
        f"{g['ratio']:.1f}x",
        "vLLM faster",
        _faster(
            vllm["median_tokens_per_s"] - hf["median_tokens_per_s"],
            vllm["spread_tokens_per_s"],
            hf["spread_tokens_per_s"],
        ),
    )
    row(
        f"runner s/step, {r['model']}, {r['steps']} steps x 8 x {r['completion_tokens']} tokens: vLLM colocate "
        f"(wall {r['vllm_wall_s']:.0f} s) vs transformers generation (wall {r['transformers_wall_s']:.0f} s)",
        f"{r['vllm_s_per_step']:.2f} s",
        f"{r['vllm_spread_s']:.2f} s",
        f"transformers {r['transformers_s_per_step']:.2f} s (spread {r['transformers_spread_s']:.2f} s)",
        f"{r['ratio']:.2f}x",
        "vLLM faster",
        _faster(r["transformers_s_per_step"] - r["vllm_s_per_step"], r["vllm_spread_s"], r["transformers_spread_s"]),
    )


def _weights_moved_row(outcome: dict, row, missing) -> None:
    """fp32 master weights vs pure bf16 at the seed's learning rate (bench/weights_moved.py)."""
    if not outcome.get("ok"):
        missing("weights moved at lr 5e-7 (fp32 master vs pure bf16)", outcome, "fp32 master >= 10x")
        return
    r = outcome["result"]
    master, pure = r["fp32_master"], r["pure_bf16"]
    ratio = master["layer_moved_fraction"] / max(pure["layer_moved_fraction"], 1e-12)
    row(
        f"weights moved after {r['steps']} AdamW steps at lr {r['learning_rate']:g}, {r['model']} decoder layers "
        f"(all parameters: {master['moved_fraction']:.1%} vs {pure['moved_fraction']:.1%}): fp32 master weights "
        "under bf16 autocast vs pure bf16",
        f"{master['layer_moved_fraction']:.1%}",
        "",
        f"pure bf16 {pure['layer_moved_fraction']:.2%}",
        f"{ratio:.0f}x",
        "fp32 master >= 10x",
        "yes" if ratio >= 10 else "no",
    )


def render(info: dict, results: dict) -> str:
    lines = (
        [
            "# Benchmark results",
            "",
            "Generated by `make bench` (bench/run_all.py); numbers from this machine.",
            "",
            "| machine | |",
            "|---|---|",
        ]
        + [f"| {k} | {v} |" for k, v in info.items()]
        + [""]
    )
    lines += [
        "| figure | median | spread | reference (same run) | ratio / value | target | met |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(figure, median, spread, reference, ratio, target, met):
        lines.append(f"| {figure} | {median} | {spread} | {reference} | {ratio} | {target} | {met} |")

    def missing(figure, outcome, target):
        row(figure, "not measured", "", "", outcome.get("error", "skipped"), target, "-")

    s = results.get("startup", {})
    if s.get("ok"):
        r = s["result"]
        row(
            "server cold start to first tools/list",
            f"{r['serve_to_tools_list_median_s']:.3f} s",
            f"{r['serve_to_tools_list_spread_s']:.3f} s",
            f"import mcp.server {r['import_mcp_median_s']:.3f} s",
            f"{r['ratio']:.2f}x",
            "<= 1.5x",
            "yes" if r["ratio"] <= 1.5 else "no",
        )
    else:
        missing("server cold start", s, "<= 1.5x")
    t = results.get("tool_latency", {})
    if t.get("ok"):
        for name, r in t["result"].items():
            row(
                f"{name} latency (in-process)",
                f"p50 {r['p50_ms']:.2f} ms",
                f"p95 {r['p95_ms']:.2f} ms",
                f"first call {r['first_call_ms']:.0f} ms",
                "",
                "p50 <= 20 ms",
                "yes" if r["p50_ms"] <= 20 else "no",
            )
    else:
        missing("tool latency", t, "p50 <= 20 ms")
    b = results.get("sandbox_throughput", {})
    if b.get("ok"):
        r = b["result"]
        row(
            f"sandbox: unit_tests executions/s ({r['executions']} test runs, isolation {r['isolation']})",
            f"{r['sandboxed_executions_per_s']:.1f}/s",
            "",
            f"bare spawn ceiling {r['bare_ceiling_per_s']:.1f}/s",
            f"{r['ratio']:.0%}",
            ">= 50% of ceiling",
            "yes" if r["ratio"] >= 0.5 else "no",
        )
    else:
        missing("sandbox throughput", b, ">= 50% of ceiling")
    i = results.get("inspection_speed", {})
    if i.get("ok"):
        r = i["result"]
        row(
            "inspection: 100 samples x (format + exact_match + unit_tests)",
            f"{r['median_s']:.2f} s",
            f"{r['spread_s']:.2f} s",
            "",
            "",
            "< 10 s",
            "yes" if r["median_s"] < 10 else "no",
        )
    else:
        missing("inspection speed", i, "< 10 s")
    for key, engine in (("runner_overhead", ""), ("runner_overhead_accelerate", ", accelerate engine, 2 gloo ranks")):
        o = results.get(key, {})
        if not o.get("ok"):
            missing(f"runner overhead{engine}", o, "<= 1.05x")
            continue
        r = o["result"]
        reference = "bare GRPOTrainer" if not engine else "bare GRPOTrainer under the plan's launch_node.sh"
        row(
            f"runner s/step ({r['steps']} steps x {r['rounds']} interleaved rounds, tiny model{engine})",
            f"{r['runner_s_per_step']:.3f} s",
            f"{r['runner_spread_s']:.3f} s",
            f"{reference} {r['bare_s_per_step']:.3f} s",
            f"{r['ratio']:.3f}x",
            "<= 1.05x",
            "yes" if r["ratio"] <= 1.05 else "no",
        )
    _slurm_rows(results.get("slurm_submit", {}), row, missing)
    _vllm_rows(results.get("vllm_generation", {}), row, missing)
    _rehearsal_rows(results.get("rehearsal", {}), row, missing)
    _engine_rows(results.get("route_probe_engines", {}), row, missing)
    d = results.get("demo", {})
    if d.get("ok"):
        r = d["result"]
        held_out = r.get("held_out") or []
        before, after = (held_out[0], held_out[-1]) if len(held_out) >= 2 else (None, None)
        row(
            "demo wall time (make demo, SmolLM2-135M, CPU)",
            f"{r['seconds'] / 60:.1f} min",
            "",
            "",
            "",
            "<= 20 min (aim 15)",
            "yes" if r["seconds"] <= 1200 else "no",
        )
        if before and after:
            row(
                f"demo held-out pass@1 step {before['step']} -> {after['step']} (the run's own evaluation)",
                f"{before['mean']:.3f} -> {after['mean']:.3f}",
                f"95% intervals {before['interval_95'][0]:.2f}-{before['interval_95'][1]:.2f} / "
                f"{after['interval_95'][0]:.2f}-{after['interval_95'][1]:.2f}",
                f"{after['completions']} completions of {after['prompts']} prompts",
                "",
                "intervals apart",
                "yes" if after["interval_95"][0] > before["interval_95"][1] else "no",
            )
        first, last = r.get("correctness_first_10"), r.get("correctness_last_10")
        if first is not None and last is not None:
            ratio = last / first if first else float("inf")
            row(
                "demo correctness reward, first-10 -> last-10 steps",
                f"{first:.3f} -> {last:.3f}",
                "",
                "",
                f"{ratio:.1f}x",
                ">= 3x (floor 1.5x)",
                "yes" if ratio >= 3 else "no",
            )
    else:
        missing("demo", d, "<= 20 min; correctness >= 3x")
    _weights_moved_row(results.get("weights_moved", {}), row, missing)
    m = results.get("memory_accuracy", {})
    lines += ["", "## Memory estimator accuracy", ""]
    if m.get("ok"):
        lines += ["| model | component | estimated | measured | error | tolerance |", "|---|---|---|---|---|---|"]
        for item in m["result"]:
            error = "-" if item["error"] is None else f"{item['error']:+.1%}"
            lines.append(
                f"| {item['model']} | {item['component']} | {item['estimated']:.0f} B | {item['measured']} B"
                f" | {error} | {item['tolerance']:.0%} |"
            )
    else:
        lines.append(f"CPU components: not measured ({m.get('error', 'skipped')}).")
    lines += [
        "",
    ]
    lines += gpu_check_lines()
    lines += agent_evaluation_lines()
    lines += _load("validation_sections").render_sections(results)
    return "\n".join(lines)


def agent_evaluation_lines() -> list[str]:
    """The agent evaluation (bench/agent_eval): per task, the graded outcomes of every round and the calls their
    transcripts count; then each round's outcomes. No agent runs here (an LLM agent plays each task:
    bench/agent_eval/README.md)."""
    graded = json.loads((BENCH / "agent_eval" / "outcomes.json").read_text())
    summarise = _load_from(BENCH / "agent_eval" / "summarise.py")
    rounds = graded["rounds"]
    counted = [
        {
            row["task"]: row
            for row in map(summarise.summary, sorted((BENCH / "agent_eval" / r["transcripts"]).glob("*.jsonl")))
        }
        for r in rounds
    ]
    lines = ["", "## Fresh LLM agents driving the server (bench/agent_eval)", "", f"Before: {graded['before']}.", ""]
    lines += [
        "Run by run (round 1 / 2 / 3); a tool result over 12,000 characters is starred.",
        "",
        "| task | right outcomes | commands | errors | client-side failures (a timeout, a broken pipe) "
        "| invalid calls repeated | largest tool result |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in rounds[0]["tasks"]:
        runs = [
            (r["tasks"][task], rows.get(task, {}))
            for r, rows in zip(rounds, counted, strict=True)
            if task in r["tasks"]
        ]
        right = sum(grade["right"] for grade, _ in runs)
        commands, errors, client, repeated = (
            " / ".join(str(row.get(key, "-")) for _, row in runs)
            for key in ("commands", "errors", "client_errors", "repeated_invalid")
        )
        largest = " / ".join(
            f"{row.get('largest_result', 0):,}{'*' if row.get('largest_result', 0) > 12_000 else ''}" for _, row in runs
        )
        lines.append(f"| {task} | {right} of {len(runs)} | {commands} | {errors} | {client} | {repeated} | {largest} |")
    for number, r in enumerate(rounds, start=1):
        lines += ["", f"Round {number}: {r['run']}.", ""]
        lines += [
            f"- {task}: {'' if grade['right'] else 'NOT RIGHT: '}{grade['outcome']}."
            for task, grade in r["tasks"].items()
        ]
        lines += [f"- Since: {line}." for line in r.get("since", [])]
    return lines


def gpu_check_lines() -> list[str]:
    """The newest GPU check (scripts/device_check.sh), as recorded under bench/results/<date>-<gpu>/."""
    runs = sorted(BENCH.glob("results/*/gpu_memory.json"))
    if not runs:
        return ["GPU: not measured - no GPU check recorded under bench/results/ yet (scripts/device_check.sh)."]
    folder = runs[-1].parent
    memory = json.loads(runs[-1].read_text())
    gpu = (folder / "gpu.txt").read_text().splitlines()[1].split(",")[0]
    steps = memory.get("steps", 1)  # checks before 2026-12-07 ran one step and no phases
    phased = all("phase_allocated_peak_bytes" in row["measured"] for row in memory["rows"])
    lines = [
        f"GPU check of {folder.name} ({gpu}; {', '.join(f'{k} {v}' for k, v in memory['versions'].items())}): "
        f"{'one GRPOTrainer step' if steps == 1 else f'{steps} GRPOTrainer steps'} of a random-init Qwen2.5-0.5B "
        f"shape, {memory['prompt_tokens']}-token prompts, {memory['completion_tokens']}-token completions; measured "
        f"= `torch.cuda.max_memory_reserved` + CUDA context ({memory['cuda_context_bytes'] / 2**30:.2f} GiB)"
        + (
            "; each phase's tensors (max_memory_allocated over generation and scoring, then over the rest of the "
            "step) beside the estimate's; s/step the median after the first step"
            if phased
            else ""
        )
        + f". Files: `bench/results/{folder.name}/`.",
        "",
    ]
    columns = ["configuration", "measured", "allocated peak", "estimated", "error"]
    if phased:
        columns += ["generation tensors (est.)", "training tensors (est.)", "s/step (est.)", "time error"]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    context = memory["cuda_context_bytes"]
    for row in memory["rows"]:
        measured, estimated = row["measured"], row["estimated"]
        truth = (measured["max_reserved_bytes"] + context) / 2**30
        guess = (estimated["peak_without_overhead_bytes"] + context) / 2**30
        allocated = measured["max_allocated_bytes"] / 2**30
        cells = [row["configuration"]["name"], f"{truth:.2f} GiB", f"{allocated:.2f} GiB", f"{guess:.2f} GiB"]
        cells.append(f"{row['error']:+.1%}")
        if phased:
            for phase in ("generation", "training"):
                peak = measured["phase_allocated_peak_bytes"][phase] / 2**30
                cells.append(f"{peak:.2f} ({estimated['phase_tensor_bytes'][phase] / 2**30:.2f}) GiB")
            seconds = estimated.get("seconds_per_step")
            cells.append(f"{measured['steady_seconds_per_step']:.2f} ({f'{seconds:.2f}' if seconds else '-'})")
            cells.append(f"{row['time_error']:+.1%}" if "time_error" in row else "-")
        lines.append("| " + " | ".join(cells) + " |")
    if any("process" not in row["measured"] for row in memory["rows"]):  # checks before each row had its own
        lines += [
            "",
            "These rows ran one after another in one process, where a row's reserved peak can include segments the "
            "rows before it left (empty_cache releases only segments with no live block): lora-ckpt-b8's 3.83 GiB "
            "reserved over 1.34 GiB allocated cannot be told apart from that. The device check now measures each "
            "configuration in a process of its own and records what was reserved at its start.",
        ]
    sampling = folder / "gpu_sampling.json"
    if sampling.is_file():
        s = json.loads(sampling.read_text())
        used = s["sampled_with"]
        lines += [
            "",
            f"Sampling there (route_check's engine, `auto` -> {s['auto_engine']}): {used['engine']} "
            f"{used['version']} on {used['device']} in {used['dtype']}, {s['completions']} completions, "
            f"{s['tokens']} tokens in {s['seconds']:.1f} s ({s['tokens_per_s']:.0f} tok/s).",
        ]
    return lines


def refresh(output: Path, benchmarks: dict, keys: list[str]) -> int:
    """Re-measure some figures and keep the others from RESULTS.json; each refreshed one carries its own date
    (figures that are ratios are only comparable within one full run, so refresh accuracy figures, not speeds)."""
    unknown = sorted(set(keys) - set(benchmarks))
    if unknown:
        print(f"unknown keys {unknown}; choose from {sorted(benchmarks)}", file=sys.stderr)
        return 2
    saved = json.loads(output.with_suffix(".json").read_text())
    for key in keys:
        label, call = benchmarks[key]
        saved[key] = {**_run(label, call), "measured_at": time.strftime("%Y-%m-%d %H:%M %Z")}
    output.with_suffix(".json").write_text(json.dumps(saved, default=str, indent=1))
    output.write_text(render(saved.pop("machine"), saved))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run of every benchmark)")
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--demo-json", type=Path, help="reuse a measured demo result (bench/demo_result.json)")
    parser.add_argument("--render-only", action="store_true", help="re-render RESULTS.md from RESULTS.json")
    parser.add_argument("--output", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--only", help="re-measure these RESULTS.json keys (comma-separated), keep the rest")
    args = parser.parse_args()
    if args.render_only:
        saved = json.loads(args.output.with_suffix(".json").read_text())
        args.output.write_text(render(saved.pop("machine"), saved))
        return 0
    os.environ.setdefault("GRPO_RLVR_HOME", str(Path.home() / ".cache" / "grpo-rlvr-bench"))
    quick = args.quick
    benchmarks = {
        "startup": ("startup", lambda: _load("startup").measure(2 if quick else 7)),
        "tool_latency": ("tool_latency", lambda: _load("tool_latency").measure(5 if quick else 200)),
        "sandbox_throughput": ("sandbox", lambda: _load("sandbox_throughput").measure(8 if quick else 64)),
        "inspection_speed": ("inspection", lambda: _load("inspection_speed").measure(100, 1 if quick else 3)),
        "runner_overhead": ("runner", lambda: _load("runner_overhead").measure(3 if quick else 20, 1 if quick else 2)),
        "runner_overhead_accelerate": (
            "runner under accelerate",
            lambda: _load("runner_overhead").measure(3 if quick else 10, 1, processes=2),
        ),
        "slurm_submit": ("slurm engine", lambda: _load("slurm_submit").measure(3 if quick else 10)),
        "memory_accuracy": ("memory", memory_accuracy),
        "weights_moved": ("weights_moved", lambda: _load("weights_moved").measure(steps=2 if quick else 10)),
        "vllm_generation": ("vllm", lambda: vllm_generation(quick)),
        "route_probe_engines": ("route probe engines", route_probe_engines),
        "rehearsal": ("rehearsal", lambda: _load("rehearsal").measure()),
        **_load("validation_sections").validation_benchmarks(quick),
    }
    if args.only:
        return refresh(args.output, benchmarks, args.only.split(","))
    results = {key: _run(label, call) for key, (label, call) in benchmarks.items()}
    if args.demo_json:
        results["demo"] = {"ok": True, "result": json.loads(args.demo_json.read_text())["demo"]}
    elif not args.skip_demo:
        from skill.demo.pipeline import run_demo

        results["demo"] = _run(
            "demo",
            lambda: run_demo(steps=2 if quick else 40).model_dump(),
        )
    info = machine()
    text = render(info, results)
    args.output.write_text(text)
    print(text)
    (args.output.with_suffix(".json")).write_text(json.dumps({"machine": info, **results}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
