"""LoRA under FSDP2 with vLLM: before each weight sync TRL merges the adapters into the sharded base weights and
walks them whole (``VLLMGeneration._iter_named_params``), where its own code asks "does this work with FSDP?".

Answered here under the target stack: the 8 x H100 LoRA FSDP2 plan's accelerate config, two processes on this CPU
(the rehearsal's FSDP2 preparation, ``install_fsdp_on_cpu``), a miniature of the plan's model with a trained adapter
(lora_B non-zero: a fresh B merges nothing). TRL's own walk gives, on every rank, exactly the merge of the same
adapter into an unsharded copy; the parameters are sharded while it runs, and the base is unmerged after it (to
float rounding).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from cpu_vllm import REWARDS, addition_file

from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import launch_files
from skill.recipe.launching.launch_commands import CONFIG_FILE
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.runs.engines import free_port
from skill.runs.rehearsal import plan_rehearsal, write_report

WALK_AS_TRL_SYNCS = """
import json, os, sys
from pathlib import Path
import torch
from safetensors.torch import load_file
from skill.recipe.schema import GRPORecipe
from skill.runs.rehearsal import install_fsdp_on_cpu

directory = Path(sys.argv[1])
recipe = GRPORecipe.model_validate_json((directory / "recipe.json").read_text())
assert install_fsdp_on_cpu(directory, recipe)
from accelerate import Accelerator
from peft import get_peft_model
from transformers import AutoModelForCausalLM
from trl.distributed import DistributedBackend
from trl.generation.vllm_generation import VLLMGeneration

accelerator = Accelerator(cpu=True)
disk = load_file(os.path.join(recipe.model.name, "model.safetensors"))

def adapted():  # the weights on disk on every rank (under efficient loading from_pretrained gives ranks > 0 zeros)
    base = AutoModelForCausalLM.from_pretrained(recipe.model.name, dtype=torch.float32)
    base.load_state_dict(disk, strict=False)
    torch.manual_seed(0)
    model = get_peft_model(base, recipe.peft.to_peft_config())
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.02)
    return model

expected = adapted().merge_and_unload().state_dict()
model = adapted()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model, optimizer = accelerator.prepare(model, optimizer)
sync = object.__new__(VLLMGeneration)  # TRL's own walk, as sync_weights runs it in server and colocate mode
sync.model, sync.accelerator, sync._dist = model, accelerator, DistributedBackend(accelerator)
sent = {name: tensor.detach().clone() for name, tensor in sync._iter_named_params()}
after = {name: p.full_tensor() for name, p in model.named_parameters() if "lora_" not in name}
(directory / f"rank{accelerator.process_index}.json").write_text(json.dumps({
    "names": sorted(sent) == sorted(expected),
    "worst_difference": max((sent[name] - expected[name]).abs().max().item() for name in sent),
    "merge_moved": max((expected[name] - tensor).abs().max().item() for name, tensor in disk.items()),
    "sharded": all(type(p).__name__ == "DTensor" for p in model.parameters()),
    "unmerge_residue": max((tensor - disk[name.removeprefix("base_model.model.").replace(".base_layer", "")]).abs()
                           .max().item() for name, tensor in after.items()),
}))
"""


@pytest.mark.slow
def test_trl_merges_a_lora_adapter_into_fsdp2_shards_exactly_as_into_the_whole_model(tmp_path):
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=8),
            method="lora",
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(addition_file(tmp_path, 40)), columns=["answer"]),
            sharding="fsdp2",
            report_to="none",
        )
    )
    assert recipe.trl["use_vllm"] and recipe.launch.sharding == "fsdp2"
    rehearsed, report = plan_rehearsal(recipe, None, "accelerate")
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "recipe.json").write_text(rehearsed.model_dump_json())
    write_report(directory, report)
    config = yaml.safe_load(launch_files(rehearsed).files[CONFIG_FILE])
    config.update(num_processes=2, main_process_port=free_port())  # the plan's config on two CPU processes
    (directory / CONFIG_FILE).write_text(yaml.safe_dump(config))
    (directory / "walk.py").write_text(WALK_AS_TRL_SYNCS)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(directory / CONFIG_FILE)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*command, str(directory / "walk.py"), str(directory)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((directory / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank in ranks:
        assert rank["names"] and rank["sharded"], rank
        assert rank["unmerge_residue"] < 1e-6, rank  # W + BA - BA: float rounding, as on one process
        assert rank["worst_difference"] == 0.0 and rank["merge_moved"] > 1e-3, rank
