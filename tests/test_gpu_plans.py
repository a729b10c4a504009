"""The plans a user gets for GPUs, checked where a CPU machine can check them: the memory check follows the plan's
sharding, hand-launched plans read their ports and honour the devices they were given, the packages a plan needs
(tracker, bitsandbytes) are named and checked before a start, FSDP2 never leaves a reference model of zeros, the
server check counts the prompt budget, and the held-out sample counts each completion once at any world size."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from recipe_matrix import config_kwargs
from test_launch import CORRECT, GSM8K, gpu_recipe

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.memory.estimate import estimate_memory
from skill.recipe.deciding.evaluation_plan import EvaluationPlan
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import launch_files, with_sharding, write_launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT, SCRIPT_FILE, SLURM_SCRIPT
from skill.recipe.launching.script import needed_packages
from skill.recipe.schema import ModelSpec
from skill.runs.checks import check_memory, check_packages
from skill.runs.vllm_server_check import needed_context


def test_the_flagship_full_fine_tune_passes_the_memory_check_of_the_plan_it_runs():
    """8 x H100, Qwen2.5-7B, full: the plan runs ZeRO-3, so run_grpo's memory check weighs ZeRO-3 (it weighed DDP,
    199.5 GiB, and refused); choosing DDP in run_grpo is weighed as DDP and refused with the remedy."""
    for nodes in (1, 2):  # and the same over 2 nodes x 8 (Slurm)
        recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, nodes)
        assert recipe.launch.sharding == "zero3" and "ZeRO-3" in recipe.launch.sharding_reason
        [line] = check_memory(recipe, force=False)
        assert line.startswith("Memory: peak") and "of 79.6 GiB" in line
        assert launch_files(recipe).sharding == "zero3"  # the launch files run the plan the check weighed
        with pytest.raises(SkillError, match="does not fit") as refused:
            check_memory(with_sharding(recipe, "ddp"), force=False)
        assert "zero3" in refused.value.fix


def test_the_caller_chooses_the_sharding_in_emit_and_it_is_refused_as_a_grpo_field():
    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, sharding="zero2")
    assert recipe.launch.sharding == "zero2" and recipe.launch.sharding_reason == "zero2: chosen by the caller."
    zero2 = estimate_memory(memory_request(recipe, "zero2")).peak_gib
    assert recipe.provenance.memory_estimate["peak_gib"] == pytest.approx(zero2)  # the verdict weighs the choice
    assert zero2 != pytest.approx(estimate_memory(memory_request(recipe, "zero3")).peak_gib)
    assert yaml.safe_load(launch_files(recipe).files[CONFIG_FILE])["deepspeed_config"]["zero_stage"] == 2
    overridden = RecipeRequest(
        model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
        hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
        method="full",
        rewards=CORRECT,
        dataset=GSM8K,
        overrides={"sharding": "zero3"},
    )
    with pytest.raises(SkillError, match="not a GRPOConfig field") as refused:
        emit_grpo_config(overridden)
    assert "sharding='zero3'" in refused.value.fix
    with pytest.raises(SkillError, match="needs several training processes"):
        gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 1, sharding="zero3")


def test_a_hand_launched_server_plan_trains_against_the_ports_its_server_was_started_on():
    """launch_node.sh and slurm.sbatch start the server on a port of their own and pick the weight-sync group's; the
    rendered train_grpo.py reads both (it once read nothing and waited on :8000 until it died). Neither is named
    VLLM_PORT, which vLLM reads itself for its internal ports."""
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8)
    plan = launch_files(recipe)
    assert "--port $GRPO_RLVR_VLLM_PORT" in plan.files[NODE_SCRIPT]
    assert "export GRPO_RLVR_VLLM_PORT GRPO_RLVR_VLLM_GROUP_PORT" in plan.files[NODE_SCRIPT]
    assert "GRPO_RLVR_VLLM_GROUP_PORT=${GRPO_RLVR_VLLM_GROUP_PORT:-$(" in plan.files[SLURM_SCRIPT]
    assert not re.search(r"(?<![A-Z_])VLLM_PORT", plan.files[NODE_SCRIPT] + plan.files[SLURM_SCRIPT])
    defaults = config_kwargs(plan.files[SCRIPT_FILE])  # none set: TRL's defaults
    assert (defaults["vllm_server_port"], defaults["vllm_group_port"]) == (8000, 51216)
    picked = config_kwargs(
        plan.files[SCRIPT_FILE], {"GRPO_RLVR_VLLM_PORT": "41234", "GRPO_RLVR_VLLM_GROUP_PORT": "41235"}
    )
    assert (picked["vllm_server_port"], picked["vllm_group_port"]) == (41234, 41235)


def test_launch_node_gives_the_plan_the_devices_the_node_was_given(tmp_path):
    """On a shared machine (or under Slurm) CUDA_VISIBLE_DEVICES lists the job's GPUs; the plan's indices 0..N-1
    are mapped through it, never over it. The real accelerate launch starts the plan's 4 trainers, each a script
    printing the devices it was given."""
    from skill.runs.engines import free_port

    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 4, use_vllm=False, report_to="none")
    write_launch_files(launch_files(recipe), tmp_path)
    trainer = tmp_path / "show_devices.py"
    # One os.write per trainer: four processes share the pipe, and a write under PIPE_BUF bytes is never split.
    trainer.write_text("import os\nos.write(1, f\"trainer on {os.environ.get('CUDA_VISIBLE_DEVICES')}\\n\".encode())\n")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"

    def launch(devices: str | None) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": path, "MAIN_PROCESS_PORT": str(free_port())}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.update({"CUDA_VISIBLE_DEVICES": devices} if devices is not None else {})
        command = ["bash", str(tmp_path / NODE_SCRIPT), str(trainer)]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    def trainers(devices: str | None) -> list[str]:
        done = launch(devices)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return [line for line in done.stdout.splitlines() if line.startswith("trainer on")]

    assert trainers(None) == ["trainer on 0,1,2,3"] * 4
    assert trainers("4,5,6,7") == ["trainer on 4,5,6,7"] * 4
    assert trainers("GPU-a,GPU-b,GPU-c,GPU-d,GPU-e") == ["trainer on GPU-a,GPU-b,GPU-c,GPU-d"] * 4
    short = launch("6,7")
    assert short.returncode != 0 and "CUDA_VISIBLE_DEVICES gives 2" in short.stderr


def test_a_server_plan_gives_its_server_the_first_given_devices(tmp_path):
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8)
    script = launch_files(recipe).files[NODE_SCRIPT]
    assert 'CUDA_VISIBLE_DEVICES="$(given_devices 0)" trl vllm-serve' in script
    assert 'TRAINER_GPUS="$(given_devices 1,2,3,4,5,6,7)"' in script


def test_the_tracker_a_recipe_reports_to_is_a_need_of_the_hand_launched_plan():
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, report_to="trackio")
    plan = launch_files(recipe)
    assert needed_packages(recipe)["trackio"] == "grpo-rlvr[tracking]" == plan.needs["trackio"]
    assert "trackio=grpo-rlvr[tracking]" in plan.files[NODE_SCRIPT]  # checked on every node before the launch
    assert "'trackio': 'grpo-rlvr[tracking]'" in plan.files[SCRIPT_FILE]  # and by the script before the model loads


def test_qlora_needs_bitsandbytes_checked_before_the_start():
    recipe = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "RTX 4090", 1, method="qlora", report_to="none")
    assert "bitsandbytes" in launch_files(recipe).needs
    if importlib.util.find_spec("bitsandbytes") is None:
        with pytest.raises(SkillError, match="needs bitsandbytes") as refused:
            check_packages(recipe)
        assert "grpo-rlvr[gpu]" in refused.value.fix
    else:
        assert "bitsandbytes" in check_packages(recipe)[0]


def test_fsdp2_loads_a_separate_reference_model_whole_on_every_rank():
    """With fsdp_cpu_ram_efficient_loading, transformers 5.17 loads zeros on local ranks != 0 and only
    Accelerator.prepare broadcasts rank 0's weights: a reference TRL builds apart (beta > 0, full) kept the zeros."""
    full = launch_files(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8), "fsdp2")
    assert full.files[CONFIG_FILE].count("fsdp_version: 2") == 1
    assert yaml.safe_load(full.files[CONFIG_FILE])["fsdp_config"]["fsdp_cpu_ram_efficient_loading"] is False
    lora = launch_files(gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8, method="lora"), "fsdp2")
    assert yaml.safe_load(lora.files[CONFIG_FILE])["fsdp_config"]["fsdp_cpu_ram_efficient_loading"] is True


