"""The parts of bench/RESULTS.md that check a judgment or a guarantee rather than a speed: reward grading on
crafted and loaded inputs, memory verdicts against published reports, run health against labelled series, the
soak of servers under concurrent clients and faults, the MCP flow an agent sees, the completion budget on
completions its probe never saw, and the blind read's rule on simulated readers.

bench/run_all.py measures them (``validation_benchmarks``) and renders them after the speed table (``render_sections``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def _bench_module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory_validation() -> dict[str, Any]:
    from skill.memory.validation import validation_summary

    return validation_summary()


def _step_time_validation() -> dict[str, Any]:
    from skill.timing.validation import validation_summary

    return validation_summary()


def _health_validation(seeds: int, healthy_seeds: int) -> dict[str, Any]:
    module = _bench_module("health_validation")
    result = module.run(seeds, healthy_seeds)
    live = module.live_false_alarms(min(seeds, 3), 20)  # 85 healthy runs, each read every 2 steps
    return {**result, "table": module.markdown(result), "seeds": seeds, "healthy_seeds": healthy_seeds, "live": live}


def validation_benchmarks(quick: bool) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Every validation figure: its key in RESULTS.json -> (label, the call that measures it)."""
    return {
        "grading_worst_case": ("grading", lambda: _bench_module("grading_worst_case").measure()),
        "math_under_load": (
            "math",
            lambda: _bench_module("math_under_load").run(items=80 if quick else 400, rounds=1 if quick else 3),
        ),
        "memory_validation": ("memory validation", _memory_validation),
        "step_time_validation": ("step time validation", _step_time_validation),
        "health_validation": ("health", lambda: _health_validation(3 if quick else 10, 3 if quick else 10)),
        "agent_flow": ("agent flow", lambda: _bench_module("agent_flow").measure()),
        "soak": ("soak", lambda: _bench_module("soak").run(60 if quick else 300)),
        "completion_budget": ("completion budget", lambda: _bench_module("completion_budget").measure(quick)),
        "blind_read_rule": ("blind read rule", lambda: _bench_module("blind_read_rule").measure(quick)),
    }


def _grading_lines(outcome: dict) -> list[str]:
    lines = ["## Reward grading on crafted and loaded inputs", ""]
    if outcome.get("ok"):
        r = outcome["result"]
        lines += [
            f"unit_tests parent-side grading, worst crafted report (`bench/grading_worst_case.py`): "
            f"{r['worst_s']:.2f} s against a {r['timeout_s']:.0f} s per-completion timeout "
            f"({'met' if r['under_timeout'] else 'NOT met'}); the old set rebuild of 20,000 colliding ints took "
            f"{r['old_set_rebuild_20000_colliding_s']:.1f} s.",
            "",
            "| crafted report | seconds |",
            "|---|---|",
        ]
        lines += [f"| {name} | {seconds:.2f} |" for name, seconds in r["rows"].items()]
    else:
        lines.append(f"unit_tests worst-case grading: not measured ({outcome.get('error', 'skipped')}).")
    return lines


