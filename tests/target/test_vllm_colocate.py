"""Real vLLM generation in the project's runner, on CPU (vLLM's CPU build, the target's transformers).

run_grpo trains a tiny Llama (head size 32: vLLM's CPU attention takes no smaller) with ``use_vllm=True,
vllm_mode="colocate"`` for 3 steps. The worker replaces TRL's colocate weight sync on a CPU only
(skill.runs.vllm_cpu); with GRPO_RLVR_VLLM_SYNC_CHECK=1 it reads every weight back out of vLLM after each
sync and compares it with the trainer's. The rewards and inspection are tests/test_runs.py's; on a random
model they are flat (zero advantages, zero gradients), so decoupled weight decay (AdamW, 1e-3 of each weight
per step) is what moves every weight between syncs, by more than vLLM's bf16 rounding.
"""

from __future__ import annotations

import json
import time

import pytest
from cpu_vllm import addition_file, pass_inspection, vllm_recipe

from skill.runs.held_out import is_evaluation, training_rows
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.store import read_jsonl, run_dir
from skill.runs.vllm_cpu import (
    ENGINE_FILE,
    SYNC_CHECK_ENV,
    SYNC_FILE,
    checkpoint_weights,
    install_cpu_weight_sync,
    recipe_vs_engine,
)

STEPS = 3


def test_the_cpu_sync_is_never_installed_for_a_gpu_or_a_server():
    """The guard reads the trainer's device and vLLM mode: a CUDA device or server mode keeps TRL's sync."""
    import torch

    class Generation:
        def __init__(self, mode: str) -> None:
            self.mode = mode

        def sync_weights(self) -> str:
            return "trl"

    class Accelerator:
        def __init__(self, device: torch.device) -> None:
            self.device = device

    class Trainer:
        def __init__(self, device: str, mode: str) -> None:
            self.accelerator = Accelerator(torch.device(device))
            self.vllm_generation = Generation(mode)

    for device, mode in (("cuda:0", "colocate"), ("cuda", "server"), ("cpu", "server"), ("meta", "colocate")):
        trainer = Trainer(device, mode)
        assert install_cpu_weight_sync(trainer) is False
        assert trainer.vllm_generation.sync_weights() == "trl"
    cpu = Trainer("cpu", "colocate")
    assert install_cpu_weight_sync(cpu) is True and "sync_weights" in vars(cpu.vllm_generation)


def test_a_lora_model_reaches_vllm_merged_under_the_base_models_names(vllm_model_dir):
    """The sync's walk of a PEFT model: base names, adapters merged in, nothing of the adapter itself, and the
    trainer's model left unmerged afterwards."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(vllm_model_dir, dtype=torch.float32)
    original = {name: parameter.detach().clone() for name, parameter in base.named_parameters()}
    names = list(original)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)  # a trained adapter: merging changes the weights
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    merged = dict(copy.deepcopy(model).merge_and_unload().named_parameters())

    walked = dict(checkpoint_weights(model))
    assert sorted(walked) == sorted(names)
    assert all(torch.equal(walked[name], merged[name]) for name in names)
    assert any(not torch.equal(merged[name], original[name]) for name in names)
    after = dict(model.named_parameters())
    assert all(torch.allclose(after[name], value, atol=1e-6) for name, value in before.items())


@pytest.mark.slow
@pytest.mark.host_memory(5)
def test_the_runner_trains_with_colocated_vllm_and_the_synced_weights_reach_it(vllm_model_dir, tmp_path, monkeypatch):
    pass_inspection()
    recipe = vllm_recipe(vllm_model_dir, addition_file(tmp_path), STEPS)
    monkeypatch.setenv(SYNC_CHECK_ENV, "1")
    started = time.time()
    run_grpo(RunRequest(recipe=recipe, run_id="vllm-colocate"))
    status = run_status("vllm-colocate", wait_seconds=600)
    wall = time.time() - started
    logs = run_logs("vllm-colocate", 2000).lines
    assert status.state == "succeeded", logs[-40:]
    print(f"vLLM colocate run: {STEPS} steps in {wall:.0f} s wall (engine start included)")
    directory = run_dir("vllm-colocate")
    everything = read_jsonl(directory / "metrics.jsonl")
    assert [row["step"] for row in training_rows(everything)] == list(range(1, STEPS + 1))
    assert [row["step"] for row in everything if is_evaluation(row)] == [0, STEPS]  # held out: before and after
    assert any("weights sync through model_runner.reload_weights" in line for line in logs)

    # Every sync: each weight vLLM computes with equals the trainer's, in vLLM's dtype, element for element.
    syncs = read_jsonl(directory / SYNC_FILE)
    # one sync before each step's generation, and one for the held-out evaluation after the last step
    assert [row["step"] for row in syncs] == list(range(STEPS + 1))
    for row in syncs:
        assert row["compared_elements"] == row["trainer_elements"] > 0, row
        assert row["mismatched"] == [] and row["missing"] == [], row
    # ... and the weights moved between syncs, so each sync carried new values into vLLM.
    digests = [row["trainer_sha256"] for row in syncs]
    assert len(set(digests)) == len(digests), digests

    # The recipe's vllm_* settings are the ones the engine was built with, read back from vLLM.
    engine = json.loads((directory / ENGINE_FILE).read_text())
    assert engine["device"] == "cpu" and engine["distributed_executor_backend"] == "external_launcher"
    compared = recipe_vs_engine(recipe.trl, engine)
    assert {"vllm_gpu_memory_utilization", "vllm_max_model_length", "vllm_mode"} <= set(compared)
    assert all(ours == theirs for ours, theirs in compared.values()), compared
