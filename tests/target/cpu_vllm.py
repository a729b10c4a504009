"""The CPU vLLM recipes the target tests run: the tiny Llama, the addition data, a passed inspection."""

from __future__ import annotations

import json
from pathlib import Path

from blind_reader import addition_samples, pass_review

from skill.data import addition_rows
from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.recipe.deciding.evaluation_plan import EvaluationPlan
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
]


def addition_file(directory: Path, rows: int = 40) -> Path:
    dataset = directory / "addition.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(rows)))
    return dataset


def pass_inspection() -> None:
    samples = [SuppliedSample(**sample) for sample in addition_samples()]
    pass_review(inspect_rewards(InspectionRequest(rewards=REWARDS, samples=samples)))


def vllm_recipe(
    model_dir: Path, dataset: Path, steps: int, variant: str | None = None, lean: bool = False, **overrides
):
    """A full fine-tune generating with colocated vLLM; ``lean`` leaves out held-out scoring and the tracker, for
    tests of training alone."""
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(dataset), columns=["answer"]),
            overrides={
                "per_device_train_batch_size": 8,
                "gradient_accumulation_steps": 1,
                "max_completion_length": 8,
                "logging_steps": 1,
                "learning_rate": 1e-2,
                "weight_decay": 0.1,  # moves every weight under flat rewards (test_vllm_colocate)
                "beta": 0.0,
                "use_vllm": True,
                "vllm_mode": "colocate",
                "warmup_steps": 0,  # the seed's warmup gives step 1 a learning rate of 0
                "vllm_gpu_memory_utilization": 0.15,  # on CPU a share of host RAM for the KV cache
                **overrides,
            },
            max_steps=steps,
            variant=variant,
            evaluation=EvaluationPlan(every_steps=0, reason="not under test") if lean else None,
            report_to="none" if lean else None,
        )
    )
