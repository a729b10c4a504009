"""Memory contracts: the request (what decides GRPO memory on one device), the estimate and its parts,
and the modelled constants every formula shares.

May import: ``hardware.specs`` (the target), ``models.shapes`` (the model's shape).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skill.hardware.specs import HardwareSpec
from skill.models.shapes import ModelShape

GIB = 2**30
LOGPROB_TOKEN_TILE = 4096  # trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE
LOGPROB_VOCAB_TILE = 32768  # trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE
# Extra bytes per tile element in the torch fallback of the chunked log-prob's backward (no Triton:
# CPU and other devices): seven float32 temporaries and one boolean mask alive at once, counted from
# _backward_tile and confirmed by allocator measurement (the forward holds fewer).
LOGPROB_TORCH_BYTES_PER_TILE_ELEMENT = 7 * 4 + 1
# The CUDA context a process holds besides its tensors: 552,402,944 bytes measured on an H200 with torch
# 2.11+cu130 (bench/results/2026-12-04-h200/gpu_memory.json, cuda_context_bytes); published figures with lazy module
# loading lie between 274 MiB (pytorch/pytorch#86509) and 426 MiB (unslothai/unsloth-zoo#1053) before cuBLAS.
CUDA_CONTEXT_GIB = 0.514
# What the caching allocator reserves beyond the tensors' peak, as a fraction of it: 3-7% on our H200 rows of a
# full fine-tune and a LoRA run without checkpointing (max_memory_reserved over max_memory_allocated, same file);
# GMLake (ASPLOS'24) reports 15% on average, up to 33%, for LLM fine-tuning on A100s, so a run may reserve more.
ALLOCATOR_SLACK = 0.05
# The headroom a 'fits' verdict keeps: a peak within 5% of the capacity is a close call, not a fit (the reserve
# beyond our H200 rows' 3-7%, a longer batch than the probe's, another library's workspace decide it).
NEAR_CAPACITY = 0.05
VLLM_RUNTIME_GIB = 0.5  # vLLM's own activations and CUDA graphs inside its share; modelled
CPU_PROCESS_GIB = 1.0  # a Python process with torch, transformers and trl imported; modelled

Method = Literal["full", "lora", "qlora"]
Sharding = Literal["none", "zero1", "zero2", "zero3", "fsdp"]


class MemoryRequest(BaseModel):
    """What decides GRPO memory on one device. Defaults follow the seed recipe."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    model: str | None = Field(
        default=None, description="Hub id, local directory or the embedded default's id; or send `shape`."
    )
    shape: ModelShape | None = Field(default=None, description="Explicit shape numbers (wins over `model`).")
    hardware: HardwareSpec
    method: Method = "full"
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        default=None,
        description="Weight dtype; default: as a recipe loads them.\n\nFloat32 on CPU and for a full fine-tune's "
        "master weights (trained under bf16/fp16 autocast); bf16 (fp16 without it) for a LoRA or QLoRA base.",
    )
    mixed_precision: bool | None = Field(
        default=None,
        description="bf16/fp16 autocast; default: on GPUs.\n\nGRPOConfig bf16/fp16: weights stay in `dtype` "
        "(float32 masters in a full fine-tune); matmuls, activations and vLLM run in half precision.",
    )
    lora_r: int = Field(default=16, gt=0)
    lora_targets: Literal["all-linear", "attention"] = "all-linear"
    optimizer: Literal["adamw", "adamw_8bit"] = "adamw"
    beta: float = Field(
        default=0.0, ge=0, description="KL coefficient; TRL 1.16's default 0.0 loads no reference model."
    )
    per_device_train_batch_size: int = Field(default=8, gt=0)
    steps_per_generation: int = Field(default=4, gt=0)
    gradient_accumulation_steps: int = Field(
        default=1,
        gt=0,
        description="Micro-batches per optimizer step; above 1, FSDP2 holds whole gradients until the last.",
    )
    prompt_length: int = Field(default=512, gt=0, description="Longest prompt, in tokens.")
    completion_length: int = Field(default=256, gt=0, description="max_completion_length")
    padding_free: bool = Field(
        default=False,
        description="GRPOConfig padding_free: sequences are packed without padding, so the training step holds "
        "`mean_sequence_length` tokens per sequence instead of the longest, and no attention mask.",
    )
    mean_sequence_length: int | None = Field(
        default=None, gt=0, description="Padding-free: mean prompt + completion tokens (default: the longest)."
    )
    logits: Literal["chunked", "full"] = Field(
        default="chunked",
        description="chunked: TRL 1.16's fused LM-head log-prob (one tile at a time); full: the batch x completion "
        "x vocab float32 logits older TRL versions and other frameworks build (to compare with their reports).",
    )
    activation_checkpointing: bool = True
    use_vllm: bool | None = Field(default=None, description="Default: on GPUs, off on CPU.")
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, lt=1)
    vllm_enable_sleep_mode: bool = False
    vllm_tensor_parallel_size: int = Field(
        default=1, gt=0, description="Colocated vLLM's tensor parallel size: each GPU holds 1/TP of its weights."
    )
    ds3_gather_for_generation: bool = Field(
        default=True,
        description="GRPOConfig's field: under ZeRO-3, generation without vLLM gathers the whole model (TRL's "
        "default); False fetches one layer at a time (slower, no full copy).",
    )
    sharding: Sharding | None = Field(
        default=None,
        description="Default: DDP if it fits each GPU, else ZeRO-3.\n\n"
        "none: DDP (whole state on each GPU); zero1/zero2/zero3: DeepSpeed (bf16 weights, float32 "
        "master weights and Adam moments sharded; ZeRO-2 also shards gradients, ZeRO-3 the weights); fsdp: FSDP2 "
        "(everything sharded in the load dtype, gathered in half precision per layer).",
    )
    offload_optimizer: bool = Field(
        default=False, description="ZeRO / FSDP CPU offload of the optimizer states (and ZeRO's master weights)."
    )
    offload_parameters: bool = Field(
        default=False, description="ZeRO-3 / FSDP CPU offload of the weights: one layer at a time on the GPU."
    )
    reference_placement: Literal["colocated", "elsewhere"] = Field(
        default="colocated",
        description="colocated: the reference model shares each trainer GPU, sharded as the policy (TRL); "
        "elsewhere: it runs on other GPUs or a server (OpenRLHF's ref group, verl's separate pool).",
    )
    gradient_as_bucket_view: bool = Field(
        default=False,
        description="DDP's gradient_as_bucket_view: without it DDP keeps a second copy of the gradients in its "
        "all-reduce buckets.",
    )
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
    weight_gather: float = Field(
        default=0.0,
        description="Whole parameters gathered at once beside the shard outside the training step (ZeRO-3 / FSDP): "
        "the whole model for PEFT's weight sync into vLLM under ZeRO-3, else one parameter.",
    )
    gradient_buckets: float = Field(
        default=0.0, description="DDP's all-reduce buckets: a second copy of the gradients (several processes)."
    )


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
    peak_sync_gib: float | None = Field(
        default=None, description="Peak while TRL syncs the weights into vLLM (None without vLLM)."
    )
    peak_gib: float = Field(
        description="What nvidia-smi shows at the peak: the tensors, the caching allocator's reserve beyond them, the "
        "CUDA context and a colocated vLLM's share."
    )
    peak_allocated_gib: float = Field(
        default=0.0, description="The tensors alone at the peak (torch.cuda.max_memory_allocated), for comparison."
    )
    fits: bool
    headroom_gib: float
    near_capacity: bool = Field(
        default=False,
        description="The peak lies within 5% of the capacity: a close call, never a fit (fragmentation or a longer "
        "batch decides).",
    )
    host_memory_gib_per_node: float = Field(
        default=0.0,
        description="Host RAM one node needs: each process loads the weights once (low_cpu_mem_usage) and keeps "
        "what it offloads.",
    )
    vllm_kv_cache_tokens: int | None = Field(default=None, description="Tokens the colocated vLLM cache can hold.")
    offloaded_to_cpu_gib: float = Field(default=0.0, description="Host RAM per process that the offload takes.")
    sharding: str = Field(default="none", description="The sharding estimated (the request's, or the one decided).")
    sharding_reason: str = Field(default="", description="Why that sharding, when it was decided here.")
    time_estimate: str | None = Field(
        default=None, description="Seconds per step by part (references/grpo-step-time.md); None when unknown."
    )
    warnings: list[str] = Field(default_factory=list, description="Reasons it cannot run besides the total.")
    remedies: list[Remedy] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """A few human-readable lines: the components, the verdict, the remedies."""
        device = "GPU" if self.target == "gpu" else "CPU RAM"
        lines = [
            f"GRPO memory per {device}: peak {self.peak_gib:.2f} GiB of {self.capacity_gib:.1f} GiB "
            f"({'fits' if self.fits else 'does NOT fit'}; headroom {self.headroom_gib:.2f} GiB"
            + ("; within 5% of capacity: a close call, not counted as a fit" if self.near_capacity else "")
            + ")",
            f"  tensors alone {self.peak_allocated_gib:.2f} GiB; "
            f"host RAM per node {self.host_memory_gib_per_node:.1f} GiB",
            f"  parameters {self.parameters_b:.3f}B, trainable {self.trainable_parameters_b:.4f}B",
            f"  training step {self.peak_train_gib:.2f} GiB, generation {self.peak_generate_gib:.2f} GiB"
            + (f", weight sync into vLLM {self.peak_sync_gib:.2f} GiB" if self.peak_sync_gib is not None else ""),
        ]
        lines.extend(f"  {name:20s} {value:8.3f} GiB" for name, value in self.components.model_dump().items())
        if self.time_estimate:
            lines.append(f"  step time: {self.time_estimate}")
        lines.extend(f"  warning: {warning}" for warning in self.warnings)
        for remedy in self.remedies:
            verdict = "fits" if remedy.fits else "still too big"
            lines.append(f"  remedy {remedy.name}: {remedy.peak_gib:.2f} GiB ({verdict}); cost: {remedy.cost}")
        lines.extend(f"  assumes: {assumption}" for assumption in self.assumptions)
        return "\n".join(lines)
