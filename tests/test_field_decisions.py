"""Every field the installed GRPOConfig adds over TrainingArguments is decided once: set by the recipe or left to
TRL's default, each with its own reason (skill.recipe.field_decisions). Version-agnostic: the same check runs under
the target's transformers in tests/target/test_field_decisions_target.py."""

from __future__ import annotations

from skill.hardware.specs import HardwareSpec
from skill.recipe import field_decisions
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.field_decisions import SET, TRAINING_ARGUMENTS, grpo_added_fields, shared_reasons, undecided_fields
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec


def test_every_grpo_field_is_decided_with_its_own_reason():
    assert len(grpo_added_fields()) >= 77  # TRL 1.16: 77 fields over TrainingArguments
    assert undecided_fields() == []
    assert shared_reasons() == []


def test_a_field_missing_from_the_table_is_named(monkeypatch):
    monkeypatch.setattr(field_decisions, "LEFT", {k: v for k, v in field_decisions.LEFT.items() if k != "delta"})
    monkeypatch.setattr(field_decisions, "SET", {k: v for k, v in SET.items() if k != "bf16"})
    assert undecided_fields() == ["bf16", "delta"]


def test_a_reason_shared_by_two_fields_is_named(monkeypatch):
    monkeypatch.setattr(field_decisions, "SET", {**SET, "top_k": SET["top_p"]})
    assert SET["top_p"] in shared_reasons() and "top_k is both set and left" in shared_reasons()


def test_every_field_a_recipe_sets_is_in_the_set_table():
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100"),
            method="full",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="addition.jsonl", columns=["answer"]),
            max_steps=10,
        )
    )
    renamed = {"activation_checkpointing": "gradient_checkpointing"}  # transformers 5.23's name
    assert {renamed.get(name, name) for name in recipe.trl} <= set(SET)
    assert set(TRAINING_ARGUMENTS) <= set(SET) | set(field_decisions.LEFT)
