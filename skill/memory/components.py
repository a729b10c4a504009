"""The components of GRPO memory per GPU (or in CPU RAM), in bytes, from the model's shape alone.

Components, each in GiB per device:
- weights: parameters x bytes of the load dtype (TRL loads in float32 unless model_init_kwargs sets a
  dtype); QLoRA keeps the projections in NF4 (4.127 bits with double quantization) and the rest in
  the compute dtype; LoRA adapters are float32 (PEFT upcasts them).
- gradients and optimizer: trainable parameters x gradient bytes, AdamW's two states in the
  parameter dtype (8-bit Adam: 2 bytes); sharded over the training processes by ZeRO-2 (gradients,
  optimizer) or ZeRO-3 / FSDP (also the weights).
- reference: a second copy of the weights when beta > 0 and no PEFT (with PEFT the reference is the
  base with adapters disabled).
- activations: what the training forward saves for backward, per token per layer, with or without
  activation checkpointing (then: each layer's input, plus one layer recomputed during backward), in
  the compute dtype (``memory.precision``: half precision under autocast on GPUs); with float32 master
  weights, also autocast's half-precision copy of the matmul weights.
- log-prob: TRL 1.16 computes per-token log-probs through a chunked fused LM head and never builds
  the batch x completion x vocab logits; its peak is one token-by-vocabulary tile (plus float32
  temporaries where Triton is unavailable) and, when the LM head trains, a float32 accumulator of
  its gradient.
- vllm: a colocated vLLM reserves vllm_gpu_memory_utilization x GPU memory (near zero while asleep
  in sleep mode); a vLLM server lives on other GPUs, as many as ``hardware.layout`` gives it, and the
  remaining GPUs are the training processes the state is sharded over.
- overhead: the CUDA context and allocator slack (on CPU: the Python process with torch loaded).
- weight gather: whole parameters TRL gathers beside each GPU's shard outside the training step under
  ZeRO-3 / FSDP (``memory.gather``): with PEFT under ZeRO-3 the whole model at every weight sync into
  vLLM (its own peak, ``peak_sync_gib``); in generation without vLLM, the whole model unless
  ``ds3_gather_for_generation=False``.

``estimate_components`` assembles them into an estimate without remedies (``estimate.estimate_memory``
adds those). May import: ``memory.schema``, ``memory.gather``, ``memory.precision``, ``hardware`` (specs,
the process layout), ``models.shapes``, ``models.size``, ``errors``.
"""

from __future__ import annotations

from typing import NamedTuple

from skill.errors import SkillError
from skill.hardware.layout import layout_processes
from skill.memory.gather import Gather, gathered, uses_vllm
from skill.memory.placement import (
    ModelState,
    check_placement,
    check_tensor_parallel,
    model_state_bytes,
    precision_note,
)
from skill.memory.precision import autocast_copy_bytes, compute_dtype, load_dtype, module_dtype
from skill.memory.schema import (
    ALLOCATOR_SLACK,
    CPU_PROCESS_GIB,
    CUDA_CONTEXT_GIB,
    GIB,
    LOGPROB_TOKEN_TILE,
    LOGPROB_TORCH_BYTES_PER_TILE_ELEMENT,
    LOGPROB_VOCAB_TILE,
    NEAR_CAPACITY,
    VLLM_RUNTIME_GIB,
    Components,
    MemoryEstimate,
    MemoryRequest,
)
from skill.models.shapes import DTYPE_BYTES, ModelShape
from skill.models.size import resolve_shape


def weight_dtype(request: MemoryRequest) -> str:
    """The dtype the weights load in: the request's, else the one a recipe for its target and method loads."""
    return request.dtype if request.dtype is not None else load_dtype(request.hardware, request.method)


