"""Held-out evaluation during training: the recipe states the interval, a real run on the tiny model logs TRL's
evaluation rows into metrics.jsonl beside the training rows, the plot draws both and the health checks read them."""

from __future__ import annotations

import json
import time

import pytest
from new_answers import addition_samples, pass_review

from skill.data import addition_rows
from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.evaluation_plan import EvaluationPlan, plan_evaluation
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.plots import curve_keys
from skill.runs.store import read_jsonl, run_dir

REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
]


def tiny_recipe(model_dir, data, steps, evaluation=None):
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
            overrides={
                "per_device_train_batch_size": 8,
                "gradient_accumulation_steps": 1,
                "max_completion_length": 8,
                "logging_steps": 1,
                "learning_rate": 1e-5,
                "beta": 0.0,
            },
            max_steps=steps,
            evaluation=evaluation,
        )
    )


def test_the_default_interval_follows_run_length_and_hardware():
    plan = plan_evaluation({"max_steps": 40}, "cpu")
    assert (plan.every_steps, plan.prompts, plan.generations) == (5, 16, 2)
    assert "8 held-out points" in plan.reason
    assert plan_evaluation({"max_steps": 400}, "gpu").every_steps == 50
    assert plan_evaluation({"max_steps": 400}, "gpu").prompts == 32
    assert plan_evaluation({"max_steps": 8}, "cpu").every_steps == 0  # too short for a trend: before/after only
    kwargs = plan.grpo_kwargs({"per_device_train_batch_size": 8}, world_size=1)
    assert kwargs == {
        "eval_strategy": "steps",
        "eval_steps": 5,
        "eval_on_start": True,
        "num_generations_eval": 2,
        "per_device_eval_batch_size": 8,
    }
    # The eval batch is a whole number of groups (TRL refuses otherwise), at most the training generation batch.
    odd = EvaluationPlan(every_steps=2, prompts=4, generations=3).grpo_kwargs({"per_device_train_batch_size": 8}, 1)
    assert odd["per_device_eval_batch_size"] == 6
    demo = plan.grpo_kwargs({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}, world_size=1)
    assert demo["per_device_eval_batch_size"] == 16  # 32 completions in 2 generate calls, as 2 training steps
    assert plan.grpo_kwargs({"per_device_train_batch_size": 64}, world_size=1)["per_device_eval_batch_size"] == 32
    assert EvaluationPlan(every_steps=0).grpo_kwargs({}, 1) == {}


def test_the_recipe_states_the_plan_and_takes_an_override(tiny_model_dir, tmp_path):
    data = tmp_path / "addition.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    recipe = tiny_recipe(tiny_model_dir, data, steps=40)
    assert recipe.evaluation.every_steps == 5 and recipe.evaluation.reason
    assert "held-out evaluation: every 5 steps on 16 prompts x 2" in recipe.summary()
    config = recipe.to_grpo_config()  # the plan's kwargs build a real GRPOConfig
    assert config.eval_strategy == "no"  # a recipe's own config is unchanged; the worker adds evaluation
    asked = EvaluationPlan(every_steps=3, prompts=4, generations=2, reason="test")
    assert tiny_recipe(tiny_model_dir, data, 40, asked).evaluation == asked
    with pytest.raises(ValueError):
        EvaluationPlan(every_steps=-1)


def _pass_inspection():
    samples = [SuppliedSample(**sample) for sample in addition_samples()]
    pass_review(inspect_rewards(InspectionRequest(rewards=REWARDS, samples=samples)))


@pytest.mark.slow
def test_a_tiny_run_logs_heldout_rows_to_metrics(tiny_model_dir, tmp_path):
    data = tmp_path / "addition.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    _pass_inspection()
    plan = EvaluationPlan(every_steps=2, prompts=4, generations=2, reason="every other step on a 4-step run")
    run_grpo(RunRequest(recipe=tiny_recipe(tiny_model_dir, data, 4, plan), run_id="tiny-eval"))
    deadline = time.time() + 300
    status = run_status("tiny-eval")
    while status.state in ("starting", "running") and time.time() < deadline:
        status = run_status("tiny-eval", wait_seconds=2)
    assert status.state == "succeeded", run_logs("tiny-eval").lines[-20:]
    metrics = read_jsonl(run_dir("tiny-eval") / "metrics.jsonl")
    training = [row["step"] for row in metrics if "loss" in row]
    held_out = [row for row in metrics if "eval_loss" in row]
    assert training == [1, 2, 3, 4]
    assert [row["step"] for row in held_out] == [0, 2, 4]  # before the first step, then every 2
    for row in held_out:
        assert {"eval_reward", "eval_rewards/exact_match/mean", "eval_completions/mean_length"} <= set(row)
        assert 0.0 <= row["eval_rewards/exact_match/mean"] <= 1.0 and row["time"] > 0
    assert not any(key.startswith("rewards/") for row in held_out for key in row)  # never mixed with training keys
    assert "held-out eval at step 2" in "\n".join(run_logs("tiny-eval", lines=500).lines)
    assert "rewards/exact_match/mean" in curve_keys(metrics)
    assert (run_dir("tiny-eval") / "reward_curve.png").stat().st_size > 1000
    card = (run_dir("tiny-eval") / "final" / "README.md").read_text()
    assert "| exact_match |" in card
