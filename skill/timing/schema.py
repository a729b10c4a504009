"""Step-time contracts: what decides the time of a GRPO step (``StepTimeRequest``) and the estimate
(``StepTimeEstimate``: seconds per step by part, the run's total, GPU-hours and, given a price, money).

May import: ``hardware.specs``, ``models.shapes``, ``errors``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.models.shapes import ModelShape

Generation = Literal["vllm_colocate", "vllm_server", "transformers"]


class StepTimeRequest(BaseModel):
    """What decides the time of one GRPO optimizer step (TRL 1.16's GRPOTrainer, one generation per step)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    shape: ModelShape
    hardware: HardwareSpec
    method: Literal["full", "lora", "qlora"] = "full"
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="bfloat16", description="What the matmuls run in (bf16 autocast or weights; float32 on CPU)."
    )
    completions_per_step: int = Field(gt=0, description="Completions generated and trained on per optimizer step.")
    micro_batch: int = Field(default=8, gt=0, description="per_device_train_batch_size (padding is per micro-batch).")
    prompt_tokens: float = Field(gt=0, description="Mean prompt length in tokens.")
    max_completion_length: int = Field(gt=0)
    completion_tokens: list[int] | None = Field(
        default=None, description="Measured completion lengths (a probe's): the longest decides when a batch ends."
    )
    mean_completion_tokens: float | None = Field(
        default=None, gt=0, description="Mean completion length when only the mean is known (a published row)."
    )
    padded: bool = Field(default=True, description="TRL pads each micro-batch to its longest; packed: no padding.")
    reference_forward: bool = Field(default=False, description="beta > 0: a reference-model forward per token.")
    old_logp_forward: bool = Field(default=False, description="A forward for the old log-probs (TRL with vLLM).")
    activation_checkpointing: bool = False
    generation: Generation = "vllm_colocate"
    generation_weights: Literal["bfloat16", "fp8", "bnb-4bit"] = Field(
        default="bfloat16",
        description="How the vLLM engine stores the weights it decodes with: TRL starts it in bf16; Unsloth's "
        "fast_inference in bitsandbytes 4-bit under load_in_4bit, in FP8 under load_in_fp8.",
    )
    generation_rounds: int = Field(
        default=1,
        gt=0,
        description="Generation calls one after another per step: TRL 1.16 generates a step's completions at once; "
        "TRL 0.14, before steps_per_generation, generated once per micro-batch (gradient_accumulation_steps calls).",
    )
    vllm_tensor_parallel_size: int = Field(default=1, gt=0)
    vllm_server_gpus: int = Field(default=0, ge=0)
    vllm_kv_cache_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens of KV cache one colocated vLLM engine holds (the memory estimate's, at the recipe's "
        "vllm_gpu_memory_utilization): an engine whose share of sequences needs more decodes them in waves. None: "
        "not limiting.",
    )
    group_size: int = Field(
        default=1,
        gt=0,
        description="Completions per prompt (num_generations): vLLM's prefix cache (on by default) holds a group's "
        "prompt once.",
    )
    vllm_sleep_mode: bool = False
    training_processes: int = Field(default=1, gt=0)
    sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] = "none"
    max_steps: int | None = Field(default=None, gt=0)
    evaluation_every: int | None = Field(default=None, gt=0, description="Held-out evaluation every N steps.")
    evaluation_completions: int = Field(default=0, ge=0, description="Completions one held-out evaluation samples.")
    save_steps: int | None = Field(default=None, gt=0)
    price_per_gpu_hour: float | None = Field(default=None, description="Money per GPU-hour; no price is built in.")

    @model_validator(mode="after")
    def _sensible(self) -> StepTimeRequest:
        if self.price_per_gpu_hour is not None and self.price_per_gpu_hour < 0:
            raise SkillError(
                f"price_per_gpu_hour={self.price_per_gpu_hour} is negative.",
                "Send the price of one GPU-hour (>= 0), or leave it out for no money figure.",
            )
        sequence = self.prompt_tokens + self.max_completion_length
        if self.vllm_kv_cache_tokens is not None and self.vllm_kv_cache_tokens < sequence:
            raise SkillError(
                f"The vLLM engine's KV cache holds {self.vllm_kv_cache_tokens:,} tokens, fewer than one sequence's "
                f"{sequence:,.0f}: vLLM would refuse to start, so no step time can be estimated.",
                "Raise vllm_gpu_memory_utilization (or shorten max_completion_length) until the memory estimate "
                "leaves the KV cache room for a sequence.",
            )
        if self.generation == "vllm_server" and self.vllm_server_gpus < 1:
            raise SkillError(
                "A vLLM server needs GPUs of its own in this estimate.",
                "Send vllm_server_gpus >= 1, or generation 'vllm_colocate'.",
            )
        return self


