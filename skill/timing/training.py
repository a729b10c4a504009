"""Training time of one GRPO step from FLOPs: the policy's forward and backward, and the extra forwards.

Rules (per token; N = the parameters a token multiplies by, ``generation.matmul_parameters``):
- forward: 2N plus attention, 4 x layers x q_dim x the mean context (Kaplan et al. 2020, "Scaling Laws for
  Neural Language Models", Table 1: C_forward = 2N + 2 n_layer n_ctx d_attn; x2 here for scores and values);
- full fine-tune: forward + backward = 3 forwards (6N; the backward computes gradients of activations and of
  weights, 2N each: same source);
- LoRA / QLoRA: 2 forwards (4N): the frozen weights get no weight gradients but the backward still propagates
  activation gradients through them (Hu et al. 2021, LoRA §4: no gradients are computed for the frozen weights);
  QLoRA's dequantization is not counted;
- activation checkpointing: one more forward (the recomputation);
- the reference forward (beta > 0) and the old-log-prob forward (TRL 1.16 with vLLM and its importance-sampling
  correction, or num_iterations > 1): one forward each.
TRL pads each micro-batch to its longest completion, so a padded step trains on that length for every row.
The optimizer step of a full fine-tune is a memory-bound sweep over the parameters a GPU holds (ZeRO and FSDP shard
them over the training processes); a LoRA adapter's is negligible.
ZeRO-3 and FSDP gather the weights for every forward and backward of every micro-batch (ZeRO-3 also reduce-scatters
a full fine-tune's gradients each micro-batch, FSDP once a step); prefetching overlaps the gathers with the matmuls,
so a micro-batch takes the longer of the two.

May import: ``timing.schema``, ``timing.constants``, ``timing.generation``, ``hardware``, ``models.shapes``.
"""

from __future__ import annotations

import math

from skill.hardware.throughput import GPUThroughput
from skill.models.shapes import DTYPE_BYTES
from skill.timing import constants
from skill.timing.generation import longest_of, matmul_parameters, mean_completion
from skill.timing.schema import StepTimeRequest


def trained_tokens_per_sequence(request: StepTimeRequest) -> float:
    """Prompt plus completion tokens one sequence costs: the micro-batch's longest when padded."""
    completion = longest_of(request, request.micro_batch) if request.padded else mean_completion(request)
    return request.prompt_tokens + completion


def forward_passes(request: StepTimeRequest) -> float:
    """Forward-equivalents per token: 3 (full) or 2 (LoRA) for the policy, +1 recomputation, +1 per extra forward.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> base = dict(shape=SHAPES["qwen2.5-0.5b"].shape, hardware=HardwareSpec(gpu_model="H100"),
    ...     completions_per_step=64, prompt_tokens=100, max_completion_length=256)
    >>> forward_passes(StepTimeRequest(**base)), forward_passes(StepTimeRequest(**base, method="lora",
    ...     reference_forward=True, old_logp_forward=True, activation_checkpointing=True))
    (3, 5)
    """
    policy = 3 if request.method == "full" else 2
    return policy + request.activation_checkpointing + request.reference_forward + request.old_logp_forward


def training_flops(request: StepTimeRequest) -> float:
    """Model FLOPs of one optimizer step over every completion of the step."""
    shape = request.shape
    tokens_per_sequence = trained_tokens_per_sequence(request)
    attention = 4 * shape.layers * shape.q_dim * tokens_per_sequence / 2  # causal: the mean context is half
    forward = 2 * matmul_parameters(shape) + attention
    return request.completions_per_step * tokens_per_sequence * forward * forward_passes(request)


