"""estimate_step_time: seconds per GRPO step (generation, training, weight sync, fixed costs), the run's total,
GPU-hours and, when a price per GPU-hour is sent, money.

TRL 1.16's GRPOTrainer is synchronous: in server mode the trainers wait while the server generates and the server
waits while they train (asynchronous GRPO lives in ``trl.experimental``), so the parts add up in both modes.

May import: ``timing.schema``, ``timing.constants``, ``timing.generation``, ``timing.training``, ``hardware``.
"""

from __future__ import annotations

import math

from skill.errors import SkillError
from skill.hardware.throughput import GPUThroughput, gpu_throughput
from skill.models.shapes import DTYPE_BYTES
from skill.timing import constants
from skill.timing.generation import (
    VLLM_BYTES,
    cpu_generation_seconds,
    gpu_generation_seconds,
    waves_note,
)
from skill.timing.schema import StepTimeEstimate, StepTimeRequest
from skill.timing.training import (
    collective_bytes_per_s,
    collective_link_bytes_per_s,
    collectives_bound,
    cpu_training_seconds,
    gpu_training_seconds,
    sharded_collective_seconds,
    training_mfu,
)

__all__ = [
    "StepTimeEstimate",
    "StepTimeRequest",
    "estimate_step_time",
    "evaluation_count",
    "sleep_mode_seconds_per_step",
]


def evaluation_count(max_steps: int, every: int | None) -> int:
    """Held-out evaluations a run of ``max_steps`` makes when it evaluates every ``every`` steps: one before the
    first step, one at each multiple, and one after the last unless the last is a multiple (transformers'
    DefaultFlowCallback evaluates at the end only when that step would not have evaluated anyway).

    >>> evaluation_count(40, 5), evaluation_count(10, 10), evaluation_count(12, 5), evaluation_count(0, 5)
    (9, 2, 4, 1)
    """
    if not every:
        return 0
    return 1 + max_steps // every + (1 if max_steps % every else 0)


def sleep_mode_seconds_per_step(weight_bytes: float) -> float:
    """What colocated vLLM's sleep mode adds to a step: waking its weights and KV cache (constants.SLEEP_WAKE_*).

    >>> round(sleep_mode_seconds_per_step(15.2e9), 2)  # a 7.6B model's bf16 weights
    1.36
    """
    return constants.SLEEP_WAKE_FIXED_S + constants.SLEEP_WAKE_S_PER_GB * weight_bytes / 1e9


def _weight_sync_seconds(
    request: StepTimeRequest, gpu: GPUThroughput, end: constants.End = "slow"
) -> tuple[float, list[str]]:
    """Weights into vLLM once per step: NCCL to a server, an in-place load when colocated (LoRA merged first),
    a ZeRO-3 / FSDP gather before either, the wake-up from sleep mode."""
    if request.generation == "transformers":
        return 0.0, []
    weights = request.shape.parameters() * VLLM_BYTES
    seconds = weights / (gpu.hbm_tb_per_s * 1e12 * constants.DECODE_BANDWIDTH_UTILISATION.at(end))  # the load
    notes = []
    if request.sharding in ("zero3", "fsdp"):
        world = request.training_processes
        # TRL gathers one parameter at a time for the sync: the per-tensor share of the link, not the bucketed one
        link = collective_link_bytes_per_s(request, gpu) * constants.LINK_UTILISATION
        seconds += weights * (world - 1) / max(world, 1) / link
        notes.append("ZeRO-3/FSDP: the sharded weights are gathered before each sync")
    if request.generation == "vllm_server":
        # One trainer broadcasts to the server: one link, across nodes one InfiniBand link.
        link = gpu.link_gb_per_s * 1e9 if request.hardware.nodes == 1 else constants.INTER_NODE_BYTES_PER_S
        seconds += weights / (link * constants.LINK_UTILISATION)
        notes.append("server mode: weights broadcast over NCCL each step at half the link's bandwidth")
    if request.vllm_sleep_mode:
        seconds += sleep_mode_seconds_per_step(weights)
        notes.append("vLLM sleep mode: its weights and KV cache are re-mapped every step (level 2, no host copy)")
    return seconds, notes


