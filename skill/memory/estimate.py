"""estimate_memory: the whole GRPO stack per GPU (or in CPU RAM), from the model's shape alone.

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
  activation checkpointing (then: each layer's input, plus one layer recomputed during backward).
- log-prob: TRL 1.16 computes per-token log-probs through a chunked fused LM head and never builds
  the batch x completion x vocab logits; its peak is one token-by-vocabulary tile (plus float32
  temporaries where Triton is unavailable) and, when the LM head trains, a float32 accumulator of
  its gradient.
- vllm: a colocated vLLM reserves vllm_gpu_memory_utilization x GPU memory (near zero while asleep
  in sleep mode); a vLLM server lives on other GPUs.
- overhead: the CUDA context and allocator slack (on CPU: the Python process with torch loaded).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.models.shapes import ModelShape, resolve_shape

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
NF4_BYTES_PER_PARAMETER = 4.127 / 8  # 4-bit weights + double-quantized absmax per 64-block (QLoRA paper)
LOGPROB_TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE
LOGPROB_VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE
# Extra bytes per tile element in the torch fallback of the chunked log-prob's backward (no Triton:
# CPU and other devices): seven float32 temporaries and one boolean mask alive at once, counted from
# _backward_tile and confirmed by allocator measurement (the forward holds fewer).
LOGPROB_TORCH_BYTES_PER_TILE_ELEMENT = 7 * 4 + 1
CUDA_CONTEXT_GIB = 0.6  # typical CUDA context + cuBLAS workspace with torch 2.x; modelled
ALLOCATOR_SLACK = 0.05  # caching allocator fragmentation on GPU, as a fraction of tensor memory; modelled
VLLM_RUNTIME_GIB = 0.5  # vLLM's own activations and CUDA graphs inside its share; modelled
CPU_PROCESS_GIB = 1.0  # a Python process with torch, transformers and trl imported; modelled

Method = Literal["full", "lora", "qlora"]
Sharding = Literal["none", "zero2", "zero3", "fsdp"]


class MemoryRequest(BaseModel):
    """What decides GRPO memory on one device. Defaults follow the seed recipe."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    model: str | None = Field(
        default=None, description="Hub id, local directory or the embedded default's id; or send `shape`."
    )
    shape: ModelShape | None = Field(default=None, description="Explicit shape numbers (wins over `model`).")
    hardware: HardwareSpec
    method: Method = "full"
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        default=None, description="Weight dtype; default: bf16 / fp16 / fp32 as the GPU or CPU supports."
    )
    lora_r: int = Field(default=16, gt=0)
    lora_targets: Literal["all-linear", "attention"] = "all-linear"
    optimizer: Literal["adamw", "adamw_8bit"] = "adamw"
    beta: float = Field(default=0.01, ge=0)
    per_device_train_batch_size: int = Field(default=8, gt=0)
    steps_per_generation: int = Field(default=4, gt=0)
    prompt_length: int = Field(default=512, gt=0, description="Longest prompt, in tokens.")
    completion_length: int = Field(default=256, gt=0, description="max_completion_length")
    activation_checkpointing: bool = True
    use_vllm: bool | None = Field(default=None, description="Default: on GPUs, off on CPU.")
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, lt=1)
    vllm_enable_sleep_mode: bool = False
    sharding: Sharding = "none"
    training_processes: int | None = Field(default=None, gt=0, description="Default: every GPU trains.")
    triton: bool | None = Field(default=None, description="Triton kernels for the log-prob; default: on GPUs.")


class Components(BaseModel):
    """GiB per device, by component."""

    weights: float
    gradients: float
    optimizer: float
    reference: float
    activations: float
    logprob: float
    generation_kv_cache: float = Field(description="KV cache of generation without vLLM (transformers).")
    vllm: float
    overhead: float


class Remedy(BaseModel):
    """One way to make it fit, with what it would cost and what it would give."""

    name: str
    cost: str
    changes: dict[str, object]
    peak_gib: float
    fits: bool


class MemoryEstimate(BaseModel):
    """Per-device memory of a GRPO setup and whether it fits."""

    target: Literal["gpu", "cpu"]
    capacity_gib: float
    parameters_b: float
    trainable_parameters_b: float
    components: Components
    peak_train_gib: float
    peak_generate_gib: float
    peak_gib: float
    fits: bool
    headroom_gib: float
    vllm_kv_cache_tokens: int | None = Field(default=None, description="Tokens the colocated vLLM cache can hold.")
    warnings: list[str] = Field(default_factory=list, description="Reasons it cannot run besides the total.")
    remedies: list[Remedy] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """A few human-readable lines: the components, the verdict, the remedies."""
        device = "GPU" if self.target == "gpu" else "CPU RAM"
        lines = [
            f"GRPO memory per {device}: peak {self.peak_gib:.2f} GiB of {self.capacity_gib:.1f} GiB "
            f"({'fits' if self.fits else 'does NOT fit'}; headroom {self.headroom_gib:.2f} GiB)",
            f"  parameters {self.parameters_b:.3f}B, trainable {self.trainable_parameters_b:.4f}B",
            f"  training step {self.peak_train_gib:.2f} GiB, generation {self.peak_generate_gib:.2f} GiB",
        ]
        lines.extend(f"  {name:20s} {value:8.3f} GiB" for name, value in self.components.model_dump().items())
        lines.extend(f"  warning: {warning}" for warning in self.warnings)
        for remedy in self.remedies:
            verdict = "fits" if remedy.fits else "still too big"
            lines.append(f"  remedy {remedy.name}: {remedy.peak_gib:.2f} GiB ({verdict}); cost: {remedy.cost}")
        lines.extend(f"  assumes: {assumption}" for assumption in self.assumptions)
        return "\n".join(lines)