def saved_activation_bytes_per_token(
    shape: ModelShape, dtype_bytes: int, checkpointing: bool, residual_bytes: int | None = None
) -> float:
    """Bytes the training forward keeps for backward, per token, over all layers.

    Per layer without checkpointing: two RMSNorms (input, normalised, output: 12h bytes in fp32; 8h
    in half precision, which upcasts to fp32 inside the norm), RoPE'd q and k, v, the attention output
    and its reshaped copy, the attention log-sum-exp, and the gated MLP's gate, activation, up and
    product. With checkpointing only each layer's input is kept. The residual stream and the norms are in
    ``residual_bytes`` (the weights' dtype: float32 master weights keep it float32 under autocast), the
    projections in ``dtype_bytes`` (the compute dtype).

    >>> from skill.models.shapes import SHAPES
    >>> saved_activation_bytes_per_token(SHAPES["smollm2-135m"].shape, 4, False) > 10 * \\
    ...     saved_activation_bytes_per_token(SHAPES["smollm2-135m"].shape, 4, True)
    True
    """
    h, q, kv, f = shape.hidden, shape.q_dim, shape.kv_dim, shape.active_ffn
    residual_bytes = residual_bytes or dtype_bytes
    if checkpointing:
        return shape.layers * h * residual_bytes + 12 * h
    norm_bytes = 12 * h if residual_bytes == 4 else 8 * h
    projections = dtype_bytes * (3 * q + 2 * kv + 4 * f)
    per_layer = 2 * norm_bytes + projections + 4 * shape.heads
    return shape.layers * per_layer + norm_bytes


def attention_mask_bytes(shape: ModelShape, sequences: int, sequence_length: int, dtype_bytes: int) -> float:
    """With padding (GRPO batches always have it), SDPA gets a sequences x 1 x T x T additive mask,
    and each layer keeps its own for backward.

    >>> attention_mask_bytes(ModelShape(layers=2, hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=64,
    ...     vocab=10, tied_embeddings=True), 8, 53, 4)
    179776
    """
    return shape.layers * sequences * sequence_length**2 * dtype_bytes


def recomputed_layer_bytes_per_token(shape: ModelShape, dtype_bytes: int) -> float:
    """With checkpointing, one layer's full activations exist again while its backward runs."""
    full = saved_activation_bytes_per_token(shape, dtype_bytes, checkpointing=False)
    return full / (shape.layers + 1)


def logprob_peak_bytes(shape: ModelShape, tokens: int, compute_bytes: int, head_trains: bool, triton: bool) -> float:
    """Peak extra bytes of TRL's chunked fused LM-head log-prob (forward or backward, the larger).

    One token-by-vocabulary tile in the compute dtype; without Triton, the backward's float32
    temporaries of the tile's size; float32 accumulators for the hidden-state gradient and, when the
    LM head trains, for its weight gradient (vocab x hidden).

    >>> from skill.models.shapes import SHAPES
    >>> round(logprob_peak_bytes(SHAPES["qwen3-0.6b"].shape, 8 * 3072, 2, True, True) / 2**30, 2)
    0.92
    """
    tile = min(tokens, LOGPROB_TOKEN_TILE) * min(shape.vocab, LOGPROB_VOCAB_TILE)
    tile_bytes = tile * (compute_bytes + (0 if triton else LOGPROB_TORCH_BYTES_PER_TILE_ELEMENT))
    backward_accumulators = tokens * shape.hidden * 4 + (shape.vocab * shape.hidden * 4 if head_trains else 0)
    return tile_bytes + backward_accumulators


def full_logits_bytes(sequences: int, tokens: int, vocab: int, dtype_bytes: int = 4) -> float:
    """The batch x tokens x vocab logits older TRL versions materialised; kept only to explain published numbers.

    >>> round(full_logits_bytes(8, 20480, 128256) / 2**30, 1)
    78.3
    """
    return sequences * tokens * vocab * dtype_bytes


class Generation(NamedTuple):
    """Bytes per device that generation needs, and what the estimate should say about it."""

    vllm: float
    vllm_tokens: int | None
    kv_cache: float
    warnings: list[str]
    assumptions: list[str]


