"""A recipe that does not fit the GPUs it was asked for: made to fit by the cheapest memory remedy that keeps its
method, its hardware and the caller's own choices, or refused with every remedy that fits.

The remedies are ``memory.estimate``'s, cheapest first. A remedy is applied by emitting the request again with the
remedy's GRPOConfig fields as overrides (or its sharding), so every check of the recipe runs on the result.

May import: ``recipe.schema``, ``errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skill.errors import SkillError
from skill.recipe.schema import GRPORecipe, RecipeReason


def fit_to_memory(
    request: Any, recipe: GRPORecipe, estimate: dict[str, Any], emit_as_asked: Callable[[Any], GRPORecipe]
) -> GRPORecipe:
    """A recipe that does not fit the GPUs it was asked for, made to fit by the cheapest remedy that keeps its
    method and hardware and leaves the caller's own choices alone; refused, with every remedy, when none does.
    ``request`` is the RecipeRequest, ``estimate`` the recipe's memory estimate, ``emit_as_asked`` emits a request
    as asked."""
    asked = f"{estimate['peak_gib']:.1f} of {estimate['capacity_gib']:.1f} GiB"
    for remedy in estimate["remedies"]:
        update = remedy_as_request(remedy, request, recipe)
        if not remedy["fits"] or update is None:
            continue
        try:
            fixed = emit_as_asked(request.model_copy(update=update))
        except SkillError:  # the change breaks a rule of its own (group arithmetic, a launch the plan refuses)
            continue
        after = fixed.provenance.memory_estimate
        if after is None or not after["fits"]:
            continue
        overrides = update.get("overrides", {})
        changed = {field: value for field, value in overrides.items() if field not in request.overrides}
        changed.update({"sharding": update["sharding"]} if "sharding" in update else {})
        line = (
            f"Memory: as asked it does NOT fit ({asked} per GPU); {remedy['name']} makes it fit "
            f"({after['peak_gib']:.1f} GiB), keeping method {request.method} and the hardware: {remedy['cost']}."
        )
        fixed.provenance.validation.append(line)
        for field, value in changed.items():
            reason = f"memory remedy {remedy['name']}: {remedy['cost']} (as asked: {asked} per GPU)"
            fixed.reasons = [r for r in fixed.reasons if r.field != field]
            changes = [change for change in fixed.changes_from_base or [] if change.field == field]
            for change in changes:  # a field changed from the caller's base has its reason there
                change.reason = reason
            if not changes:
                fixed.reasons.append(RecipeReason(field=field, value=value, source="hardware", reason=reason))
        return fixed
    options = "; ".join(
        f"{remedy['name']} ({remedy['peak_gib']:.1f} GiB: {', '.join(f'{k}={v}' for k, v in changes.items())})"
        for remedy in estimate["remedies"]
        if remedy["fits"]
        for changes in [remedy["changes"]]
    )
    raise SkillError(
        f"The recipe does not fit: {asked} per GPU, and no remedy that keeps method {request.method!r} and this "
        "hardware makes it fit.",
        f"Send one of these: {options or 'no single change fits; send more or larger GPUs, or a smaller model'}.",
    )


REMEDY_FIELDS = frozenset(
    {
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "beta",
        "optim",
        "activation_checkpointing",
        "use_vllm",
        "ds3_gather_for_generation",
        "vllm_enable_sleep_mode",
        "vllm_gpu_memory_utilization",
    }
)
"""GRPOConfig fields a memory remedy may set on the caller's behalf (never one the caller overrode)."""


def remedy_as_request(remedy: dict[str, Any], request: Any, recipe: GRPORecipe) -> dict[str, Any] | None:
    """The request changes a memory remedy stands for, or None when it changes the method or the hardware, or
    touches what the caller chose (an override, the sharding).

    >>> recipe = GRPORecipe.model_construct(trl={"gradient_accumulation_steps": 4})
    >>> from types import SimpleNamespace
    >>> request = SimpleNamespace(overrides={}, override_reasons={}, sharding=None)
    >>> remedy_as_request({"changes": {"per_device_train_batch_size": 4, "gradient_accumulation_steps": "x2"}},
    ...     request, recipe)
    {'overrides': {'per_device_train_batch_size': 4, 'gradient_accumulation_steps': 8}, 'override_reasons': {}}
    >>> remedy_as_request({"changes": {"launch": "accelerate launch --config_file zero3.yaml"}}, request, recipe)
    {'sharding': 'zero3'}
    >>> remedy_as_request({"changes": {"method": "lora"}}, request, recipe) is None
    True
    """
    changes = dict(remedy["changes"])
    if "launch" in changes:
        if request.sharding is not None or len(changes) > 1:
            return None
        return {"sharding": "zero3"}
    if not changes or set(changes) - REMEDY_FIELDS or set(changes) & set(request.overrides):
        return None
    for field, value in changes.items():
        if isinstance(value, str) and value.startswith("x"):  # a multiple of the recipe's own value
            changes[field] = int(getattr(recipe.grpo, field)) * int(value[1:])
    return {"overrides": {**request.overrides, **changes}, "override_reasons": dict(request.override_reasons)}