class StepTimeEstimate(BaseModel):
    """Seconds per GRPO step by part, the run's total, GPU-hours and (given a price) money."""

    generation_s: float = Field(description="Prefill and decode of the step's completions.")
    training_s: float = Field(description="Policy forward + backward, reference and old-log-prob forwards.")
    weight_sync_s: float = Field(description="Weights into vLLM (NCCL / in place / sleep-mode reload), ZeRO-3 gathers.")
    overhead_s: float = Field(default=0.0, description="Per-step work besides the model (CPU: TRL's own).")
    fixed_per_step_s: float = Field(description="Start, load, vLLM start, evaluations, checkpoints over max_steps.")
    seconds_per_step: float = Field(description="The point: the geometric middle of the low and high ends.")
    low_seconds_per_step: float = Field(description="Every spanned constant at its fast end.")
    high_seconds_per_step: float = Field(description="Every spanned constant at its slow end.")
    largest_part: str = Field(default="", description="The part that takes the most of a step, with its share.")
    largest_uncertainty: str = Field(
        default="", description="The spanned constants behind the part whose ends lie furthest apart."
    )
    completions_per_step: int = Field(default=0, description="Completions a step generates and trains on.")
    evaluation_s: float = Field(default=0.0, description="One held-out evaluation (generation of its completions).")
    evaluations: int = Field(default=0, description="Held-out evaluations over max_steps (before step 1 included).")
    steps: int | None = None
    total_s: float | None = None
    gpus: int = Field(description="GPUs billed (0 on a CPU target).")
    gpu_hours: float | None = None
    cost: float | None = Field(default=None, description="gpu_hours x price_per_gpu_hour, when a price was sent.")
    assumptions: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line: seconds per step with its range and largest part, by part, the run's time, GPU-hours and money
        when priced, and the same per 1,000 completions, which compares hardware that trains on different numbers
        of completions a step.

        >>> estimate = StepTimeEstimate(generation_s=3.0, training_s=1.5, weight_sync_s=0.1, fixed_per_step_s=0.4,
        ...     seconds_per_step=5.0, low_seconds_per_step=4.2, high_seconds_per_step=6.0,
        ...     largest_part="generation 60%", largest_uncertainty="decode bandwidth 52-72%", completions_per_step=256,
        ...     steps=100, total_s=500.0, gpus=8, gpu_hours=1.11, cost=2.22)
        >>> print(estimate.summary())  # doctest: +NORMALIZE_WHITESPACE
        ~5.0 s/step, 4.2-6.0 (largest: generation 60%; widest: decode bandwidth 52-72%): generation 3.0, training
        1.5, sync 0.1, fixed 0.4 x 100 steps = 8.3 min; 1.11 GPU-hours; 2.22 at the price sent; 256 completions a
        step, per 1,000: 20 s, 0.0434 GPU-hours, 0.09
        """
        parts = f"generation {self.generation_s:.1f}, training {self.training_s:.1f}, sync {self.weight_sync_s:.1f}"
        if self.overhead_s:
            parts += f", TRL {self.overhead_s:.1f}"
        line = f"~{self.seconds_per_step:.1f} s/step"
        notes = [f"largest: {self.largest_part}"] if self.largest_part else []
        if self.largest_uncertainty:
            line += f", {self.low_seconds_per_step:.1f}-{self.high_seconds_per_step:.1f}"
            notes.append(f"widest: {self.largest_uncertainty}")
        if notes:
            line += f" ({'; '.join(notes)})"
        line += f": {parts}, fixed {self.fixed_per_step_s:.1f}"
        if self.steps and self.total_s is not None:
            line += f" x {self.steps} steps = {describe_seconds(self.total_s)}"
        if self.gpu_hours is not None and self.gpus:
            line += f"; {self.gpu_hours:.3g} GPU-hours"
        if self.cost is not None:
            line += f"; {self.cost:,.2f} at the price sent"
        if self.completions_per_step and self.steps and self.total_s is not None:
            per = 1000 / (self.completions_per_step * self.steps)  # of the run, start-up included
            line += (
                f"; {self.completions_per_step} completions a step, per 1,000: {describe_seconds(self.total_s * per)}"
            )
            if self.gpu_hours is not None and self.gpus:
                line += f", {self.gpu_hours * per:.3g} GPU-hours"
            if self.cost is not None:
                line += f", {self.cost * per:,.2f}"
        return line


def describe_seconds(seconds: float) -> str:
    """A duration for a person.

    >>> describe_seconds(42), describe_seconds(500), describe_seconds(7200 * 3)
    ('42 s', '8.3 min', '6.0 h')
    """
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