def _fixed_seconds(request: StepTimeRequest, generate_one_evaluation: float) -> float:
    """Start, weight load, vLLM start, held-out evaluations and checkpoints, for the whole run."""
    parameters = request.shape.parameters()
    seconds = constants.PROCESS_START_S + parameters * DTYPE_BYTES[request.dtype] / constants.WEIGHT_LOAD_BYTES_PER_S
    if request.generation != "transformers" and request.hardware.accelerator == "gpu":
        seconds += constants.VLLM_START_S
    steps = request.max_steps or 0
    if request.evaluation_completions:
        seconds += evaluation_count(steps, request.evaluation_every) * generate_one_evaluation
    if request.save_steps and steps:
        per_parameter = DTYPE_BYTES[request.dtype] + (
            constants.ADAM_STATE_BYTES_PER_PARAMETER * (request.method == "full")
        )
        seconds += steps // request.save_steps * parameters * per_parameter / constants.CHECKPOINT_WRITE_BYTES_PER_S
    return seconds


def _uncertainty(request: StepTimeRequest, part: str, gpu: GPUThroughput | None) -> str:
    """The spanned constants behind the part whose two ends lie furthest apart."""
    if part == "training":
        if gpu is not None and collectives_bound(request, gpu):
            return constants.SHARDED_COLLECTIVE_LINK_SHARE.what
        return training_mfu(request).what
    if part == "sync":
        return f"sync at {constants.DECODE_BANDWIDTH_UTILISATION.what}"
    if request.generation == "transformers":
        return constants.EAGER_DECODE_LAYER_S.what
    spans = [constants.DECODE_BANDWIDTH_UTILISATION, constants.VLLM_DECODE_ITERATION_OVERHEAD_S]
    if request.vllm_kv_cache_tokens is not None and waves_note(request):
        spans.append(constants.KV_HELD_SHARE_OF_COMPLETION)
    return ", ".join(span.what for span in spans)


def _assumptions(request: StepTimeRequest, gpu: GPUThroughput | None) -> list[str]:
    lengths = (
        f"completion lengths from {len(request.completion_tokens)} measured completions"
        if request.completion_tokens
        else f"mean completion {request.mean_completion_tokens:.0f} tokens stated: a batch's longest from lengths "
        "exponential about that mean, cut at the budget"
        if request.mean_completion_tokens
        else f"no completion lengths measured: every completion assumed to run to max_completion_length "
        f"({request.max_completion_length}); a route_check probe gives the distribution"
    )
    notes = [lengths]
    waves = waves_note(request) if gpu is not None else None
    notes += [waves] if waves else []
    if gpu is not None and request.sharding in ("zero3", "fsdp") and request.training_processes > 1:
        infiniband = collective_link_bytes_per_s(request, gpu) < gpu.link_gb_per_s * 1e9  # slower than in the node
        over = "the nodes' InfiniBand links" if infiniband else f"{gpu.name} links within the node"
        wait = "longer than its matmuls, so training waits on them" if collectives_bound(request, gpu) else "hidden"
        rate = collective_bytes_per_s(request, gpu) / 1e9
        notes.append(
            f"ZeRO-3/FSDP: each micro-batch gathers the weights for its forward and backward: "
            f"{sharded_collective_seconds(request, gpu):.2f} s at {rate:.0f} GB/s ({over}, the slow end), {wait}"
        )
    if gpu is not None:
        notes.append(
            f"{gpu.name}: {gpu.peak_tflops:g} TFLOP/s dense, {gpu.hbm_tb_per_s:g} TB/s ({gpu.source}); "
            f"{training_mfu(request).what}, {constants.DECODE_BANDWIDTH_UTILISATION.what} (a published "
            "figure at each end; the point is the range's geometric middle); nothing here was measured on a GPU"
        )
    else:
        notes.append(
            f"CPU rates measured {constants.CPU_MEASURED} (bench/timing_cpu_calibration.py); other CPUs differ"
        )
    return notes


