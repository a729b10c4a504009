"""The recipe rendered as a script is a real training program: it runs one GRPO step on CPU."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skill.data import addition_rows
from skill.demo.pipeline import demo_recipe_request
from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

TESTS = Path(__file__).resolve().parent


def test_multi_gpu_script_names_the_launch_commands():
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="lora",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k", prompt_column="question"),
        )
    )
    script = recipe.to_script()
    ast.parse(script)
    assert "trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct" in script
    assert "accelerate launch --num_processes 7" in script
    assert "LoraConfig(" in script and "rename_column('question', \"prompt\")" in script
    assert "learning_rate=5e-06,  # LoRA needs about 10x" in script


def test_demo_script_uses_the_embedded_model_and_task():
    script = emit_grpo_config(demo_recipe_request()).to_script()
    ast.parse(script)
    assert "resolve_model_path('embedded:SmolLM2-135M-Instruct')" in script
    assert "addition_dataset()" in script


@pytest.mark.slow
def test_rendered_script_trains_one_step(tiny_model_dir, tmp_path):
    data = tmp_path / "addition.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in addition_rows(16)))
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(tiny_model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="lora",
            rewards=[
                RewardSpec(name="rewards_for_tests:just_a_number", role="format", weight=0.2),
                RewardSpec(name="rewards_for_tests:says_the_answer", role="correctness"),
            ],
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
            overrides={"gradient_accumulation_steps": 1, "max_completion_length": 8},
            max_steps=1,
        )
    )
    script = tmp_path / "train_grpo.py"
    script.write_text(recipe.to_script())
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
