"""Ways to make a GRPO setup fit, cheapest first, each re-estimated with the change applied.

Only options the installed TRL supports are offered (``use_liger_kernel`` is deprecated there).
May import: ``memory.schema``, ``memory.components``, ``memory.gather``, ``hardware`` (the process layout),
``errors``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from skill.errors import SkillError
from skill.memory.components import (
    estimate_components,
    training_processes,
    weight_dtype,
    with_shape,
)
from skill.memory.gather import gathers_whole_model
from skill.memory.precision import compute_dtype
from skill.memory.schema import GIB, MemoryRequest, Remedy
from skill.models.shapes import DTYPE_BYTES

MAX_GPUS_SUGGESTED = 512

# (name, cost, changes to report, the request with the change applied)
Candidate = tuple[str, str, dict[str, object], MemoryRequest]


def _changed(request: MemoryRequest, name: str, cost: str, changes: dict[str, object], **update: object) -> Candidate:
    return name, cost, changes, request.model_copy(update=update)


def _generation_candidates(request: MemoryRequest) -> Iterator[Candidate]:
    """Changes to a colocated vLLM: sleep while training, a share that fits its job."""
    if not request.vllm_enable_sleep_mode:
        yield _changed(
            request,
            "vllm_sleep_mode",
            "vLLM offloads its weights and drops its cache while training: seconds per step to wake it",
            {"vllm_enable_sleep_mode": True},
            vllm_enable_sleep_mode=True,
        )
    needed = smallest_vllm_share(request)
    if needed != request.vllm_gpu_memory_utilization:
        lower = needed < request.vllm_gpu_memory_utilization
        yield _changed(
            request,
            "lower_vllm_share" if lower else "raise_vllm_share",
            "fewer sequences generated concurrently; generation may slow down"
            if lower
            else "vLLM gets enough memory for its weights and one generation batch; less is left for training",
            {"vllm_gpu_memory_utilization": needed},
            vllm_gpu_memory_utilization=needed,
        )


def _training_candidates(request: MemoryRequest, on_gpu: bool) -> Iterator[Candidate]:
    """Changes to the training step: smaller micro-batches, 8-bit optimizer states, adapters."""
    if request.per_device_train_batch_size > 1:
        half = request.per_device_train_batch_size // 2
        yield _changed(
            request,
            "smaller_micro_batch",
            "same effective batch through more accumulation steps: more, smaller forward passes",
            {
                "per_device_train_batch_size": half,
                "gradient_accumulation_steps": f"x{request.per_device_train_batch_size // half}",
            },
            per_device_train_batch_size=half,
            steps_per_generation=request.steps_per_generation * 2,
            gradient_accumulation_steps=request.gradient_accumulation_steps
            * (request.per_device_train_batch_size // half),
        )
    if request.method == "full" and request.beta > 0 and request.reference_placement == "colocated":
        # Ranked after the time-only changes and before those that change the numerics or the method: TRL 1.16's
        # default (beta 0.0) loads no reference model, and DAPO trains without a KL term.
        yield _changed(
            request,
            "beta_zero",
            "no KL anchor to the reference (TRL's default, as DAPO trains): the frozen reference copy and its "
            "forward pass go; the clip and a small learning rate hold the policy",
            {"beta": 0.0},
            beta=0.0,
        )
    if request.method == "full" and request.optimizer == "adamw" and on_gpu:
        yield _changed(
            request,
            "adamw_8bit",
            "8-bit optimizer states (bitsandbytes, `optim='adamw_8bit'`): slightly noisier updates",
            {"optim": "adamw_8bit"},
            optimizer="adamw_8bit",
        )
    if request.method == "full":
        yield _changed(
            request,
            "lora",
            "adapters learn less than a full fine-tune; needs ~10x the learning rate",
            {"method": "lora"},
            method="lora",
        )
    if request.method != "qlora" and on_gpu:
        # A sharded NF4 base needs bnb_4bit_quant_storage, which no recipe sets: QLoRA keeps the base whole. It
        # generates without vLLM, which cannot load NF4 (skill.recipe.checking.plan_checks).
        changes = {"sharding": "none"} if request.sharding in ("zero3", "fsdp") else {}
        changes.update({"use_vllm": False} if request.use_vllm else {})
        yield _changed(
            request,
            "qlora",
            "NF4 base (bitsandbytes): slower steps, a small quality loss, transformers generation"
            + ("; the NF4 base is not sharded (DDP)" if "sharding" in changes else ""),
            {"method": "qlora", **changes},
            method="qlora",
            **changes,
        )


def candidates(request: MemoryRequest) -> Iterator[Candidate]:
    """Each single change that could make the request fit, cheapest first."""
    on_gpu = request.hardware.accelerator == "gpu"
    colocated = on_gpu and request.use_vllm is not False and request.vllm_mode == "colocate"
    if not request.activation_checkpointing:
        yield _changed(
            request,
            "activation_checkpointing",
            "~20-30% slower steps (layers are recomputed in backward)",
            {"activation_checkpointing": True},
            activation_checkpointing=True,
        )
    if colocated:
        yield from _generation_candidates(request)
    yield from _training_candidates(request, on_gpu)
    if colocated:
        yield _changed(
            request,
            "generate_without_vllm",
            "transformers generation: several times slower sampling, but no second copy of the weights",
            {"use_vllm": False},
            use_vllm=False,
        )
    if on_gpu and gathers_whole_model(request):
        yield _changed(
            request,
            "generate_layer_by_layer",
            "transformers generation that fetches one layer at a time under ZeRO-3 (TRL's ds3_gather_for_generation="
            "False): much slower sampling, but the whole model is never gathered onto one GPU",
            {"use_vllm": False, "ds3_gather_for_generation": False},
            use_vllm=False,
            ds3_gather_for_generation=False,
        )
    if on_gpu and request.sharding == "none" and (request.training_processes or request.hardware.total_gpus) > 1:
        yield _changed(
            request,
            "zero3",
            "DeepSpeed ZeRO-3 shards weights, gradients and optimizer: communication every step",
            {"launch": "accelerate launch --config_file zero3.yaml"},
            sharding="zero3",
        )


def smallest_vllm_share(request: MemoryRequest) -> float:
    """The vLLM share that still holds its weights and one generation batch of KV cache (rounded up to 0.05).

    >>> from skill.hardware.specs import HardwareSpec
    >>> smallest_vllm_share(MemoryRequest(model="Qwen/Qwen2.5-7B", hardware=HardwareSpec(gpu_model="H100")))
    0.25
    """
    shape = with_shape(request).shape
    assert shape is not None  # with_shape guarantees it
    b = DTYPE_BYTES[compute_dtype(request, weight_dtype(request))]  # vLLM serves in half precision on GPUs
    tokens = request.per_device_train_batch_size * request.steps_per_generation
    tokens *= request.prompt_length + request.completion_length
    needed = shape.parameters() * b + 0.5 * GIB + tokens * shape.kv_cache_bytes_per_token(b)
    needed /= request.vllm_tensor_parallel_size  # tensor parallel splits the weights and each token's KV heads
    share = needed / ((request.hardware.memory_gib_per_gpu or 1.0) * GIB)
    return min(0.95, math.ceil(share * 20) / 20)


def more_gpus(request: MemoryRequest) -> Remedy | None:
    """The fewest GPUs (up to MAX_GPUS_SUGGESTED) on which ZeRO-3 and a vLLM server fit, laid out as the launch
    planner would: the server's GPUs do not train."""
    if request.hardware.accelerator != "gpu":
        return None
    for gpus in (2, 4, 8, 16, 32, 64, 128, 256, MAX_GPUS_SUGGESTED):
        if gpus <= request.hardware.total_gpus:
            continue
        hardware = request.hardware.model_copy(update={"gpus_per_node": min(gpus, 8), "nodes": max(1, gpus // 8)})
        # The server's own tensor parallel size is the launch planner's; the colocated one does not apply.
        server = {
            "sharding": "zero3",
            "training_processes": None,
            "vllm_mode": "server",
            "vllm_tensor_parallel_size": 1,
        }
        candidate = request.model_copy(update={"hardware": hardware, **server})
        try:
            trainers = training_processes(candidate)
            result = estimate_components(candidate)[1]
        except SkillError:  # the vLLM server cannot be laid out on this many GPUs
            continue
        if result.fits:
            layout = {"gpus": gpus, "gpus_per_node": hardware.gpus_per_node, "nodes": hardware.nodes}
            return Remedy(
                name="more_gpus",
                cost=f"{gpus} GPUs with ZeRO-3 over {trainers} training processes"
                + (f" and a separate vLLM server on {gpus - trainers}" if gpus > trainers else ""),
                changes={**layout, **server},
                peak_gib=result.peak_gib,
                fits=True,
            )
    return None


def remedies(request: MemoryRequest) -> list[Remedy]:
    """Each applicable remedy alone, cheapest first, with the peak it would give."""
    found = []
    for name, cost, changes, changed in candidates(request):
        try:
            result = estimate_components(changed)[1]
        except SkillError:  # the change needs a layout the launch planner refuses (a vLLM server too big)
            continue
        found.append(Remedy(name=name, cost=cost, changes=changes, peak_gib=result.peak_gib, fits=result.fits))
    more = more_gpus(request)
    if more is not None:
        found.append(more)
    return found
