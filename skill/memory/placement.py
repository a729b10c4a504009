"""Where the training state lives and how each backend stores it: weights, gradients, optimizer states and the
reference model per GPU, by backend precision, sharding, CPU offload and reference placement.

Per backend (trainable parameters T, all parameters P, load dtype w bytes, half precision h = 2 bytes):

- DDP (``sharding="none"``): everything whole on every GPU in the load dtype: float32 master weights
  (``dtype="float32"`` under autocast: 4 + 4 + 8 = 16 B per trainable parameter) or pure bf16 (2 + 2 + 4 = 8 B);
  with several processes DDP's all-reduce buckets hold a second copy of the gradients unless
  ``gradient_as_bucket_view`` is set (torch ``DistributedDataParallel``'s documented behaviour).
- DeepSpeed ZeRO-1/2/3 with bf16 (every GPU recipe): the module is cast to half precision (2 B per parameter),
  gradients are half precision (2 B), and the optimizer keeps float32 master weights plus two float32 Adam
  moments (12 B per trainable parameter; 8-bit Adam: 4 + 2), sharded over the training processes: ZeRO-1
  shards the optimizer, ZeRO-2 also the gradients, ZeRO-3 also the weights (the ZeRO paper's 2 + 2 + 12).
- FSDP2 with a bf16 mixed-precision policy: the sharded parameters keep the load dtype, gradients and Adam
  states too, all sharded; each layer is gathered in half precision while it computes (``memory.gather``).

CPU offload (ZeRO / FSDP only): ``offload_optimizer`` moves the optimizer states (and ZeRO's master weights)
to host RAM; ``offload_parameters`` (ZeRO-3 / FSDP) keeps only the layers being computed on the GPU. Under
ZeRO-3 / FSDP those layers (the one computing and the one prefetched) are gathered whole beside the shard with
or without offload, so offloading never raises the estimate. The
reference model (``beta > 0``, full fine-tune) is a copy of the policy stored like its weights on each trainer
GPU (TRL), or nowhere on them when it runs elsewhere (``reference_placement="elsewhere"``, e.g. OpenRLHF's
reference group).

May import: ``memory.schema``, ``memory.precision``, ``models.shapes``, ``errors``.
"""

from __future__ import annotations

from typing import NamedTuple

from skill.errors import SkillError
from skill.memory.precision import adapter_bytes, compute_dtype
from skill.memory.schema import MemoryRequest
from skill.models.shapes import DTYPE_BYTES, NF4_BYTES_PER_PARAMETER, ModelShape

ZERO = ("zero1", "zero2", "zero3")
LAYERS_RESIDENT_WHEN_OFFLOADED = 2  # ZeRO-3 / FSDP: the layer computing and the one prefetched, gathered whole


class ModelState(NamedTuple):
    """Bytes per device of what the optimizer step keeps, the trainable parameter count, and what is offloaded."""

    weights: float
    gradients: float
    optimizer: float
    reference: float
    trainable: int
    buckets: float = 0.0
    offloaded: float = 0.0


def lora_parameters(shape: ModelShape, r: int, targets: str) -> int:
    """Adapter parameters: r x (in + out) for each adapted projection. A mixture of experts' routed experts are
    fused 3-D parameters in transformers 5 (``Qwen3MoeExperts.gate_up_proj``), not ``nn.Linear``, so PEFT's
    'all-linear' adapts the dense layers' and the shared experts' MLPs only.

    >>> from skill.models.shapes import SHAPES
    >>> lora_parameters(SHAPES["qwen2.5-7b"].shape, 16, "all-linear")
    40370176
    """
    h, q, kv = shape.hidden, shape.q_dim, shape.kv_dim
    attention = shape.layers * ((h + q) + 2 * (h + kv) + (q + h))
    gated = 3 * h  # gate and up take h in, down gives h out
    mlp = (shape.layers - shape.moe_layers) * (gated + 3 * shape.ffn) + shape.moe_layers * shape.shared_experts * (
        gated + 3 * shape.expert_ffn
    )
    return r * (attention + (mlp if targets == "all-linear" else 0))


