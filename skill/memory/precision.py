"""The dtypes a GRPO step computes in, besides the one its weights load in.

GPU recipes train under autocast (``bf16=True``, or ``fp16=True`` without bf16): matmuls, the activations
they produce, the log-prob tile and transformers' KV cache are half precision whatever the load dtype. vLLM
serves in half precision on a GPU with or without autocast (TRL starts it with ``dtype="auto"``, which serves a
float32 checkpoint in float16: ``components.vllm_bytes``). A full fine-tune keeps float32 master weights (the
recipe's ``model_init_kwargs.dtype``): its weights, gradients and AdamW states are float32 (``components``
reads those from the load dtype) and autocast adds a half-precision copy of every matmul weight: cached
while the forward runs and kept by autograd for backward (measured on CPU: 8 x 4096^2 float32 Linear
layers, 512 MiB, held 264 MiB more at the end of an autocast forward). ZeRO and FSDP2 cast their shards
themselves (no whole copy); ZeRO holds the module itself in half precision
(``module_dtype``). On CPU everything stays in the load dtype. TRL 1.16 casts QLoRA adapters to
bf16; PEFT keeps LoRA adapters in float32.

May import: ``memory.schema``, ``models.shapes``, ``hardware.specs``.
"""

from __future__ import annotations

from skill.hardware.specs import HardwareSpec
from skill.memory.schema import MemoryRequest
from skill.models.shapes import DTYPE_BYTES, ModelShape


def load_dtype(hardware: HardwareSpec, method: str) -> str:
    """The dtype a GRPO run loads its weights in, the rule every recipe follows (``recipe.deciding.precision``
    gives its reasons) and every memory estimate assumes unless told otherwise: float32 on a CPU, and a full
    fine-tune's float32 master weights on a GPU (trained under half-precision autocast); the frozen base of LoRA
    and QLoRA in half precision (bf16, fp16 on GPUs without it).

    >>> h100 = HardwareSpec(gpu_model="H100")
    >>> load_dtype(h100, "full"), load_dtype(h100, "lora"), load_dtype(HardwareSpec(gpu_model="T4"), "qlora")
    ('float32', 'bfloat16', 'float16')
    """
    if hardware.accelerator == "cpu" or method == "full":
        return "float32"
    return "bfloat16" if hardware.bf16 else "float16"


def mixed_precision(request: MemoryRequest) -> bool:
    """Whether the training forward runs under autocast: as the request says, else on GPUs."""
    if request.mixed_precision is None:
        return request.hardware.accelerator != "cpu"
    return request.mixed_precision and request.hardware.accelerator != "cpu"


def compute_dtype(request: MemoryRequest, weights: str) -> str:
    """The dtype of activations and transformers' caches: half precision under autocast (bf16, fp16 on GPUs
    without it), else the weights' own.

    >>> from skill.hardware.specs import HardwareSpec
    >>> compute_dtype(MemoryRequest(hardware=HardwareSpec(gpu_model="H100")), "float32")
    'bfloat16'
    >>> compute_dtype(MemoryRequest(hardware=HardwareSpec(accelerator="cpu")), "float32")
    'float32'
    """
    if not mixed_precision(request):
        return weights
    return "bfloat16" if request.hardware.bf16 else "float16"


def module_dtype(request: MemoryRequest, weights: str) -> str:
    """The dtype the model's parameters are held in while it trains: DeepSpeed ZeRO with bf16 (fp16) enabled
    casts the module itself to half precision (``DeepSpeedEngine._configure_distributed_model`` calls
    ``module.bfloat16()``; under ``zero.Init`` the partitions are created in that dtype), so its residual stream
    and the whole parameters TRL gathers under ZeRO-3 are half precision whatever the load dtype (TRL 1.16 also
    keeps LoRA adapters in the base dtype under ZeRO-3: ``autocast_adapter_dtype=False``); float32 master weights
    live in the optimizer. Every other backend keeps the load dtype.

    >>> from skill.hardware.specs import HardwareSpec
    >>> module_dtype(MemoryRequest(hardware=HardwareSpec(gpu_model="H100"), sharding="zero3"), "float32")
    'bfloat16'
    >>> module_dtype(MemoryRequest(hardware=HardwareSpec(gpu_model="H100")), "float32")
    'float32'
    """
    if request.sharding in ("zero1", "zero2", "zero3") and mixed_precision(request):
        return compute_dtype(request, weights)
    return weights


def autocast_copy_bytes(request: MemoryRequest, shape: ModelShape, weights: str) -> float:
    """Half-precision copies autocast makes of float32 matmul weights that train (the projections and the LM
    head), alive from the forward through backward; none under ZeRO / FSDP2 or without autocast.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> shape = SHAPES["qwen2.5-7b"].shape
    >>> round(autocast_copy_bytes(MemoryRequest(shape=shape, hardware=HardwareSpec(gpu_model="H100"),
    ...     dtype="float32", sharding="none"), shape, "float32") / 2**30, 1)
    13.2
    """
    compute = compute_dtype(request, weights)
    if compute == weights or request.method != "full" or request.sharding != "none":
        return 0.0
    matmul = shape.linear_parameters() + shape.vocab * shape.hidden
    return matmul * DTYPE_BYTES[compute]


def adapter_bytes(request: MemoryRequest) -> int:
    """Bytes per LoRA adapter parameter: TRL 1.16 casts QLoRA adapters to bf16, PEFT keeps LoRA's in float32."""
    return 2 if request.method == "qlora" else 4
