"""GRPORecipe: the validated, self-explaining GRPO configuration this project emits.

A recipe carries the GRPOConfig kwargs (``trl``) and everything around them a run needs: the
model and how it is adapted, the data, the rewards, the target hardware and launch layout, the
variant applied, one reason per chosen value, and where it came from. It is data: what is made from it lives
with its maker (the GRPOConfig: ``trl_contract.recipe_grpo_config``; the memory request:
``memory_request``; the script: ``script.render_script``; the launch files: ``launch``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer, model_validator

from skill.absolute_paths import LocalModelOrNamed
from skill.data import DatasetSpec
from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.hardware.layout import LaunchPlan
from skill.hardware.specs import HardwareSpec
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.recipe.deciding.evaluation_plan import EvaluationPlan
from skill.recipe.deciding.variants import AppliedVariants
from skill.rewards.spec import RewardSpec

Method = Literal["full", "lora", "qlora"]


class ModelSpec(BaseModel):
    """The policy model."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    name: LocalModelOrNamed = Field(
        default=EMBEDDED_MODEL_ID,
        description=f"Hugging Face id, local directory, or '{EMBEDDED_MODEL_ID}' (the embedded default).",
    )
    parameters_billions: float | None = Field(
        default=None,
        gt=0,
        description="Size in billions, when its config.json cannot be read (it wins when sent).",
    )
    architecture: str | None = Field(default=None, description="Architecture name (e.g. 'LlamaForCausalLM').")


class PeftSpec(BaseModel):
    """LoRA / QLoRA adapter settings (peft.LoraConfig)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    r: int = Field(default=16, ge=1, description="LoRA rank.")
    lora_alpha: int = Field(default=32, ge=1, description="LoRA scaling numerator (alpha / r scales the update).")
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    target_modules: str | list[str] = Field(default="all-linear", description="Modules to adapt.")
    quantize_4bit: bool = Field(default=False, description="Load the base in NF4 (QLoRA).")

    def to_peft_config(self) -> Any:
        """A real ``peft.LoraConfig``."""
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=self.target_modules,
            task_type="CAUSAL_LM",
        )


class RecipeReason(BaseModel):
    """Why one field has its value."""

    field: str
    value: Any = Field(default=None, description="Its value; left out where it is the recipe's trl[field].")
    source: Literal["seed", "hardware", "method", "task", "base", "variant", "override", "rewards", "dataset"]
    reason: str


class ChangeFromBase(BaseModel):
    """One field the recipe changes from the caller's own run (``base_config``), and why."""

    field: str
    yours: Any = Field(description="Your run's value: what your config sets, else TRL's default (stated: false).")
    stated: bool = Field(default=True, description="Whether your config sets it; false: yours is TRL's default.")
    recipe: Any = Field(description="The recipe's value.")
    reason: str


class Provenance(BaseModel):
    """Where a recipe came from, and what it was checked against."""

    emitted_by: str = Field(description="grpo-rlvr version.")
    trl_version: str
    transformers_version: str
    torch_version: str
    validation: list[str] = Field(
        default_factory=list, description="How the recipe was proven acceptable to the installed TRL."
    )
    inspection_id: str | None = Field(default=None, description="Passed reward inspection this recipe relies on.")
    policy_samples_of: str | None = Field(
        default=None, description="Only a read of this model's own samples opens the gate (require_policy_samples)."
    )
    reward_review: str | None = Field(
        default=None, description="How that inspection was reviewed: 'reviewed: ...' or 'reward not reviewed: ...'."
    )
    route_decision: str | None = Field(default=None, description="route_check decision id, when one was made.")
    memory_estimate: dict[str, Any] | None = Field(default=None, description="Memory estimate summary, when made.")
    time_estimate: str | None = Field(
        default=None,
        description="Step time, run time, GPU-hours (and money when priced): references/grpo-step-time.md.",
    )