def check_placement(request: MemoryRequest) -> None:
    """Refuse offload the backend cannot do, with what to send instead."""
    if request.offload_optimizer and request.sharding == "none":
        raise SkillError(
            "offload_optimizer needs DeepSpeed ZeRO or FSDP; DDP keeps the optimizer on the GPU.",
            "Send sharding 'zero2', 'zero3' or 'fsdp' with offload_optimizer, or offload_optimizer=False.",
        )
    if request.offload_parameters and request.sharding not in ("zero3", "fsdp"):
        raise SkillError(
            f"offload_parameters needs ZeRO-3 or FSDP (the weights must be sharded); sharding is {request.sharding!r}.",
            "Send sharding 'zero3' or 'fsdp' with offload_parameters, or offload_parameters=False.",
        )
    if request.sharding == "fsdp" and request.offload_optimizer != request.offload_parameters:
        raise SkillError(
            "FSDP's CPU offload (CPUOffloadPolicy) moves the weights, gradients and optimizer states together; "
            "it cannot offload only one of optimizer and parameters.",
            "Under FSDP send offload_optimizer and offload_parameters both True or both False, or use ZeRO "
            "(sharding 'zero2' / 'zero3') for optimizer-only offload.",
        )


def tensor_parallel_problem(request: MemoryRequest, gpus: int) -> str | None:
    """Why vLLM's tensor parallel size cannot run on ``gpus`` GPUs (those vLLM shares) for this model, or None:
    TP must be at most and divide the GPUs, divide the attention heads, and divide the KV heads (or be a
    multiple of them: vLLM then replicates each KV head).

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = MemoryRequest(shape=SHAPES["qwen2.5-7b"].shape, hardware=HardwareSpec(gpu_model="L4"),
    ...     vllm_tensor_parallel_size=8)
    >>> tensor_parallel_problem(request, 1)
    'vllm_tensor_parallel_size=8 needs 8 GPUs for vLLM; only 1 can hold it'
    """
    tp, shape = request.vllm_tensor_parallel_size, request.shape
    if tp == 1:
        return None
    if tp > gpus or gpus % tp:
        needs = f"needs {tp} GPUs for vLLM" if tp > gpus else f"does not divide the {gpus} GPUs vLLM runs on"
        return f"vllm_tensor_parallel_size={tp} {needs}" + (f"; only {gpus} can hold it" if tp > gpus else "")
    if shape is not None and shape.heads % tp:
        return f"vllm_tensor_parallel_size={tp} does not divide the model's {shape.heads} attention heads"
    if shape is not None and shape.kv_heads % tp and tp % shape.kv_heads:
        return f"vllm_tensor_parallel_size={tp} neither divides nor is a multiple of the {shape.kv_heads} KV heads"
    return None


def check_tensor_parallel(request: MemoryRequest, processes: int) -> None:
    """Refuse a vLLM tensor parallel size that cannot run, with what to send instead. A colocated vLLM runs on
    the training processes' GPUs; a server on the GPUs left over (or, when none are, on another node, where only
    the heads can be checked)."""
    if request.hardware.accelerator == "cpu":
        return
    gpus = processes if request.vllm_mode == "colocate" else request.hardware.total_gpus - processes
    problem = tensor_parallel_problem(request, gpus or request.vllm_tensor_parallel_size)
    if problem:
        raise SkillError(
            problem + ".",
            "Send a vllm_tensor_parallel_size that divides both the GPUs vLLM runs on (colocated: the training "
            "processes) and the model's attention and KV heads, e.g. 1, 2, 4 or 8.",
        )


def precision_note(request: MemoryRequest, dtype: str) -> str:
    """One line saying how this backend stores the state, for the estimate's assumptions."""
    if request.sharding in ZERO:
        return (
            f"DeepSpeed {request.sharding.upper()}: half-precision weights and gradients, float32 master weights and "
            "Adam moments (12 B per trainable parameter) sharded"
        )
    if request.sharding == "fsdp":
        if request.gradient_accumulation_steps > 1 and (request.training_processes or request.hardware.total_gpus) > 1:
            return (
                f"FSDP2: {dtype} weights and Adam states sharded, layers gathered in half precision; gradients whole "
                "on each GPU between reductions (gradient accumulation under no_sync)"
            )
        return f"FSDP2: {dtype} weights, gradients and Adam states sharded, layers gathered in half precision"
    mixed = compute_dtype(request, dtype) != dtype
    master = "float32 master weights" if mixed else f"{dtype} throughout" if dtype == "float32" else f"pure {dtype}"
    where = "on the CPU" if request.hardware.accelerator == "cpu" else "whole on each GPU"
    return f"DDP / one process: {master}, state {where}"