def _math_lines(outcome: dict) -> list[str]:
    lines = [""]
    if not outcome.get("ok"):
        return lines + [f"math reward under load: not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    lines += [
        f"`math` reward, {r['items']} items x {r['rounds']} rounds from a cold worker pool "
        f"({r['latex_share']:.0%} LaTeX answers through math-verify; `bench/math_under_load.py`):",
        "",
        "| setting | items/s (median) | items/s (min) | None | wrong scores | target |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in (("idle", "nothing beside it"), ("two_busy", "two CPU-bound processes beside it")):
        s = r[name]
        lines.append(
            f"| {label} | {s['items_per_s_median']:.1f} | {s['items_per_s_min']:.1f} | {s['none_total']} | "
            f"{s['wrong_total']} | no None, no wrong score |"
        )
    return lines


def _share(fraction: str) -> float:
    """'7/21' as 0.333 (0 of none is 0)."""
    done, total = (int(part) for part in fraction.split("/"))
    return done / total if total else 0.0


def _memory_lines(outcome: dict) -> list[str]:
    lines = ["", "## estimate_memory against published GRPO memory reports", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    mae = r["median_absolute_error"]
    lines += [
        "The rows, their sources and settings: references/grpo-memory.md (generated from "
        "skill/memory/published_reports.json).",
        "",
        "| figure | value | target | met |",
        "|---|---|---|---|",
        f"| fits / does-not-fit verdict agrees | {r['verdict_agreement']} ({r['verdict_agreement_rate']:.0%}) "
        f"| >= 90% | {'yes' if r['verdict_agreement_rate'] >= 0.9 else 'no'} |",
        f"| median absolute error of the total, rows with a reported number | "
        f"{'-' if mae is None else f'{mae:.1%}'} over {r['rows_with_numbers']} rows | within 25% | "
        f"{'yes' if mae is not None and mae <= 0.25 else 'no'} |",
        f"| verdict agrees where the estimate is within 25% of the card (close calls) | {r.get('close_calls', '-')} "
        "| (shown: far from the card a verdict is easy) | |",
        f"| rows within 25% | {r['within_tolerance']} | all | "
        f"{'yes' if r['within_tolerance'].split('/')[0] == r['within_tolerance'].split('/')[1] else 'no'} |",
    ]
    held = r.get("held_out")
    if held:
        error = held["median_absolute_error"]
        lines += [
            "",
            f"Held out (collected 2026-12-06, before any estimator change; bench/results/2026-12-06-held-out-rows): "
            f"{held['rows']} reports, {held['expressed']} the request expresses.",
            "",
            "| held-out figure | value | target | met |",
            "|---|---|---|---|",
            f"| reports within ±25% of the reported figure | {held['within_tolerance']} "
            f"(median absolute error {'-' if error is None else f'{error:.0%}'}) | >= 80% | "
            f"{'yes' if _share(held['within_tolerance']) >= 0.8 else 'no'} |",
            f"| 'fits' verdicts for runs that went out of memory | {held['fits_verdicts_on_out_of_memory']} | 0 | "
            f"{'yes' if held['fits_verdicts_on_out_of_memory'] == 0 else 'no'} |",
            f"| verdict agreement | {held['verdict_agreement']} | | |",
        ]
    if r["disagreeing"]:
        lines += ["", "Rows that disagree (kept, with the reason in the reference): " + ", ".join(r["disagreeing"])]
    return lines


def _step_time_lines(outcome: dict) -> list[str]:
    lines = ["", "## Step-time estimate against published GRPO step times", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    cpu = ", ".join(f"{key} {value:+.0%}" for key, value in r["cpu_errors"].items())
    return lines + [
        "The rows, sources and settings: references/grpo-step-time.md (generated from "
        "skill/timing/published_step_times.json). Nothing was measured on a GPU.",
        "",
        "| figure | value | target | met |",
        "|---|---|---|---|",
        f"| median absolute error (abs(estimate / reported - 1)), published rows the request expresses | "
        f"{r['median_absolute_error']:.0%} over {r['estimated_rows']} of {r['published_rows']} rows | <= 40% | "
        f"{'yes' if r['median_absolute_error'] <= 0.4 else 'no'} |",
        f"| published rows within 2x (a row not expressed is a miss) | {r['within_2x']} ({r['within_2x_share']:.0%}) "
        f"| >= 75% | {'yes' if r['within_2x_share'] >= 0.75 else 'no'} |",
        f"| estimated high / low | {r['high']} / {r['low']} | as many high as low +- 20% | |",
        f"| held-out rows (collected 2026-12-06, before any estimator change) within 2x | "
        f"{r['held_out']['within_2x']} ({r['held_out']['estimated']} expressed) | | |",
        f"| CPU rows (this machine) | {cpu} | each within 30% | {'yes' if r['cpu_within_30_percent'] else 'no'} |",
        *_length_tail_lines(),
        *_decode_waves_lines(),
    ]


def _table(intro: str, columns: list[str], rows: list[list[object]]) -> list[str]:
    """A paragraph and a markdown table under it."""
    lines = ["", intro, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _decode_waves_lines() -> list[str]:
    """The calibration of decode waves (an engine whose KV cache holds fewer sequences than its share) on vLLM."""
    module = _bench_module("vllm_decode_waves")
    rows = []
    for run in module.recorded():
        cut, ends = run["cut"], run["predicted"]
        estimate = " - ".join(f"{ends[end]['iterations']:.0f} ({ends[end]['held']})" for end in ("fast", "slow"))
        rows.append(
            [
                f"{run['file']} (vLLM {run['vllm']})",
                f"{run['sequences']} x {run['tokens']}",
                f"{cut['blocks']} blocks of {cut['block_size']}",
                run["ample"]["iterations"],
                cut["iterations"],
                f"{cut['preemptions']:.0f}",
                estimate,
            ]
        )
    intro = (
        "An engine whose KV cache holds fewer sequences than its share decodes them in waves "
        "(`timing.generation.engine_concurrency`; the recipe's colocated vLLM holds what its memory estimate gives). "
        "Checked on vLLM's own iteration counter, on this CPU (`bench/vllm_decode_waves.py`, recorded in "
        f"`bench/results/{module.RECORDED.name}/`): the embedded SmolLM2-135M, completions of exactly the budget:"
    )
    columns = [
        "run",
        "sequences x tokens",
        "KV cache held",
        "iterations with ample KV",
        "iterations, cut",
        "preemptions",
        "estimate (sequences at once)",
    ]
    return _table(intro, columns, rows)


def _length_tail_lines() -> list[str]:
    """The calibration of a batch's longest completion from a stated mean, on the project's own recorded samplings."""
    module = _bench_module("completion_length_tail")
    rows = [
        [
            f"{run['file']}: {run['prompts']} prompts x {run['group']}",
            f"{run['mean']:.0f} / {run['budget']} ({run['cut_at_budget']} of {run['completions']})",
            row["n"],
            f"{row['measured_mean_longest']:.0f}",
            f"{row['predicted']:.0f}",
            f"{row['predicted_over_measured']:.2f}",
            f"{row['budget_over_measured']:.2f}",
        ]
        for run in module.recorded()
        for row in run["by_batch"]
    ]
    intro = (
        "A row that states only its mean completion length takes a batch's longest from lengths exponential about "
        "that mean, cut at the budget (`timing.generation.expected_longest`). Checked on this project's own "
        "sampling (`bench/completion_length_tail.py`, recorded in "
        f"`bench/results/{module.RECORDED.name}/`, none of the rows above), longest of n: of one prompt up to its "
        "group, pooled across prompts beyond:"
    )
    columns = [
        "sampling",
        "mean / budget (cut at it)",
        "n",
        "measured longest",
        "predicted",
        "predicted / measured",
        "budget / measured",
    ]
    return _table(intro, columns, rows)


def _health_lines(outcome: dict) -> list[str]:
    lines = ["", "## Run health against labelled metric series", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    rate = r["detected"] / r["failing_runs"] if r["failing_runs"] else 0.0
    lines += [
        f"`bench/health_validation.py` ({r['seeds']} seeds per failure, {r['healthy_seeds']} per healthy shape): "
        f"detected {r['detected']}/{r['failing_runs']} ({rate:.0%}, target >= 90%), false alarms "
        f"{r['false_alarms']}/{r['healthy_runs']} healthy runs (target 0).",
        "",
        r["table"],
    ]
    live = r.get("live")
    if live:
        alarmed = live["alarmed_at_some_point"]
        reads = f", {live['alarmed_reads']}/{live['reads']} reads" if "reads" in live else ""
        lines += [
            "",
            f"While they train (run_status read every 2 steps): {alarmed}/{live['healthy_runs']} healthy runs "
            f"raise a warning at some point{reads} ({live['codes'] or 'no codes'}); target 0, "
            f"{'met' if alarmed == 0 else 'not met yet'}.",
        ]
    return lines


def _agent_flow_lines(outcome: dict) -> list[str]:
    lines = ["", "## The flow an agent sees over MCP", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    lines += ["| figure | value | target | met |", "|---|---|---|---|"]
    lines += [f"| {row['figure']} | {row['value']} | {row['target']} | {row['met']} |" for row in r["rows"]]
    return lines


def _soak_lines(outcome: dict) -> list[str]:
    lines = ["", "## Soak: servers under concurrent clients and faults", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    problems = r.get("problems") or []
    lines += [
        f"`bench/soak.py`: {r['servers']}, {r['clients']} clients, {r['seconds']:.0f} s, two live tiny runs of "
        f"{r['run_steps']} steps, faults: {', '.join(e if isinstance(e, str) else str(e) for e in r['events'])}.",
        "",
        "| calls | internal errors | p50 | p99 | problems found |",
        "|---|---|---|---|---|",
        f"| {r.get('calls')} | {r.get('internal_errors')} | {r.get('p50_ms', 0):.0f} ms | "
        f"{r.get('p99_ms', 0):.0f} ms | {len(problems)} |",
    ]
    lines += [f"- {problem}" for problem in problems[:10]]
    return lines


def _completion_budget_lines(outcome: dict) -> list[str]:
    lines = ["", "## The completion budget against completions its probe never saw", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    r = outcome["result"]
    lines += [
        "`bench/completion_budget.py`: the budget emit_grpo_config sizes from a probe of the embedded model, read on "
        "fresh completions sampled to twice it (another seed; other prompts where the data has them). The rule "
        "cuts at most a quarter of the probe; where the probe cut more at its own budget the recipe takes twice "
        "it and says to probe again there, so the fresh share past the sized budget is what that probe left unknown.",
        "",
        *_bench_module("completion_budget").markdown(r),
    ]
    return lines


def _blind_read_lines(outcome: dict) -> list[str]:
    lines = ["", "## The blind read's rule on simulated readers and non-readers", ""]
    if not outcome.get("ok"):
        return lines + [f"Not measured ({outcome.get('error', 'skipped')})."]
    return lines + [
        "`bench/blind_read_rule.py`: reads simulated with the shipped draw and rule (nothing fitted): a reader "
        "misreads each sample at the misread rate and amends every misread; a non-reading strategy amends every "
        "disagreement. Blocked means blocked for good (a failed report is final).",
        "",
        *_bench_module("blind_read_rule").markdown(outcome["result"]),
    ]


def render_sections(results: dict) -> list[str]:
    """The Markdown after the speed table; a section re-measured after the full run (``--only``) says when."""
    lines = [""]
    for key, render in (
        ("grading_worst_case", _grading_lines),
        ("math_under_load", _math_lines),
        ("memory_validation", _memory_lines),
        ("step_time_validation", _step_time_lines),
        ("health_validation", _health_lines),
        ("agent_flow", _agent_flow_lines),
        ("soak", _soak_lines),
        ("completion_budget", _completion_budget_lines),
        ("blind_read_rule", _blind_read_lines),
    ):
        outcome = results.get(key, {})
        section = render(outcome)
        heading = next((i for i, line in enumerate(section) if line.startswith("## ")), None)
        if outcome.get("measured_at") and heading is not None:
            note = f"Re-measured {outcome['measured_at']} (`bench/run_all.py --only {key}`), after the run above."
            section[heading + 1 : heading + 1] = ["", note]
        lines += section
    return lines
