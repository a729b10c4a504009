"""The rehearsal matrix: recipes emitted for GPUs, run by ``run_grpo(rehearse=True)`` at their own world size on this
CPU, under the target stack with vLLM's CPU build and DeepSpeed (the two-node Slurm plan is in tests/test_slurm.py).

Each case emits the recipe a user gets for the hardware named, rehearses it, and asserts: at least 2 logged steps,
every rank in the plan's world with the same weights at the end (gathered, under ZeRO-3), the final model loading
with ``from_pretrained`` and equal to them, a report that lists what it substituted, and held-out results that count
each completion once (counted by the ranks' rewards).
"""

from __future__ import annotations

import time

import pytest
from cpu_vllm import REWARDS, addition_file, pass_inspection

from skill.hardware.specs import HardwareSpec
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, GRPORecipe, ModelSpec
from skill.runs.held_out import training_rows
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.rank_state import parameter_digest
from skill.runs.store import read_jsonl, run_dir

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rehearsal")]  # one rehearsal at a time: up to 8 processes


def rehearse(run_id: str, tmp_path, model: str, gpu: str, gpus: int, method: str, **request) -> tuple:
    pass_inspection()
    recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=model),
            hardware=HardwareSpec(gpu_model=gpu, gpus_per_node=gpus),
            method=method,
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(addition_file(tmp_path, 80)), columns=["answer"]),
            report_to="none",
            **request,
        )
    )
    started = time.time()
    run_grpo(RunRequest(recipe=recipe, run_id=run_id, rehearse=True))
    status = run_status(run_id, wait_seconds=900)
    if status.state != "succeeded":  # the first error of any rank, then how the run ended
        lines = run_logs(run_id, 5000).lines
        errors = [line for line in lines if "Error" in line or "error:" in line or "Traceback" in line][:20]
        raise AssertionError("\n".join([*errors, "...", *lines[-60:]]))
    print(f"\n{run_id}: rehearsed in {time.time() - started:.0f} s")
    return recipe, status, run_dir(run_id)


def check_common(recipe, status, directory, world: int) -> dict:
    """What every rehearsal shows: steps, ranks in the plan's world and in sync, the final model, the report."""
    from transformers import AutoModelForCausalLM

    rows = training_rows(read_jsonl(directory / "metrics.jsonl"))
    assert [row["step"] for row in rows] == [1, 2]
    report = status.rehearsal
    assert report is not None and report.training_processes == recipe.launch.training_processes == world
    assert [rank.rank for rank in report.ranks] == list(range(world))
    assert {rank.world_size for rank in report.ranks} == {world}
    assert len({rank.steps_per_generation for rank in report.ranks}) == 1
    assert report.ranks_in_sync is True
    final = parameter_digest(
        AutoModelForCausalLM.from_pretrained(directory / ("final-merged" if recipe.peft else "final"))
    )
    if recipe.peft is None:
        assert final["sha256"] == report.ranks[0].parameters_sha256  # saved whole (gathered) and equal to the ranks'
    substituted = {item.what: item for item in report.substitutions}
    assert {"weights", "precision", "device", "length"} <= set(substituted)
    assert recipe.model.name in str(substituted["weights"].real)
    assert "fits" in report.memory_verdict and report.unverified
    described = report.describe()  # what the command line prints
    assert described[0] == f"rehearsal of {report.plan}" and any("in sync" in line for line in described)
    held_out = [row for row in read_jsonl(directory / "metrics.jsonl") if "held_out" in row]
    completions, prompts = held_out[0]["held_out"][0]["completions"], held_out[0]["held_out"][0]["prompts"]
    assert report.held_out and report.held_out.endswith(f"({completions})")
    # Counted, not computed: the first reward, wrapped to count, scored every held-out prompt exactly
    # num_generations times per evaluation across all ranks (a padded repeat would count twice), and the n the
    # held-out score reports is that count.
    generations = recipe.evaluation.generations
    assert report.held_out_scored == [generations * len(held_out)] * prompts
    assert completions == sum(report.held_out_scored) // len(held_out) == prompts * generations
    # each prompt's own score, gathered from every rank's record, for the paired before/after comparison
    for row in held_out:
        assert row["held_out_prompts"] and all(
            len(scores) == prompts and None not in scores for scores in row["held_out_prompts"].values()
        ), row["held_out_prompts"]
    assert [change.prompts for change in status.held_out_change] == [prompts] * len(row["held_out_prompts"])
    return substituted


