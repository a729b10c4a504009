"""estimate_memory: the whole GRPO stack per GPU (or in CPU RAM), from the model's shape alone, with
remedies ranked by cost when it does not fit (or fits with little room).

The components are computed in ``memory.components``, the remedies in ``memory.remedies``; the
contracts live in ``memory.schema``; when no single remedy is enough, ``memory.search`` finds the smallest
configuration that fits. May import those, and ``errors``.
"""

from __future__ import annotations

from skill.errors import SkillError
from skill.memory.components import estimate_components, with_shape
from skill.memory.remedies import remedies
from skill.memory.schema import MemoryEstimate, MemoryRequest
from skill.memory.search import smallest_configuration
from skill.timing.estimate import StepTimeRequest, estimate_step_time

# The face the tools and the server import; the contracts are defined in memory.schema.
__all__ = ["MemoryEstimate", "MemoryRequest", "estimate_memory"]

# Below this share of the device left free, remedies are offered even though the estimate fits.
LOW_HEADROOM = 0.1


def estimate_memory(request: MemoryRequest) -> MemoryEstimate:
    """Per-device memory of the whole GRPO stack, whether it fits, and remedies ranked by cost.

    >>> from skill.hardware.specs import HardwareSpec
    >>> estimate = estimate_memory(MemoryRequest(model="Qwen/Qwen2.5-7B-Instruct",
    ...     hardware=HardwareSpec(gpu_model="H100"), method="full"))
    >>> estimate.fits, [remedy.name for remedy in estimate.remedies if remedy.fits][:2]
    (False, ['vllm_sleep_mode', 'adamw_8bit'])
    """
    request = with_shape(request)
    estimate = estimate_components(request)[1]
    estimate.time_estimate = step_time_line(request)
    if not estimate.fits or estimate.headroom_gib < LOW_HEADROOM * estimate.capacity_gib:
        estimate.remedies = remedies(request)
    if not estimate.fits and not any(remedy.fits for remedy in estimate.remedies):
        # No single change is enough: search GPUs, method, offload and generation together.
        smallest = smallest_configuration(request)
        if smallest is not None:
            estimate.remedies.append(smallest)
            if smallest.changes["method"] != request.method:
                same = smallest_configuration(request, keep_method=True)
                estimate.remedies.extend([same] if same is not None else [])
        else:
            estimate.warnings.append(
                "No configuration up to 512 GPUs of this memory fits (any method, offload, generation); "
                "send larger GPUs or a smaller model."
            )
    return estimate


def step_time_line(request: MemoryRequest) -> str | None:
    """The step time of the memory request's setting (one generation batch per step), or None when its GPU's
    throughput is unknown."""
    processes = request.training_processes or max(1, request.hardware.total_gpus)
    use_vllm = request.use_vllm if request.use_vllm is not None else request.hardware.accelerator == "gpu"
    try:
        estimate = estimate_step_time(
            StepTimeRequest(
                shape=request.shape,
                hardware=request.hardware,
                method=request.method,
                dtype="float32" if request.hardware.accelerator == "cpu" else "bfloat16",
                completions_per_step=request.per_device_train_batch_size * request.steps_per_generation * processes,
                micro_batch=request.per_device_train_batch_size,
                prompt_tokens=request.prompt_length,
                max_completion_length=request.completion_length,
                reference_forward=request.beta > 0,
                old_logp_forward=use_vllm,
                activation_checkpointing=request.activation_checkpointing,
                generation=f"vllm_{request.vllm_mode}" if use_vllm else "transformers",
                vllm_tensor_parallel_size=request.vllm_tensor_parallel_size,
                vllm_server_gpus=max(1, request.hardware.total_gpus - processes),
                vllm_sleep_mode=request.vllm_enable_sleep_mode,
                training_processes=processes,
                sharding=request.sharding,
            )
        )
    except SkillError:
        return None
    return estimate.summary()
