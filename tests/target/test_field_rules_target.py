"""The field rules against the target's GRPOConfig (transformers 5.17): no field undecided, no reason shared (the
main suite runs the same check under the newest transformers: tests/test_field_rules.py)."""

from __future__ import annotations

from skill.recipe.deciding.field_rules import grpo_added_fields, shared_reasons, undecided_fields


def test_every_target_grpo_field_is_decided_with_its_own_reason():
    assert len(grpo_added_fields()) >= 77
    assert undecided_fields() == [] and shared_reasons() == []
