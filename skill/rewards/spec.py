"""RewardSpec: how a recipe names a reward function, its role in the composite, and its weight.

TRL also takes a reward *model* id (``reward_funcs="org/reward-model"``) and loads it with
``AutoModelForSequenceClassification`` from the hub. A spec refuses one, hub id or local path alike:
nothing is fetched from a hub here, and a learned score is not a verifiable reward, so the composite rule
and the inspection's probes could not vouch for it. A rubric judge (role ``judge``) or a user function that
loads a local model and returns its scores is the way to use one.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RewardRole = Literal["format", "correctness", "shaping", "judge"]
# The roles that say whether an answer is right (a judge grades it with a rubric): what pass@1 and the gate count.
CORRECTNESS_ROLES = ("correctness", "judge")

_NAME = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")


class RewardSpec(BaseModel):
    """One reward in the composite.

    >>> RewardSpec(name="exact_match", role="correctness", weight=1.0).role
    'correctness'
    >>> RewardSpec(name="OpenAssistant/reward-model-deberta-v3-large-v2", role="correctness")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for RewardSpec
    name
      Value error, reward name 'OpenAssistant/reward-model-deberta-v3-large-v2' looks like a reward model ...
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    name: str = Field(
        description="A library reward (e.g. 'format', 'exact_match', 'math', 'unit_tests'; params, columns and "
        "examples: grpo://references/reward-functions.md) or a user 'module:function'."
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
        if "/" in value or "\\" in value or value.startswith(("~", ".")):
            raise ValueError(
                f"reward name {value!r} looks like a reward model (a hub id or a path); TRL would load it with "
                "AutoModelForSequenceClassification, which this project does not do: nothing is fetched from a "
                "hub, and a learned score is not a verifiable reward. Send a registry reward, a 'rubric_judge' "
                "with role 'judge', or a user function 'module:function' that loads your local model and returns "
                "its scores"
            )
        if not _NAME.match(value):
            raise ValueError(
                f"reward name {value!r} is neither a registry name nor 'module:function'; "
                "send e.g. 'exact_match' or 'my_rewards:score'"
            )
        return value


def metric_names(rewards: list[RewardSpec]) -> list[tuple[RewardSpec, str]]:
    """Each spec with the name TRL logs it under (as skill.rewards.registry names the functions:
    a user 'module:function' keeps its function name; a repeated name gets _2, _3, ...)."""
    seen: dict[str, int] = {}
    named = []
    for spec in rewards:
        base = spec.name.rpartition(":")[2]
        seen[base] = seen.get(base, 0) + 1
        named.append((spec, base if seen[base] == 1 else f"{base}_{seen[base]}"))
    return named