def _unsharded(request: MemoryRequest, shape: ModelShape, dtype_bytes: int) -> tuple[float, float, int, float]:
    """(base weights, adapters, trainable count, bytes per trainable parameter) before any backend's storage."""
    parameters = shape.parameters()
    adapters = lora_parameters(shape, request.lora_r, request.lora_targets) if request.method != "full" else 0
    if request.method == "qlora":
        linear = shape.linear_parameters()
        base = linear * NF4_BYTES_PER_PARAMETER + (parameters - linear) * dtype_bytes
    else:
        base = parameters * dtype_bytes
    trainable = parameters if request.method == "full" else adapters
    per_trainable = dtype_bytes if request.method == "full" else adapter_bytes(request)
    return base, adapters * adapter_bytes(request), trainable, per_trainable


def model_state_bytes(request: MemoryRequest, shape: ModelShape, dtype_bytes: int, processes: int) -> ModelState:
    """Weights, gradients, optimizer states and the reference copy per GPU, as the backend stores and shards them.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> shape = SHAPES["qwen2.5-7b"].shape
    >>> zero2 = model_state_bytes(MemoryRequest(shape=shape, hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
    ...     sharding="zero2"), shape, 2, 8)
    >>> round(zero2.optimizer / shape.parameters(), 2)  # 12 B per parameter over 8 processes
    1.5
    """
    base, adapters, trainable, per_trainable = _unsharded(request, shape, dtype_bytes)
    half = DTYPE_BYTES[compute_dtype(request, "float32")]  # 2 under autocast on GPUs, else 4
    state_bytes = 1 if request.optimizer == "adamw_8bit" else None
    if request.sharding in ZERO and half == 2:
        weights = (base if request.method == "qlora" else shape.parameters() * half) + adapters / per_trainable * half
        gradients = trainable * half
        optimizer = trainable * (4 + 2 * (state_bytes or 4))  # float32 master + two moments
        reference = shape.parameters() * half
    else:
        weights = base + adapters
        gradients = trainable * per_trainable
        optimizer = trainable * 2 * (state_bytes or per_trainable)
        reference = shape.parameters() * dtype_bytes
    if request.beta == 0 or request.method != "full" or request.reference_placement == "elsewhere":
        reference = 0.0
    buckets = 0.0
    if request.sharding == "none" and processes > 1 and not request.gradient_as_bucket_view:
        buckets = gradients
    if request.sharding in ("zero1", "zero2", "zero3", "fsdp"):
        optimizer /= processes
        if request.sharding != "zero1":
            gradients /= processes
        if request.sharding in ("zero3", "fsdp"):
            weights /= processes
            reference /= processes
    state = _offloaded(
        request, shape, ModelState(weights, gradients, optimizer, reference, trainable, buckets), processes, half
    )
    if request.sharding == "fsdp" and request.gradient_accumulation_steps > 1 and processes > 1:
        # transformers' Trainer runs the micro-batches before the last under accelerate's no_sync, which sets FSDP2's
        # requires_gradient_sync to False: each layer keeps its unsharded gradient (in the parameters' compute dtype,
        # accelerate's bf16 policy reducing in bf16 too) and adds to it until the last micro-batch reduce-scatters.
        state = state._replace(gradients=trainable * half)
    return state


def _offloaded(
    request: MemoryRequest, shape: ModelShape, state: ModelState, processes: int, gather_bytes: int
) -> ModelState:
    """Move what the request offloads to host RAM. Under ZeRO-3 / FSDP the layers being computed are gathered
    whole beside the shard, offloaded or not; with the weights offloaded only those gathered layers stay."""
    offloaded = 0.0
    optimizer, weights, reference = state.optimizer, state.weights, state.reference
    if request.offload_optimizer:
        offloaded += optimizer
        optimizer = 0.0
    if request.sharding in ("zero3", "fsdp"):
        fraction = min(1.0, LAYERS_RESIDENT_WHEN_OFFLOADED / shape.layers)  # of the whole model, gathered at once
        if request.offload_parameters:
            offloaded += weights + reference
            weights, reference = weights * processes * fraction, reference * processes * fraction
        else:  # the shard already holds 1/processes of the gathered layers
            grow = 1 + fraction * (processes - 1)
            weights, reference = weights * grow, reference * grow
        if request.sharding == "fsdp" and reference:
            # TRL 1.16 shards an FSDP2 reference at its root only (trl/models/utils.py prepare_fsdp): its forward
            # gathers the whole model at once (in the gather precision), where ZeRO-3 gathers a layer at a time
            reference = state.reference * (0 if request.offload_parameters else 1) + shape.parameters() * gather_bytes
    return state._replace(optimizer=optimizer, weights=weights, reference=reference, offloaded=offloaded)