def with_shape(request: MemoryRequest) -> MemoryRequest:
    """The request with its model's shape filled in (an explicit ``shape`` wins over ``model``), and DDP where it
    names no sharding (``estimate_memory`` decides one before it gets here)."""
    if request.sharding is None:
        request = request.model_copy(update={"sharding": "none"})
    if request.shape is not None:
        return request
    if request.model is None:
        raise SkillError("No model and no shape.", "Send `model` (a hub id or local directory) or `shape`.")
    try:
        return request.model_copy(update={"shape": resolve_shape(request.model)})
    except SkillError as exc:  # the config.json could not be read or sized: the shape numbers can still be sent
        raise SkillError(exc.problem, f"{exc.fix} Or send `shape`, the shape numbers (layers, hidden, ...).") from None


def training_processes(request: MemoryRequest) -> int:
    """The processes the training state is sharded over: as the request says, else every GPU, less the vLLM
    server's GPUs (as the launch planner lays them out) when generation runs on a server.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> training_processes(MemoryRequest(shape=SHAPES["qwen2.5-7b"].shape, vllm_mode="server",
    ...     hardware=HardwareSpec(gpu_model="A10G", gpus_per_node=4)))
    2
    """
    hardware = request.hardware
    asked = request.training_processes
    if asked and hardware.accelerator == "gpu" and asked > hardware.total_gpus:
        raise SkillError(
            f"training_processes={request.training_processes} on {hardware.total_gpus} GPU(s): each training process "
            "needs a GPU of its own.",
            f"Send training_processes <= {hardware.total_gpus}, or more GPUs (gpus_per_node, nodes).",
        )
    if request.training_processes:
        return request.training_processes
    if hardware.accelerator == "cpu":
        return 1
    if request.use_vllm is not False and request.vllm_mode == "server":
        assert request.shape is not None  # with_shape guarantees it
        model_gib_bf16 = request.shape.parameters() * DTYPE_BYTES["bfloat16"] / GIB
        return layout_processes(hardware, model_gib_bf16).training_processes
    return max(1, hardware.total_gpus)


def capacity_gib(request: MemoryRequest) -> float:
    """GiB on one device: the GPU's memory, or the RAM of a CPU target (given, else this machine's; 16 GiB when
    neither is known)."""
    memory = request.hardware.memory_gib_per_gpu
    if request.hardware.accelerator == "cpu":
        return memory or 16.0
    return memory or 0.0


def triton_used(request: MemoryRequest) -> bool:
    """Whether TRL's log-prob runs its Triton kernels: as the request says, else on GPUs."""
    return (request.hardware.accelerator != "cpu") if request.triton is None else request.triton


def training_workspace_bytes(
    request: MemoryRequest, shape: ModelShape, dtype_bytes: int, residual_bytes: int | None = None
) -> tuple[float, float]:
    """(saved activations, log-prob peak) of one training micro-batch, in bytes (``dtype_bytes``: the compute
    dtype; ``residual_bytes``: the weights', which the residual stream keeps)."""
    batch = request.per_device_train_batch_size
    sequence = request.prompt_length + request.completion_length
    # Padding-free batches pack the real tokens (mean length) and need no attention mask.
    packed = min(sequence, request.mean_sequence_length or sequence) if request.padding_free else sequence
    tokens = batch * packed
    checkpointing = request.activation_checkpointing
    activations = tokens * saved_activation_bytes_per_token(shape, dtype_bytes, checkpointing, residual_bytes)
    mask = 0.0 if request.padding_free else attention_mask_bytes(shape, batch, sequence, dtype_bytes)
    if checkpointing:
        activations += tokens * recomputed_layer_bytes_per_token(shape, dtype_bytes) + mask / shape.layers
    else:
        activations += mask
    if request.logits == "full":  # older TRL and other frameworks: the whole float32 logits at once
        return activations, full_logits_bytes(batch, request.completion_length + 1, shape.vocab)
    triton = triton_used(request)
    logprob_tokens = batch * (request.completion_length if triton else sequence - 1)
    logprob = logprob_peak_bytes(shape, logprob_tokens, dtype_bytes, request.method == "full", triton)
    return activations, logprob


def vllm_bytes(request: MemoryRequest, compute_bytes: int) -> int:
    """Bytes a vLLM weight and a cached KV value take: TRL starts vLLM with dtype "auto", which on a GPU serves a
    float32 checkpoint in float16 and a bfloat16 one in bfloat16 (vLLM 0.31, config/model.py), whatever the trainer
    computes in; on a CPU, the trainer's."""
    return DTYPE_BYTES["bfloat16"] if request.hardware.accelerator == "gpu" else compute_bytes


