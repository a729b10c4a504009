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
from skill.models.shapes import DTYPE_BYTES, NF4_BYTES_PER_PARAMETER, ModelShape
from skill.timing import constants
from skill.timing.schema import StepTimeRequest

# Bytes a decode iteration moves per weight, by how the generating engine stores it: vLLM as TRL starts it loads
# bf16 whatever the trainer's dtype; Unsloth's fast_inference starts vLLM with bitsandbytes 4-bit weights under
# load_in_4bit and FP8 weights under load_in_fp8 (unsloth_zoo/vllm_utils.py: quantization "bitsandbytes" /
# "torchao"). bitsandbytes' matmul_4bit reads the 4-bit weights directly only for a single token (gemv_4bit); a
# batch of sequences goes through MatMul4Bit, which dequantizes each weight to 16 bits and multiplies: 4-bit read,
# 16-bit written, 16-bit read (bitsandbytes/autograd/_functions.py).
GENERATION_WEIGHT_BYTES = {"bfloat16": 2, "fp8": 1, "bnb-4bit": NF4_BYTES_PER_PARAMETER + 2 + 2}
VLLM_BYTES = GENERATION_WEIGHT_BYTES["bfloat16"]
BNB_SINGLE_TOKEN_BYTES = NF4_BYTES_PER_PARAMETER  # gemv_4bit: one sequence decoding reads the 4-bit weights only


def matmul_parameters(shape: ModelShape) -> int:
    """Parameters a token's forward multiplies by: every projection of every layer (of a mixture of experts, the
    experts the token is routed to) and the LM head (the embedding lookup is free).

    >>> from skill.models.shapes import SHAPES
    >>> matmul_parameters(SHAPES["smollm2-135m"].shape)
    134479872
    """
    return shape.active_linear_parameters() + shape.vocab * shape.hidden


def expected_longest(mean: float, batch: int, budget: int) -> float:
    """The expected longest of ``batch`` completion lengths when only their ``mean`` is known: lengths exponential
    (the maximum-entropy law for a positive length of known mean) and cut at ``budget``.

    The exponential's scale s solves s(1 - e^(-budget/s)) = mean (the mean of the cut law); the expected longest
    of n cut draws is s x sum over k = 1..n of U^k / k, with U = 1 - e^(-budget/s) (the integral of
    P(longest > x) from 0 to the budget). Uncut, it is the mean times the harmonic number H(n).

    >>> round(expected_longest(100, 1, 10_000), 1), round(expected_longest(100, 4, 10_000), 1)
    (100.0, 208.3)
    >>> round(expected_longest(157, 4, 1867)), round(expected_longest(1800, 4, 1846))
    (327, 1846)
    """
    if mean >= budget:
        return float(budget)
    low, high = mean, mean * 1e6  # the cut mean s(1 - e^(-budget/s)) grows with s from 0 towards the budget
    for _ in range(200):
        scale = (low + high) / 2
        if scale * -math.expm1(-budget / scale) < mean:
            low = scale
        else:
            high = scale
    reached = -math.expm1(-budget / scale)
    return min(float(budget), scale * sum(reached**k / k for k in range(1, batch + 1)))


def longest_of(request: StepTimeRequest, batch: int) -> float:
    """The expected longest completion of ``batch`` draws: the ``1 - 1/(batch+1)`` quantile of the measured lengths
    (their maximum for a batch as large as the sample); with only a stated mean, ``expected_longest``; else the
    budget.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["smollm2-135m"].shape, hardware=HardwareSpec(accelerator="cpu"),
    ...     completions_per_step=16, prompt_tokens=30, max_completion_length=64, completion_tokens=list(range(1, 41)))
    >>> longest_of(request, 1), longest_of(request, 8), longest_of(request, 100)
    (20, 36, 40)
    """
    if not request.completion_tokens:
        if request.mean_completion_tokens:
            return expected_longest(request.mean_completion_tokens, batch, request.max_completion_length)
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
    return min(request.mean_completion_tokens or request.max_completion_length, request.max_completion_length)