def test_the_server_check_needs_the_prompt_budget_plus_the_completion_budget():
    """max_prompt_length is gone in TRL 1.16: the check added 0 for the prompt, so a server with too short a context
    passed and the run died on the first long prompt."""
    recipe = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8)
    budget = recipe.trl["max_completion_length"]
    assert needed_context(recipe, recipe.trl) == recipe.dataset.max_prompt_tokens + budget
    assert needed_context(recipe, recipe.trl) == recipe.trl["vllm_max_model_length"]  # what the plan's server gets


def _scored(prompts: int, generations: int, per_device: int, world: int) -> Counter:
    """How often each held-out prompt is scored: TRL's eval sampler, sharded by accelerate for each rank as
    ``Accelerator.prepare`` shards it (even_batches), every rank's batches counted (TRL gathers them all)."""
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader
    from trl.trainer.utils import RepeatSampler

    data = list(range(prompts))
    counts: Counter = Counter()
    for rank in range(world):
        loader = DataLoader(
            data, sampler=RepeatSampler(data, mini_repeat_count=generations, seed=3407), batch_size=per_device
        )
        shard = prepare_data_loader(
            loader, num_processes=world, process_index=rank, split_batches=False, even_batches=True, put_on_device=False
        )
        for batch in shard:
            counts.update(batch.tolist())
    return counts


@pytest.mark.parametrize("world", [1, 2, 3, 7, 15])
def test_each_held_out_prompt_is_scored_exactly_num_generations_times(world):
    """At 7 trainers the old sizing (32 prompts, ceil(32/7) x 4 a device) scored 3 prompts twice over."""
    plan = EvaluationPlan(every_steps=5, prompts=32, generations=4)
    trl = {"per_device_train_batch_size": 8, "steps_per_generation": 4}
    kept, _ = plan.even_split(trl, world, available=40)
    kwargs = plan.grpo_kwargs(trl, world, kept)
    counts = _scored(kept, 4, kwargs["per_device_eval_batch_size"], world)
    assert set(counts) == set(range(kept)) and set(counts.values()) == {4}
    assert kept > 32 - world * 4  # at most one global batch short of the plan's sample
    if world == 7:
        old = _scored(32, 4, 5 * 4, 7)
        assert sorted(Counter(old.values()).items()) == [(4, 29), (8, 3)]
