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
__all__ = ["MemoryEstimate", "MemoryRequest", "decide_sharding", "estimate_memory"]

# Below this share of the device left free, remedies are offered even though the estimate fits.
LOW_HEADROOM = 0.1


def decide_sharding(request: MemoryRequest) -> tuple[MemoryRequest, str]:
    """The request under the sharding it asks for, or (without one) the one a recipe's launch plan takes: DDP when
    the whole training state fits on each GPU (sharding would only add communication), else ZeRO-3, which shards
    weights, gradients and optimizer states over the training processes; with the reason ("" for the request's
    own). A CPU target runs DDP
    over gloo, one training process has nothing to shard over, and an NF4 base stays DDP (sharding it needs
    ``bnb_4bit_quant_storage``, which no recipe sets).

    >>> from skill.hardware.specs import HardwareSpec
    >>> node = HardwareSpec(gpu_model="H100", gpus_per_node=8)
    >>> decide_sharding(MemoryRequest(model="Qwen/Qwen2.5-7B-Instruct", hardware=node))[0].sharding
    'zero3'
    >>> decide_sharding(MemoryRequest(model="Qwen/Qwen2.5-0.5B-Instruct", hardware=node))[1][:48]
    'DDP: each GPU holds the whole training state (es'
    """
    if request.sharding is not None:
        return request, ""  # the caller's: its reason is the caller's (a recipe's launch plan states it)
    ddp = with_shape(request.model_copy(update={"sharding": "none"}))  # the shape read once, for every estimate
    if request.hardware.accelerator == "cpu":
        return ddp, "DDP over gloo: CPU processes, each holding a whole model copy (run_grpo checks the RAM)."
    processes = request.training_processes or max(1, request.hardware.total_gpus)
    if processes == 1:
        return ddp, "one training process: nothing to shard over."
    whole = estimate_components(ddp)[1]
    if whole.fits:
        return ddp, (
            f"DDP: each GPU holds the whole training state (estimated peak {whole.peak_gib:.1f} of "
            f"{whole.capacity_gib:.1f} GiB); sharding would only add communication."
        )
    if request.method == "qlora":
        return ddp, (
            f"DDP: the estimated peak ({whole.peak_gib:.1f} GiB) does not fit {whole.capacity_gib:.1f} GiB, but "
            "sharding an NF4 base needs bnb_4bit_quant_storage, which the recipe does not set; see the remedies."
        )
    zero3 = ddp.model_copy(update={"sharding": "zero3"})
    sharded = estimate_components(zero3)[1]
    reason = (
        f"ZeRO-3: with DDP each GPU would need {whole.peak_gib:.1f} GiB of {whole.capacity_gib:.1f}; sharding "
        f"weights, gradients and optimizer states over {processes} training processes brings it to "
        f"{sharded.peak_gib:.1f} GiB"
    )
    if not sharded.fits:
        reason += ", which still does NOT fit (see the remedies)"
    else:
        zero2 = estimate_components(ddp.model_copy(update={"sharding": "zero2"}))[1]
        if zero2.fits:
            reason += f"; ZeRO-2 also fits ({zero2.peak_gib:.1f} GiB, less communication): send sharding='zero2'"
    return zero3, reason + "."


def estimate_memory(request: MemoryRequest) -> MemoryEstimate:
    """Per-device memory of the whole GRPO stack, whether it fits, and remedies ranked by cost.

    >>> from skill.hardware.specs import HardwareSpec
    >>> estimate = estimate_memory(MemoryRequest(model="Qwen/Qwen2.5-7B-Instruct",
    ...     hardware=HardwareSpec(gpu_model="H100"), method="full"))
    >>> estimate.fits, [remedy.name for remedy in estimate.remedies if remedy.fits][:2]
    (False, ['lora', 'qlora'])
    """
    request, sharding = decide_sharding(request)
    request = with_shape(request)
    estimate = estimate_components(request)[1]
    estimate.sharding, estimate.sharding_reason = request.sharding, sharding
    estimate.time_estimate = step_time_line(request, estimate.vllm_kv_cache_tokens)
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


def step_time_line(request: MemoryRequest, kv_cache_tokens: int | None = None) -> str | None:
    """The step time of the memory request's setting (one generation batch per step), its colocated vLLM holding
    ``kv_cache_tokens`` (this estimate's), or None when its GPU's throughput is unknown."""
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
                vllm_kv_cache_tokens=kv_cache_tokens if use_vllm and request.vllm_mode == "colocate" else None,
                vllm_sleep_mode=request.vllm_enable_sleep_mode,
                training_processes=processes,
                sharding=request.sharding,
            )
        )
    except SkillError:
        return None
    return estimate.summary()
