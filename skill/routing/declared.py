"""Declared evidence: a base pass rate the caller already measured on their own evaluation, with its n.

route_check decides from it with the same thresholds as from a probe, read through the 95% interval
that n allows: a declared rate decides the route only when the interval stays on one side of every
threshold. The decision says the evidence was declared (nothing here checked it) and still asks for
a measurement, because the user's evaluation may differ from training (prompts, temperature, verifier).
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from skill.intervals import wilson_interval

AFTER_DECLARED = {  # what to do meanwhile, by the route the declared evidence gave
    "grpo": "Or go on: inspect_rewards on samples of the model (yours, or a probe's), then emit the config.",
    "lora-qlora-recipes": "Meanwhile, fine-tune on demonstrations first (SFT) and come back when it succeeds.",
    "not-worth-rl": "Meanwhile, use harder prompts or a stricter verifier.",
}


class DeclaredEvidence(BaseModel):
    """A base pass rate from the caller's own evaluation of the model they will train."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    pass_rate: float = Field(ge=0, le=1, description="Share of samples that passed, 0..1 (e.g. 0.3 for 30%).")
    n: int = Field(gt=0, description="How many samples that rate counts (prompts x attempts per prompt).")
    source: str = Field(
        min_length=3, description="Where it came from: the evaluation, its verifier, the model and the date."
    )
    learnable_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of prompts with both passes and failures, when the evaluation sampled each prompt "
        "several times; needed to call a task not worth RL.",
    )


class DeclaredSummary(DeclaredEvidence):
    """The declared evidence as route_check read it."""

    successes: int = Field(description="round(pass_rate x n).")
    interval_95: tuple[float, float] = Field(description="Wilson 95% interval of the pass rate for this n.")


def summarise(declared: DeclaredEvidence) -> DeclaredSummary:
    """The declared rate with its success count and interval.

    >>> summarise(DeclaredEvidence(pass_rate=0.3, n=100, source="my eval")).successes
    30
    """
    successes = round(declared.pass_rate * declared.n)
    low, high = wilson_interval(successes, declared.n)
    return DeclaredSummary(**declared.model_dump(), successes=successes, interval_95=(round(low, 4), round(high, 4)))


class DeclaredVerdict(NamedTuple):
    """What declared evidence decides, in route_check's terms."""

    route: str
    reasons: list[str]
    next_skill: str | None
    provisional: bool
    warnings: list[str]

    @property
    def meanwhile(self) -> str:
        """What to do while the measurement is pending."""
        return AFTER_DECLARED[self.route]


def decide_declared(summary: DeclaredSummary, almost_always: float, few_mixed: float) -> DeclaredVerdict:
    """The route from declared evidence and route_check's thresholds, read through the interval for n.

    >>> verdict = decide_declared(summarise(DeclaredEvidence(pass_rate=0.3, n=100, source="eval")), 0.9, 0.1)
    >>> verdict.route, verdict.provisional
    ('grpo', False)
    >>> decide_declared(summarise(DeclaredEvidence(pass_rate=0.0, n=50, source="eval")), 0.9, 0.1).route
    'lora-qlora-recipes'
    """
    low, high = summary.interval_95
    stated = (
        f"declared pass rate {summary.pass_rate:.2f} ({summary.successes}/{summary.n}, 95% interval "
        f"{low:.2f}-{high:.2f}) from {summary.source!r}, not measured here"
    )
    warnings: list[str] = []
    if summary.successes == 0:
        if high > 0.05:
            warnings.append(
                f"0 of {summary.n} bounds the rate only below {high:.2f}: a larger sample (or a probe) could still "
                "find successes at the training temperature."
            )
        reasons = [f"The base model never succeeded ({stated}): RL sharpens a capability, it cannot install one."]
        return DeclaredVerdict("lora-qlora-recipes", reasons, "lora-qlora-recipes", False, warnings)
    fraction = summary.learnable_fraction
    if low >= almost_always and fraction is not None and fraction < few_mixed:
        reasons = [f"The base model almost always succeeds with almost no mixed groups ({stated}): no GRPO signal."]
        return DeclaredVerdict("not-worth-rl", reasons, None, False, warnings)
    reasons = [f"The base model succeeds sometimes ({stated}): the case GRPO is for."]
    provisional = high >= almost_always
    if provisional:
        reasons.append(
            f"The interval reaches {almost_always:.2f}, where a task may not be worth RL: "
            + (
                "the declared learnable fraction leaves it open."
                if fraction is not None
                else "a pass rate alone cannot show how many prompts have mixed outcomes."
            )
            + " Measure it with a probe."
        )
    if fraction is not None and fraction < few_mixed:
        reasons.append("Few prompts have mixed outcomes: train on the learnable ones or raise num_generations.")
    return DeclaredVerdict("grpo", reasons, None, provisional, warnings)


def compare_with_measured(summary: DeclaredSummary, measured_pass_at_1: float, samples: int) -> str | None:
    """A warning when the declared rate lies outside the measured rate's 95% interval, else None.

    >>> compare_with_measured(summarise(DeclaredEvidence(pass_rate=0.3, n=100, source="eval")), 0.05, 64)[:30]
    'The declared pass rate 0.30 (e'
    """
    low, high = wilson_interval(round(measured_pass_at_1 * samples), samples)
    if low <= summary.pass_rate <= high:
        return None
    return (
        f"The declared pass rate {summary.pass_rate:.2f} ({summary.source}) lies outside the measured "
        f"{measured_pass_at_1:.2f} (95% interval {low:.2f}-{high:.2f}, {samples} samples): the evaluations differ "
        "(prompts, temperature, completion budget or verifier). The route follows the measurement."
    )