def _engines(request: StepTimeRequest) -> int:
    gpus = request.vllm_server_gpus if request.generation == "vllm_server" else request.training_processes
    return max(1, gpus // request.vllm_tensor_parallel_size)


def engine_share(request: StepTimeRequest, completions: int | None = None) -> int:
    """Completions one engine generates in one generation call: vLLM's engines share the step's (default) or
    ``completions``; transformers generates on every training process."""
    engines = _engines(request) if request.generation != "transformers" else request.training_processes
    per_engine = math.ceil((completions or request.completions_per_step) / engines)
    return math.ceil(per_engine / request.generation_rounds)


def server_max_num_seqs(request: StepTimeRequest) -> int:
    """The max_num_seqs `vllm serve` takes by default on the request's GPU (constants.VLLM_SERVE_MAX_NUM_SEQS*).

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> def on(gpu): return server_max_num_seqs(StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape,
    ...     hardware=HardwareSpec(gpu_model=gpu), completions_per_step=8, prompt_tokens=100, max_completion_length=64))
    >>> on("H100"), on("A100-80GB"), on("L4"), on("B200")
    (1024, 256, 256, 1024)
    """
    memory = request.hardware.memory_gib_per_gpu
    large = memory >= constants.VLLM_VERY_LARGE_GPU_GIB or (
        memory >= constants.VLLM_LARGE_GPU_GIB and "A100" not in request.hardware.gpu_model.upper()
    )
    return constants.VLLM_SERVE_MAX_NUM_SEQS_LARGE_GPU if large else constants.VLLM_SERVE_MAX_NUM_SEQS


def engine_concurrency(request: StepTimeRequest, share: int, end: constants.End = "slow") -> int:
    """Sequences one vLLM engine decodes at once: its whole ``share``, unless `vllm serve`'s default max_num_seqs
    or the KV cache (``vllm_kv_cache_tokens``, each running sequence holding its share of its group's prompt, which
    the prefix cache holds once, and part of its completion: constants.KV_HELD_SHARE_OF_COMPLETION) holds fewer;
    then the share decodes in waves.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape, hardware=HardwareSpec(gpu_model="H100"),
    ...     completions_per_step=64, prompt_tokens=500, max_completion_length=4096, vllm_kv_cache_tokens=100_000)
    >>> engine_concurrency(request, 64, "fast"), engine_concurrency(request, 64, "slow")  # 100k / (500 + 2048 | 4096)
    (39, 21)
    """
    if request.generation == "transformers":
        return share
    limit = share
    if request.generation == "vllm_server":
        limit = min(limit, server_max_num_seqs(request))
    if request.vllm_kv_cache_tokens is not None:
        prompt = request.prompt_tokens / request.group_size
        held = prompt + constants.KV_HELD_SHARE_OF_COMPLETION.at(end) * mean_completion(request)
        limit = min(limit, int(request.vllm_kv_cache_tokens // held))
    return max(1, limit)


def tensor_parallel_seconds(request: StepTimeRequest, end: constants.End) -> float:
    """What one decode iteration waits on tensor parallel all-reduces: two a layer, across nodes when the engine
    spans more GPUs than a node has.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape, completions_per_step=8, prompt_tokens=100,
    ...     max_completion_length=256, hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
    ...     vllm_tensor_parallel_size=8, training_processes=8)
    >>> round(tensor_parallel_seconds(request, "slow") * 1e3, 2)  # 28 layers x 2 x 12 us
    0.67
    """
    tp = request.vllm_tensor_parallel_size
    if tp == 1 or request.generation == "transformers":
        return 0.0
    across = tp > request.hardware.gpus_per_node
    latency = constants.TP_ALLREDUCE_ACROSS_NODES_S if across else constants.TP_ALLREDUCE_IN_NODE_S
    return 2 * request.shape.layers * latency.at(end)


def waves_note(request: StepTimeRequest) -> str | None:
    """The assumption to state when an engine cannot decode its whole share at once (at the slow end), else None."""
    share = engine_share(request)
    held = engine_concurrency(request, share)
    if held >= share:
        return None
    if request.generation == "vllm_server" and held == server_max_num_seqs(request):
        why = f"`vllm serve`'s default max_num_seqs on a {request.hardware.gpu_model}"
    else:
        why = (
            f"its KV cache of {request.vllm_kv_cache_tokens:,} tokens, each running sequence holding its share of "
            "its group's prompt and up to its whole completion; a larger vllm_gpu_memory_utilization holds more"
        )
    return f"one vLLM engine decodes {held} of its {share} sequences at once ({why}): {share / held:.1f} waves"


def gpu_generation_seconds(
    request: StepTimeRequest, gpu: GPUThroughput, completions: int | None = None, end: constants.End = "slow"
) -> float:
    """Seconds to generate ``completions`` (default: the step's) on the request's engines, all engines in parallel,
    at the fast or the slow end of the constants' spans.

    A decode iteration reads the weights and the KV cache at the bandwidth roof; vLLM (CUDA graphs) adds its
    per-iteration scheduling; transformers' eager ``generate`` takes at least its kernel launches, layer by layer.
    """
    shape, tp = request.shape, request.vllm_tensor_parallel_size
    vllm = request.generation != "transformers"
    tp = tp if vllm else 1
    per_round = engine_share(request, completions)
    longest, mean = longest_of(request, per_round), mean_completion(request)
    # More sequences than the engine holds at once decode in waves: each wave beyond the first adds a mean
    # completion's iterations (continuous batching refills a finished sequence's place at once).
    iterations = longest + (per_round / engine_concurrency(request, per_round, end) - 1) * mean
    bandwidth = gpu.hbm_tb_per_s * 1e12 * constants.DECODE_BANDWIDTH_UTILISATION.at(end)
    compute = gpu.peak_tflops * 1e12 * constants.GENERATION_MFU.at(end)
    weight_bytes = GENERATION_WEIGHT_BYTES[request.generation_weights] if vllm else DTYPE_BYTES[request.dtype]
    if vllm and request.generation_weights == "bnb-4bit" and per_round == 1:
        weight_bytes = BNB_SINGLE_TOKEN_BYTES
    weights = shape.parameters() * weight_bytes / tp
    flops_per_token = 2 * matmul_parameters(shape) / tp
    running_tokens = per_round * (mean if vllm else longest)  # transformers keeps finished rows to the end
    kv_reads = per_round * (request.prompt_tokens * mean + mean * mean / 2)
    kv = kv_reads * shape.kv_cache_bytes_per_token(VLLM_BYTES) / tp / bandwidth
    roof = max(iterations * weights / bandwidth, running_tokens * flops_per_token / compute) + kv
    if vllm:
        decode = roof + iterations * (
            constants.VLLM_DECODE_ITERATION_OVERHEAD_S.at(end) + tensor_parallel_seconds(request, end)
        )
    else:
        decode = max(roof, iterations * shape.layers * constants.EAGER_DECODE_LAYER_S.at(end))
    prefill = per_round * request.prompt_tokens * flops_per_token / compute
    return request.generation_rounds * (prefill + decode)


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
    kv = kv_reads * shape.kv_cache_bytes_per_token(DTYPE_BYTES[request.dtype]) / constants.CPU_READ_BYTES_PER_S
    prefill = batch * request.prompt_tokens * flops_per_token / constants.CPU_MATMUL_FLOPS
    return prefill + longest * (roof + dispatch) + kv
