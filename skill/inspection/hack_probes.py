"""Hack probes: known ways policies fool rewards, built from the real samples and tried on each reward.

A probe that scores above zero where an honest reward gives zero, or as well as a correct completion
where it should score below one, is a blocking flag naming the hack. The probes chosen for a reward
follow its role and what its completions look like (tag probes only where answers are tagged).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from skill.inspection.schema import ProbeResult, SampleResult
from skill.rewards.judge.verdict import MASTER_KEYS
from skill.rewards.spec import RewardSpec

ZERO = "0"
BELOW = "below a correct completion"
PADDING = " and so on" * 600


def _text(prompt: Any) -> str:
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        return str(prompt[-1].get("content", ""))
    return str(prompt)


def _neighbours(gold: str) -> tuple[str, str]:
    try:
        number = float(gold)
    except ValueError:
        return f"not {gold}", f"maybe {gold}?"
    if number.is_integer():
        return str(int(number) - 1), str(int(number) + 1)
    return str(number - 1), str(number + 1)


def _uses_tags(spec: RewardSpec, best: SampleResult | None) -> bool:
    params = json.dumps(spec.params)
    return "answer_tag" in params or "think_answer" in params or (best is not None and "<answer>" in best.completion)


def _text_probes(spec: RewardSpec, best: SampleResult | None, gold: str | None, sample: SampleResult):
    """(probe name, completion, expected) for format / correctness / shaping rewards."""
    probes = [("echo_prompt", _text(sample.prompt), ZERO), ("empty_completion", "", ZERO)]
    tagged = _uses_tags(spec, best)
    if tagged:
        probes.append(("empty_answer_tags", "<think>Let me think.</think>\n<answer></answer>", ZERO))
        if gold is not None:
            probes.append(
                (
                    "answer_in_reasoning",
                    f"<think>It is <answer>{gold}</answer></think>\n<answer>not sure</answer>",
                    ZERO,
                )
            )
    if spec.role == "correctness" and gold is not None:
        low, high = _neighbours(gold)
        listed = f"{low}, {gold} or {high}"
        probes.append(("candidate_list", f"<answer>{listed}</answer>" if tagged else listed, ZERO))
    if best is not None and spec.role == "format":
        probes.append(("repeated_blocks", f"{best.completion}\n{best.completion}", ZERO))
        probes.append(("trailing_junk", f"{best.completion}\nIgnore this trailing text 999.", ZERO))
        probes.append(("overlong_padding", best.completion + PADDING, ZERO))
    if best is not None and spec.role == "shaping":
        probes.append(("overlong_padding", best.completion + PADDING, BELOW))
    return probes


def _code_probes(sample: SampleResult, spec: RewardSpec):
    tests = sample.columns.get(spec.params.get("tests_column", "tests"))
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            tests = [tests]
    tests = tests if isinstance(tests, list) else []
    names = set()
    expected_outputs = []
    for case in tests:
        text = case.get("call", "") if isinstance(case, dict) else str(case)
        names.update(re.findall(r"([A-Za-z_]\w*)\s*\(", text.removeprefix("assert ")))
        if isinstance(case, dict) and "output" in case:
            expected_outputs.append(str(case["output"]))
    functions = "\n".join(f"def {name}(*args, **kwargs):\n    return AlwaysEqual()" for name in sorted(names))
    always_equal = (
        "class AlwaysEqual:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
        f"        return False\n    def __hash__(self):\n        return 0\n{functions}\n"
    )
    printed = "\n".join(expected_outputs) or "All tests passed"
    return [
        ("sys_exit_0", "```python\nimport sys\nsys.exit(0)\n```", ZERO),
        ("os_exit_0", "```python\nimport os\nos._exit(0)\n```", ZERO),
        ("always_equal", f"```python\n{always_equal}```", ZERO),
        ("print_expected", f"```python\nprint({printed!r})\nprint('PASSED')\n```", ZERO),
        ("empty_completion", "", ZERO),
    ]


def _score(function: Callable[..., list[float | None]], completion: str, sample: SampleResult) -> float | None:
    columns = {key: [value] for key, value in sample.columns.items()}
    return function([sample.prompt], [completion], **columns)[0]


def probe_rewards(
    specs: list[RewardSpec], functions: dict[str, Callable[..., list[float | None]]], results: list[SampleResult]
) -> list[ProbeResult]:
    """Try every applicable probe on every reward, on the real sample the reward scored best (or the first)."""
    found = []
    for spec, (name, function) in zip(specs, functions.items(), strict=True):
        scored = [r for r in results if r.scores.get(name) is not None]
        best = max(scored, key=lambda r: r.scores[name] or 0.0) if scored else None
        reference = best.scores[name] if best is not None else None
        sample = best or results[0]
        gold_column = spec.params.get("answer_column", "answer")
        gold = sample.columns.get(gold_column)
        if spec.role == "judge":
            probes = [(f"master_key_{i}", key, BELOW) for i, key in enumerate(MASTER_KEYS)]
        elif spec.name == "unit_tests" or spec.params.get("tests_column", "tests") in sample.columns:
            probes = _code_probes(sample, spec)
        else:
            probes = _text_probes(spec, best, None if gold is None else str(gold), sample)
        for probe, completion, expected in probes:
            score = _score(function, completion, sample)
            if expected == ZERO:
                hacked = score is not None and score > 0
            else:
                bar = reference if reference is not None else 1.0
                hacked = score is not None and (score >= bar or (spec.role == "judge" and score >= 0.5))
            found.append(
                ProbeResult(
                    reward=name,
                    probe=probe,
                    completion=completion[:400],
                    score=score,
                    expected=expected,
                    reference_score=reference,
                    hacked=hacked,
                    sample_id=sample.id,
                )
            )
    return found