def lora_parameters(shape: ModelShape, r: int, targets: str) -> int:
    """Adapter parameters: r x (in + out) for each adapted projection.

    >>> from skill.models.shapes import SHAPES
    >>> lora_parameters(SHAPES["qwen2.5-7b"].shape, 16, "all-linear")
    40370176
    """
    h, q, kv, f = shape.hidden, shape.q_dim, shape.kv_dim, shape.ffn
    attention = (h + q) + 2 * (h + kv) + (q + h)
    mlp = 2 * (h + f) + (f + h)
    return shape.layers * r * (attention + (mlp if targets == "all-linear" else 0))


def weight_dtype(request: MemoryRequest) -> str:
    if request.dtype is not None:
        return request.dtype
    if request.hardware.accelerator == "cpu":
        return "float32"
    return "bfloat16" if request.hardware.bf16 else "float16"


def saved_activation_bytes_per_token(shape: ModelShape, dtype_bytes: int, checkpointing: bool) -> float:
    """Bytes the training forward keeps for backward, per token, over all layers.

    Per layer without checkpointing: two RMSNorms (input, normalised, output: 12h bytes in fp32; 8h
    in half precision, which upcasts to fp32 inside the norm), RoPE'd q and k, v, the attention output
    and its reshaped copy, the attention log-sum-exp, and the gated MLP's gate, activation, up and
    product. With checkpointing only each layer's input is kept.

    >>> from skill.models.shapes import SHAPES
    >>> saved_activation_bytes_per_token(SHAPES["smollm2-135m"].shape, 4, False) > 10 * \\
    ...     saved_activation_bytes_per_token(SHAPES["smollm2-135m"].shape, 4, True)
    True
    """
    h, q, kv, f = shape.hidden, shape.q_dim, shape.kv_dim, shape.ffn
    if checkpointing:
        return shape.layers * h * dtype_bytes + 12 * h
    norm_bytes = 12 * h if dtype_bytes == 4 else 8 * h
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


def kv_cache_bytes_per_token(shape: ModelShape, dtype_bytes: int) -> int:
    """Keys and values of every layer for one token.

    >>> from skill.models.shapes import SHAPES
    >>> kv_cache_bytes_per_token(SHAPES["llama-3.1-8b"].shape, 2)
    131072
    """
    return 2 * shape.layers * shape.kv_dim * dtype_bytes


