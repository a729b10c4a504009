"""Under the target's transformers (5.17), the FSDP2 plan's accelerate config loads a model TRL builds apart (the
reference, for beta > 0 on a full fine-tune) with the real weights on every rank.

``accelerate launch`` with the plan's own config (two processes on this CPU) starts a script that loads the model the
way TRL builds its reference (``from_pretrained`` after the process group is up, never passed through
``Accelerator.prepare``). With ``fsdp_cpu_ram_efficient_loading: true`` transformers loads zeros on local rank 1 (only
``prepare`` would broadcast rank 0's weights); the plan sets it false for such a recipe, and rank 1 then holds the
weights on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec

LOAD_AS_THE_REFERENCE = """
import json, os, sys
import torch
import torch.distributed as dist
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

dist.init_process_group("gloo")
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
disk = load_file(os.path.join(sys.argv[1], "model.safetensors"))
state = model.state_dict()
equal = all(torch.equal(state[name], tensor.to(state[name].dtype)) for name, tensor in disk.items() if name in state)
zeros = all(not tensor.any() for name, tensor in state.items() if name.endswith("q_proj.weight"))
rank = dist.get_rank()
with open(os.path.join(sys.argv[2], f"rank{rank}.json"), "w") as out:
    json.dump({"equal_to_disk": equal, "attention_all_zero": zeros}, out)
dist.destroy_process_group()
"""


def _plan_config(method: str) -> dict:
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method=method,
            rewards=[RewardSpec(name="exact_match", role="correctness")],
            dataset=DatasetSpec(name="openai/gsm8k", columns=["answer"]),
            sharding="fsdp2",
            report_to="none",
        )
    )
    assert recipe.trl["beta"] > 0
    return yaml.safe_load(launch_files(recipe).files[CONFIG_FILE])


def _ranks(config: dict, model_dir: Path, tmp_path: Path, name: str) -> dict[int, dict]:
    """The plan's config on this CPU: two processes instead of seven, nothing else changed."""
    directory = tmp_path / name
    directory.mkdir()
    config = {**config, "num_processes": 2, "main_process_port": _free_port()}
    (directory / CONFIG_FILE).write_text(yaml.safe_dump(config))
    (directory / "load.py").write_text(LOAD_AS_THE_REFERENCE)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(directory / CONFIG_FILE)]
    command += [str(directory / "load.py"), str(model_dir), str(directory)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {rank: json.loads((directory / f"rank{rank}.json").read_text()) for rank in (0, 1)}


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_the_fsdp2_plan_loads_a_separate_reference_with_its_weights_on_every_rank(vllm_model_dir, tmp_path):
    full = _plan_config("full")
    assert full["fsdp_config"]["fsdp_cpu_ram_efficient_loading"] is False
    ranks = _ranks(full, vllm_model_dir, tmp_path, "plan")
    assert ranks[0]["equal_to_disk"] and ranks[1]["equal_to_disk"], ranks
    # The defect the plan avoids, shown under the same transformers: rank 1 of the efficient loading holds zeros.
    efficient = {**full, "fsdp_config": {**full["fsdp_config"], "fsdp_cpu_ram_efficient_loading": True}}
    efficient["fsdp_config"]["fsdp_sync_module_states"] = True  # accelerate requires it with efficient loading
    ranks = _ranks(efficient, vllm_model_dir, tmp_path, "efficient")
    assert ranks[0]["equal_to_disk"] and ranks[1]["attention_all_zero"] and not ranks[1]["equal_to_disk"], ranks
