"""Declared evidence: a base pass rate the caller already measured on their own evaluation, with its n.

route_check decides from it by the same rule as from a probe (skill.routing.interval_rule): a declared
rate decides the route only when its 95% interval for that n stays on one side of every boundary,
else the route is 'sample-more' with the size that would decide. The decision says the evidence was
declared (nothing here checked it) and still asks for a measurement, because the user's evaluation
may differ from training (prompts, temperature, verifier).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.intervals import wilson_interval
from skill.routing.interval_rule import Rate, Verdict, decide

AFTER_DECLARED = {  # what to do meanwhile, by the route the declared evidence gave
    "grpo": "Or go on: inspect_rewards on samples of the model (yours, or a probe's), then emit the config.",
    "lora-qlora-recipes": "Meanwhile, fine-tune on demonstrations first (SFT) and come back when it succeeds.",
    "not-worth-rl": "Meanwhile, use harder prompts or a stricter verifier.",
    "sample-more": "A larger evaluation of your own decides too: declare it with its n.",
}


class DeclaredEvidence(BaseModel):
    """A base pass rate from the caller's own evaluation of the model they will train."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    pass_rate: float = Field(ge=0, le=1, description="Share of samples that passed, 0..1.")
    n: int = Field(gt=0, description="Samples that rate counts (prompts x attempts per prompt).")
    source: str = Field(
        min_length=3, description="Where it came from: the evaluation, its verifier, the model and the date."
    )
    learnable_fraction: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of prompts with mixed outcomes, with `prompts`: needed to call a task not worth RL.",
    )
    prompts: int | None = Field(default=None, gt=0, description="Prompts the learnable fraction counts.")

    @model_validator(mode="after")
    def _fraction_with_its_prompts(self) -> DeclaredEvidence:
        if self.learnable_fraction is not None and self.prompts is None:
            raise ValueError("learnable_fraction needs prompts: how many prompts it was counted over")
        if self.prompts is not None and self.prompts > self.n:
            raise ValueError(f"prompts={self.prompts} exceeds n={self.n}: n counts samples, at least one per prompt")
        return self


class DeclaredSummary(DeclaredEvidence):
    """The declared evidence as route_check read it."""

    successes: int = Field(description="round(pass_rate x n).")
    interval_95: tuple[float, float] = Field(description="Wilson 95% interval of the pass rate for this n.")
    learnable_interval_95: tuple[float, float] | None = Field(
        default=None, description="Wilson 95% interval of the learnable fraction over its prompts."
    )

    def rates(self) -> tuple[Rate, Rate | None]:
        """The pass rate over samples and the learnable fraction over prompts, as the routing rule reads them."""
        learnable = None
        if self.learnable_fraction is not None and self.prompts is not None:
            learnable = Rate(round(self.learnable_fraction * self.prompts), self.prompts, "prompts")
        return Rate(self.successes, self.n, "samples"), learnable


def summarise(declared: DeclaredEvidence) -> DeclaredSummary:
    """The declared rate with its success count and intervals.

    >>> summarise(DeclaredEvidence(pass_rate=0.3, n=100, source="my eval")).successes
    30
    """
    successes = round(declared.pass_rate * declared.n)
    low, high = wilson_interval(successes, declared.n)
    summary = DeclaredSummary(**declared.model_dump(), successes=successes, interval_95=(round(low, 4), round(high, 4)))
    _, learnable = summary.rates()
    if learnable is not None:
        a, b = learnable.interval
        summary.learnable_interval_95 = (round(a, 4), round(b, 4))
    return summary


def declared_verdict(summary: DeclaredSummary) -> Verdict:
    """The route from declared evidence, by the rule measured evidence follows; its reasons say it was declared.

    >>> declared_verdict(summarise(DeclaredEvidence(pass_rate=0.3, n=100, source="eval"))).route
    'grpo'
    >>> declared_verdict(summarise(DeclaredEvidence(pass_rate=0.0, n=30, source="eval"))).route  # 0/30: thin
    'sample-more'
    """
    verdict = decide(*summary.rates())
    stated = f"declared from {summary.source!r}, not measured here"
    return verdict._replace(reasons=[f"{verdict.reasons[0]} ({stated})", *verdict.reasons[1:]])


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
