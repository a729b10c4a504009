"""The completion budget against completions its probe never saw (skill.recipe.deciding.completion_budget).

The rule promises a budget that cuts at most a quarter of the probe's completions (``CUT_AT_MOST``), or twice the
probe's own budget with a note to probe again when the probe cut more. Whether that holds beyond the probe is
measured here: the budget is sized from a probe of the embedded model exactly as emit_grpo_config sizes it, then
fresh completions (another seed, other prompts where the data has them) are sampled to twice the budget, and the
share that runs to the budget or past it is what training would cut. The old fixed CPU budget of 16 tokens is
read on the same fresh completions, side by side.

Cases: the addition task (exact_match, last number; fresh prompts 100-131 of the 200) and the gsm8k-format
sample (tests/data/gsm8k_sample.jsonl, the math reward; its 5 problems again, new samples: the file has no more).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skill.recipe.deciding.completion_budget import CUT_AT_MOST

ROOT = Path(__file__).resolve().parent.parent
MODEL = "embedded:SmolLM2-135M-Instruct"
OLD_CPU_BUDGET = 16


def _case(name: str, dataset: Any, verifier: Any, rewards: list[Any], fresh_rows: slice, probe: dict, n: int) -> dict:
    from skill.data import load_rows
    from skill.intervals import wilson_interval
    from skill.recipe.deciding.completion_budget import reference_answer_tokens, size_completion_budget
    from skill.recipe.deciding.field_rules import seed_values
    from skill.routing.evidence import measure_lengths
    from skill.routing.probe import ProbeSpec, run_probe
    from skill.sampling.engines import sample_completions
    from skill.sampling.schema import SamplingSettings

    rows = load_rows(dataset)
    spec = ProbeSpec(rows=rows, **probe)
    _evidence, samples, _rows = run_probe(spec, verifier, None, None)
    lengths = measure_lengths(samples, spec.max_new_tokens, spec.temperature, spec.success_threshold)
    references = reference_answer_tokens(dataset, MODEL)
    budget = size_completion_budget(lengths, references, rewards, seed=seed_values()["max_completion_length"][0])
    prompts = [row["prompt"] for row in rows[fresh_rows]]
    settings = SamplingSettings(n=n, max_new_tokens=2 * budget.value, seed=1)
    counts = [count for group in sample_completions(MODEL, prompts, settings).groups for count in group.token_counts]

    def cut(at: int) -> dict:
        share = sum(count >= at for count in counts)
        return {"budget": at, "cut": share / len(counts), "interval_95": wilson_interval(share, len(counts))}

    return {
        "case": name,
        "probe": lengths.describe(),
        "budget": budget.value,
        "reason": budget.reason,
        "fresh": f"{len(prompts)} prompts x {n}, to {2 * budget.value} tokens",
        "completions": len(counts),
        "sized": cut(budget.value),
        "old_cpu": cut(OLD_CPU_BUDGET),
    }


def measure(quick: bool = False) -> dict:
    """Both cases (the addition case only, smaller, when ``quick``)."""
    from skill.data import DatasetSpec
    from skill.rewards.spec import RewardSpec

    exact = RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"})
    cases = [
        _case(
            "addition (exact_match)",
            DatasetSpec(name="embedded:addition"),
            exact,
            [exact],
            slice(100, 108 if quick else 132),
            {"num_prompts": 8, "max_new_tokens": 32},
            2 if quick else 4,
        )
    ]
    if not quick:
        gsm8k = DatasetSpec(
            name=str(ROOT / "tests" / "data" / "gsm8k_sample.jsonl"),
            prompt_template="Solve: {question}",
            answer_column="answer",
            answer_extractor="gsm8k",
        )
        math = RewardSpec(name="math", role="correctness")
        cases.append(
            _case("gsm8k format (math)", gsm8k, exact, [math], slice(0, 5), {"n": 10, "max_new_tokens": 32}, 4)
        )
    return {"cases": cases, "rule": f"a budget cuts at most {CUT_AT_MOST:.0%} of the completions"}


def markdown(result: dict) -> list[str]:
    """The section's table."""
    lines = [
        "| case | probe | sized budget | fresh completions | cut at the sized budget | cut at 16 (the old CPU "
        f"budget) | at most {CUT_AT_MOST:.0%} |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in result["cases"]:
        sized, old = case["sized"], case["old_cpu"]
        lines.append(
            f"| {case['case']} | {case['probe']} | {case['budget']} | {case['fresh']} | {sized['cut']:.0%} "
            f"({sized['interval_95'][0]:.0%}-{sized['interval_95'][1]:.0%}) | {old['cut']:.0%} | "
            f"{'yes' if sized['cut'] <= CUT_AT_MOST else 'no'} |"
        )
    return lines
