"""The slurm engine on a real two-node Slurm cluster started on this machine (``scripts/slurm_cluster.py``):
run_grpo submits the run directory's slurm.sbatch, one launch_node.sh per node and the worker on every rank (gloo
over the two nodes); run_status reads the scheduler (PENDING and why, RUNNING, COMPLETED, TIMEOUT); cancel_run is
scancel; resume resubmits from the checkpoint, which Slurm's signal before the time limit asked for.

What a CPU cluster cannot show: GPUs granted per node (--gpus-per-node), NCCL between nodes, and a vLLM server
whose weights TRL syncs over NCCL (CUDA only). Those lines of the script are checked as text (test_launch)."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from old_run_json import SLURM_RUN_BEFORE_ENGINE_HANDLE, write_as_before
from test_engines import run_processes, until
from test_runs import REWARDS, pass_inspection, recipe, wait

from skill.errors import SkillError
from skill.recipe.launching.launch_commands import SLURM_SCRIPT
from skill.recipe.launching.slurm_script import SlurmSettings
from skill.runs.held_out import training_rows
from skill.runs.jobs import RunRequest, cancel_run, list_runs, run_grpo, run_logs, run_status
from skill.runs.rank_state import DUMP_RANK_STATE_ENV, parameter_digest
from skill.runs.store import START_LOCK, read_jsonl, read_record, run_dir, runs_root
from skill.state import STATE_ROOT_ENV

_SPEC = importlib.util.spec_from_file_location(
    "slurm_cluster", Path(__file__).resolve().parent.parent / "scripts" / "slurm_cluster.py"
)
slurm = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(slurm)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("slurm"),  # one cluster, its two one-CPU nodes used by one test at a time
]


@pytest.fixture(scope="module")
def cluster(isolated_state_root):
    if slurm.MISSING and not os.environ.get("CI"):  # CI installs it (make test): there, a missing Slurm fails
        pytest.skip(f"Slurm is not installed ({', '.join(slurm.MISSING)}): make test installs slurm-wlm and munge")
    # The cluster's two nodes hold one test's job at a time: a second pytest worker with a cluster of its own means
    # xdist_group("slurm") was not honoured (pytest 9.2 with pytest-xdist 3.8), and those tests would race.
    with open(isolated_state_root / "slurm-tests.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.fail("Another pytest worker runs the Slurm tests: run pytest with --dist loadgroup (pytest <9.2).")
        with slurm.slurm_cluster() as env:
            yield env


@pytest.fixture
def on_cluster(cluster, monkeypatch):
    for name, value in cluster.items():
        monkeypatch.setenv(name, value)
    return cluster


def two_node_request(model, data, run_id, steps, settings=None, **trl):
    return RunRequest(
        recipe=recipe(model, data, steps=steps, **trl),
        run_id=run_id,
        processes=2,
        nodes=2,
        engine=settings or SlurmSettings(partition="debug"),
    )


def scheduler_state(run_id: str) -> str | None:
    return run_status(run_id).engine_handle.get("scheduler_state")


def training_steps(directory):
    """The optimizer steps in metrics.jsonl (held-out evaluations have rows of their own)."""
    return [row["step"] for row in training_rows(read_jsonl(directory / "metrics.jsonl"))]


def test_refusals_come_before_anything_is_written(on_cluster, digit_model_dir, addition_data, tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path))  # its own runs directory: the other worker starts runs meanwhile
    pass_inspection(REWARDS)
    with pytest.raises(SkillError, match="Slurm refused the job: .*[Ii]nvalid partition") as refused:
        run_grpo(two_node_request(digit_model_dir, addition_data, "bad-partition", 3, SlurmSettings(partition="nope")))
    assert "partition" in refused.value.fix
    with pytest.raises(SkillError, match="spans 2 nodes"):  # several nodes need a cluster
        run_grpo(two_node_request(digit_model_dir, addition_data, "no-slurm", 3).model_copy(update={"engine": None}))
    with pytest.raises(ValueError, match="not a Slurm time"):
        SlurmSettings(time_limit="soon")
    assert set(runs_root().iterdir()) <= {runs_root() / START_LOCK}  # the lock is taken before the checks


def test_two_nodes_train_in_sync_and_the_status_follows_the_scheduler(
    on_cluster, digit_model_dir, addition_data, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv(DUMP_RANK_STATE_ENV, str(tmp_path / "ranks"))
    pass_inspection(REWARDS)
    run_id, steps = f"slurm-{uuid.uuid4().hex[:6]}", 3
    slurm.scontrol(on_cluster, "update", f"NodeName={slurm.NODES[1]}", "State=DRAIN", "Reason=maintenance")
    try:
        submitted = time.time()
        status = run_grpo(two_node_request(digit_model_dir, addition_data, run_id, steps))
        assert status.engine == "slurm" and status.engine_handle["job_id"] > 0
        until(lambda: scheduler_state(run_id) == "PENDING" and "Reason=" in run_status(run_id).reason, 30)
        pending = run_status(run_id)
        assert pending.state == "starting" and "PENDING" in pending.reason, pending
        assert any(run.engine_handle.get("job_id") == status.engine_handle["job_id"] for run in list_runs().runs)
    finally:
        slurm.scontrol(on_cluster, "update", f"NodeName={slurm.NODES[1]}", "State=RESUME")
    until(lambda: scheduler_state(run_id) == "RUNNING", 120)  # the scheduler runs on events and a timer
    directory = run_dir(run_id)
    until(lambda: read_jsonl(directory / "metrics.jsonl"), 240)
    first_step = time.time() - submitted
    status = wait(run_id, timeout=240)
    assert status.state == "succeeded", run_logs(run_id).lines[-30:]
    job = str(status.engine_handle["job_id"])  # rank 0 records the end just before the ranks exit and the job completes
    until(lambda: "JobState=COMPLETED" in slurm.scontrol(on_cluster, "show", "job", "-o", job), 60)

    assert training_steps(directory) == list(range(1, steps + 1))
    ranks = [json.loads((tmp_path / "ranks" / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [(r["rank"], r["node"], r["world_size"], r["distributed"]) for r in ranks] == [
        (0, "n1", 2, "MULTI_CPU"),
        (1, "n2", 2, "MULTI_CPU"),
    ]
    assert all(r["steps_per_generation"] == r["gradient_accumulation_steps"] == 1 for r in ranks)
    initial = parameter_digest(AutoModelForCausalLM.from_pretrained(digit_model_dir))
    assert ranks[0]["sha256"] == ranks[1]["sha256"] != initial["sha256"]
    assert parameter_digest(AutoModelForCausalLM.from_pretrained(directory / "final"))["sha256"] == ranks[0]["sha256"]
    script = (directory / SLURM_SCRIPT).read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --cpus-per-task=1" in script
    assert "#SBATCH --partition=debug" in script
    print(f"\n2 Slurm nodes: submit to first step {first_step:.1f} s, {steps} steps")


def test_a_two_node_gpu_plan_is_rehearsed_on_the_cluster_at_its_world_size(on_cluster, addition_data):
    """2 nodes x 4 H100, full fine-tune, DDP: the plan's 8 trainers, 4 on each node, through the same slurm.sbatch
    and launch_node.sh, its GPU request turned into a request for CPU nodes."""
    from skill.hardware.specs import HardwareSpec
    from skill.recipe.emit import RecipeRequest, emit_grpo_config
    from skill.recipe.schema import DatasetSpec, ModelSpec

    pass_inspection(REWARDS)
    gpu_recipe = emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name="Qwen/Qwen2.5-1.5B-Instruct"),
            hardware=HardwareSpec(gpu_model="H100", gpus_per_node=4, nodes=2),
            method="full",
            rewards=REWARDS,
            dataset=DatasetSpec(name=str(addition_data), columns=["answer"]),
            overrides={"use_vllm": False, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1},
            report_to="none",
        )
    )
    assert (gpu_recipe.launch.training_processes, gpu_recipe.launch.sharding) == (8, "ddp")
    run_id, started = f"slurm-rehearsal-{uuid.uuid4().hex[:6]}", time.time()
    settings = SlurmSettings(partition="debug", cpus_per_task=1)  # the test cluster's nodes have one CPU each
    status = run_grpo(RunRequest(recipe=gpu_recipe, run_id=run_id, rehearse=True, engine=settings))
    assert status.engine == "slurm"
    status = wait(run_id, timeout=600)
    assert status.state == "succeeded", run_logs(run_id, 200).lines[-40:]
    directory = run_dir(run_id)
    assert training_steps(directory) == [1, 2]
    report = status.rehearsal
    assert [(rank.rank, rank.node, rank.world_size) for rank in report.ranks] == [
        (rank, "n1" if rank < 4 else "n2", 8) for rank in range(8)
    ]
    assert report.ranks_in_sync is True
    script = (directory / SLURM_SCRIPT).read_text()
    assert "--gpus-per-node" not in script and "--exclusive" not in script and "#SBATCH --nodes=2" in script
    slurm_request = next(item for item in report.substitutions if item.what == "Slurm request")
    assert slurm_request.real == ["#SBATCH --gpus-per-node=4", "#SBATCH --exclusive"]
    print(f"\n2-node rehearsal of a 2 x 4 H100 plan (8 ranks): {time.time() - started:.0f} s")


def test_the_time_limit_signal_saves_a_checkpoint_timeout_fails_the_run_resume_and_cancel(
    on_cluster, digit_model_dir, addition_data
):
    pass_inspection(REWARDS)
    run_id = f"slurm-limit-{uuid.uuid4().hex[:6]}"
    settings = SlurmSettings(time_limit="1", checkpoint_before_limit_s=30)
    run_grpo(two_node_request(digit_model_dir, addition_data, run_id, 400, settings, save_steps=1000))
    directory = run_dir(run_id)
    job = read_record(directory).engine_handle["job_id"]
    assert "#SBATCH --signal=USR1@30" in (directory / SLURM_SCRIPT).read_text()
    until(lambda: len(training_steps(directory)) >= 2, 150)
    # Slurm's own notice comes at most 30 s before the limit, on its timer; the same signal, sent now:
    subprocess.run(["scancel", "--signal=USR1", str(job)], check=True, timeout=30)
    until(lambda: list((directory / "checkpoints").glob("checkpoint-*/trainer_state.json")), 60)
    saved = sorted(int(path.name.split("-")[1]) for path in (directory / "checkpoints").glob("checkpoint-*"))
    status = wait(run_id, timeout=180)
    assert status.state == "failed" and status.engine_handle["scheduler_state"] == "TIMEOUT", status
    assert status.reason.startswith(f"Slurm job {job} ended TIMEOUT") and "resume_run_id" in status.reason
    until(lambda: not run_processes(directory), 30)
    # As the version before the engine handle recorded it: the run resumes and cancels all the same.
    assert write_as_before(directory)["job_id"] == job

    run_grpo(RunRequest(resume_run_id=run_id))
    record = read_record(directory)
    assert record.engine_handle["job_id"] != job and record.command[-1] == "--resume"
    until(lambda: read_record(directory).resumed_from_step, 150)
    resumed = read_record(directory).resumed_from_step
    assert resumed >= saved[0]  # the checkpoint the signal asked for (or a later one)
    until(lambda: len(training_steps(directory)) > resumed, 120)
    assert training_steps(directory)[: resumed + 1] == list(range(1, resumed + 2))  # the checkpoint's step + 1
    status = cancel_run(run_id)
    assert status.state == "cancelled"
    assert not run_processes(directory)  # cancel_run returns once the job has left both nodes
    assert "JobState=CANCELLED" in slurm.scontrol(on_cluster, "show", "job", "-o", str(record.engine_handle["job_id"]))


def test_a_controller_that_does_not_answer_changes_no_run_state(tmp_path, monkeypatch):
    """The run.json of a Slurm run as the version before the engine handle wrote it (job_id of its own)."""
    from skill.runs.engine_choice import engine_named

    shutil.copy(SLURM_RUN_BEFORE_ENGINE_HANDLE, tmp_path / "run.json")
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))  # scontrol is missing: the controller is out of reach
    seen = engine_named("slurm").state(tmp_path)
    assert seen.state == "running" and "did not answer" in seen.reason
    assert seen.engine_handle == {"job_id": 41, "scheduler_state": "RUNNING"}
    assert read_record(tmp_path).state == "running" and read_record(tmp_path).reason is None  # nothing written
    with pytest.raises(SkillError, match="Cancel job 41 with scancel"):  # and cancel still finds its job
        engine_named("slurm").cancel(tmp_path, seen)
