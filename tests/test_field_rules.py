"""One rule per GRPOConfig field (skill/recipe/deciding/field_rules.toml): every field GRPOConfig adds over
TrainingArguments is decided once, with its own reason, and the seed recipe, CPU values, ranges and enumerations all
derive from the rules. Version-agnostic: the same check runs under the target's transformers in
tests/target/test_field_rules_target.py."""

from __future__ import annotations

import pytest

from skill.grpo_fields import FIELD_RENAMES, grpo_config_defaults
from skill.hardware.specs import HardwareSpec
from skill.recipe.deciding import field_rules as rules_module
from skill.recipe.deciding.field_rules import (
    Bounds,
    field_rules,
    grpo_added_fields,
    rule_from_table,
    seed_values,
    shared_reasons,
    undecided_fields,
)
from skill.recipe.emit import RecipeRequest, emit_as_asked
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec


def test_every_grpo_field_is_decided_with_its_own_reason():
    assert len(grpo_added_fields()) >= 77  # TRL 1.16: 77 fields over TrainingArguments
    assert undecided_fields() == []
    assert shared_reasons() == []


def test_every_rule_names_a_grpo_config_field():
    known = set(grpo_config_defaults()) | {name for rename in FIELD_RENAMES for name in (rename.old, rename.new)}
    assert set(field_rules()) - known == set()


def test_a_field_missing_from_the_rules_is_named(monkeypatch):
    kept = {name: rule for name, rule in field_rules().items() if name not in ("delta", "top_k")}
    monkeypatch.setattr(rules_module, "field_rules", lambda: kept)
    assert undecided_fields() == ["delta", "top_k"]


def test_a_reason_shared_by_two_fields_is_named(monkeypatch):
    rules = field_rules()
    shared = {**rules, "top_k": rules["top_k"].__class__(**{**vars(rules["top_k"]), "reason": rules["top_p"].reason})}
    monkeypatch.setattr(rules_module, "field_rules", lambda: shared)
    assert rules["top_p"].reason in shared_reasons()


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        ({"value": 1}, "needs 'reason'"),
        ({"reason": "r", "valu": 1}, "needs 'reason'"),
        ({"reason": "r", "cpu": 1}, "'cpu' and 'cpu_reason' go together"),
        ({"reason": "r", "value": 1, "set_by": "emit"}, "'set_by' is for the others"),
        ({"reason": "r", "bounds": "positive"}, "is not an interval"),
    ],
)
def test_a_malformed_rule_is_refused_with_what_it_may_say(table, complaint):
    with pytest.raises(ValueError, match=complaint):
        rule_from_table("beta", table)


def test_bounds_read_as_intervals():
    assert Bounds.parse("[1, inf)") == Bounds(1.0, None)
    assert Bounds.parse("(0, 1]").holds(1.0) and not Bounds.parse("(0, 1]").holds(0.0)


def test_every_field_a_recipe_states_is_seeded_or_set_by_a_decision():
    recipe = emit_as_asked(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100"),
            method="full",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="embedded:addition", columns=["answer"]),
            max_steps=10,
        )
    )
    renamed = {rename.new: rename.old for rename in FIELD_RENAMES}  # transformers 5.23's names
    rules = field_rules()
    assert all(rules[renamed.get(name, name)].decision in ("seed", "set") for name in recipe.trl)
    assert list(recipe.trl)[: len(seed_values())] == list(seed_values())  # the seed's order is the recipe's
