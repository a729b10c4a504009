"""The blind read's rule on simulated reads: how often it blocks an honest reader for good, and how often it
opens for a labeller who does not read.

Each trial collects the samples a user would (at least 256; at a low pass rate, as many as the too-few-outcomes
flag asks for: 2 x ``MIN_EACH_OUTCOME`` / rate), each passing the correctness reward with the pass rate, draws
the read with the shipped ``balanced_draw``, and judges labels with the shipped ``compare`` and ``read_reasons``.
A reader misreads each sample with the misread rate and then amends every misread (it is one); a non-reading
strategy amends every disagreement. Outcomes: **opened**; **blocked** (a final reason: labels are never
replaced, so blocked for good); **asked for more** (the draw had fewer than ``MIN_EACH_OUTCOME`` of an outcome:
a blocking flag that asks for more samples before anyone reads, not a verdict on a reader). Nothing here is fitted:
the constants are the shipped ones and the numbers only report them.
"""

from __future__ import annotations

import math
import random
from typing import Any

PASS_RATES = (0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9)
MISREAD_RATES = (0.0, 0.01, 0.03, 0.05)
STRATEGIES = ("all pass", "all fail", "coin flip", "coin at the draw's pass rate", "copied from another reward")
REWARD = "exact_match"


def _trial(rng: random.Random, pass_rate: float, label: Any) -> str:
    """One simulated read: 'opened', 'blocked' or 'asked for more'."""
    from skill.inspection.agreement import MIN_EACH_OUTCOME, compare, read_reasons
    from skill.inspection.draw import balanced_draw, outcome_flags
    from skill.inspection.schema import Amendment, InspectionReport, Review, SampleResult
    from skill.rewards.spec import RewardSpec

    rewards = [RewardSpec(name=REWARD, role="correctness")]
    collected = max(256, math.ceil(2 * MIN_EACH_OUTCOME / min(pass_rate, 1 - pass_rate)))
    pool = [
        SampleResult(
            id=i, prompt=f"q{i}", completion=f"a{i}", scores={REWARD: float(rng.random() < pass_rate)}, total=None
        )
        for i in range(collected)
    ]
    drawn_ids, _how = balanced_draw(pool, rewards)
    drawn = [pool[i] for i in drawn_ids]
    if outcome_flags(drawn, pool, rewards, []):
        return "asked for more"
    samples = [sample.model_copy(update={"id": new}) for new, sample in enumerate(drawn)]
    truths = [sample.scores[REWARD] >= 0.5 for sample in samples]
    labels = label(rng, truths)
    report = InspectionReport(
        id="insp-simulated",
        created_at="",
        rewards=rewards,
        reward_fingerprint="",
        source="simulated",
        samples=samples,
        stats={},
        flags=[],
        probe_results=[],
        read_roles=["correctness"],
    )
    report.review = Review(
        reviewer="simulated",
        reviewer_kind="program",
        labels={i: {"correctness": "pass" if said else "fail"} for i, said in enumerate(labels)},
    )
    report.review.disagreements, report.review.agreement = compare(report)
    report.review.amendments = [  # every disagreement amended to the reward's side
        Amendment(sample_id=d.sample_id, role=d.role, label=d.reward_said, reason="misread")
        for d in report.review.disagreements
    ]
    report.review.disagreements, report.review.agreement = compare(report)
    to_do, final = read_reasons(report)
    assert not to_do or final, to_do  # every label given and every disagreement amended
    return "blocked" if final else "opened"


def _reader(misread: float):
    return lambda rng, truths: [truth != (rng.random() < misread) for truth in truths]


def _strategy(name: str):
    def label(rng: random.Random, truths: list[bool]) -> list[bool]:
        share = sum(truths) / len(truths)  # the draw's sentence tells it
        chance = {
            "all pass": 1.0,
            "all fail": 0.0,
            "coin flip": 0.5,
            "coin at the draw's pass rate": share,
            "copied from another reward": 0.6,
        }[name]
        return [rng.random() < chance for _ in truths]

    return label


def measure(quick: bool = False, trials: int | None = None, seed: int = 3407) -> dict[str, Any]:
    """Outcome counts per pass rate, for readers by misread rate and for each non-reading strategy."""
    trials = trials or (60 if quick else 400)
    rng = random.Random(seed)
    readers: dict[str, dict[str, dict[str, int]]] = {}
    strategies: dict[str, dict[str, dict[str, int]]] = {}
    for rate in PASS_RATES:
        for misread in MISREAD_RATES:
            counts = {"opened": 0, "blocked": 0, "asked for more": 0}
            for _ in range(trials):
                counts[_trial(rng, rate, _reader(misread))] += 1
            readers.setdefault(f"{misread:.0%}", {})[f"{rate:.0%}"] = counts
        for name in STRATEGIES:
            counts = {"opened": 0, "blocked": 0, "asked for more": 0}
            for _ in range(trials):
                counts[_trial(rng, rate, _strategy(name))] += 1
            strategies.setdefault(name, {})[f"{rate:.0%}"] = counts
    return {"trials": trials, "seed": seed, "readers": readers, "strategies": strategies}


def false_block(counts: dict[str, int]) -> float:
    """Blocked for good among the reads that went ahead (asked-for-more reads are not a verdict on the reader)."""
    read = counts["opened"] + counts["blocked"]
    return counts["blocked"] / read if read else 0.0


def false_pass(by_rate: dict[str, dict[str, int]]) -> float:
    """Opened among every trial of a non-reading strategy, over all pass rates."""
    return sum(c["opened"] for c in by_rate.values()) / sum(sum(c.values()) for c in by_rate.values())


def markdown(result: dict[str, Any]) -> list[str]:
    from skill.inspection.agreement import MAX_DISAGREEING_SHARE, MAX_P_VALUE, MIN_EACH_OUTCOME

    rates = [f"{rate:.0%}" for rate in PASS_RATES]
    lines = [
        f"Shipped constants: Fisher p <= {MAX_P_VALUE}, at most {MAX_DISAGREEING_SHARE:.0%} of first labels differ, "
        f"{MIN_EACH_OUTCOME} of each outcome in the draw. {result['trials']} trials per cell (seed {result['seed']}). "
        "Targets: false-block <= 5% for readers with <= 3% misreads at every pass rate; false-pass <= 1% for "
        "each non-reading strategy.",
        "",
        "False-block (blocked for good among reads that went ahead; in brackets, the share asked for more samples "
        "first):",
        "",
        "| misread rate | " + " | ".join(f"pass {rate}" for rate in rates) + " |",
        "|---|" + "---|" * len(rates),
    ]
    for misread, by_rate in result["readers"].items():
        cells = [
            f"{false_block(by_rate[rate]):.1%} ({by_rate[rate]['asked for more'] / result['trials']:.0%})"
            for rate in rates
        ]
        lines.append(f"| {misread} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "False-pass (opened, of every trial):",
        "",
        "| strategy | " + " | ".join(rates) + " | all |",
        "|---|" + "---|" * (len(rates) + 1),
    ]
    for name, by_rate in result["strategies"].items():
        cells = [f"{by_rate[rate]['opened'] / result['trials']:.1%}" for rate in rates]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {false_pass(by_rate):.2%} |")
    return lines
