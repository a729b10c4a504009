"""A recipe's step-time estimate (``skill.timing``): the recipe's settings as a StepTimeRequest, with the route
probe's completion lengths when the recipe followed a probe, and the one line recipes and runs carry.

May import: ``timing``, ``memory``, ``models``, ``routing.evidence``, ``recipe.deciding.memory_request``, ``errors``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from skill.errors import SkillError
from skill.hardware.layout import MEMORY_SHARDING
from skill.memory.components import estimate_components
from skill.models.size import resolve_shape
from skill.recipe.deciding.memory_request import memory_request
from skill.routing.evidence import CompletionLengths
from skill.timing.estimate import StepTimeEstimate, StepTimeRequest, estimate_step_time


def _dtype(recipe: Any) -> str:
    trl = recipe.grpo
    if recipe.hardware.accelerator == "cpu":
        return "float32"
    if trl.bf16:
        return "bfloat16"
    if trl.fp16:
        return "float16"
    return (trl.model_init_kwargs or {}).get("dtype", "float32")


def colocated_kv_cache_tokens(recipe: Any) -> int | None:
    """Tokens of KV cache the recipe's colocated vLLM holds, as its memory estimate models them (None when it cannot
    be estimated)."""
    try:
        return estimate_components(memory_request(recipe))[1].vllm_kv_cache_tokens
    except (SkillError, ValidationError):  # a setting the memory request refuses (its check says why elsewhere)
        return None


def step_time_request(
    recipe: Any, probe: CompletionLengths | None = None, price_per_gpu_hour: float | None = None
) -> StepTimeRequest:
    """The recipe (a GRPORecipe) as a StepTimeRequest; the mean prompt is taken at the prompt budget (an upper
    bound)."""
    trl = recipe.grpo
    processes = recipe.launch.training_processes
    accumulation = trl.gradient_accumulation_steps
    use_vllm = bool(trl.use_vllm) and recipe.hardware.accelerator == "gpu"
    mode = trl.vllm_mode
    generation = f"vllm_{mode}" if use_vllm else "transformers"
    old_logps = (use_vllm and trl.vllm_importance_sampling_correction) or trl.num_iterations > 1
    evaluation = recipe.evaluation
    return StepTimeRequest(
        shape=resolve_shape(recipe.model.name),
        hardware=recipe.hardware,
        method=recipe.method,
        dtype=_dtype(recipe),
        completions_per_step=trl.per_device_train_batch_size * accumulation * processes,
        micro_batch=trl.per_device_train_batch_size,
        prompt_tokens=recipe.dataset.max_prompt_tokens,
        max_completion_length=trl.max_completion_length,
        completion_tokens=list(probe.tokens) if probe is not None and probe.tokens else None,
        reference_forward=trl.beta > 0,
        old_logp_forward=bool(old_logps),
        activation_checkpointing=bool(trl.activation_checkpointing),
        generation=generation,
        vllm_tensor_parallel_size=(
            trl.vllm_tensor_parallel_size if mode == "colocate" else recipe.launch.vllm_tensor_parallel_size or 1
        ),
        group_size=trl.num_generations or 1,
        vllm_server_gpus=recipe.launch.vllm_server_gpus if generation == "vllm_server" else 0,
        vllm_kv_cache_tokens=colocated_kv_cache_tokens(recipe) if generation == "vllm_colocate" else None,
        vllm_sleep_mode=bool(trl.vllm_enable_sleep_mode),
        training_processes=processes,
        sharding=MEMORY_SHARDING[recipe.launch.sharding or "ddp"],
        max_steps=trl.max_steps if trl.max_steps > 0 else None,
        evaluation_every=evaluation.every_steps if evaluation and evaluation.every_steps else None,
        evaluation_completions=evaluation.prompts * evaluation.generations if evaluation else 0,
        save_steps=trl.save_steps if trl.save_strategy == "steps" else None,
        price_per_gpu_hour=price_per_gpu_hour,
    )


def recipe_step_time(
    recipe: Any, probe: CompletionLengths | None = None, price_per_gpu_hour: float | None = None
) -> StepTimeEstimate | None:
    """The estimate, or None when the recipe's model has no known shape or its GPU no known throughput."""
    try:
        return estimate_step_time(step_time_request(recipe, probe, price_per_gpu_hour))
    except SkillError:
        return None


def attach_time_estimate(recipe: Any, probe: CompletionLengths | None, price: float | None) -> None:
    """The step-time line into the recipe's provenance (None when it cannot be estimated)."""
    estimate = recipe_step_time(recipe, probe, price)
    recipe.provenance.time_estimate = estimate.summary() if estimate else None
