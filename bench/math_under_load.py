"""The ``math`` reward under load: items/s and the count of None (failed) items, on an idle machine and with
two CPU-bound processes (``python -c "while True: pass"``) beside it.

The items are half MATH-style LaTeX answers that go to math-verify's worker, half GSM8K-style plain numbers
compared in-process, each with its expected score. A round starts from a cold pool, so the worker's start
(not counted in the per-comparison timeout) is inside the measured time; rounds alternate idle / loaded.
Target: no None and every score right, loaded or not.

Run: python bench/math_under_load.py [--items N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skill.rewards.math_workers import shared_pool  # noqa: E402
from skill.rewards.text import build_math  # noqa: E402

# (completion, gold, expected score)
LATEX = [
    ("so $\\boxed{\\frac{1}{\\sqrt{2}}}$", "$\\frac{\\sqrt{2}}{2}$", 1.0),
    ("<answer>1 + x^2</answer>", "x^2+1", 1.0),
    ("<answer>x^2 - 1</answer>", "x^2+1", 0.0),
    ("The answer is $\\boxed{(3, -1)}$.", "(3, -1)", 1.0),
    ("$\\boxed{\\sqrt{8}}$", "2\\sqrt{2}", 1.0),
    ("\\boxed{\\pi}", "3.14", 0.0),
    ("Therefore the answer is $\\frac{7}{2}$.", "3.5", 1.0),
    ("\\boxed{[1, 2)}", "[1, 2)", 1.0),
]
PLAIN = [
    ("She sold 48/2 = 24 clips, 48+24 = 72 in all.\n#### 72", "72", 1.0),
    ("The answer is $1,250.", "1250", 1.0),
    ("<answer>18.0</answer>", "18", 1.0),
    ("Final answer: 17, 18 or 19", "18", 0.0),
    ("so 3/4", "0.75", 1.0),
    ("<answer>50%</answer>", "0.5", 1.0),
    ("#### 1,000", "999", 0.0),
    ("\\boxed{-7}", "-7", 1.0),
]


def one_round(items: list[tuple[str, str, float]], busy: int) -> dict:
    shared_pool().close()  # cold: the worker's start is part of the round
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        reward = build_math()
        started = time.perf_counter()
        scores = reward([""] * len(items), [c for c, _, _ in items], answer=[g for _, g, _ in items])
        elapsed = time.perf_counter() - started
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    wrong = sum(score is not None and score != expected for score, (_, _, expected) in zip(scores, items, strict=True))
    return {"items_per_s": len(items) / elapsed, "none": scores.count(None), "wrong": wrong, "seconds": elapsed}


def run(items: int = 400, rounds: int = 3) -> dict:
    mix = [(LATEX + PLAIN)[i % (len(LATEX) + len(PLAIN))] for i in range(items)]
    results: dict[str, list[dict]] = {"idle": [], "two_busy": []}
    for _ in range(rounds):
        results["idle"].append(one_round(mix, 0))
        results["two_busy"].append(one_round(mix, 2))
    summary = {"items": items, "rounds": rounds, "latex_share": len(LATEX) / (len(LATEX) + len(PLAIN))}
    for name, runs in results.items():
        summary[name] = {
            "items_per_s_median": statistics.median(r["items_per_s"] for r in runs),
            "items_per_s_min": min(r["items_per_s"] for r in runs),
            "none_total": sum(r["none"] for r in runs),
            "wrong_total": sum(r["wrong"] for r in runs),
        }
    shared_pool().close()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(run(args.items, args.rounds), indent=2))


if __name__ == "__main__":
    main()
