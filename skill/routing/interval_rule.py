"""The rule route_check decides by, for measured and declared evidence alike, read through 95% intervals.

A rate decides only when its Wilson interval (skill.intervals) lies on one side of a boundary:
- pass@1 (successes over samples) entirely below MIN_PASS: the model (almost) never succeeds, SFT first;
- pass@1 entirely at or above MIN_PASS and below ALMOST_ALWAYS: GRPO;
- pass@1 entirely at or above ALMOST_ALWAYS with the learnable fraction (prompts with mixed outcomes over
  prompts) entirely below FEW_MIXED: not worth RL as posed; a learnable fraction entirely at or above
  FEW_MIXED keeps GRPO, whatever the pass rate;
- anything else straddles a boundary: sample more, with the sample size that would decide at the rate
  seen (the interval shrinks as 1 / sqrt(n), so it is found by growing n until it no longer straddles).

MIN_PASS: GRPO learns only from groups with a success; at 5% pass@1 a group of 8 holds one with
probability 1 - 0.95^8 = 0.34, so two groups in three carry no signal; below it SFT is the cheaper start.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from skill.intervals import wilson_interval

MIN_PASS = 0.05
ALMOST_ALWAYS = 0.9  # pass@1 at or above this, with ...
FEW_MIXED = 0.1  # ... a learnable fraction below this: not worth RL as posed
MAX_SAMPLES = 100_000  # a rate on a boundary decides at no size; the search stops here


class Rate(NamedTuple):
    """A proportion and what it counts: ``successes`` of ``n`` ``unit`` (samples or prompts)."""

    successes: float
    n: int
    unit: str

    @property
    def value(self) -> float:
        return self.successes / self.n

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.n)

    def describe(self, name: str) -> str:
        """
        >>> Rate(1, 48, "samples").describe("pass@1")
        'pass@1 0.02 (95% interval 0.00-0.11 over 48 samples)'
        """
        low, high = self.interval
        return f"{name} {self.value:.2f} (95% interval {low:.2f}-{high:.2f} over {self.n} {self.unit})"


class Verdict(NamedTuple):
    """What the evidence decides: a route, why, from what, and for 'sample-more' the size that would decide."""

    route: str  # grpo | lora-qlora-recipes | not-worth-rl | sample-more
    reasons: list[str]
    pass_rate: Rate
    learnable: Rate | None = None
    samples_needed: int | None = None  # sample-more on pass@1: samples (prompts x n) that would decide
    prompts_needed: int | None = None  # sample-more on the learnable fraction: prompts that would decide

    def prompts_to_decide(self, n: int) -> int | None:
        """For 'sample-more': the prompts (at n samples each) that would decide; None when no size does.

        >>> Verdict("sample-more", [], Rate(1, 48, "samples"), samples_needed=232).prompts_to_decide(8)
        29
        """
        if self.prompts_needed is not None:
            return self.prompts_needed
        return math.ceil(self.samples_needed / n) if self.samples_needed is not None else None


def straddles(rate: Rate, boundary: float) -> bool:
    """Whether the 95% interval holds values on both sides of ``boundary``.

    >>> straddles(Rate(1, 48, "samples"), MIN_PASS), straddles(Rate(10, 100, "samples"), MIN_PASS)
    (True, False)
    """
    low, high = rate.interval
    return low < boundary <= high


def size_that_decides(rate: Rate, boundary: float) -> int | None:
    """The smallest n (in steps of a quarter) at which the same rate's interval leaves ``boundary``; None when
    no size up to MAX_SAMPLES does (the rate sits on the boundary).

    >>> size_that_decides(Rate(1, 48, "samples"), MIN_PASS)  # 1 in 48 seen: 232 samples bound it below 0.05
    232
    >>> size_that_decides(Rate(5, 100, "samples"), MIN_PASS) is None
    True
    """
    n = rate.n
    while n <= MAX_SAMPLES:
        if not straddles(Rate(rate.value * n, n, rate.unit), boundary):
            return n
        n = math.ceil(n * 1.25)
    return None


def decide(pass_rate: Rate, learnable: Rate | None) -> Verdict:
    """The route from pass@1 over samples and, when known, the learnable fraction over prompts.

    >>> decide(Rate(1, 48, "samples"), Rate(1, 6, "prompts")).route
    'sample-more'
    >>> decide(Rate(0, 128, "samples"), Rate(0, 16, "prompts")).route
    'lora-qlora-recipes'
    >>> decide(Rate(20, 96, "samples"), Rate(6, 12, "prompts")).route
    'grpo'
    >>> decide(Rate(400, 400, "samples"), Rate(0, 50, "prompts")).route
    'not-worth-rl'
    """
    pass_low, pass_high = pass_rate.interval
    measured = pass_rate.describe("pass@1") + (f"; {learnable.describe('learnable fraction')}" if learnable else "")
    if pass_high < MIN_PASS:
        return Verdict(
            "lora-qlora-recipes",
            [
                f"The base model (almost) never succeeds ({measured}): below {MIN_PASS:.2f}, most GRPO groups hold "
                "no success to learn from; RL sharpens a capability, it cannot install one."
            ],
            pass_rate,
            learnable,
        )
    if pass_low < MIN_PASS:
        return _sample_more(pass_rate, learnable, pass_rate, MIN_PASS, "whether the model succeeds often enough")
    few_mixed = learnable is not None and learnable.interval[1] < FEW_MIXED
    if pass_high < ALMOST_ALWAYS or (learnable is not None and learnable.interval[0] >= FEW_MIXED):
        reasons = [f"The base model succeeds sometimes, inconsistently ({measured}): the case GRPO is for."]
        if few_mixed:
            reasons.append("Few prompts have mixed outcomes: train on the learnable ones or raise num_generations.")
        return Verdict("grpo", reasons, pass_rate, learnable)
    if pass_low >= ALMOST_ALWAYS and few_mixed:
        return Verdict(
            "not-worth-rl",
            [f"The base model almost always succeeds with almost no mixed groups ({measured}): GRPO has no signal."],
            pass_rate,
            learnable,
        )
    if learnable is None:
        fewest = size_that_decides(Rate(0, 1, "prompts"), FEW_MIXED)  # the fewest that can show it below FEW_MIXED
        return Verdict(
            "sample-more",
            [
                f"The pass rate reaches {ALMOST_ALWAYS:.2f} ({measured}), where a task may not be worth RL, and no "
                "learnable fraction was measured: a probe (several samples per prompt) shows how many prompts have "
                f"mixed outcomes, from at least {fewest} prompts."
            ],
            pass_rate,
            prompts_needed=fewest,
        )
    if pass_low >= ALMOST_ALWAYS:  # the learnable fraction straddles FEW_MIXED
        return _sample_more(pass_rate, learnable, learnable, FEW_MIXED, "whether enough prompts have mixed outcomes")
    return _sample_more(pass_rate, learnable, pass_rate, ALMOST_ALWAYS, "whether the model almost always succeeds")


def _sample_more(pass_rate: Rate, learnable: Rate | None, rate: Rate, boundary: float, question: str) -> Verdict:
    """'sample-more' because ``rate``'s interval straddles ``boundary``, with the size that would decide."""
    measured = pass_rate.describe("pass@1") + (f"; {learnable.describe('learnable fraction')}" if learnable else "")
    size = size_that_decides(rate, boundary)
    reason = f"Too little evidence to decide {question} ({measured}): the interval straddles {boundary:.2f}"
    if size is None:
        reasons = [f"{reason}, and the rate sits so near it that no probe size decides; decide on other grounds."]
        return Verdict("sample-more", reasons, pass_rate, learnable)
    reasons = [f"{reason}; about {size} {rate.unit} at this rate would decide."]
    if rate.unit == "prompts":
        return Verdict("sample-more", reasons, pass_rate, learnable, prompts_needed=size)
    return Verdict("sample-more", reasons, pass_rate, learnable, samples_needed=size)
