"""A recipe as it is sent to run_grpo, checked as strictly as emit_grpo_config checks what it emits.

A recipe is JSON a user can edit by hand between emit and run; every check emit made is made again here,
by the same functions, so ``num_generations=1``, ``loss_type="bogus"`` or ``learning_rate=NaN`` is
refused before any process starts, with the same message emit gives.
"""

from __future__ import annotations

from skill.errors import SkillError
from skill.recipe.checking.compatibility import refuse_incompatible
from skill.recipe.checking.field_values import check_field_values
from skill.recipe.checking.group_arithmetic import check_group_arithmetic
from skill.recipe.checking.plan_checks import refuse_quantized_vllm
from skill.recipe.checking.trl_contract import build_grpo_config, recipe_transformers
from skill.recipe.deciding.precision import check_master_weights
from skill.recipe.deciding.vllm_decisions import check_server_url
from skill.recipe.emit import check_rewards
from skill.recipe.schema import GRPORecipe, target_is_this_machine


def validate_recipe(recipe: GRPORecipe) -> list[str]:
    """emit_grpo_config's checks on a recipe as it is sent (run_grpo's path: a hand-edited recipe is refused just as
    emit would refuse it): the rewards, every value's type and range, the cross-field refusals, half-precision master
    weights without a stated reason, the server URL, the group arithmetic on the recipe's world size, the reward
    weights, and a real GRPOConfig under the target's transformers. Returns the config's notes."""
    check_rewards(recipe.rewards)
    check_field_values(recipe.trl)
    refuse_quantized_vllm(recipe.trl, recipe.method)
    refuse_incompatible(recipe.trl, recipe.method)
    overridden = {item.field: item.reason for item in recipe.reasons if item.source == "override"}
    check_master_weights(recipe.trl, recipe.method, overridden)
    check_server_url(recipe.trl)
    world_size = recipe.launch.training_processes
    check_group_arithmetic(recipe.trl, world_size)
    weights = recipe.grpo.reward_weights
    if weights is not None and len(weights) != len(recipe.rewards):
        raise SkillError(
            f"trl.reward_weights has {len(weights)} entries for {len(recipe.rewards)} rewards.",
            "Send one weight per reward spec (emit the recipe again with emit_grpo_config).",
        )
    _config, notes = build_grpo_config(
        recipe.trl,
        output_dir="grpo-output",
        on_target=target_is_this_machine(recipe.hardware),
        target_world_size=world_size,
        transformers_version=recipe_transformers(recipe.hardware.accelerator),
    )
    return notes
