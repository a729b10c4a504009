"""The memory request a recipe implies: every memory-relevant value as the recipe sets it, for
``skill.memory.estimate`` (which cannot read a recipe: it sits below the recipe package).

Owns: ``memory_request``. May import: ``recipe.schema``, ``memory.schema``, ``hardware``, ``models``.
"""

from __future__ import annotations

from skill.hardware.layout import MEMORY_SHARDING, Sharding
from skill.memory.schema import MemoryRequest
from skill.models.size import resolve_shape
from skill.recipe.schema import GRPORecipe


def memory_request(recipe: GRPORecipe, sharding: Sharding | None = None) -> MemoryRequest:
    """The MemoryRequest a recipe implies: every memory-relevant value as the recipe sets it, under its launch
    plan's sharding (or ``sharding``, to weigh another), with TRL's ZeRO-3 generation gather as the recipe sets
    it."""

    trl = recipe.grpo
    sharding = sharding or recipe.launch.sharding or "ddp"
    dtype = (trl.model_init_kwargs or {}).get("dtype", "float32")  # TRL's default load dtype
    return MemoryRequest(
        shape=resolve_shape(recipe.model.name),
        hardware=recipe.hardware,
        method=recipe.method,
        dtype=dtype,
        mixed_precision=bool(trl.bf16 or trl.fp16),  # autocast: activations and vLLM in half
        lora_r=recipe.peft.r if recipe.peft else 16,
        optimizer="adamw_8bit" if "8bit" in str(trl.optim) else "adamw",
        beta=trl.beta,
        per_device_train_batch_size=trl.per_device_train_batch_size,
        steps_per_generation=trl.steps_per_generation or trl.gradient_accumulation_steps,
        gradient_accumulation_steps=trl.gradient_accumulation_steps,
        prompt_length=recipe.dataset.max_prompt_tokens,
        completion_length=trl.max_completion_length,
        activation_checkpointing=bool(trl.activation_checkpointing),
        use_vllm=bool(trl.use_vllm),
        vllm_mode=trl.vllm_mode,
        vllm_gpu_memory_utilization=trl.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=bool(trl.vllm_enable_sleep_mode),
        # a colocated engine's split (skill.recipe.deciding.vllm_decisions); a server's size is the launch planner's
        vllm_tensor_parallel_size=trl.vllm_tensor_parallel_size if trl.vllm_mode == "colocate" else 1,
        training_processes=recipe.launch.training_processes,
        sharding=MEMORY_SHARDING[sharding],
        ds3_gather_for_generation=bool(trl.ds3_gather_for_generation),
    )