def estimate_components(request: MemoryRequest) -> tuple[Components, MemoryEstimate]:
    """Every component, per device, and the estimate assembled from them (without remedies)."""
    request = _with_shape(request)
    shape, hardware = request.shape, request.hardware
    assert shape is not None  # _with_shape guarantees it
    on_cpu = hardware.accelerator == "cpu"
    dtype = weight_dtype(request)
    b = DTYPE_BYTES[dtype]
    parameters = shape.parameters()
    processes = request.training_processes or max(1, hardware.total_gpus)
    if (
        not on_cpu
        and request.use_vllm is not False
        and request.vllm_mode == "server"
        and not request.training_processes
    ):
        processes = max(1, hardware.total_gpus - 1)

    adapters = lora_parameters(shape, request.lora_r, request.lora_targets) if request.method != "full" else 0
    if request.method == "qlora":
        linear = shape.layers * shape.linear_parameters_per_layer()
        weights = linear * NF4_BYTES_PER_PARAMETER + (parameters - linear) * b + adapters * 4
    else:
        weights = parameters * b + adapters * 4
    trainable = parameters if request.method == "full" else adapters
    grad_bytes = b if request.method == "full" else 4
    gradients = trainable * grad_bytes
    state_bytes = 1 if request.optimizer == "adamw_8bit" else grad_bytes
    optimizer = trainable * 2 * state_bytes
    reference = parameters * b if request.beta > 0 and request.method == "full" else 0.0
    if request.sharding in ("zero2", "zero3", "fsdp"):
        gradients /= processes
        optimizer /= processes
    if request.sharding in ("zero3", "fsdp"):
        weights /= processes
        reference /= processes

    sequence = request.prompt_length + request.completion_length
    tokens = request.per_device_train_batch_size * sequence
    activations = tokens * saved_activation_bytes_per_token(shape, b, request.activation_checkpointing)
    mask = attention_mask_bytes(shape, request.per_device_train_batch_size, sequence, b)
    if request.activation_checkpointing:
        activations += tokens * recomputed_layer_bytes_per_token(shape, b) + mask / shape.layers
    else:
        activations += mask
    triton = (not on_cpu) if request.triton is None else request.triton
    logprob_tokens = request.per_device_train_batch_size * (request.completion_length if triton else sequence - 1)
    logprob = logprob_peak_bytes(shape, logprob_tokens, b, request.method == "full", triton)

    use_vllm = (not on_cpu) if request.use_vllm is None else request.use_vllm
    generation_sequences = request.per_device_train_batch_size * request.steps_per_generation
    kv_per_token = kv_cache_bytes_per_token(shape, b)
    capacity = (hardware.memory_gib_per_gpu or 0.0) if not on_cpu else (hardware.memory_gib_per_gpu or 16.0)
    vllm = 0.0
    vllm_tokens = None
    assumptions = []
    warnings = []
    generation_kv = 0.0
    if use_vllm and request.vllm_mode == "colocate":
        vllm = request.vllm_gpu_memory_utilization * capacity * GIB
        vllm_weights = parameters * b
        vllm_tokens = max(0, int((vllm - vllm_weights - VLLM_RUNTIME_GIB * GIB) // kv_per_token))
        if vllm_tokens < sequence:
            warnings.append(
                f"The colocated vLLM share ({vllm / GIB:.1f} GiB) cannot hold its {vllm_weights / GIB:.1f} GiB copy "
                f"of the weights plus the KV cache of one {sequence}-token sequence; vLLM would refuse to start."
            )
        assumptions.append("vLLM share is modelled (utilization x GPU memory), not measured here.")
    elif not use_vllm:
        generation_kv = generation_sequences * sequence * kv_per_token
    overhead_gib = CPU_PROCESS_GIB if on_cpu else CUDA_CONTEXT_GIB

    resident = weights + optimizer + reference
    train_tensors = resident + gradients + activations + logprob
    vllm_during_train = 0.0 if request.vllm_enable_sleep_mode else vllm
    slack = 0.0 if on_cpu else ALLOCATOR_SLACK
    peak_train = (train_tensors * (1 + slack) + vllm_during_train) / GIB + overhead_gib
    peak_generate = ((resident + generation_kv) * (1 + slack) + vllm) / GIB + overhead_gib
    peak = max(peak_train, peak_generate)
    components = Components(
        weights=weights / GIB,
        gradients=gradients / GIB,
        optimizer=optimizer / GIB,
        reference=reference / GIB,
        activations=activations / GIB,
        logprob=logprob / GIB,
        generation_kv_cache=generation_kv / GIB,
        vllm=vllm / GIB,
        overhead=overhead_gib,
    )
    assumptions.append(
        f"{dtype} weights; {'checkpointed' if request.activation_checkpointing else 'full'} activations for "
        f"{request.per_device_train_batch_size} x {sequence} tokens; overhead {overhead_gib} GiB is modelled."
    )
    estimate = MemoryEstimate(
        target="cpu" if on_cpu else "gpu",
        capacity_gib=capacity,
        parameters_b=parameters / 1e9,
        trainable_parameters_b=trainable / 1e9,
        components=components,
        peak_train_gib=round(peak_train, 3),
        peak_generate_gib=round(peak_generate, 3),
        peak_gib=round(peak, 3),
        fits=peak <= capacity and not warnings,
        headroom_gib=round(capacity - peak, 3),
        vllm_kv_cache_tokens=vllm_tokens,
        warnings=warnings,
        assumptions=assumptions,
    )
    return components, estimate


def _with_shape(request: MemoryRequest) -> MemoryRequest:
    if request.shape is not None:
        return request
    if request.model is None:
        raise SkillError("No model and no shape.", "Send `model` (a hub id or local directory) or `shape`.")
    return request.model_copy(update={"shape": resolve_shape(request.model)})


def _estimate_without_remedies(request: MemoryRequest) -> MemoryEstimate:
    return estimate_components(request)[1]


def estimate_memory(request: MemoryRequest) -> MemoryEstimate:
    """Per-device memory of the whole GRPO stack, whether it fits, and remedies ranked by cost.

    >>> from skill.hardware.specs import HardwareSpec
    >>> estimate = estimate_memory(MemoryRequest(model="Qwen/Qwen2.5-7B-Instruct",
    ...     hardware=HardwareSpec(gpu_model="H100"), method="full"))
    >>> estimate.fits, [remedy.name for remedy in estimate.remedies if remedy.fits][:2]
    (False, ['lora', 'qlora'])
    """
    from skill.memory.remedies import remedies

    request = _with_shape(request)
    estimate = _estimate_without_remedies(request)
    if not estimate.fits or estimate.headroom_gib < 0.1 * estimate.capacity_gib:
        estimate.remedies = remedies(request, _estimate_without_remedies)
    return estimate
