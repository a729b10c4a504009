"""The runner's engines: the accelerate engine runs the emitted launch plan (accelerate launch --config_file, two CPU
processes over gloo) with the project's worker on every rank; the on-policy invariant read from the GRPOConfig TRL
built in each rank; kill, resume and cancel; the preflight of devices and CPU processes; the merged model a PEFT run
saves from its gathered adapter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from test_runs import REWARDS, pass_inspection, recipe, wait

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.recipe.checking.trl_contract import build_grpo_config
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.launching.launch import on_cpu_processes
from skill.recipe.launching.launch_commands import CONFIG_FILE, NODE_SCRIPT
from skill.recipe.launching.slurm_script import SlurmSettings
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.runs.checks import check_cpu_processes, compare_devices
from skill.runs.engine_choice import engine_for
from skill.runs.engines import GONE, ProcessEngine, free_port
from skill.runs.held_out import is_evaluation, training_rows
from skill.runs.jobs import RunRequest, cancel_run, run_grpo, run_logs
from skill.runs.rank_state import DUMP_RANK_STATE_ENV, parameter_digest
from skill.runs.store import RunRecord, is_alive, read_jsonl, read_record, run_dir, write_record
from skill.runs.worker import launched_world_size


def run_processes(directory: Path) -> dict[int, list[bytes]]:
    """Every live process of a run (the launcher script, accelerate, the ranks), found by the run directory in
    its command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(directory).encode() in words and state != "Z":
            found[int(proc.name)] = words
    return found


def rank_pids(directory: Path) -> list[int]:
    """The worker ranks: started by accelerate's torchrun as `python -u -m skill.runs.worker RUN_DIR`."""
    return [
        pid
        for pid, words in run_processes(directory).items()
        if b"skill.runs.worker" in words and b"launch" not in words and not words[0].endswith(b"bash")
    ]


