"""The generated parts of references/grpo-memory.md: sizing tables by size class and the comparison
with published reports (skill/memory/published_reports.json) and the GPU capacities, all computed by the
estimator itself."""

from __future__ import annotations

from skill.hardware.specs import KNOWN_GPUS, HardwareSpec
from skill.memory.components import estimate_components
from skill.memory.schema import MemoryRequest
from skill.memory.validation import validation_table
from skill.models.shapes import SHAPES

SIZE_CLASSES = [
    ("0.5B", "qwen2.5-0.5b"),
    ("1.5B", "qwen2.5-1.5b"),
    ("3B", "qwen2.5-3b"),
    ("7B", "qwen2.5-7b"),
    ("14B", "qwen2.5-14b"),
    ("32B", "qwen2.5-32b"),
    ("70B", "llama-3.1-70b"),
]
GPUS = [("24 GB (L4)", "L4"), ("40 GB (A100)", "A100-40GB"), ("80 GB (H100)", "H100"), ("141 GB (H200)", "H200")]
METHODS = ("full", "lora", "qlora")


def _cell(request: MemoryRequest) -> str:
    estimate = estimate_components(request)[1]
    if estimate.warnings:
        return f"{estimate.peak_gib:.0f} ✗ vLLM"
    return f"{estimate.peak_gib:.0f} {'✓' if estimate.fits else '✗'}"


def sizing_table(vllm_mode: str) -> str:
    """Peak GiB per GPU (✓ fits, ✗ does not) for the seed settings, one row per size class and method."""
    header = "| model | method | " + " | ".join(label for label, _ in GPUS) + " |"
    lines = [header, "|---|---|" + "---|" * len(GPUS)]
    for label, key in SIZE_CLASSES:
        for method in METHODS:
            cells = []
            for _, gpu in GPUS:
                hardware = HardwareSpec(gpu_model=gpu, gpus_per_node=1 if vllm_mode == "colocate" else 2)
                request = MemoryRequest(
                    shape=SHAPES[key].shape,
                    hardware=hardware,
                    method=method,
                    vllm_mode=vllm_mode,
                    training_processes=1,
                    beta=0.01,  # the seed recipe's (TRL 1.16's own default is 0.0)
                )
                cells.append(_cell(request))
            lines.append(f"| {label} ({SHAPES[key].hub_id}) | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def colocated_table() -> str:
    return sizing_table("colocate")


def server_table() -> str:
    return sizing_table("server")


def published_comparison() -> str:
    """Published GRPO memory reports next to this estimator's answer (skill/memory/published_reports.json)."""
    return validation_table()


def gpu_capacity_table() -> str:
    """The GPUs the estimator knows, with the capacity it uses and where that figure comes from."""
    lines = ["| GPU | GiB | bf16 | source of the figure |", "|---|---|---|---|"]
    seen = set()
    for gpu in KNOWN_GPUS.values():
        if gpu.name in seen:
            continue
        seen.add(gpu.name)
        lines.append(f"| {gpu.name} | {gpu.memory_gib:.1f} | {'yes' if gpu.bf16 else 'no'} | {gpu.source} |")
    return "\n".join(lines) + "\n"
