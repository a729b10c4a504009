"""What a probe measured: pass@k, the per-prompt successes, the learnable fraction and the completions' lengths."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from skill.sampling.schema import SampledWith

# The fewest scored samples a probe decides from; the same floor as the reward read (inspection imports it), since
# inspect_rewards reads a probe's own samples: the seed's 50-100-sample read.
MIN_SAMPLES = 50
# A cut completion has no answer and scores like a wrong one: a budget that cut 39% of the probe (the 0.5 this
# replaced allowed it) trained a run that then clipped 54-62% of its completions. A quarter is the most a sized
# budget may cut, and past it a probe's pass rate is a floor. A small model that sometimes never stops keeps a share
# cut at any budget, and raising the budget for it only costs.
CUT_AT_MOST = 0.25


class RouteEvidence(BaseModel):
    """What the probe measured."""

    n: int
    prompts: int
    pass_at_1: float
    pass_at_k: dict[str, float] = Field(description="Unbiased pass@k for k = 1..k.")
    per_prompt_successes: list[int]
    histogram: dict[str, int] = Field(description="Number of successes in a group -> prompts with that many.")
    learnable_fraction: float = Field(description="Prompts with mixed outcomes: where GRPO has an advantage signal.")
    learnable_prompt_indices: list[int]
    temperatures: list[float] = Field(description="Temperatures probed, in order.")
    seconds: float
    sampled_with: SampledWith | None = Field(
        default=None, description="The engine, its version, device and seed, and the model revision sampled."
    )
    verifier_read_share: float | None = Field(
        default=None, description="Share of the completions the verifier found an answer in (None: not shown)."
    )
    looser_extract: tuple[str, float] | None = Field(
        default=None,
        description="When nothing passed: an extract mode of the same verifier under which some of the same "
        "completions pass, with that share (the verifier may be stricter than the task).",
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n - c, k) / C(n, k).

    >>> pass_at_k(8, 0, 1), pass_at_k(8, 8, 3), round(pass_at_k(8, 2, 1), 3), round(pass_at_k(8, 2, 4), 3)
    (0.0, 1.0, 0.25, 0.786)
    """
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def probe_evidence(
    successes: list[int], n: int, largest_k: int | None, temperatures: list[float], seconds: float
) -> RouteEvidence:
    """The evidence of one probe from the successes per prompt (out of n samples each).

    >>> evidence = probe_evidence([0, 3, 8], n=8, largest_k=2, temperatures=[1.0], seconds=1.234)
    >>> evidence.pass_at_1, evidence.learnable_prompt_indices, evidence.histogram, evidence.seconds
    (0.4583333333333333, [1], {'0': 1, '3': 1, '8': 1}, 1.23)
    """
    top = largest_k or n
    histogram: dict[str, int] = {}
    for count in successes:
        histogram[str(count)] = histogram.get(str(count), 0) + 1
    learnable = [index for index, count in enumerate(successes) if 0 < count < n]
    return RouteEvidence(
        n=n,
        prompts=len(successes),
        pass_at_1=sum(successes) / (n * len(successes)),
        pass_at_k={str(k): sum(pass_at_k(n, c, k) for c in successes) / len(successes) for k in range(1, top + 1)},
        per_prompt_successes=successes,
        histogram=dict(sorted(histogram.items(), key=lambda item: int(item[0]))),
        learnable_fraction=len(learnable) / len(successes),
        learnable_prompt_indices=learnable,
        temperatures=temperatures,
        seconds=round(seconds, 2),
    )


class CompletionLengths(BaseModel):
    """How long the probe's completions ran at the training temperature, in tokens: what sizes the recipe's
    max_completion_length (skill.recipe.deciding.completion_budget)."""

    budget: int = Field(description="The probe's max_new_tokens: a completion cut there is counted at it.")
    tokens: list[int] = Field(description="Every completion's length, shortest first.")
    truncated: int = Field(description="Completions cut at the budget, unfinished.")
    passing_tokens: list[int] = Field(
        description="The lengths of every completion that passed, shortest first (one cut at the budget counted at "
        "it: it passed within it)."
    )

    def describe(self) -> str:
        """One line for a person.

        >>> CompletionLengths(budget=16, tokens=[3, 9, 16, 16], truncated=2, passing_tokens=[3]).describe()
        'median 9 tokens; 50% of 4 cut at the budget of 16'
        """
        median = self.tokens[(len(self.tokens) - 1) // 2] if self.tokens else 0
        share = self.truncated / len(self.tokens) if self.tokens else 0.0
        return f"median {median} tokens; {share:.0%} of {len(self.tokens)} cut at the budget of {self.budget}"

    def truncated_at(self, budget: int) -> float | None:
        """The share of these completions a budget would cut; None above the probe's budget when the probe cut
        some (how far they would have run is unknown).

        >>> lengths = CompletionLengths(budget=16, tokens=[3, 9, 16, 16], truncated=2, passing_tokens=[3])
        >>> lengths.truncated_at(8), lengths.truncated_at(16), lengths.truncated_at(32)
        (0.75, 0.5, None)
        """
        if budget > self.budget:
            return 0.0 if not self.truncated else None
        return sum(length >= budget for length in self.tokens) / len(self.tokens)


def measure_lengths(
    samples: list[dict[str, Any]], budget: int, temperature: float, threshold: float
) -> CompletionLengths:
    """The lengths of the samples drawn at ``temperature`` (the training one); a sample passes at ``threshold``.

    >>> samples = [{"tokens": 4, "truncated": False, "score": 1.0, "temperature": 1.0},
    ...            {"tokens": 8, "truncated": True, "score": 1.0, "temperature": 1.0}]
    >>> measure_lengths(samples, 8, 1.0, 1.0).passing_tokens
    [4, 8]
    """
    hot = [sample for sample in samples if sample["temperature"] == temperature]
    return CompletionLengths(
        budget=budget,
        tokens=sorted(sample["tokens"] for sample in hot),
        truncated=sum(sample["truncated"] for sample in hot),
        passing_tokens=sorted(sample["tokens"] for sample in hot if sample["score"] >= threshold),
    )