def generation_bytes(request: MemoryRequest, shape: ModelShape, dtype_bytes: int) -> Generation:
    """A colocated vLLM's share (and the KV cache it leaves), or transformers' KV cache without vLLM."""
    use_vllm = uses_vllm(request)
    sequence = request.prompt_length + request.completion_length
    kv_per_token = shape.kv_cache_bytes_per_token(dtype_bytes)
    if not use_vllm:
        sequences = request.per_device_train_batch_size * request.steps_per_generation
        return Generation(0.0, None, sequences * sequence * kv_per_token, [], [])
    if request.vllm_mode != "colocate":
        return Generation(0.0, None, 0.0, [], [])
    vllm = request.vllm_gpu_memory_utilization * capacity_gib(request) * GIB
    tensor_parallel = request.vllm_tensor_parallel_size  # each GPU holds 1/TP of the weights and of each KV head set
    served = vllm_bytes(request, dtype_bytes)
    kv_per_token = shape.kv_cache_bytes_per_token(served)
    vllm_weights = shape.parameters() * served / tensor_parallel
    # vLLM splits KV heads over tensor parallel ranks and replicates them beyond their count; MLA's latent is one
    # vector per token, whole on every rank.
    kv_per_gpu = kv_per_token / (1 if shape.kv_cache_width else min(tensor_parallel, shape.kv_heads))
    vllm_tokens = max(0, int((vllm - vllm_weights - VLLM_RUNTIME_GIB * GIB) // kv_per_gpu))
    warnings = []
    if vllm_tokens < sequence:
        warnings.append(
            f"The colocated vLLM share ({vllm / GIB:.1f} GiB) cannot hold its {vllm_weights / GIB:.1f} GiB copy "
            f"of the weights plus the KV cache of one {sequence}-token sequence; vLLM would refuse to start."
        )
    share = (
        f"vLLM colocated: {request.vllm_gpu_memory_utilization:.2f} x GPU memory (modelled, not measured here), "
        f"tensor parallel {tensor_parallel}"
    )
    return Generation(vllm, vllm_tokens, 0.0, warnings, [share + "."])


class Peaks(NamedTuple):
    """Peak bytes per device of each phase of a GRPO step (the sync phase None without vLLM)."""

    train: float
    generate: float
    sync: float | None


def phase_peaks(
    request: MemoryRequest,
    state: ModelState,
    workspace: tuple[float, float],
    generation: Generation,
    gather: Gather,
    overhead: float,
    reserve: bool = True,
) -> Peaks:
    """The training step, generation, and the weight sync into vLLM, each with what is alive during it (with the
    caching allocator's reserve on a GPU, or the tensors alone)."""
    activations, logprob = workspace
    slack = ALLOCATOR_SLACK if reserve and request.hardware.accelerator != "cpu" else 0.0
    resident = state.weights + state.optimizer + state.reference
    vllm_during_train = 0.0 if request.vllm_enable_sleep_mode else generation.vllm
    train = (resident + state.gradients + state.buckets + activations + logprob) * (1 + slack)
    train += vllm_during_train + overhead
    generation_gather = gather.bytes if gather.during == "generation" else 0.0
    generate = (resident + generation.kv_cache + generation_gather) * (1 + slack) + generation.vllm + overhead
    if not uses_vllm(request):
        return Peaks(train, generate, None)
    # TRL wakes only a sleeping vLLM's weights for the sync; the KV cache comes back for generation.
    served = vllm_bytes(request, DTYPE_BYTES[compute_dtype(request, weight_dtype(request))])
    vllm_weights = request.shape.parameters() * served if request.shape else 0.0
    vllm_weights /= request.vllm_tensor_parallel_size
    vllm_during_sync = min(generation.vllm, vllm_weights) if request.vllm_enable_sleep_mode else generation.vllm
    # Gradients are gone by then: the trainer zeroes them with set_to_none after each optimizer step.
    sync_gather = gather.bytes if gather.during == "sync" else 0.0
    sync = (resident + sync_gather) * (1 + slack) + vllm_during_sync + overhead
    return Peaks(train, generate, sync)


def stated_assumptions(request: MemoryRequest, dtype: str, compute: str, overhead_gib: float) -> list[str]:
    """Every setting the estimate assumed, in words, so the answer can be checked against the real launch."""
    sequence = request.prompt_length + request.completion_length
    tokens = (
        f"padding-free batches of {request.mean_sequence_length or sequence} tokens per sequence on average"
        if request.padding_free
        else f"{request.per_device_train_batch_size} x {sequence} padded tokens"
    )
    reference = (
        "no reference model (beta=0)"
        if request.beta == 0
        else f"beta={request.beta}: "
        + (
            "the reference is the base with adapters disabled (no copy)"
            if request.method != "full"
            else "a reference copy on each trainer GPU"
            + (", gathered whole for its forward (TRL shards it at its root)" if request.sharding == "fsdp" else "")
            if request.reference_placement == "colocated"
            else "the reference runs elsewhere (not on these GPUs)"
        )
    )
    logits = (
        "the whole float32 logits (older TRL / other frameworks)"
        if request.logits == "full"
        else "TRL 1.16's chunked log-prob (one 4096 x 32768 tile at a time)"
    )
    offload = [name for name in ("optimizer", "parameters") if getattr(request, f"offload_{name}")]
    return [
        f"{dtype} weights{f' under {compute} autocast' if compute != dtype else ''}; "
        f"{precision_note(request, dtype)}; {reference}.",
        f"{'Checkpointed' if request.activation_checkpointing else 'Full'} activations for {tokens}; log-prob via "
        f"{logits}; "
        + (
            f"the Python process {overhead_gib} GiB (modelled)."
            if request.hardware.accelerator == "cpu"
            else f"CUDA context {overhead_gib} GiB (measured on an H200) and the allocator's reserve "
            f"{ALLOCATOR_SLACK:.0%} of the tensors."
        ),
        f"CPU offload: {', '.join(offload) if offload else 'none'}.",
    ]


def state_assumptions(gather: Gather, state: ModelState) -> list[str]:
    """The weight gather and DDP's buckets, when the backend has them."""
    notes = [f"Weight gather: {gather.reason}."] if gather.reason else []
    if state.buckets:
        notes.append("DDP's all-reduce buckets hold a second copy of the gradients (gradient_as_bucket_view off).")
    return notes


def estimate_components(request: MemoryRequest) -> tuple[Components, MemoryEstimate]:
    """Every component, per device, and the estimate assembled from them (without remedies)."""
    request = with_shape(request)
    check_placement(request)
    shape = request.shape
    assert shape is not None  # with_shape guarantees it
    on_cpu = request.hardware.accelerator == "cpu"
    dtype = weight_dtype(request)
    b, compute, held = DTYPE_BYTES[dtype], compute_dtype(request, dtype), DTYPE_BYTES[module_dtype(request, dtype)]
    processes = training_processes(request)
    if uses_vllm(request):
        check_tensor_parallel(request, processes)
    state = model_state_bytes(request, shape, b, processes)
    activations, logprob = training_workspace_bytes(request, shape, DTYPE_BYTES[compute], held)
    activations += autocast_copy_bytes(request, shape, dtype)
    generation = generation_bytes(request, shape, DTYPE_BYTES[compute])
    whole = request.model_copy(update={"offload_parameters": False, "offload_optimizer": False})
    gather = gathered(request, shape, model_state_bytes(whole, shape, b, 1).weights, held)  # as the backend holds it
    overhead_gib = CPU_PROCESS_GIB if on_cpu else CUDA_CONTEXT_GIB
    peaks = phase_peaks(request, state, (activations, logprob), generation, gather, overhead_gib * GIB)
    peak = max(peaks.train, peaks.generate, peaks.sync or 0.0) / GIB
    tensors = phase_peaks(request, state, (activations, logprob), generation, gather, 0.0, reserve=False)
    host = host_memory_bytes(request, shape, b, state.offloaded, processes) / GIB
    components = Components(
        weights=state.weights / GIB,
        gradients=state.gradients / GIB,
        optimizer=state.optimizer / GIB,
        reference=state.reference / GIB,
        activations=activations / GIB,
        logprob=logprob / GIB,
        generation_kv_cache=generation.kv_cache / GIB,
        vllm=generation.vllm / GIB,
        overhead=overhead_gib,
        weight_gather=gather.bytes / GIB,
        gradient_buckets=state.buckets / GIB,
    )
    assumptions = generation.assumptions + stated_assumptions(request, dtype, compute, overhead_gib)
    assumptions += state_assumptions(gather, state)
    capacity = capacity_gib(request)
    host_warnings = host_memory_warnings(request, host)
    estimate = MemoryEstimate(
        target="cpu" if on_cpu else "gpu",
        capacity_gib=capacity,
        parameters_b=shape.parameters() / 1e9,
        trainable_parameters_b=state.trainable / 1e9,
        components=components,
        peak_train_gib=round(peaks.train / GIB, 3),
        peak_generate_gib=round(peaks.generate / GIB, 3),
        peak_sync_gib=None if peaks.sync is None else round(peaks.sync / GIB, 3),
        peak_gib=round(peak, 3),
        peak_allocated_gib=round(max(tensors.train, tensors.generate, tensors.sync or 0.0) / GIB, 3),
        fits=peak <= capacity * (1 - NEAR_CAPACITY) and not generation.warnings and not host_warnings,
        headroom_gib=round(capacity - peak, 3),
        near_capacity=abs(capacity - peak) <= NEAR_CAPACITY * capacity,
        host_memory_gib_per_node=round(host, 1),
        vllm_kv_cache_tokens=generation.vllm_tokens,
        offloaded_to_cpu_gib=round(state.offloaded / GIB, 3),
        warnings=generation.warnings + gather_warnings(gather, peaks, capacity) + host_warnings,
        assumptions=assumptions,
    )
    return components, estimate


def host_memory_bytes(
    request: MemoryRequest, shape: ModelShape, dtype_bytes: int, offloaded: float, processes: int
) -> float:
    """Host RAM one node needs: every process on it loads the weights once in their dtype (transformers'
    from_pretrained keeps at most one copy, "low_cpu_mem_usage"), keeps what it offloads, and is a Python process.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = MemoryRequest(shape=SHAPES["qwen2.5-7b"].shape, dtype="float32",
    ...     hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8))
    >>> round(host_memory_bytes(request, request.shape, 4, 0.0, 8) / GIB)  # eight ranks, 7.6B in fp32
    235
    """
    per_node = processes if request.hardware.accelerator == "cpu" else min(processes, request.hardware.gpus_per_node)
    return per_node * (shape.parameters() * dtype_bytes + offloaded + CPU_PROCESS_GIB * GIB)


def host_memory_warnings(request: MemoryRequest, host_gib: float) -> list[str]:
    """Say so when a node's host RAM, as the hardware states it, cannot hold what its processes load and offload."""
    limit = request.hardware.host_memory_gib_per_node
    if limit is None or request.hardware.accelerator == "cpu" or host_gib <= limit:
        return []
    return [
        f"Each node needs about {host_gib:.0f} GiB of host RAM (the weights loaded once per process, what is "
        f"offloaded, the processes themselves) and has {limit:.0f} GiB: loading would stop there."
    ]


def gather_warnings(gather: Gather, peaks: Peaks, capacity: float) -> list[str]:
    """Say so when the gather is what does not fit, so the verdict names its cause."""
    phase = peaks.sync if gather.during == "sync" else peaks.generate
    if not gather.bytes or phase is None or phase / GIB <= capacity:
        return []
    where = "the weight sync into vLLM" if gather.during == "sync" else "generation"
    return [
        f"{gather.reason[0].upper()}{gather.reason[1:]}: {where} needs {phase / GIB:.1f} GiB of {capacity:.1f} GiB "
        "per GPU, so the run would stop there (out of memory) even where the training step fits."
    ]
