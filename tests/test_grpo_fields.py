"""GRPOFields: a recipe's GRPOConfig keywords read with TRL's own defaults, typed as GRPOConfig declares them."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from skill.grpo_fields import FIELD_RENAMES, GRPOFields, grpo_config_defaults
from skill.recipe.checking.field_values import declared_types


def test_every_typed_field_is_a_grpo_config_field_of_the_kind_trl_declares():
    from trl import GRPOConfig

    declared = {field.name: field for field in dataclasses.fields(GRPOConfig)}
    kinds = declared_types()
    for name, annotation in typing.get_type_hints(GRPOFields).items():
        assert name in declared, f"{name} is not a GRPOConfig field"
        kind = kinds[name]
        if kind in ("int", "float", "bool"):
            # the view's annotation names TRL's kind; an int field may be read where TRL declares a float
            assert kind in str(annotation) or (kind == "float" and "int" in str(annotation)), (name, annotation, kind)


def test_a_field_left_out_reads_the_target_default_and_a_stated_one_reads_as_stated():
    defaults = grpo_config_defaults()
    view = GRPOFields({"logging_steps": 1, "max_completion_length": None})
    assert view.logging_steps == 1 and view.max_completion_length is None  # a stated None is the caller's
    assert view.seed == defaults["seed"] and view.vllm_server_port == defaults["vllm_server_port"]
    assert GRPOFields({}).logging_steps == defaults["logging_steps"] != 1  # TRL logs every 10 steps, not every step


@pytest.mark.parametrize("rename", FIELD_RENAMES, ids=lambda rename: rename.new)
def test_either_name_of_a_renamed_field_reads_what_the_recipe_wrote(rename):
    assert getattr(GRPOFields({rename.old: "old"}), rename.new) == "old"
    assert getattr(GRPOFields({rename.new: "new"}), rename.old) == "new"
    assert GRPOFields({rename.new: 1}).is_set(rename.old)
    assert getattr(GRPOFields({}), rename.new) == grpo_config_defaults()[rename.old]


def test_the_view_is_read_only_and_names_a_field_that_does_not_exist():
    view = GRPOFields({"beta": 0.01})
    with pytest.raises(AttributeError, match="read-only"):
        view.beta = 0.0
    with pytest.raises(AttributeError, match="'learning_rat' is not a GRPOConfig field"):
        _ = view.learning_rat
    stated = view.stated()
    stated["beta"] = 1.0
    assert view.beta == 0.01  # stated() is a copy
