"""Ways to make a GRPO setup fit, cheapest first, each re-estimated with the change applied.

Only options the installed TRL supports are offered (``use_liger_kernel`` is deprecated there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from skill.memory.estimate import DTYPE_BYTES, GIB, MemoryEstimate, MemoryRequest, Remedy, kv_cache_bytes_per_token

MAX_GPUS_SUGGESTED = 64


def _candidates(request: MemoryRequest) -> Iterator[tuple[str, str, dict[str, object], MemoryRequest]]:
    on_gpu = request.hardware.accelerator == "gpu"
    colocated = on_gpu and request.use_vllm is not False and request.vllm_mode == "colocate"
    if not request.activation_checkpointing:
        yield (
            "activation_checkpointing",
            "~20-30% slower steps (layers are recomputed in backward)",
            {"activation_checkpointing": True},
            request.model_copy(update={"activation_checkpointing": True}),
        )
    if colocated and not request.vllm_enable_sleep_mode:
        yield (
            "vllm_sleep_mode",
            "vLLM offloads its weights and drops its cache while training: seconds per step to wake it",
            {"vllm_enable_sleep_mode": True},
            request.model_copy(update={"vllm_enable_sleep_mode": True}),
        )
    if colocated:
        needed = _smallest_vllm_share(request)
        if needed != request.vllm_gpu_memory_utilization:
            lower = needed < request.vllm_gpu_memory_utilization
            yield (
                "lower_vllm_share" if lower else "raise_vllm_share",
                "fewer sequences generated concurrently; generation may slow down"
                if lower
                else "vLLM gets enough memory for its weights and one generation batch; less is left for training",
                {"vllm_gpu_memory_utilization": needed},
                request.model_copy(update={"vllm_gpu_memory_utilization": needed}),
            )
    if request.per_device_train_batch_size > 1:
        half = request.per_device_train_batch_size // 2
        yield (
            "smaller_micro_batch",
            "same effective batch through more accumulation steps: more, smaller forward passes",
            {
                "per_device_train_batch_size": half,
                "gradient_accumulation_steps": f"x{request.per_device_train_batch_size // half}",
            },
            request.model_copy(
                update={"per_device_train_batch_size": half, "steps_per_generation": request.steps_per_generation * 2}
            ),
        )
    if request.method == "full" and request.optimizer == "adamw" and on_gpu:
        yield (
            "adamw_8bit",
            "8-bit optimizer states (bitsandbytes, `optim='adamw_8bit'`): slightly noisier updates",
            {"optim": "adamw_8bit"},
            request.model_copy(update={"optimizer": "adamw_8bit"}),
        )
    if request.method == "full":
        yield (
            "lora",
            "adapters learn less than a full fine-tune; needs ~10x the learning rate",
            {"method": "lora"},
            request.model_copy(update={"method": "lora"}),
        )
    if request.method != "qlora" and on_gpu:
        yield (
            "qlora",
            "NF4 base (bitsandbytes): slower steps, a small quality loss",
            {"method": "qlora"},
            request.model_copy(update={"method": "qlora"}),
        )
    if colocated:
        yield (
            "generate_without_vllm",
            "transformers generation: several times slower sampling, but no second copy of the weights",
            {"use_vllm": False},
            request.model_copy(update={"use_vllm": False}),
        )
    processes = request.training_processes or request.hardware.total_gpus
    if on_gpu and processes > 1 and request.sharding == "none":
        yield (
            "zero3",
            "DeepSpeed ZeRO-3 shards weights, gradients and optimizer: communication every step",
            {"launch": "accelerate launch --config_file zero3.yaml"},
            request.model_copy(update={"sharding": "zero3"}),
        )


def _smallest_vllm_share(request: MemoryRequest) -> float:
    """The vLLM share that still holds its weights and one generation batch of KV cache (rounded up to 0.05)."""
    from skill.memory.estimate import weight_dtype

    shape = request.shape
    b = DTYPE_BYTES[weight_dtype(request)]
    tokens = request.per_device_train_batch_size * request.steps_per_generation
    tokens *= request.prompt_length + request.completion_length
    needed = shape.parameters() * b + 0.5 * GIB + tokens * kv_cache_bytes_per_token(shape, b)
    share = needed / ((request.hardware.memory_gib_per_gpu or 1.0) * GIB)
    return min(0.95, math.ceil(share * 20) / 20)


def _more_gpus(request: MemoryRequest, estimate: Callable[[MemoryRequest], MemoryEstimate]) -> Remedy | None:
    if request.hardware.accelerator != "gpu":
        return None
    for gpus in (2, 4, 8, 16, 32, MAX_GPUS_SUGGESTED):
        if gpus <= request.hardware.total_gpus:
            continue
        hardware = request.hardware.model_copy(update={"gpus_per_node": min(gpus, 8), "nodes": max(1, gpus // 8)})
        candidate = request.model_copy(
            update={"hardware": hardware, "sharding": "zero3", "training_processes": gpus, "vllm_mode": "server"}
        )
        result = estimate(candidate)
        if result.fits:
            return Remedy(
                name="more_gpus",
                cost=f"{gpus} GPUs with ZeRO-3 and a separate vLLM server",
                changes={"gpus": gpus, "sharding": "zero3"},
                peak_gib=result.peak_gib,
                fits=True,
            )
    return None


def remedies(request: MemoryRequest, estimate: Callable[[MemoryRequest], MemoryEstimate]) -> list[Remedy]:
    """Each applicable remedy alone, cheapest first, with the peak it would give."""
    found = []
    for name, cost, changes, changed in _candidates(request):
        result = estimate(changed)
        found.append(Remedy(name=name, cost=cost, changes=changes, peak_gib=result.peak_gib, fits=result.fits))
    more = _more_gpus(request, estimate)
    if more is not None:
        found.append(more)
    return found