def until(condition, timeout: float) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.slow
def test_two_cpu_processes_under_accelerate_train_on_policy_and_end_in_sync(
    digit_model_dir, addition_data, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv(DUMP_RANK_STATE_ENV, str(tmp_path / "ranks"))
    pass_inspection(REWARDS)
    steps, run_id = 3, f"two-ranks-{uuid.uuid4().hex[:6]}"
    started = time.time()
    run_grpo(RunRequest(recipe=recipe(digit_model_dir, addition_data, steps=steps), run_id=run_id, processes=2))
    directory = run_dir(run_id)
    record = read_record(directory)
    assert record.engine == "accelerate" and record.command[:2] == ["bash", str(directory / NODE_SCRIPT)]
    assert record.command[2:] == ["-m", "skill.runs.worker", str(directory)]
    config = yaml.safe_load((directory / CONFIG_FILE).read_text())  # the plan's own config, for a CPU
    assert (config["use_cpu"], config["num_processes"], config["distributed_type"]) == (True, 2, "MULTI_GPU")
    assert set(record.ports) == {"main_process"} and record.ports["main_process"] != 29500
    status = wait(run_id)
    elapsed = time.time() - started
    assert status.state == "succeeded", run_logs(run_id).lines[-30:]
    assert status.engine == "accelerate" and status.engine_handle["main_process_port"] == record.ports["main_process"]

    everything = read_jsonl(directory / "metrics.jsonl")
    metrics = training_rows(everything)
    assert [row["step"] for row in metrics] == list(range(1, steps + 1))  # rank 0 alone writes
    assert [row["step"] for row in everything if is_evaluation(row)] == [0, steps]  # both ranks evaluated together
    assert any(row["grad_norm"] > 0 for row in metrics), metrics

    ranks = [json.loads((tmp_path / "ranks" / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [(r["rank"], r["world_size"], r["env_world_size"], r["distributed"]) for r in ranks] == [
        (0, 2, "2", "MULTI_CPU"),
        (1, 2, "2", "MULTI_CPU"),
    ]
    for rank in ranks:  # on-policy, as TRL built it in the rank: one generation batch feeds one optimizer step
        assert rank["steps_per_generation"] == rank["gradient_accumulation_steps"] == 1
        assert rank["generation_batch_size"] == rank["per_device_train_batch_size"] * 2 * rank["steps_per_generation"]
    initial = parameter_digest(AutoModelForCausalLM.from_pretrained(digit_model_dir))
    final = parameter_digest(AutoModelForCausalLM.from_pretrained(directory / "final"))
    assert ranks[0]["sha256"] == ranks[1]["sha256"]  # the ranks hold the same parameters...
    assert ranks[0]["sha256"] != initial["sha256"]  # ...and they are not the ones they started from
    assert final["sha256"] == ranks[0]["sha256"]  # what was saved is what trained
    print(f"\n2 ranks under accelerate, {steps} steps in {elapsed:.1f} s")
    until(lambda: not run_processes(directory), 30)  # rank 0 wrote 'succeeded' just before the processes exit


@pytest.mark.slow
def test_a_killed_launcher_takes_its_ranks_resume_keeps_two_and_cancel_leaves_nothing(digit_model_dir, addition_data):
    pass_inspection(REWARDS)
    run_id = f"two-ranks-kill-{uuid.uuid4().hex[:6]}"
    request = RunRequest(
        recipe=recipe(digit_model_dir, addition_data, steps=8, save_steps=2), run_id=run_id, processes=2
    )
    run_grpo(request)
    directory = run_dir(run_id)
    until(lambda: list((directory / "checkpoints").glob("checkpoint-*/trainer_state.json")), 240)
    assert len(rank_pids(directory)) == 2
    os.killpg(read_record(directory).pid, signal.SIGKILL)  # the launcher's group; the ranks live in their own sessions
    status = wait(run_id, timeout=30)
    assert status.state == "failed" and status.signal == signal.SIGKILL, status.reason
    until(lambda: not run_processes(directory), 10)  # PR_SET_PDEATHSIG: no rank outlives its launcher

    with pytest.raises(SkillError, match="keeps its layout"):
        run_grpo(RunRequest(resume_run_id=run_id, processes=3))
    run_grpo(RunRequest(resume_run_id=run_id))
    record = read_record(directory)
    assert record.engine == "accelerate" and record.command[-1] == "--resume"
    until(lambda: read_record(directory).resumed_from_step, 120)  # rank 0 trimmed the metrics to the checkpoint
    resumed = read_record(directory).resumed_from_step
    until(lambda: len(training_rows(read_jsonl(directory / "metrics.jsonl"))) > resumed, 120)
    assert training_rows(read_jsonl(directory / "metrics.jsonl"))[resumed]["step"] == resumed + 1  # checkpoint + 1
    assert len(rank_pids(directory)) == 2
    status = cancel_run(run_id)  # SIGTERM to the launcher's group: accelerate stops its ranks
    assert status.state == "cancelled" and not is_alive(read_record(directory))
    until(lambda: not run_processes(directory), 15)
    steps = [row["step"] for row in training_rows(read_jsonl(directory / "metrics.jsonl"))]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) > resumed >= 2


def test_the_engine_follows_the_launch_plan(tiny_model_dir, addition_data):
    cpu = recipe(tiny_model_dir, addition_data)
    assert engine_for(cpu).name == "local" and engine_for(on_cpu_processes(cpu, 2)).name == "accelerate"
    assert on_cpu_processes(cpu, 2).launch.commands["train (node 0)"].startswith("accelerate launch --config_file")
    from test_launch import gpu_recipe

    eight = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8)
    assert engine_for(eight).name == "accelerate"
    assert engine_for(gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 1)).name == "local"
    with pytest.raises(SkillError, match="are for CPU recipes"):
        on_cpu_processes(eight, 2)
    two_nodes = gpu_recipe("Qwen/Qwen2.5-1.5B-Instruct", "H100", 8, 2)
    with pytest.raises(SkillError, match="spans 2 nodes") as refused:
        engine_for(two_nodes)
    assert 'Send engine {"kind": "slurm"}' in refused.value.fix and "--slurm" in refused.value.fix
    assert engine_for(two_nodes, SlurmSettings()).name == "slurm" == engine_for(eight, SlurmSettings()).name
    assert not engine_for(two_nodes, SlurmSettings()).runs_here and engine_for(eight).runs_here
    with pytest.raises(SkillError, match="do not split equally over 2 nodes"):
        on_cpu_processes(cpu, 3, nodes=2)
    assert len({free_port() for _ in range(5)}) > 1


class SleepingLauncher(ProcessEngine):
    """The local engine with `sleep` as its launcher: a real process for the engine to start, watch and lose."""

    def command(self, directory: Path, resume: bool) -> list[str]:
        return ["sleep", "60"]


def test_a_launcher_killed_just_before_the_engine_looks_is_failed_with_its_signal(
    tiny_model_dir, addition_data, tmp_path
):
    # The CI failure: state() saw the launcher running through poll(), then a zombie through /proc a moment
    # later, and failed the run without its signal. Here the engine looks right after the kill, each time.
    engine = SleepingLauncher()
    recipe_json = recipe(tiny_model_dir, addition_data).model_dump_json()
    for attempt in range(200):
        directory = tmp_path / f"run-{attempt}"
        directory.mkdir()
        (directory / "recipe.json").write_text(recipe_json)
        write_record(directory, RunRecord(run_id=f"killed-{attempt}"))
        record = engine.submit(directory, resume=False)
        os.killpg(record.pid, signal.SIGKILL)
        while record.state == "running":
            record = engine.state(directory)
        assert (record.state, record.signal) == ("failed", signal.SIGKILL), record.reason
        assert record.reason.startswith("killed by signal 9 (SIGKILL)")


def test_the_parent_gives_the_signal_when_another_watcher_saw_only_the_zombie(tiny_model_dir, addition_data, tmp_path):
    # Two servers on one state root: the one that did not start the launcher sees a zombie and can say only that
    # the process is gone; the parent, looking next, reaps it and says how it ended.
    engine = SleepingLauncher()
    (tmp_path / "recipe.json").write_text(recipe(tiny_model_dir, addition_data).model_dump_json())
    write_record(tmp_path, RunRecord(run_id="watched"))
    record = engine.submit(tmp_path, resume=False)
    os.killpg(record.pid, signal.SIGKILL)
    until(lambda: not is_alive(record), 10)  # a zombie: nothing here reaps it before the other watcher looks
    other_watcher = "import sys, pathlib, skill.runs.engines as e; e.ProcessEngine().state(pathlib.Path(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", other_watcher, str(tmp_path)], check=True)
    assert read_record(tmp_path).reason.startswith(GONE) and read_record(tmp_path).signal is None
    record = engine.state(tmp_path)
    assert (record.state, record.signal) == ("failed", signal.SIGKILL)
    assert record.reason.startswith("killed by signal 9 (SIGKILL)")
    assert engine.state(tmp_path) == read_record(tmp_path) == record  # said once, and kept