def estimate_step_time(request: StepTimeRequest) -> StepTimeEstimate:
    """Seconds per GRPO step by part, the run's total, GPU-hours and (when priced) money.

    >>> from skill.hardware.specs import HardwareSpec
    >>> from skill.models.shapes import SHAPES
    >>> estimate = estimate_step_time(StepTimeRequest(shape=SHAPES["qwen2.5-7b"].shape,
    ...     hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8), completions_per_step=512,
    ...     prompt_tokens=200, max_completion_length=1024, training_processes=8, max_steps=500,
    ...     price_per_gpu_hour=2.0))
    >>> 10 < estimate.seconds_per_step < 300, estimate.cost == round(estimate.gpu_hours * 2.0, 2)
    (True, True)
    """
    gpu = gpu_throughput(request.hardware)
    if request.hardware.accelerator == "gpu" and gpu is None:
        raise SkillError(
            f"No peak compute or bandwidth is known for GPU {request.hardware.gpu_model!r}.",
            "Send a GPU model from skill/hardware/throughput.py (e.g. 'H100', 'A100', 'L4').",
        )
    assumptions = _assumptions(request, gpu)
    overhead = 0.0
    if gpu is None:  # measured CPU rates: one figure, no span
        generation = (cpu_generation_seconds(request),) * 2
        training, sync = (cpu_training_seconds(request),) * 2, (0.0, 0.0)
        overhead = constants.CPU_TRL_STEP_OVERHEAD_S
        one_evaluation = cpu_generation_seconds(request, request.evaluation_completions or 1)
    else:
        ends: tuple[constants.End, constants.End] = ("fast", "slow")
        generation = tuple(gpu_generation_seconds(request, gpu, end=end) for end in ends)
        training = tuple(gpu_training_seconds(request, gpu, end) for end in ends)
        sync = tuple(_weight_sync_seconds(request, gpu, end)[0] for end in ends)
        assumptions += _weight_sync_seconds(request, gpu)[1]
        one_evaluation = math.sqrt(
            math.prod(gpu_generation_seconds(request, gpu, request.evaluation_completions or 1, end) for end in ends)
        )
    fixed = _fixed_seconds(request, one_evaluation)
    steps = request.max_steps
    fixed_per_step = fixed / steps if steps else 0.0
    low, high = (generation[i] + training[i] + sync[i] + overhead + fixed_per_step for i in (0, 1))
    per_step = math.sqrt(low * high)
    parts = {"generation": generation, "training": training, "sync": sync}
    middle = {name: math.sqrt(fast * slow) for name, (fast, slow) in parts.items()}
    largest = max(middle, key=lambda name: middle[name])
    uncertain = max(parts, key=lambda name: parts[name][1] - parts[name][0])
    total = per_step * steps if steps else None
    gpus = request.hardware.total_gpus
    gpu_hours = round(total * gpus / 3600, 2) if total is not None and gpus else None
    cost = None
    if request.price_per_gpu_hour is not None and gpu_hours is not None:
        cost = round(gpu_hours * request.price_per_gpu_hour, 2)
    return StepTimeEstimate(
        generation_s=round(middle["generation"], 3),
        training_s=round(middle["training"], 3),
        weight_sync_s=round(middle["sync"], 3),
        overhead_s=round(overhead, 3),
        fixed_per_step_s=round(fixed_per_step, 3),
        seconds_per_step=round(per_step, 3),
        low_seconds_per_step=round(low, 3),
        high_seconds_per_step=round(high, 3),
        largest_part=f"{largest} {middle[largest] / per_step:.0%}",
        largest_uncertainty=_uncertainty(request, uncertain, gpu) if high > low else "",
        completions_per_step=request.completions_per_step,
        evaluation_s=round(one_evaluation, 3) if request.evaluation_completions else 0.0,
        evaluations=evaluation_count(steps or 0, request.evaluation_every) if request.evaluation_completions else 0,
        steps=steps,
        total_s=round(total, 1) if total is not None else None,
        gpus=gpus,
        gpu_hours=gpu_hours,
        cost=cost,
        assumptions=assumptions,
    )
