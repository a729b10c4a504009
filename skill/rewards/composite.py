"""The composite rule for format + correctness rewards, checked on the weights alone.

Both sides must hold, or GRPO learns the wrong lesson:
- well-formed but wrong must score above malformed (else format is never learned), and
- correct but malformed must score above wrong but well-formed (else the policy learns to be
  well-formed and wrong: measured with SmolLM2-135M on the demo task, equal weights took format
  0.11 -> 0.85 while correctness fell 0.19 -> 0.12; correctness 1.0 / format 0.2 lifted
  correctness 0.16 -> 0.79).
The format share of the total should also stay small; shaping terms (length) must not outweigh
correctness either.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec

FORMAT_SHARE_LIMIT = 0.25


class CompositeCheck(BaseModel):
    """Totals of the four corner cases, and what is wrong with them."""

    correct_well_formed: float
    correct_malformed: float
    wrong_well_formed: float
    wrong_malformed: float
    format_share: float = Field(description="Format weight / (format + correctness weight).")
    ok: bool
    warnings: list[str] = Field(default_factory=list)


def check_composite(specs: list[RewardSpec]) -> CompositeCheck:
    """Score the four corners (each reward at 0 or 1 by its role) and check both sides of the rule.

    >>> equal = [RewardSpec(name="format", role="format", weight=1.0),
    ...          RewardSpec(name="exact_match", role="correctness", weight=1.0)]
    >>> check_composite(equal).ok
    False
    >>> check_composite([equal[0].model_copy(update={"weight": 0.2}), equal[1]]).ok
    True
    """
    format_weight = sum(spec.weight for spec in specs if spec.role == "format")
    correctness_weight = sum(spec.weight for spec in specs if spec.role in CORRECTNESS_ROLES)
    shaping_weight = sum(abs(spec.weight) for spec in specs if spec.role == "shaping")
    corners = {
        "correct_well_formed": correctness_weight + format_weight,
        "correct_malformed": correctness_weight,
        "wrong_well_formed": format_weight,
        "wrong_malformed": 0.0,
    }
    total = format_weight + correctness_weight
    share = format_weight / total if total else 0.0
    warnings = []
    if format_weight <= 0:
        warnings.append("No format reward (or zero weight): well-formed but wrong does not beat malformed.")
    if corners["correct_malformed"] <= corners["wrong_well_formed"]:
        warnings.append(
            f"Correct but malformed ({corners['correct_malformed']:g}) does not beat wrong but well-formed "
            f"({corners['wrong_well_formed']:g}): the policy can learn to be well-formed and wrong. "
            "Give correctness a larger weight than format (e.g. 1.0 vs 0.2)."
        )
    elif share > FORMAT_SHARE_LIMIT:
        warnings.append(f"Format is {share:.0%} of the total weight; keep it under {FORMAT_SHARE_LIMIT:.0%}.")
    if correctness_weight and shaping_weight >= correctness_weight:
        warnings.append("Shaping weights reach the correctness weight: length could outweigh being right.")
    ok = (
        format_weight > 0
        and corners["correct_malformed"] > corners["wrong_well_formed"]
        and not (correctness_weight and shaping_weight >= correctness_weight)
    )
    return CompositeCheck(**corners, format_share=round(share, 4), ok=ok, warnings=warnings)


def format_and_correctness(
    format_spec: RewardSpec, correctness_spec: RewardSpec, format_weight: float = 0.2
) -> list[RewardSpec]:
    """The recommended pair: correctness at 1.0, format at a small weight (0.2 by default).

    >>> specs = format_and_correctness(RewardSpec(name="format", role="format"),
    ...                                RewardSpec(name="exact_match", role="correctness"))
    >>> [spec.weight for spec in specs], check_composite(specs).ok
    ([0.2, 1.0], True)
    """
    return [
        format_spec.model_copy(update={"weight": format_weight}),
        correctness_spec.model_copy(update={"weight": 1.0}),
    ]
