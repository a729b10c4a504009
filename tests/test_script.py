"""The recipe rendered as a script is a real training program: it runs one GRPO step on CPU."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skill.data import load_rows
from skill.demo.pipeline import demo_recipe_request
from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.script import render_script
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs import checks

TESTS = Path(__file__).resolve().parent
# The first rows of openai/gsm8k (config "main") as published: question, and an answer ending in "#### N".
GSM8K_SAMPLE = DatasetSpec(
    name=str(TESTS / "data" / "gsm8k_sample.jsonl"),
    prompt_template="Solve: {question}",
    answer_column="answer",
    answer_extractor="gsm8k",
)


def test_multi_gpu_script_names_the_launch_commands():
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="lora",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(
                name="openai/gsm8k",
                config="main",
                prompt_template="Solve: {question}",
                answer_column="answer",
                answer_extractor="gsm8k",
            ),
        )
    )
    script = render_script(recipe)
    ast.parse(script)
    assert "trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct" in script
    assert "accelerate launch --config_file accelerate_config.yaml --num_processes 7" in script
    assert "LoraConfig(" in script and "'config': 'main'" in script and "'answer_extractor': 'gsm8k'" in script
    assert "learning_rate=5e-06,  # LoRA needs about 10x" in script


def test_demo_script_uses_the_embedded_model_and_task():
    script = render_script(emit_grpo_config(demo_recipe_request()))
    ast.parse(script)
    assert "resolve_model_path('embedded:SmolLM2-135M-Instruct')" in script
    assert "'name': 'embedded:addition'" in script


def gsm8k_recipe(model_dir: Path, dataset: DatasetSpec = GSM8K_SAMPLE):
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="lora",
            rewards=[
                RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
                RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
            ],
            dataset=dataset,
            overrides={"gradient_accumulation_steps": 1, "max_completion_length": 8},
            max_steps=1,
        )
    )


def test_rendered_script_loads_the_rows_run_grpo_would(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    # A stated budget of 80 tokens drops the two longest of the five prompts (93 and 88 tokens: rows 3 and 4).
    recipe = gsm8k_recipe(tiny_model_dir, GSM8K_SAMPLE.model_copy(update={"max_prompt_tokens": 80}))
    path = tmp_path / "train_grpo.py"
    path.write_text(render_script(recipe))
    module_spec = importlib.util.spec_from_file_location("rendered_train_grpo", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # runs the script's top level, not main()
    rows = list(module.training_dataset(AutoTokenizer.from_pretrained(str(tiny_model_dir))))
    expected, dropped = checks.filter_long_prompts(recipe, load_rows(recipe.dataset))
    assert rows == expected and dropped == 2
    assert [row["answer"] for row in rows] == ["72", "10", "624"]
    assert rows[0]["prompt"][0]["content"].startswith("Solve: Natalia sold clips")


@pytest.mark.slow
def test_rendered_script_trains_one_step(tiny_model_dir, tmp_path):
    recipe = gsm8k_recipe(tiny_model_dir)
    script = tmp_path / "train_grpo.py"
    script.write_text(render_script(recipe))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    result = subprocess.run(
        [sys.executable, str(script), "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "adapter_config.json").is_file()
