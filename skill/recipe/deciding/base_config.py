"""A user's own run (``base_config``): the recipe keeps what it sets, and what the recipe changes in it is listed
with the reason (``changes_from_base``), so "what should we change?" is answered against the user's run rather than
against this project's defaults.

May import: ``recipe.schema``, ``recipe.checking.trl_contract``, ``grpo_fields``.
"""

from __future__ import annotations

from typing import Any

from skill.grpo_fields import GRPOFields
from skill.recipe.checking.trl_contract import check_field_names
from skill.recipe.schema import ChangeFromBase, RecipeReason

BASE_LEFT_OUT = frozenset({"output_dir"})
"""Fields of a base config the recipe does not take: where a run writes is the runner's (run_grpo's directory)."""


def apply_base(build: Any, base: dict[str, Any]) -> None:
    """The caller's own run into ``build`` (emit's collector of kwargs and reasons): each field it sets wins over
    this recipe's seeds and decisions (a symptom, variant or override may still change it, and says why)."""
    check_field_names(base)
    for field, value in base.items():
        if field not in BASE_LEFT_OUT:
            build.set(field, value, "base", "your run's value (base_config), kept")


def changes_from_base(base: dict[str, Any], trl: dict[str, Any], reasons: list[RecipeReason]) -> list[ChangeFromBase]:
    """What the recipe changes in the caller's run: each field whose value differs from the run's (a field the
    base leaves unset counts at TRL's default), with the reason: a symptom's variant, an override, or what the
    target, the method or the task requires. The project's seed values for fields the base leaves unset are not
    listed: they are this project's defaults (the recipe's reasons give them), not changes the run needs.

    >>> reasons = [RecipeReason(field="temperature", value=0.9, source="base", reason="kept"),
    ...     RecipeReason(field="epsilon_high", value=0.28, source="variant", reason="dapo"),
    ...     RecipeReason(field="logging_steps", value=1, source="seed", reason="every step")]
    >>> [(c.field, c.yours, c.recipe) for c in changes_from_base({"temperature": 0.9}, {"temperature": 0.9,
    ...     "epsilon_high": 0.28, "logging_steps": 1}, reasons)]
    [('epsilon_high', None, 0.28)]
    """
    run = GRPOFields({field: value for field, value in base.items() if field not in BASE_LEFT_OUT})
    changes = []
    for reason in reasons:
        field, stated = reason.field, reason.field in base
        if reason.source in ("base", "seed") or field in BASE_LEFT_OUT:
            continue
        yours = base[field] if stated else getattr(run, field, None)
        if yours != trl.get(field):
            changes.append(
                ChangeFromBase(field=field, yours=yours, stated=stated, recipe=trl.get(field), reason=reason.reason)
            )
    return changes


def reasons_besides_changes(reasons: list[RecipeReason], changes: list[ChangeFromBase]) -> list[RecipeReason]:
    """The recipe's reasons, each said once: a field changed from the base has its reason in the change, and a
    field the base set and the recipe kept needs none (the base is the reason).

    >>> kept = RecipeReason(field="temperature", value=0.9, source="base", reason="kept")
    >>> changed = RecipeReason(field="epsilon_high", value=0.28, source="variant", reason="dapo")
    >>> seeded = RecipeReason(field="logging_steps", value=1, source="seed", reason="every step")
    >>> change = ChangeFromBase(field="epsilon_high", yours=None, recipe=0.28, reason="dapo")
    >>> [reason.field for reason in reasons_besides_changes([kept, changed, seeded], [change])]
    ['logging_steps']
    """
    changed = {change.field for change in changes}
    return [reason for reason in reasons if reason.source != "base" and reason.field not in changed]
