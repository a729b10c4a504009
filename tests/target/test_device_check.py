"""The GPU check (scripts/device_check.sh -> scripts/gpu_memory_check.py) end to end on CPU, under the target
transformers: a real GRPO step per configuration on a tiny model, the checkpointing switch under the GRPOConfig
field the installed version knows, and the prompts' real token count handed to the estimate."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recipe_matrix import config_kwargs

from skill.data import addition_rows
from skill.models.sources import embedded_tokenizer_dir
from skill.recipe.checking.stack import TARGET_STACK
from skill.recipe.checking.trl_contract import recipe_grpo_config

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.host_memory(3)
def test_the_device_check_runs_end_to_end_on_cpu_under_the_target_transformers(tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    tokenizer_dir = embedded_tokenizer_dir()
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "OUT": str(out),
        "DEVICE_WORK": str(tmp_path / "work"),
        "DEVICE_TOKENIZER": str(tokenizer_dir),
    }
    done = subprocess.run(
        ["bash", "scripts/device_check.sh", "--device", "cpu", "--tiny"],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    result = json.loads((out / "gpu_memory.json").read_text())
    installed = importlib.metadata.version("transformers")
    assert result["versions"]["transformers"] == installed
    assert TARGET_STACK["transformers"].specifier.contains(installed)
    fields = {field.name for field in dataclasses.fields(GRPOConfig)}
    assert result["checkpointing_field"] in fields
    if "activation_checkpointing" not in fields:  # transformers < 5.23, the target: the old name
        assert result["checkpointing_field"] == "gradient_checkpointing"

    # The prompt length the estimate got, counted here another way: the template as text, then tokenized.
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    texts = [
        tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        for row in addition_rows(64)
    ]
    longest = max(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts)
    assert result["prompt_tokens"] == longest > 20  # not the 2 keys of a BatchEncoding

    rows = result["rows"]
    assert len(rows) >= 6
    log = (out / "gpu_memory.log").read_text()
    for row in rows:
        name, measured = row["configuration"]["name"], row["measured"]
        assert measured["steps"] == 2, name  # real optimizer steps ran
        assert row["estimated"]["peak_gib"] > 0
        assert f"{name:18s} 2 steps in" in log
        # Each step timed, its generation inside it; the steady figure beside the step-time estimate.
        assert len(measured["per_step"]) == 2
        for step in measured["per_step"]:
            assert 0 < step["generation_seconds"] < step["seconds"], (name, step)
        assert measured["steady_seconds_per_step"] > 0 and 0 < measured["completion_mean_tokens"] <= 8  # tiny: budget 8
        assert row["estimated"]["seconds_per_step"] > 0 and "time_error" in row
        assert f"{name:18s} {measured['steady_seconds_per_step']:.2f} s/step" in log
    # Each configuration in a process of its own: in one, a step's reserve began with what the steps before it held.
    assert len({row["measured"]["process"] for row in rows}) == len(rows)
    methods = {row["configuration"]["method"] for row in rows}
    assert methods == {"full", "lora"} and {row["configuration"]["checkpointing"] for row in rows} == {True, False}
    assert "transformers" in (out / "gpu.txt").read_text()

    # Sampling on the device's model: auto picks transformers without CUDA, in the weights' dtype on the CPU.
    sampling = json.loads((out / "gpu_sampling.json").read_text())
    assert sampling["auto_engine"] == "transformers" and sampling["completions"] == 64
    assert sampling["sampled_with"]["device"] == "cpu" and sampling["tokens"] > 0

    # The product on the device: run_grpo through the worker, killed after step 3, resumed, finished.
    run = json.loads((out / "gpu_run.json").read_text())
    assert [phase["method"] for phase in run["phases"]] == ["lora", "full"]
    for phase in run["phases"]:
        assert phase["state"] == "succeeded" and phase["steps"] == 6, phase  # --tiny: 6 steps, killed after 3
        assert phase["killed_at_step"] >= 3 and phase["killed_run"] == {"state": "failed", "signal": 9}
        assert phase["resume"] and "checkpoint" in phase["resume"]
        assert len(phase["held_out"]) >= 3  # before the first step, at step 3, after the last
        assert phase["reward_review"].startswith("reward not reviewed")  # the gate, opened unread and stamped
        assert phase["peak_measured_gib"] > 0 and phase["peak_estimated_gib"] > 0 and phase["seconds_per_step"] > 0


def test_a_peft_zero3_plan_gets_reentrant_checkpointing_where_transformers_5_17_reads_it():
    """The launch plan's script, built into a real GRPOConfig under the target transformers: use_reentrant=True
    sits in the kwargs the Trainer of this version passes to the model (TRL's own override writes the same name)."""

    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.launching.launch import SCRIPT_FILE, launch_files
    from skill.recipe.schema import DatasetSpec, ModelSpec
    from skill.rewards.spec import RewardSpec

    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="lora",
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k", prompt_column="question"),
        )
    )
    script = launch_files(recipe, "zero3").files[SCRIPT_FILE]
    kwargs = config_kwargs(script)
    config = recipe_grpo_config(recipe.model_copy(update={"trl": kwargs}))
    trainer_source = (Path(importlib.import_module("transformers.trainer").__file__)).read_text()
    read = (
        "activation_checkpointing_kwargs"
        if "args.activation_checkpointing_kwargs" in trainer_source
        else ("gradient_checkpointing_kwargs")
    )
    assert f"args.{read}" in trainer_source
    assert getattr(config, read) == {"use_reentrant": True}
