"""Generated artefacts stay in step with the code, and emitted recipes satisfy the published schema."""

from __future__ import annotations

import json

import jsonschema
from generate import REPOSITORY, stale_files

from skill.demo.pipeline import demo_recipe_request
from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec


def test_generated_files_match_the_code():
    stale = stale_files()
    assert not stale, f"run `make generate` and commit: {[str(path) for path in stale]}"


def test_emitted_recipes_validate_against_the_schema():
    schema = json.loads((REPOSITORY / "schemas" / "grpo_recipe.json").read_text())
    requests = [
        demo_recipe_request(),
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="qlora",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k"),
            symptoms=["length_growth_without_accuracy", "instability"],
        ),
    ]
    for request in requests:
        recipe = emit_grpo_config(request)
        jsonschema.validate(recipe.model_dump(mode="json"), schema)


def test_request_schema_accepts_a_request_and_rejects_a_malformed_one():
    schema = json.loads((REPOSITORY / "schemas" / "recipe_request.json").read_text())
    jsonschema.validate(demo_recipe_request().model_dump(mode="json"), schema)
    broken = demo_recipe_request().model_dump(mode="json")
    broken["method"] = "sideways"
    try:
        jsonschema.validate(broken, schema)
    except jsonschema.ValidationError as exc:
        assert "sideways" in str(exc)
    else:
        raise AssertionError("the schema accepted method='sideways'")