@pytest.mark.host_memory(5)
def test_one_h100_lora_with_colocated_vllm(tmp_path):
    recipe, status, directory = rehearse("h100-lora", tmp_path, "Qwen/Qwen2.5-1.5B-Instruct", "H100", 1, "lora")
    assert recipe.trl["vllm_mode"] == "colocate" and status.engine == "local"
    substituted = check_common(recipe, status, directory, world=1)
    assert substituted["generation"].rehearsed["vllm_gpu_memory_utilization"] == 0.15
    assert (directory / "final" / "adapter_config.json").is_file()


@pytest.mark.host_memory(13)
def test_eight_h100_full_zero3_with_a_vllm_server(tmp_path):
    """The flagship: 7 trainers under DeepSpeed ZeRO-3 (on its CPU accelerator, gloo) and the real trl vllm-serve on
    the plan's port; TRL's NCCL weight sync into the server is the one step replaced."""
    recipe, status, directory = rehearse("h100x8-zero3", tmp_path, "Qwen/Qwen2.5-7B-Instruct", "H100", 8, "full")
    assert (recipe.launch.sharding, recipe.trl["vllm_mode"], status.engine) == ("zero3", "server", "accelerate")
    substituted = check_common(recipe, status, directory, world=7)
    assert substituted["device"].rehearsed == {"ddp_backend": "gloo"}
    assert "server weight sync" in substituted
    assert any("--gpu-memory-utilization" in line for line in status.rehearsal.launch_file_changes)
    assert "distributed_type: DEEPSPEED" in (directory / "accelerate_config.yaml").read_text()
    log = "\n".join(run_logs("h100x8-zero3", 5000).lines)
    assert "vLLM server healthy" in log and '"server_prompt_ids_match": true' in log


@pytest.mark.host_memory(14)
def test_eight_h100_full_fsdp2_with_a_reference_model(tmp_path):
    """FSDP2 with beta > 0: accelerate's own fully_shard on every trainer (applied on CPU by the listed shim), the
    parameters really sharded, and the reference model TRL builds apart equal to the weights on disk on every rank."""
    from transformers import AutoModelForCausalLM

    model, request = "Qwen/Qwen2.5-7B-Instruct", {"sharding": "fsdp2", "overrides": {"beta": 0.04}}
    recipe, status, directory = rehearse("h100x8-fsdp2", tmp_path, model, "H100", 8, "full", **request)
    assert recipe.launch.sharding == "fsdp2" and recipe.trl["beta"] == 0.04
    world = recipe.launch.training_processes
    substituted = check_common(recipe, status, directory, world=world)
    assert "fully_shard" in substituted["device"].why
    assert "distributed_type: FSDP" in (directory / "accelerate_config.yaml").read_text()
    ranks = status.rehearsal.ranks
    total = ranks[0].parameters_total
    assert all(rank.parameters_held < total for rank in ranks)  # each rank holds a shard, not the model
    assert sum(rank.parameters_held for rank in ranks) >= total
    rehearsed = GRPORecipe.model_validate_json((directory / "recipe.json").read_text())
    on_disk = parameter_digest(AutoModelForCausalLM.from_pretrained(rehearsed.model.name))["sha256"]
    assert {rank.reference_sha256 for rank in ranks} == {on_disk}  # the reference: the source weights, every rank


@pytest.mark.host_memory(3)
def test_one_rtx_4090_qlora(tmp_path):
    recipe, status, directory = rehearse("rtx4090-qlora", tmp_path, "Qwen/Qwen2.5-7B-Instruct", "RTX 4090", 1, "qlora")
    assert recipe.peft.quantize_4bit and recipe.trl["use_vllm"] is False
    substituted = check_common(recipe, status, directory, world=1)
    # bitsandbytes' NF4 matmul cannot train on this CPU: the base loads unquantized, and the report says why
    assert substituted["adapter base"].real == "NF4" and "bitsandbytes" in substituted["adapter base"].why
    rehearsed = GRPORecipe.model_validate_json((directory / "recipe.json").read_text())
    assert not rehearsed.peft.quantize_4bit and "quantization_config" not in rehearsed.trl["model_init_kwargs"]
