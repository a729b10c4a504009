"""TRL's generation-batch arithmetic on a target's world size: whole groups, whole global batches, a group no
smaller than the floor. emit_grpo_config, the recipe check and run_grpo's plan check share it.
"""

from __future__ import annotations

from typing import Any

from skill.errors import SkillError
from skill.grpo_fields import GRPOFields

# The smallest group a recipe may sample per prompt: with fewer samples the group mean is too noisy a baseline and
# most groups have no mixed outcomes (the seed recipe's num_generations, field_rules.toml).
GROUP_SIZE_FLOOR = 8


def check_group_arithmetic(trl: dict[str, Any], world_size: int) -> None:
    """Refuse GRPOConfig keywords whose generation batch is not whole groups of whole global batches on
    ``world_size`` training processes, or whose group is below the floor (a field left out has TRL's default)."""
    fields = GRPOFields(trl)
    generations = fields.num_generations
    if not isinstance(generations, int) or generations < GROUP_SIZE_FLOOR:
        raise SkillError(
            f"num_generations={generations!r} is below the floor of {GROUP_SIZE_FLOOR}: with fewer samples the "
            "group mean is too noisy a baseline and most groups have no mixed outcomes.",
            f"Send num_generations >= {GROUP_SIZE_FLOOR} (e.g. 8 or 16).",
        )
    per_device = fields.per_device_train_batch_size
    global_batch = per_device * world_size
    steps = fields.steps_per_generation or fields.gradient_accumulation_steps
    generation_batch = fields.generation_batch_size or global_batch * steps
    if generation_batch % global_batch:
        raise SkillError(
            f"generation_batch_size={generation_batch} is not divisible by the global batch "
            f"{per_device} x {world_size} training processes = {global_batch}.",
            f"Send a generation_batch_size that is a multiple of {global_batch}.",
        )
    if generation_batch % generations:
        raise SkillError(
            f"The generation batch ({generation_batch} = {per_device} per device x {world_size} training "
            f"processes x {steps} steps) is not divisible by num_generations={generations}: TRL needs whole groups.",
            f"Send per_device_train_batch_size or gradient_accumulation_steps so that their product with "
            f"{world_size} is a multiple of {generations}.",
        )
