"""Every recipe of the matrix builds a real ``trl.GRPOConfig`` under the target's transformers (5.17, the
newest vLLM 0.31 admits), from the keywords its rendered script passes; a field the target lacks is refused;
and the contract's rename table is exactly the difference between the target's GRPOConfig and the newest's
(the main environment, .venv, read through its own interpreter).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from recipe_matrix import CONFIGURATIONS, script_kwargs

from skill.errors import SkillError
from skill.recipe.checking.stack import TARGET_STACK
from skill.recipe.checking.trl_contract import build_grpo_config, fields_under, installed_transformers

REPOSITORY = Path(__file__).resolve().parents[2]
MAIN_PYTHON = REPOSITORY / ".venv" / "bin" / "python"


def test_this_is_the_target_transformers():
    assert TARGET_STACK["transformers"].specifier.contains(installed_transformers())


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda c: c.name)
def test_every_recipe_of_the_matrix_builds_under_the_target(configuration, tmp_path):
    kwargs, processes, recipe = script_kwargs(configuration)
    config, _notes = build_grpo_config(kwargs, str(tmp_path), on_target=False, target_world_size=processes)
    assert config.gradient_checkpointing is True and not hasattr(config, "activation_checkpointing")
    assert (config.loss_type, config.use_vllm) == (recipe.trl["loss_type"], recipe.trl["use_vllm"])
    if configuration.variant:  # a loss variant of the matrix: TRL built the loss the variant names
        assert config.loss_type == configuration.variant
    expected = "float32" if configuration.method == "full" else "bfloat16"
    assert config.model_init_kwargs["dtype"] == expected and recipe.trl["bf16"] is True
    if configuration.method != "full" and configuration.sharding == "zero3":
        assert config.gradient_checkpointing_kwargs["use_reentrant"] is True  # the name 5.17's Trainer reads


def test_a_recipe_with_a_field_the_target_lacks_is_refused(tmp_path):
    from trl import GRPOConfig

    kwargs, processes, _recipe = script_kwargs(CONFIGURATIONS[0])
    injected = {**kwargs, "activation_checkpointing": True}
    with pytest.raises(SkillError) as refused:
        build_grpo_config(injected, str(tmp_path), on_target=False, target_world_size=processes)
    message = str(refused.value)
    assert "'activation_checkpointing' is not a GRPOConfig field" in message
    assert "exists from transformers 5.23" in message and "'gradient_checkpointing'" in message
    # What the check stands in front of: TRL's own constructor on this transformers.
    plain = {**injected, "bf16": False, "use_cpu": True}
    with pytest.raises(TypeError, match="activation_checkpointing"):
        GRPOConfig(output_dir=str(tmp_path), **plain)


def grpo_fields(python: Path, code: str) -> set[str]:
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_rename_table_is_the_whole_difference_with_the_newest():
    from trl import GRPOConfig

    assert MAIN_PYTHON.exists(), "the main environment (.venv) is missing: run `make test`"
    here = {field.name for field in dataclasses.fields(GRPOConfig) if field.init}
    newest_version = grpo_fields(
        MAIN_PYTHON, "import json, transformers; print(json.dumps([transformers.__version__]))"
    )
    (version,) = newest_version
    newest = grpo_fields(
        MAIN_PYTHON,
        "import dataclasses, json; from trl import GRPOConfig; "
        "print(json.dumps([f.name for f in dataclasses.fields(GRPOConfig) if f.init]))",
    )
    assert fields_under(version) == newest  # the target's fields + the table = the newest's real fields
    known_there = grpo_fields(
        MAIN_PYTHON,
        "import json; from skill.recipe.checking.trl_contract import fields_under; "
        f"print(json.dumps(sorted(fields_under({installed_transformers()!r}))))",
    )
    assert known_there == here  # the newest's fields - the table = the target's real fields


def test_the_defaults_file_is_the_target_grpo_config():
    """The defaults every recipe read falls back to are the target's own GRPOConfig defaults (in .venv,
    tests/test_artifacts.py checks the same file against the newest transformers with the renames applied)."""
    from skill.grpo_fields import grpo_config_defaults, installed_defaults

    assert installed_defaults(installed_transformers()) == grpo_config_defaults()
