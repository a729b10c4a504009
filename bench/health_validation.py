"""Run health against labelled metric series: for each failure, how often its check fires (and is named the
most likely cause), and how many healthy runs draw any warning.

The series are skill.runs.labelled_series's: runs simulated at TRL's logging granularity (real group
sampling, batch and held-out noise at the stated shape), one failure each across seeds and lengths
(40/100/200 steps), healthy runs at 20/40/100/200 steps, and the project's two measured CPU runs
reconstructed at the demo's shape. Pure Python, a few seconds.

Run: python bench/health_validation.py [--seeds N] [--healthy-seeds N] [--live]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from skill.runs.labelled_series import validation_set


def run(seeds: int = 10, healthy_seeds: int = 10) -> dict:
    """Per label: runs, detected (its check fired), named_first (its check leads), and for runs with no expected
    failure the false alarms (any warning) and which codes raised them."""
    table: dict[str, dict] = defaultdict(lambda: {"runs": 0, "detected": 0, "named_first": 0, "false_alarms": 0})
    alarms: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for labelled in validation_set(seeds, healthy_seeds):
        warnings = labelled.diagnose()
        codes = [w.code for w in warnings]
        row = table[labelled.label]
        row["runs"] += 1
        row["expected"] = labelled.expected
        if labelled.expected is None:
            row["false_alarms"] += bool(codes)
            for code in codes:
                alarms[labelled.label][code] += 1
        else:
            row["detected"] += labelled.expected in codes
            row["named_first"] += bool(codes) and codes[0] == labelled.expected
            for code in codes:
                if code != labelled.expected:
                    alarms[labelled.label][code] += 1
    failing = [row for row in table.values() if row["expected"]]
    healthy = [row for row in table.values() if not row["expected"]]
    return {
        "labels": dict(table),
        "other_codes": {label: dict(codes) for label, codes in alarms.items()},
        "detected": sum(row["detected"] for row in failing),
        "named_first": sum(row["named_first"] for row in failing),
        "failing_runs": sum(row["runs"] for row in failing),
        "false_alarms": sum(row["false_alarms"] for row in healthy),
        "healthy_runs": sum(row["runs"] for row in healthy),
    }


def live_false_alarms(seeds: int = 3, healthy_seeds: int = 5, every: int = 2) -> dict:
    """Healthy runs as run_status sees them while they train: diagnose on every ``every``-th prefix (from the
    third point), knowing the run's max_steps as run_status does; a run counts once if any prefix raises any
    warning, and which codes did; ``reads`` and ``alarmed_reads`` count the prefixes."""
    codes: dict[str, int] = defaultdict(int)
    runs = alarmed = reads = alarmed_reads = 0
    for labelled in validation_set(seeds, healthy_seeds):
        if labelled.expected is not None:
            continue
        raised: set[str] = set()
        for end in range(3, len(labelled.metrics) + 1, every):
            warnings = labelled.diagnose(rows=end)
            raised |= {w.code for w in warnings}
            reads += 1
            alarmed_reads += bool(warnings)
        runs += 1
        alarmed += bool(raised)
        for code in raised:
            codes[code] += 1
    return {
        "healthy_runs": runs,
        "alarmed_at_some_point": alarmed,
        "codes": dict(codes),
        "reads": reads,
        "alarmed_reads": alarmed_reads,
    }


def markdown(result: dict) -> str:
    """The table for bench/RESULTS.md."""
    lines = ["| labelled run | check that must fire | detected | named first | false alarms |", "|---|---|---|---|---|"]
    for label, row in result["labels"].items():
        if row["expected"]:
            lines.append(
                f"| {label} | {row['expected']} | {row['detected']}/{row['runs']} | "
                f"{row['named_first']}/{row['runs']} | |"
            )
        else:
            lines.append(f"| {label} | (none) | | | {row['false_alarms']}/{row['runs']} |")
    total = result["failing_runs"]
    lines.append(
        f"| **all** | | **{result['detected']}/{total}** | **{result['named_first']}/{total}** | "
        f"**{result['false_alarms']}/{result['healthy_runs']}** |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--healthy-seeds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--live", action="store_true", help="also read healthy runs every 2 steps as they train")
    args = parser.parse_args()
    outcome = run(args.seeds, args.healthy_seeds)
    print(json.dumps(outcome, indent=1) if args.json else markdown(outcome))
    print("other codes raised:", json.dumps(outcome["other_codes"]))
    if args.live:
        print("while training:", json.dumps(live_false_alarms(min(args.seeds, 3), 20)))
