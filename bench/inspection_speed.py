"""Inspection wall time: 100 supplied samples x (format + exact_match + unit_tests), hack probes included.

Target: under 10 s on 2 cores. Samples mix right, wrong and malformed code in fenced blocks, with
three function-call tests each (the unit_tests reward runs every completion in the sandbox).
Run: python bench/inspection_speed.py [--samples N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import time

from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.rewards.spec import RewardSpec

TARGET_S = 10.0
REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "code_block"}),
    RewardSpec(
        name="exact_match", role="correctness", weight=0.5, params={"extract": "regex", "regex": r"# result: (\S+)"}
    ),
    RewardSpec(name="unit_tests", role="correctness", weight=1.0),
]
PROGRAMS = [
    "```python\ndef add(a, b):\n    return a + b\n# result: {gold}\n```",
    "```python\ndef add(a, b):\n    return a - b\n# result: 0\n```",
    "def add(a, b): return a + b",
    "```python\ndef add(a, b):\n    return int(str(a) + str(b))\n```",
]


def samples(count: int) -> list[SuppliedSample]:
    rows = []
    for i in range(count):
        a, b = i % 7, i % 5
        tests = [
            {"call": f"add({a}, {b})", "expected": a + b},
            {"call": "add(2, 2)", "expected": 4},
            {"call": "add(-1, 1)", "expected": 0},
        ]
        rows.append(
            SuppliedSample(
                prompt=f"Write add(a, b). What is add({a}, {b})?",
                completion=PROGRAMS[i % len(PROGRAMS)].format(gold=a + b),
                columns={"answer": str(a + b), "tests": tests},
                group=i // 4,
            )
        )
    return rows


def measure(count: int = 100, repeats: int = 3) -> dict[str, float]:
    """Median and spread of the wall time of one inspection, in seconds."""
    data = samples(count)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        inspect_rewards(InspectionRequest(rewards=REWARDS, samples=data))
        times.append(time.perf_counter() - started)
    return {
        "samples": count,
        "median_s": statistics.median(times),
        "spread_s": max(times) - min(times),
        "target_s": TARGET_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for key, value in measure(args.samples, args.repeats).items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