def test_cpu_processes_are_refused_when_they_cannot_work(tiny_model_dir, addition_data, monkeypatch):
    cpu = recipe(tiny_model_dir, addition_data)
    two = on_cpu_processes(cpu, 2)
    assert check_cpu_processes(cpu, force=False) == []
    assert "2 CPU processes (accelerate launch, gloo)" in check_cpu_processes(two, force=False)[0]
    uneven = recipe(tiny_model_dir, addition_data, generation_batch_size=24)  # 3 groups of 8 with one process
    for where in (True, False):  # on this machine, or on a cluster's nodes
        with pytest.raises(SkillError, match=r"not divisible by the global batch 8 x 2 training processes = 16"):
            check_cpu_processes(on_cpu_processes(uneven, 2, nodes=2), force=False, on_this_machine=where)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    with pytest.raises(SkillError, match="exceeds this machine's 1 CPU cores"):
        check_cpu_processes(two, force=False)
    assert check_cpu_processes(on_cpu_processes(cpu, 2, nodes=2), force=False, on_this_machine=False) == []
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RunRequest(recipe=cpu, processes=0)


def test_the_devices_present_are_checked_against_the_recipe():
    from test_launch import gpu_recipe

    eight = gpu_recipe("Qwen/Qwen2.5-7B-Instruct", "H100", 8)
    h100 = ("NVIDIA H100 80GB HBM3", 79.62)
    assert compare_devices(eight, [h100] * 8, force=False) == [
        "Devices: 8 x NVIDIA H100 80GB HBM3 (79.6 GiB) for 8 x 79.6 GiB planned."
    ]
    with pytest.raises(SkillError, match=r"has 4 GPU\(s\) .* laid out for 8") as fewer:
        compare_devices(eight, [h100] * 4, force=False)
    assert "gpus_per_node" in fewer.value.fix
    with pytest.raises(SkillError, match="assumed 79.6 GiB per GPU"):
        compare_devices(eight, [("NVIDIA A100-SXM4-40GB", 39.4)] * 8, force=False)
    assert "forced" in compare_devices(eight, [h100] * 4, force=True)[0]
    assert compare_devices(eight.model_copy(update={"hardware": HardwareSpec(accelerator="cpu")}), [], False) == []


