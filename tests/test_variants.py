"""Variants: the table's deltas, their precedence, and one real GRPO step per variant on CPU (the loss variants
train on colocated vLLM instead: tests/target/test_loss_variants.py)."""

from __future__ import annotations

import math

import pytest
from recipe_matrix import LOSS_METRICS

from skill.data import addition_rows
from skill.hardware.specs import HardwareSpec
from skill.recipe.checking.trl_contract import recipe_grpo_config
from skill.recipe.deciding.variants import LOSS_VARIANTS, VARIANTS, apply_variants, select_variants
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.registry import build_reward_functions
from skill.rewards.spec import RewardSpec

REWARDS = [
    RewardSpec(name="rewards_for_tests:just_a_number", role="format", weight=0.2),
    RewardSpec(name="rewards_for_tests:says_the_answer", role="correctness", weight=1.0),
]
# Small enough for a CPU step in about a second; 16 completions per step so that every variant's
# group size (8, or 16 for more_exploration) fits whole groups.
SMALL = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 2,
    "max_completion_length": 8,
    "logging_steps": 1,
}


def cpu_recipe(model_dir, max_steps=1, **changes):
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=REWARDS,
            dataset=DatasetSpec(name="embedded:addition", columns=["answer"]),
            overrides=SMALL,
            max_steps=max_steps,
            **changes,
        )
    )


def train_one_step(recipe, model_dir, output_dir):
    from datasets import Dataset
    from trl import GRPOTrainer

    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=build_reward_functions(recipe.rewards),
        args=recipe_grpo_config(recipe, output_dir=str(output_dir)),
        train_dataset=Dataset.from_list(addition_rows(32)),
    )
    trainer.train()
    return trainer


def test_every_symptom_maps_to_a_variant():
    for variant in VARIANTS:
        for symptom in variant.symptoms:
            assert [v.name for v in select_variants([], [symptom])[0]] == [variant.name]


def test_conflicts_resolve_by_precedence_and_report_what_was_dropped():
    config = {
        "loss_type": "dapo",
        "scale_rewards": "group",
        "epsilon": 0.2,
        "epsilon_high": None,
        "mask_truncated_completions": False,
        "importance_sampling_level": "token",
    }
    applied = apply_variants(config, [], ["length_growth_without_accuracy", "instability", "entropy_collapse"])
    assert applied.variants == ["gspo", "dr_grpo", "dapo"]
    assert config["loss_type"] == "grpo" and config["importance_sampling_level"] == "sequence"
    assert config["epsilon_high"] == 4e-4  # GSPO's clip range, not DAPO's 0.28
    assert config["scale_rewards"] == "none"  # Dr. GRPO's non-conflicting delta survives
    assert config["mask_truncated_completions"] is True  # DAPO's non-conflicting delta survives
    dropped = " ".join(applied.dropped)
    assert "dr_grpo: loss_type='dr_grpo' (overruled by gspo)" in dropped
    assert "dapo: epsilon_high=0.28 (overruled by gspo)" in dropped
    assert any(other.kind == "reward" for other in applied.other)


def test_scaled_deltas_follow_the_current_value():
    config = {"beta": 0.01, "learning_rate": 5e-7}
    apply_variants(config, ["kl_control"], [])
    assert config == {"beta": 0.04, "learning_rate": 2.5e-7}


@pytest.mark.slow
@pytest.mark.parametrize("variant", [variant.name for variant in VARIANTS if variant not in LOSS_VARIANTS])
def test_variant_delta_trains_one_real_step(variant, tiny_model_dir, tmp_path):
    recipe = cpu_recipe(tiny_model_dir, variant=variant)
    assert recipe.variant is not None and recipe.variant.variants == [variant]
    trainer = train_one_step(recipe, tiny_model_dir, tmp_path)
    # The trainer really ran with the variant's values, not just accepted them.
    for field in recipe.variant.changes:
        assert getattr(trainer.args, field) == recipe.trl[field], field
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert math.isfinite(logged["loss"])
    assert "rewards/says_the_answer/mean" in logged


def test_every_loss_trl_ships_has_a_variant():
    from trl import GRPOConfig

    shipped = {"grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"}  # GRPOConfig.loss_type docs
    assert all(f"'{loss}'" in GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"] for loss in shipped)
    reachable = {delta.value for v in VARIANTS for delta in v.config if delta.field == "loss_type"} | {"dapo"}
    assert reachable - {"dapo"} >= shipped - {"dapo"} and set(LOSS_METRICS) == {v.name for v in LOSS_VARIANTS}


@pytest.mark.parametrize("symptom", ["entropy_collapse", "many_truncated_completions"])
def test_a_suggested_reward_passes_the_reward_mix_check_with_the_rewards_it_joins(symptom):
    """The issue: the DAPO variant suggested a shaping weight of 1.0, which the reward-mix check then warned about
    (shaping reaching correctness). The suggestion is weighed against the request's own rewards."""
    from skill.rewards.composite import check_composite

    rewards = [
        RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "answer_tag"}),
        RewardSpec(name="exact_match", role="correctness", weight=1.0),
        RewardSpec(name="length_penalty", role="shaping", weight=0.2),
    ]
    recipe = emit_grpo_config(
        RecipeRequest(
            hardware=HardwareSpec(gpu_model="H100"),
            method="lora",
            rewards=rewards,
            dataset=DatasetSpec(name="embedded:addition"),
            symptoms=[symptom],
        )
    )
    suggested = [other.reward for other in recipe.variant.other if other.reward is not None]
    assert suggested and all(0 < reward.weight <= 0.4 for reward in suggested)
    assert all(check_composite([*rewards, reward]).ok for reward in suggested)