class GRPORecipe(BaseModel):
    """A GRPO training recipe, validated against the installed TRL."""

    model: ModelSpec
    method: Method
    peft: PeftSpec | None = Field(default=None, description="Adapter settings; None for a full fine-tune.")
    dataset: DatasetSpec
    rewards: list[RewardSpec]
    trl: dict[str, Any] = Field(description="GRPOConfig keyword arguments, every relied-on value stated.")
    hardware: HardwareSpec
    launch: LaunchPlan
    variant: AppliedVariants | None = None
    evaluation: EvaluationPlan | None = Field(
        default=None,
        description="Held-out evaluation: before the first step, every N steps and after the last (None: none).",
    )
    reasons: list[RecipeReason] = Field(
        default_factory=list,
        description="Why each field has its value (a seed value's reason abridged: grpo://references/grpo-fields.md).",
    )
    changes_from_base: list[ChangeFromBase] | None = Field(
        default=None,
        description="With base_config: what to change in your run, each with its reason (not repeated in reasons); "
        "every other field you set is kept.",
    )
    provenance: Provenance

    @model_validator(mode="before")
    @classmethod
    def _reason_values(cls, data: Any) -> Any:
        """A reason sent without its value (as the recipe is written) takes the trl field's."""
        if isinstance(data, dict) and isinstance(data.get("reasons"), list) and isinstance(data.get("trl"), dict):
            trl = data["trl"]
            data = {
                **data,
                "reasons": [
                    {**reason, "value": trl[reason["field"]]}
                    if isinstance(reason, dict) and "value" not in reason and reason.get("field") in trl
                    else reason
                    for reason in data["reasons"]
                ],
            }
        return data

    @model_serializer(mode="wrap")
    def _without_repeated_values(self, handler: Any) -> Any:
        """The recipe as written: a reason's value is left out where it repeats trl[field] (read back by
        ``_reason_values``), which keeps a recipe within what an agent reads in one result."""
        data = handler(self)
        if isinstance(data, dict) and isinstance(data.get("reasons"), list):
            trl = data.get("trl") or {}
            for reason in data["reasons"]:
                if (
                    isinstance(reason, dict)
                    and reason.get("field") in trl
                    and reason.get("value") == trl[reason["field"]]
                ):
                    reason.pop("value", None)
        return data

    @property
    def grpo(self) -> GRPOFields:
        """The GRPOConfig keywords read as TRL reads them: a field left out has TRL's default."""
        return GRPOFields(self.trl)

    def summary(self) -> str:
        """A few human-readable lines: what will run where, and why."""
        trl = self.grpo
        lines = [
            f"GRPO recipe: {self.model.name} ({self.method}) on {describe_hardware(self.hardware)}",
            f"  launch: {self.launch.training_processes} training process(es)"
            + (f", vLLM server on {self.launch.vllm_server_gpus} GPU(s)" if self.launch.vllm_server_gpus else ""),
            f"  generation: num_generations={trl.num_generations} "
            f"temperature={trl.temperature} max_completion_length={trl.max_completion_length} "
            f"use_vllm={trl.use_vllm}" + (f" ({trl.vllm_mode})" if trl.use_vllm else ""),
            f"  optimisation: lr={trl.learning_rate} beta={trl.beta} loss_type={trl.loss_type} "
            f"batch={trl.per_device_train_batch_size}x{trl.gradient_accumulation_steps}",
            "  rewards: " + ", ".join(f"{r.name} ({r.role}, w={r.weight:g})" for r in self.rewards),
        ]
        if self.variant and self.variant.variants:
            lines.append("  variants: " + ", ".join(self.variant.variants))
        if self.evaluation and self.evaluation.every_steps:
            plan = self.evaluation
            lines.append(
                f"  held-out evaluation: before step 1, every {plan.every_steps} steps and at the end, on "
                f"{plan.prompts} prompts x {plan.generations}"
            )
        if self.provenance.time_estimate:
            lines.append(f"  time: {self.provenance.time_estimate}")
        lines.append("  reasons:")
        lines.extend(f"    {reason.field}={reason.value!r}: {reason.reason}" for reason in self.reasons)
        lines.extend(f"  note: {note}" for note in self.provenance.validation)
        return "\n".join(lines)


def load_recipe(path: Path) -> GRPORecipe:
    """The recipe in a file (one a user saved from emit_grpo_config, or a run's ``recipe.json``): the one reader of
    recipe files, so a missing, torn or foreign file says what is wrong wherever it is read."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SkillError(
            f"Cannot read the recipe {path}: {exc.strerror or exc}.",
            "Send the path of a recipe file emit_grpo_config wrote (grpo-rlvr config --output json > recipe.json).",
        ) from None
    try:
        return GRPORecipe.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise SkillError(
            f"{path} is not a recipe this version reads ({exc.error_count()} problem(s); first: {where}: "
            f"{first['msg']}).",
            "Emit it again with emit_grpo_config, or mend the field named.",
        ) from None


def describe_hardware(hardware: HardwareSpec) -> str:
    """One line naming the target.

    >>> describe_hardware(HardwareSpec(gpu_model="H100", gpus_per_node=8, nodes=2))
    '2 node(s) x 8 x H100 (79.6 GiB)'
    >>> describe_hardware(HardwareSpec(accelerator="cpu"))
    'CPU'
    """
    if hardware.accelerator == "cpu":
        return "CPU"
    return (
        f"{hardware.nodes} node(s) x {hardware.gpus_per_node} x "
        f"{hardware.gpu_model or 'GPU'} ({hardware.memory_gib_per_gpu} GiB)"
    )


def target_is_this_machine(hardware: HardwareSpec) -> bool:
    """True when this machine can build the config as the target would (a CPU recipe anywhere; a GPU
    recipe only where CUDA is available)."""
    if hardware.accelerator == "cpu":
        return True
    import torch

    return bool(torch.cuda.is_available())