def on_policy_in_a_world_of(kwargs: dict, world: int, monkeypatch) -> tuple[int, int, int]:
    """(steps_per_generation, generation_batch_size, gradient_accumulation_steps) as TRL's GRPOConfig derives them in
    a rank of a ``world``-process run. The worker's call passes the launched world as the target, which is the
    rank's own world, so build_grpo_config adds nothing and TRL derives the batch from the world it is in (here a
    patched property reports it, as accelerate's state does inside a launched rank; WORLD_SIZE stays unset so no process
    group is started)."""
    from trl import GRPOConfig

    with monkeypatch.context() as patch:  # what accelerate's state reports inside a launched rank
        patch.setattr(GRPOConfig, "world_size", property(lambda self: world))
        config, notes = build_grpo_config(
            kwargs, "/tmp/on-policy", on_target=False, target_world_size=launched_world_size()
        )
    assert "world_size" not in GRPOConfig.__dict__
    assert not [note for note in notes if "generation_batch_size" in note]
    return config.steps_per_generation, config.generation_batch_size, config.gradient_accumulation_steps


def test_every_recipe_configuration_is_on_policy_in_its_launched_world(monkeypatch):
    from recipe_matrix import CONFIGURATIONS, script_kwargs

    for configuration in CONFIGURATIONS:
        kwargs, processes, recipe_ = script_kwargs(configuration)
        assert processes == recipe_.launch.training_processes
        steps, batch, accumulation = on_policy_in_a_world_of(kwargs, processes, monkeypatch)
        assert steps == accumulation, configuration.name  # one generation batch, one optimizer step
        assert batch == kwargs["per_device_train_batch_size"] * processes * steps, configuration.name


@pytest.mark.slow
def test_a_lora_run_saves_a_merged_model_that_loads_alone_and_matches_the_adapter(digit_model_dir, addition_data):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    pass_inspection(REWARDS)
    lora = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(digit_model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="lora",
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(addition_data), columns=["answer"]),
            overrides={
                "per_device_train_batch_size": 8,
                "gradient_accumulation_steps": 1,
                "max_completion_length": 8,
                "learning_rate": 1e-2,
                "beta": 0.0,
            },
            max_steps=2,
        )
    )
    status = wait(run_grpo(RunRequest(recipe=lora, run_id=f"lora-{uuid.uuid4().hex[:6]}")).run_id)
    assert status.state == "succeeded", run_logs(status.run_id).lines[-20:]
    directory = run_dir(status.run_id)
    tokens = torch.tensor([[1, 42, 7, 99, 3]])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(directory / "final-merged")(tokens).logits
        adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(digit_model_dir), directory / "final")
        expected = adapted(tokens).logits
        base = AutoModelForCausalLM.from_pretrained(digit_model_dir)(tokens).logits
    assert torch.allclose(merged, expected, atol=1e-4)  # the merged model is the trained adapter on its base
    assert not torch.allclose(merged, base, atol=1e-6)  # and the adapter learned something


def test_the_request_names_its_engine_and_the_old_slurm_field_says_where_it_went():
    from pydantic import ValidationError

    from skill.runs.engine_choice import ThisMachine, engine_named

    with pytest.raises(ValidationError, match='"engine": {"kind": "slurm"'):
        RunRequest.model_validate({"slurm": {"partition": "gpu"}})
    assert RunRequest.model_validate({"engine": {"kind": "slurm", "partition": "gpu"}}).engine.partition == "gpu"
    assert RunRequest().engine == ThisMachine()
    with pytest.raises(ValidationError, match="kind"):
        RunRequest.model_validate({"engine": {"kind": "kubernetes"}})
    with pytest.raises(SkillError, match="engine 'kubernetes', which this version does not have") as refused:
        engine_named("kubernetes")  # a run.json written by another version
    assert "version" in refused.value.fix
