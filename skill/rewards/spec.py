"""RewardSpec: how a recipe names a reward function, its role in the composite, and its weight."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RewardRole = Literal["format", "correctness", "shaping", "judge"]

_NAME = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")


class RewardSpec(BaseModel):
    """One reward in the composite.

    >>> RewardSpec(name="exact_match", role="correctness", weight=1.0).role
    'correctness'
    """

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    name: str = Field(
        description="A reward from the project's registry (e.g. 'format', 'exact_match', 'unit_tests') or a user "
        "function 'module:function' from an allowed module."
    )
    role: RewardRole = Field(
        description="format: structure only; correctness: the verifiable pass/fail signal; shaping: small "
        "auxiliary terms (length, style); judge: a model grading with a rubric."
    )
    weight: float = Field(default=1.0, description="Weight in the weighted sum (TRL reward_weights).")
    params: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the reward's builder.")

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"reward name {value!r} is neither a registry name nor 'module:function'; "
                "send e.g. 'exact_match' or 'my_rewards:score'"
            )
        return value
