"""Held-out evaluation during training: the recipe states the interval, a real run on the tiny model logs TRL's
evaluation rows into metrics.jsonl beside the training rows, the plot draws both and the health checks read them."""

from __future__ import annotations

import json
import time

import pytest
from blind_reader import addition_samples, pass_review

from skill.data import addition_rows
from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.recipe.checking.trl_contract import recipe_grpo_config
from skill.recipe.deciding.evaluation_plan import EvaluationPlan, plan_evaluation
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.held_out import is_evaluation
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
    short = plan_evaluation({"max_steps": 8}, "cpu")  # too short for a trend: before the first step and after the last
    assert short.every_steps == 8 and "before the first step and after the last" in short.reason
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
    # A CPU generates up to 64 at once (faster per completion); 20 prompts x 8 then take 4 equal batches of 40, not
    # 8 + 8 + 4 prompts (TRL's mean of batch means would weigh the last 4 prompts as a third of the score), nor 10.
    wide = EvaluationPlan(every_steps=5, prompts=20, generations=8)
    cpu = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2, "use_cpu": True}
    assert wide.grpo_kwargs(cpu, 1)["per_device_eval_batch_size"] == 40
    assert plan.grpo_kwargs(cpu, 1)["per_device_eval_batch_size"] == 32  # at most the whole sample
    assert EvaluationPlan(every_steps=0).grpo_kwargs({}, 1) == {}


def test_the_recipe_states_the_plan_and_takes_an_override(tiny_model_dir, tmp_path):
    data = tmp_path / "addition.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    recipe = tiny_recipe(tiny_model_dir, data, steps=40)
    assert recipe.evaluation.every_steps == 5 and recipe.evaluation.reason
    assert "held-out evaluation: before step 1, every 5 steps and at the end, on 16 prompts x 2" in recipe.summary()
    config = recipe_grpo_config(recipe)  # the plan's kwargs build a real GRPOConfig
    assert config.eval_strategy == "no"  # a recipe's own config is unchanged; the worker adds evaluation
    asked = EvaluationPlan(every_steps=3, prompts=4, generations=2, reason="test")
    assert tiny_recipe(tiny_model_dir, data, 40, asked).evaluation == asked
    with pytest.raises(ValueError):
        EvaluationPlan(every_steps=-1)


def _pass_inspection() -> list[dict]:
    samples = addition_samples()
    pass_review(inspect_rewards(InspectionRequest(rewards=REWARDS, samples=[SuppliedSample(**s) for s in samples])))
    return samples


@pytest.mark.slow
def test_a_tiny_run_reports_held_out_scores_before_during_and_after(tiny_model_dir, tmp_path):
    """Every 3 steps on a 4-step run: scored at 0 and 3 by TRL, and after step 4 by the worker's final evaluation;
    the prompts the inspection read are never held out (they are half the data here)."""
    inspected = _pass_inspection()
    rows = addition_rows(64) + [{"prompt": s["prompt"], "answer": s["columns"]["answer"]} for s in inspected]
    data = tmp_path / "addition.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    plan = EvaluationPlan(every_steps=3, prompts=4, generations=2, reason="a 4-step run off the interval")
    run_grpo(RunRequest(recipe=tiny_recipe(tiny_model_dir, data, 4, plan), run_id="tiny-eval"))
    deadline = time.time() + 300
    status = run_status("tiny-eval")
    while status.state in ("starting", "running") and time.time() < deadline:
        status = run_status("tiny-eval", wait_seconds=2)
    assert status.state == "succeeded", run_logs("tiny-eval").lines[-20:]
    directory = run_dir("tiny-eval")
    seen = {json.dumps(s["prompt"]) for s in inspected}
    held_out_prompts = {json.dumps(row["prompt"]) for row in read_jsonl(directory / "heldout.jsonl")}
    assert held_out_prompts and not held_out_prompts & seen
    assert seen <= {json.dumps(row["prompt"]) for row in read_jsonl(directory / "train.jsonl")}

    metrics = read_jsonl(directory / "metrics.jsonl")
    training = [row["step"] for row in metrics if "loss" in row]
    held_out = [row for row in metrics if is_evaluation(row)]
    assert training == [1, 2, 3, 4]
    assert [row["step"] for row in held_out] == [0, 3, 4]  # before the first step, on the interval, after the last
    for row in held_out:
        assert {"eval_reward", "eval_rewards/exact_match/mean", "eval_completions/mean_length"} <= set(row)
        assert 0.0 <= row["eval_rewards/exact_match/mean"] <= 1.0 and row["time"] > 0
    assert not any(key.startswith("rewards/") for row in held_out for key in row)  # never mixed with training keys
    # run_status reports the correctness reward (not format) on 4 prompts x 2, with an interval around each mean.
    assert [(s.step, s.reward, s.completions, s.prompts) for s in status.held_out] == [
        (step, "exact_match", 8, 4) for step in (0, 3, 4)
    ]
    for score, row in zip(status.held_out, held_out, strict=True):
        low, high = score.interval_95
        assert score.mean == row["eval_rewards/exact_match/mean"] and low <= score.mean <= high and high - low > 0.2
    # each held-out prompt's own score, gathered from the rank's record: their mean is TRL's logged mean
    for row in held_out:
        per_prompt = row["held_out_prompts"]["exact_match"]
        assert len(per_prompt) == 4 and None not in per_prompt and "format" not in row["held_out_prompts"]
        assert abs(sum(per_prompt) / 4 - row["eval_rewards/exact_match/mean"]) < 1e-6
    [change] = status.held_out_change
    assert (change.reward, change.from_step, change.to_step, change.prompts) == ("exact_match", 0, 4, 4)
    assert abs(change.change - (status.held_out[-1].mean - status.held_out[0].mean)) < 1e-3
    low, high = change.interval_95
    assert change.beyond_noise == (low > 0 or high < 0)
    log = "\n".join(run_logs("tiny-eval", lines=500).lines)
    assert "held-out eval at step 3" in log and f"held-out: {status.held_out[0].describe()} -> " in log
    assert f"paired: {change.describe()}" in log
    assert "rewards/exact_match/mean" in curve_keys(metrics)
    assert (directory / "reward_curve.png").stat().st_size > 1000
    card = (directory / "final" / "README.md").read_text()
    assert f"| 4 | exact_match | {status.held_out[-1].mean:.3f} |" in card
    assert "| training reward | first-2 steps mean | last-2 steps mean |" in card  # 4 steps: halves, no overlap
