"""The recipe emit_grpo_config gives a CPU target learns in a short run: no override, the embedded model, 10 steps.

The seed's GPU values (lr 5e-7, beta 0.01, 4 groups of 8, 256 tokens) left a 10-step CPU run flat; the CPU
target's short-run values (skill.recipe.seed.CPU_SHORT_RUN) must lift the correctness reward from the first
three steps to the last three. The rewards are the composite the skill recommends (correctness 1.0, format 0.2).
The run is deterministic on CPU (the same curve twice). Measured 2026-12-01 with seeds 3407 / 1 / 2: 0.208 -> 0.229,
0.041 -> 0.146, 0.083 -> 0.354 (first-3 -> last-3); lr 3e-5 gave 0.125 -> 0.417, 0.021 -> 0.062, 0.083 -> 0.646, no
better on balance, so the CPU default stays 1e-5.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from skill.data import ADDITION_DATASET_ID, addition_rows
from skill.hardware.specs import HardwareSpec
from skill.inspection.gate import record_review
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.recipe.seed import CPU_SHORT_RUN
from skill.rewards.spec import RewardSpec
from skill.runs.jobs import RunRequest, run_grpo, run_status
from skill.runs.store import read_jsonl

STEPS = 10
REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(
        name="exact_match", role="correctness", weight=1.0, params={"extract": "last_number", "answer_column": "answer"}
    ),
]
CORRECTNESS = "rewards/exact_match/mean"


def accept_rewards_unread() -> None:
    """The gate opens only on an inspection; this test is about learning, so it accepts the rewards unread, stamped."""
    samples = [
        SuppliedSample(
            prompt=row["prompt"], completion=row["answer"] if i % 3 else "no idea", columns={"answer": row["answer"]}
        )
        for i, row in enumerate(addition_rows(60))
    ]
    report = inspect_rewards(InspectionRequest(rewards=REWARDS, samples=samples))
    review = ReviewRequest(
        report_id=report.id, reviewer="test", accept_unread=True, accept_unread_reason="a test of learning speed"
    )
    assert record_review(review).verdict == "accepted_unread"


def test_a_cpu_target_takes_the_short_run_values_and_a_gpu_target_the_seed():
    def emit(hardware: HardwareSpec):
        return emit_grpo_config(
            RecipeRequest(
                model=ModelSpec(),
                hardware=hardware,
                method="full" if hardware.accelerator == "cpu" else "lora",
                rewards=REWARDS,
                dataset=DatasetSpec(name=ADDITION_DATASET_ID, columns=["answer"], max_prompt_tokens=64),
            )
        )

    cpu, gpu = emit(HardwareSpec(accelerator="cpu")), emit(HardwareSpec(gpu_model="H100"))
    reasons = {reason.field: reason for reason in cpu.reasons}
    for field, (value, _why) in CPU_SHORT_RUN.items():
        assert cpu.trl[field] == value and reasons[field].source == "hardware" and "CPU" in reasons[field].reason
        assert gpu.trl[field] != value, field
    assert gpu.trl["beta"] == 0.01 and gpu.trl["max_completion_length"] == 256 and gpu.trl["learning_rate"] == 5e-6
    # 16 completions per optimizer step: whole groups of 8, as the group arithmetic demands.
    assert cpu.trl["per_device_train_batch_size"] * cpu.trl["gradient_accumulation_steps"] == 16


@pytest.mark.slow
def test_the_emitted_cpu_recipe_lifts_correctness_within_ten_steps():
    accept_rewards_unread()
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=REWARDS,
            dataset=DatasetSpec(name=ADDITION_DATASET_ID, columns=["answer"]),
            max_steps=STEPS,
        )
    )
    assert not [
        reason.field for reason in recipe.reasons if reason.source == "override" and reason.field != "max_steps"
    ]
    started = time.perf_counter()
    status = run_grpo(RunRequest(recipe=recipe))
    while status.state in ("starting", "running"):
        status = run_status(status.run_id, wait_seconds=10)
    seconds = time.perf_counter() - started
    assert status.state == "succeeded", status.reason
    rows = [row for row in read_jsonl(Path(status.paths["metrics.jsonl"])) if CORRECTNESS in row]
    curve = [row[CORRECTNESS] for row in rows]
    assert len(curve) == STEPS, curve
    first, last = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    print(f"correctness first-3 {first:.3f} -> last-3 {last:.3f} in {seconds:.0f} s; curve {curve}")
    # The criterion. A step scores 2 prompts x 8 completions, so prompt difficulty moves single steps a lot
    # (measured under load: 0.19 0.06 0.38 0.44 0.69 0.63 0.50 0.44 0.06 ...): three-step means, not single steps.
    assert last > first, curve