def optimizer_seconds(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """The optimizer step of one GPU: a full fine-tune's AdamW sweep over the parameters it holds.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.hardware.throughput import gpu_throughput
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape, hardware=HardwareSpec(gpu_model="H100"),
    ...     completions_per_step=64, prompt_tokens=100, max_completion_length=256, training_processes=8)
    >>> h100 = gpu_throughput(request.hardware)
    >>> round(optimizer_seconds(request, h100), 3), round(optimizer_seconds(request.model_copy(
    ...     update={"sharding": "zero3"}), h100), 3)  # 7.6B x 28 bytes, whole or over 8 ranks
    (0.122, 0.015)
    """
    if request.method != "full":
        return 0.0
    shards = request.training_processes if request.sharding != "none" else 1
    swept = request.shape.parameters() / shards * constants.OPTIMIZER_STEP_BYTES_PER_PARAMETER
    return swept / (gpu.hbm_tb_per_s * 1e12 * constants.DECODE_BANDWIDTH_UTILISATION.at(end))


def micro_batches(request: StepTimeRequest) -> int:
    """Training micro-batches one GPU runs per optimizer step."""
    return math.ceil(request.completions_per_step / (request.training_processes * request.micro_batch))


def collective_link_bytes_per_s(request: StepTimeRequest, gpu: GPUThroughput) -> float:
    """The link a GPU's ZeRO-3 / FSDP all-gathers and reduce-scatters run over: its in-node link (the GPU table's)
    or, when the training processes span nodes, the node's InfiniBand links together (one ring a link, one link a
    GPU: the DGX reference design), up to that."""
    link = gpu.link_gb_per_s * 1e9
    hardware = request.hardware
    if hardware.nodes > 1 and request.training_processes > hardware.gpus_per_node:  # the trainers span nodes
        link = min(link, hardware.gpus_per_node * constants.INTER_NODE_BYTES_PER_S)
    return link


def collective_bytes_per_s(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """What bucketed ZeRO-3 / FSDP collectives move per second: SHARDED_COLLECTIVE_LINK_SHARE of their link."""
    return collective_link_bytes_per_s(request, gpu) * constants.SHARDED_COLLECTIVE_LINK_SHARE.at(end)


def sharded_collective_seconds(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """Seconds one micro-batch's ZeRO-3 / FSDP collectives take on a GPU: the weights all-gathered for the policy's
    forward and its backward and for each extra forward (reference, old log-probs), each moving (W-1)/W of the model
    in the compute dtype, and under ZeRO-3 a full fine-tune's gradients reduce-scattered too (DeepSpeed reduces every
    micro-batch; FSDP under the Trainer's no_sync reduces once a step, ``gradient_reduction_seconds``). Zero for
    ZeRO-1/2 and DDP, which keep the weights whole.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.hardware.throughput import gpu_throughput
    >>> from skill.models.shapes import SHAPES
    >>> request = StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape, completions_per_step=64, prompt_tokens=100,
    ...     max_completion_length=256, hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
    ...     training_processes=8, sharding="zero3")  # 3 passes of 7.6B x 2 bytes x 7/8 over half the link
    >>> h100, l4 = gpu_throughput(request.hardware), gpu_throughput(HardwareSpec(gpu_model="L4"))
    >>> round(sharded_collective_seconds(request, h100), 2), round(sharded_collective_seconds(request, l4), 2)
    (0.18, 2.5)
    """
    world = request.training_processes
    if request.sharding not in ("zero3", "fsdp") or world < 2:
        return 0.0
    passes = 2 + request.reference_forward + request.old_logp_forward
    passes += request.sharding == "zero3" and request.method == "full"
    moved = passes * request.shape.parameters() * DTYPE_BYTES[request.dtype] * (world - 1) / world
    return moved / collective_bytes_per_s(request, gpu, end)


def gradient_reduction_seconds(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """FSDP's reduce-scatter of a full fine-tune's gradients, once an optimizer step (the Trainer accumulates the
    other micro-batches under no_sync); the other shardings' reductions are in ``sharded_collective_seconds`` or
    overlap the backward (DDP, ZeRO-1/2)."""
    world = request.training_processes
    if request.sharding != "fsdp" or request.method != "full" or world < 2:
        return 0.0
    moved = request.shape.parameters() * DTYPE_BYTES[request.dtype] * (world - 1) / world
    return moved / collective_bytes_per_s(request, gpu, end)


def training_mfu(request: StepTimeRequest) -> constants.Span:
    """The model FLOPs utilisation training reaches: TRAINING_MFU, or MOE_TRAINING_MFU for a mixture of experts."""
    return constants.MOE_TRAINING_MFU if request.shape.experts else constants.TRAINING_MFU


def matmul_seconds_per_micro_batch(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """One micro-batch's model FLOPs at ``training_mfu``'s fast or slow end."""
    rate = request.training_processes * gpu.peak_tflops * 1e12 * training_mfu(request).at(end)
    return training_flops(request) / rate / micro_batches(request)


def collectives_bound(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> bool:
    """Whether a micro-batch waits on its ZeRO-3 / FSDP collectives rather than its matmuls."""
    return sharded_collective_seconds(request, gpu, end) > matmul_seconds_per_micro_batch(request, gpu, end)


def gpu_training_seconds(request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow") -> float:
    """Seconds on the training GPUs: each micro-batch its matmuls or, when they take longer, its ZeRO-3 / FSDP
    collectives; then FSDP's gradient reduction and the optimizer step."""
    collectives = sharded_collective_seconds(request, gpu, end)
    per_micro_batch = max(matmul_seconds_per_micro_batch(request, gpu, end), collectives)
    reduction = gradient_reduction_seconds(request, gpu, end)
    return micro_batches(request) * per_micro_batch + reduction + optimizer_seconds(request, gpu, end)


def cpu_training_seconds(request: StepTimeRequest) -> float:
    """Seconds on this machine's CPU at its measured training rate (forward-only passes counted at the same rate)."""
    return training_flops(request) / constants.CPU_TRAINING_FLOPS
