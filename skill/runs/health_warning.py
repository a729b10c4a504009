"""One health warning (what is wrong, the numbers, what to change) and the run a check reads.

The checks live in skill.runs.reward_checks (what the rewards and held-out scores say) and
skill.runs.dynamics_checks (what the optimisation says: entropy, KL, gradients, clipping,
truncation); skill.runs.health runs them all and ranks what they find.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from skill.grpo_fields import GRPOFields
from skill.recipe.deciding.variants import SYMPTOMS
from skill.rewards.spec import RewardSpec
from skill.runs.series import BatchShape, progress


class HealthWarning(BaseModel):
    """One thing wrong with a run, the numbers that show it, and what to change.

    >>> HealthWarning(code="kl_blowup", severity="warning", message="KL climbing.", symptom="kl_blowup").symptom
    'kl_blowup'
    """

    code: str = Field(description="Which check fired, e.g. 'reward_divergence'.")
    severity: Literal["warning", "critical"]
    message: str
    symptom: str | None = Field(default=None, description="A key of skill.recipe.deciding.variants.SYMPTOMS, or None.")
    suggested_variant: str | None = Field(default=None, description="The variant the symptom selects.")
    suggested_change: str | None = Field(default=None, description="What to change that no variant does.")
    evidence: dict[str, float] = Field(default_factory=dict, description="Window means, ratios, standard errors.")


class RunView(NamedTuple):
    """What a check reads: the logged points (training rows and held-out ``eval_*`` rows, in order), the reward
    specs, the batch shape when known (sets the noise floors), the run's length limits and its GRPOConfig kwargs
    (which loss it already trains with decides which variant a symptom calls for)."""

    metrics: list[dict[str, Any]]
    rewards: list[RewardSpec]
    shape: BatchShape | None = None
    max_completion_length: int | None = None
    max_steps: int | None = None
    trl: dict[str, Any] | None = None

    def loss_type(self) -> str:
        """The run's loss_type (TRL's default where the recipe leaves it).

        >>> RunView([], [], trl={"loss_type": "cispo"}).loss_type(), RunView([], []).loss_type()
        ('cispo', 'dapo')
        """
        return GRPOFields(self.trl or {}).loss_type

    def sequence_ratios(self) -> bool:
        """Whether the run clips one importance ratio per sequence (GSPO's importance_sampling_level)."""
        return GRPOFields(self.trl or {}).importance_sampling_level == "sequence"

    def samples(self) -> int | None:
        """Completions behind one training point, when the shape is known."""
        return self.shape.completions if self.shape else None

    def progress(self) -> float:
        """Share of the planned run (max_steps) logged so far; 1.0 when the length is unknown."""
        return progress(self.metrics, self.max_steps)


def rounded(value: float) -> float:
    """Four significant digits: evidence is read by people.

    >>> rounded(0.123456)
    0.1235
    """
    return float(f"{value:.4g}")


def make_warning(
    code: str,
    severity: str,
    message: str,
    symptom: str | None = None,
    *,
    evidence: dict[str, Any],
    change: str | None = None,
) -> HealthWarning:
    """A warning; evidence values that are None or not finite are left out (the model must stay JSON).

    >>> make_warning("entropy_collapse", "warning", "m", "entropy_collapse", evidence={"a": None}).suggested_variant
    'dapo'
    """
    numbers = {key: rounded(value) for key, value in evidence.items() if value is not None and math.isfinite(value)}
    variant = SYMPTOMS.get(symptom) if symptom else None
    fields = {"symptom": symptom, "suggested_variant": variant, "suggested_change": change, "evidence": numbers}
    return HealthWarning(code=code, severity=severity, message=message, **fields)
