"""Generation time of one GRPO step: prefill at the compute roof, decode at the memory-bandwidth roof.

Each decode iteration reads the weights once (bytes at the generation dtype, split over tensor parallel) and the
KV cache of the sequences still running; a batch ends when its longest completion does, so the number of
iterations is the expected longest of the batch (from measured lengths when known), and the running batch
shrinks as shorter completions finish (vLLM's continuous batching; transformers' ``generate`` keeps every row to
the end). On a CPU the iteration also pays a measured per-layer and per-iteration dispatch overhead.

May import: ``timing.schema``, ``timing.constants``, ``hardware``, ``models.shapes``.
"""

from __future__ import annotations

import math

from skill.hardware.throughput import GPUThroughput
from skill.models.shapes import ModelShape
from skill.timing import constants
from skill.timing.schema import StepTimeRequest

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
VLLM_BYTES = 2  # vLLM generates in bf16/fp16 whatever the trainer's dtype


def matmul_parameters(shape: ModelShape) -> int:
    """Parameters a token's forward multiplies by: every projection of every layer and the LM head (the embedding
    lookup is free).

    >>> from skill.models.shapes import SHAPES
    >>> matmul_parameters(SHAPES["smollm2-135m"].shape)
    134479872
    """
    return shape.layers * shape.linear_parameters_per_layer() + shape.vocab * shape.hidden


def kv_bytes_per_token(shape: ModelShape, dtype_bytes: int) -> int:
    """Key and value of one token in every layer."""
    return 2 * shape.layers * shape.kv_dim * dtype_bytes


def longest_of(request: StepTimeRequest, batch: int) -> float:
    """The expected longest completion of ``batch`` draws: the ``1 - 1/(batch+1)`` quantile of the measured lengths
    (their maximum for a batch as large as the sample), else the budget.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["smollm2-135m"].shape, hardware=HardwareSpec(accelerator="cpu"),
    ...     completions_per_step=16, prompt_tokens=30, max_completion_length=64, completion_tokens=list(range(1, 41)))
    >>> longest_of(request, 1), longest_of(request, 8), longest_of(request, 100)
    (20, 36, 40)
    """
    if not request.completion_tokens:
        return request.max_completion_length
    lengths = sorted(min(length, request.max_completion_length) for length in request.completion_tokens)
    index = min(len(lengths), math.ceil((1 - 1 / (batch + 1)) * len(lengths))) - 1
    return lengths[max(0, index)]


def mean_completion(request: StepTimeRequest) -> float:
    """The mean completion length: measured, stated, or (unknown) the budget."""
    if request.completion_tokens:
        return sum(min(t, request.max_completion_length) for t in request.completion_tokens) / len(
            request.completion_tokens
        )
    return request.mean_completion_tokens or request.max_completion_length


def _engines(request: StepTimeRequest) -> int:
    gpus = request.vllm_server_gpus if request.generation == "vllm_server" else request.training_processes
    return max(1, gpus // request.vllm_tensor_parallel_size)


def gpu_generation_seconds(request: StepTimeRequest, gpu: GPUThroughput, completions: int | None = None) -> float:
    """Seconds to generate ``completions`` (default: the step's) on the request's engines, all engines in parallel."""
    shape, tp = request.shape, request.vllm_tensor_parallel_size
    vllm = request.generation != "transformers"
    engines = _engines(request) if vllm else request.training_processes
    tp = tp if vllm else 1
    per_engine = math.ceil((completions or request.completions_per_step) / engines)
    longest, mean = longest_of(request, per_engine), mean_completion(request)
    bandwidth = gpu.hbm_tb_per_s * 1e12 * constants.DECODE_BANDWIDTH_UTILISATION
    compute = gpu.peak_tflops * 1e12 * constants.GENERATION_MFU
    weights = shape.parameters() * (VLLM_BYTES if vllm else DTYPE_BYTES[request.dtype]) / tp
    flops_per_token = 2 * matmul_parameters(shape) / tp
    running_tokens = per_engine * (mean if vllm else longest)  # transformers keeps finished rows to the end
    decode = max(longest * weights / bandwidth, running_tokens * flops_per_token / compute)
    kv_reads = per_engine * (request.prompt_tokens * mean + mean * mean / 2)
    kv = kv_reads * kv_bytes_per_token(shape, VLLM_BYTES) / tp / bandwidth
    prefill = per_engine * request.prompt_tokens * flops_per_token / compute
    return prefill + decode + kv


def cpu_generation_seconds(request: StepTimeRequest, completions: int | None = None) -> float:
    """Seconds for transformers' ``generate`` of every completion in one batch on this machine's CPU (several
    processes share its cores, so the work adds up as if one process did it all)."""
    shape = request.shape
    batch = completions or request.completions_per_step
    longest = longest_of(request, batch)
    weights = shape.parameters() * DTYPE_BYTES[request.dtype]
    flops_per_token = 2 * matmul_parameters(shape)
    roof = max(weights / constants.CPU_READ_BYTES_PER_S, batch * flops_per_token / constants.CPU_MATMUL_FLOPS)
    dispatch = constants.CPU_DECODE_ITERATION_OVERHEAD_S + shape.layers * constants.CPU_DECODE_LAYER_OVERHEAD_S
    kv_reads = batch * (request.prompt_tokens * longest + longest * longest / 2)
    kv = kv_reads * kv_bytes_per_token(shape, DTYPE_BYTES[request.dtype]) / constants.CPU_READ_BYTES_PER_S
    prefill = batch * request.prompt_tokens * flops_per_token / constants.CPU_MATMUL_FLOPS
    return prefill + longest * (roof + dispatch) + kv
