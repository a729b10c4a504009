"""The generated parts of references/grpo-memory.md: sizing tables by size class and the comparison
with published measurements, both computed by the estimator itself."""

from __future__ import annotations

from skill.hardware.specs import HardwareSpec
from skill.memory.components import estimate_components, full_logits_bytes, saved_activation_bytes_per_token
from skill.memory.schema import GIB, MemoryRequest
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
                )
                cells.append(_cell(request))
            lines.append(f"| {label} ({SHAPES[key].hub_id}) | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def colocated_table() -> str:
    return sizing_table("colocate")


def server_table() -> str:
    return sizing_table("server")


def _legacy_trl_peak(key: str, batch: int, prompt: int, completion: int, checkpointing: bool) -> tuple[float, float]:
    """An older TRL setup: float32 weights under bf16 autocast, no vLLM, full logits; (peak GiB, logits GiB)."""
    shape = SHAPES[key].shape
    request = MemoryRequest(
        shape=shape,
        hardware=HardwareSpec(gpu_model="A100-80GB"),
        method="full",
        dtype="float32",
        beta=0.04,
        per_device_train_batch_size=batch,
        steps_per_generation=1,
        prompt_length=prompt,
        completion_length=completion,
        activation_checkpointing=checkpointing,
        use_vllm=False,
    )
    components = estimate_components(request)[0]
    tokens = batch * (prompt + completion)
    activations = tokens * saved_activation_bytes_per_token(shape, 2, checkpointing) / GIB  # autocast: bf16
    logits = full_logits_bytes(batch, completion + 1, shape.vocab) / GIB
    states = components.weights + components.gradients + components.optimizer + components.reference
    return states + activations + logits + components.overhead, logits


def published_comparison() -> str:
    """Public reports next to what the estimator says, with the gap explained."""
    lines = [
        "| report | setup | reported | this estimator (installed TRL, seed dtype) | older TRL modelled | gap |",
        "|---|---|---|---|---|---|",
    ]
    for key, reported in (("qwen3-0.6b", 49273 / 1024), ("qwen3-1.7b", 78147 / 1024)):
        modern = estimate_components(
            MemoryRequest(
                shape=SHAPES[key].shape,
                hardware=HardwareSpec(gpu_model="A100-80GB"),
                method="full",
                per_device_train_batch_size=4,
                steps_per_generation=1,
                prompt_length=2048,
                completion_length=1024,
                beta=0.04,
                use_vllm=False,
            )
        )[1]
        legacy, logits = _legacy_trl_peak(key, 4, 2048, 1024, checkpointing=False)
        lines.append(
            f"| TRL issue #3456 | {SHAPES[key].hub_id} full GRPO, batch 4, prompt 2048 + completion 1024, "
            f"A100-80GB, TRL 0.17-era | {reported:.1f} GiB (nvidia-smi) | {modern.peak_gib:.1f} GiB | "
            f"{legacy:.1f} GiB (of which {logits:.1f} GiB logits) | the report ran float32 weights, no "
            "checkpointing and full logits; nvidia-smi also counts the caching allocator's reserve |"
        )
    unsloth = full_logits_bytes(8, 20480, SHAPES["llama-3.1-8b"].shape.vocab) / GIB
    fused = estimate_components(
        MemoryRequest(
            shape=SHAPES["llama-3.1-8b"].shape,
            hardware=HardwareSpec(gpu_model="H100"),
            method="lora",
            per_device_train_batch_size=8,
            prompt_length=512,
            completion_length=20480 - 512,
            use_vllm=False,
        )
    )[0]
    lines.append(
        f"| Unsloth long-context GRPO note | Llama-3.1-8B, 8 x 20K-token completions, logits 8 x 20480 x 128256 x "
        f"4 B | {unsloth:.0f} GiB of logits | {fused.logprob:.2f} GiB log-prob peak | {unsloth:.0f} GiB | TRL 1.16's "
        "chunked fused LM head never builds the logits: one 4096 x 32768 tile at a time |"
    )
    return "\n".join(lines) + "\n"
