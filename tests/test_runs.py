"""The runner: preflight refusals, a real run on the tiny model, kill and resume, cancel, and the faces."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from blind_reader import addition_samples, pass_review
from old_run_json import write_as_before

from skill.data import addition_rows
from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.held_out import is_evaluation, training_rows
from skill.runs.jobs import RunRequest, cancel_run, list_runs, run_grpo, run_logs, run_status
from skill.runs.store import (
    METRICS_HEADER,
    START_LOCK,
    RunRecord,
    is_alive,
    planned_steps,
    read_jsonl,
    read_record,
    run_dir,
    runs_root,
)
from skill.state import STATE_ROOT_ENV

TESTS = Path(__file__).resolve().parent
REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "addition.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in addition_rows(64)))
    return path


def recipe(model_dir, dataset, rewards=REWARDS, steps=2, hardware=None, **overrides):
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=hardware or HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=rewards,
            dataset=DatasetSpec(name=str(dataset), columns=["answer"]),
            overrides={
                "per_device_train_batch_size": 8,
                "gradient_accumulation_steps": 1,
                "max_completion_length": 8,
                "logging_steps": 1,
                "learning_rate": 1e-5,
                "beta": 0.0,
                **overrides,
            },
            max_steps=steps,
        )
    )


def pass_inspection(rewards):
    samples = [SuppliedSample(**sample) for sample in addition_samples()]
    return pass_review(inspect_rewards(InspectionRequest(rewards=rewards, samples=samples)))


def process_environment(pid: int) -> list[bytes]:
    """A process's environment, read from /proc. Empty for a moment after Popen returns: exec closes the pipe Popen
    waits on before the kernel has laid out the new program's environment (the CI failure: ``[b'']``)."""
    deadline = time.monotonic() + 10
    while not (content := Path(f"/proc/{pid}/environ").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return content.split(b"\0")


def wait(run_id, timeout=240):
    status = run_status(run_id)
    deadline = time.time() + timeout
    while status.state in ("starting", "running") and time.time() < deadline:
        status = run_status(run_id, wait_seconds=2)
    return status


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/b", "..", ""])
def test_run_ids_that_escape_the_runs_directory_are_refused(bad, tiny_model_dir, dataset):
    with pytest.raises(SkillError, match="not allowed"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset), run_id=bad))


def test_uninspected_rewards_are_refused_even_with_force(tiny_model_dir, dataset, tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path))  # its own runs directory: the other worker starts runs meanwhile
    with pytest.raises(SkillError, match="No passed inspection"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset), force=True, force_reason="testing"))
    pass_inspection(REWARDS)
    rewards = [REWARDS[0].model_copy(update={"weight": 0.1}), REWARDS[1]]
    with pytest.raises(SkillError, match="changed since"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, rewards), force=True, force_reason="testing"))
    assert set(runs_root().iterdir()) <= {runs_root() / START_LOCK}  # nothing half-written (the lock comes first)


def test_missing_column_is_refused_before_any_process(tiny_model_dir, tmp_path):
    pass_inspection(REWARDS)
    data = tmp_path / "no_answer.jsonl"
    data.write_text("".join(json.dumps({"prompt": row["prompt"]}) + "\n" for row in addition_rows(20)))
    bad = recipe(tiny_model_dir, data).model_copy(update={"dataset": DatasetSpec(name=str(data))})
    with pytest.raises(SkillError, match=r"lacks column\(s\) \['answer'\]"):
        run_grpo(RunRequest(recipe=bad))


def test_force_needs_a_reason(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    with pytest.raises(SkillError, match="force needs a recorded reason"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset), force=True))


def test_gpu_recipe_is_refused_on_this_cpu(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    gpu = recipe(tiny_model_dir, dataset, hardware=HardwareSpec(gpu_model="H100"))
    with pytest.raises(SkillError, match="targets GPUs and this machine has none"):
        run_grpo(RunRequest(recipe=gpu))


def test_an_epoch_based_run_is_judged_against_the_length_the_trainer_planned(tmp_path):
    record = RunRecord(run_id="epochs")
    assert planned_steps(tmp_path, record) is None  # before training begins nothing says how long it is
    (tmp_path / METRICS_HEADER).write_text(json.dumps({"reward_review": "reviewed", "max_steps": 120}))
    assert planned_steps(tmp_path, record) == 120
    assert planned_steps(tmp_path, record.model_copy(update={"max_steps": 40})) == 40  # the recipe's own length
    (tmp_path / METRICS_HEADER).write_text("{torn")
    assert planned_steps(tmp_path, record) is None


@pytest.mark.slow
def test_a_real_run_writes_everything_and_follows_the_recipe(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    status = run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, steps=3), run_id="tiny-full"))
    assert status.state in ("running", "succeeded")
    # Its own rendezvous port, in the worker's environment (read while it loads torch): TRL's would be 29500 for all.
    record = read_record(run_dir("tiny-full"))
    assert f"MASTER_PORT={record.ports['master']}".encode() in process_environment(record.pid)
    assert status.engine_handle["master_port"] == record.ports["master"]
    status = wait("tiny-full")
    assert status.state == "succeeded", run_logs("tiny-full").lines[-20:]
    directory = run_dir("tiny-full")
    everything = read_jsonl(directory / "metrics.jsonl")
    metrics = training_rows(everything)
    assert [row["step"] for row in metrics] == [1, 2, 3]
    assert [row["step"] for row in everything if is_evaluation(row)] == [0, 3]  # scored before and after
    assert {"rewards/format/mean", "rewards/exact_match/mean", "entropy", "completions/mean_length"} <= set(metrics[0])
    assert read_jsonl(directory / "completions.jsonl")
    assert (directory / "reward_curve.png").stat().st_size > 1000
    card = (directory / "final" / "README.md").read_text()
    assert "Inspection: insp-" in card and "not reviewed" not in card
    header = json.loads((directory / "metrics.header.json").read_text())
    assert header["reviewed"] is True
    assert header["reward_review"].startswith("reviewed: program tester labelled 60 samples blind")
    assert header["max_steps"] == 3  # the trainer's planned length, which run_status reads for epoch-based runs
    assert status.reward_review == header["reward_review"]
    # the estimate stored at the start is compared with the measured s/step, and feeds the ETA
    assert (directory / "estimate.json").is_file() and status.estimated_seconds_per_step > 0
    assert status.time_comparison.startswith("measured ") and "vs estimated" in status.time_comparison
    card_recipe = json.loads(card.split("```json", 1)[1].split("```", 1)[0])
    assert card_recipe["trl"]["learning_rate"] == 1e-5 and card_recipe["trl"]["max_steps"] == 3
    record = read_record(directory)
    assert record.inspection_id and "tester" in record.review and record.checks
    assert "tiny-full" in [run.run_id for run in list_runs().runs]


@pytest.mark.slow
def test_killed_worker_is_failed_with_the_signal_and_resume_loses_no_step(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, steps=8), run_id="tiny-kill"))
    directory = run_dir("tiny-kill")
    deadline = time.time() + 240
    while time.time() < deadline and not list((directory / "checkpoints").glob("checkpoint-*/trainer_state.json")):
        time.sleep(0.5)
    record = read_record(directory)
    os.killpg(record.pid, signal.SIGKILL)
    status = wait("tiny-kill", timeout=30)
    assert status.state == "failed" and status.signal == signal.SIGKILL and "SIGKILL" in status.reason
    # A run recorded by the version before the engine handle reports its status and resumes.
    write_as_before(directory)
    assert run_status("tiny-kill").state == "failed" and list_runs().runs
    status = run_grpo(RunRequest(resume_run_id="tiny-kill"))
    status = wait("tiny-kill")
    assert status.state == "succeeded", run_logs("tiny-kill").lines[-20:]
    everything = read_jsonl(directory / "metrics.jsonl")
    assert [row["step"] for row in training_rows(everything)] == list(range(1, 9))
    assert read_record(directory).resumed_from_step >= 2
    assert [row["step"] for row in everything if is_evaluation(row)] == [0, 8]  # the resume kept the first score


@pytest.mark.slow
def test_cancel_leaves_no_process_behind(tiny_model_dir, dataset):
    pass_inspection(REWARDS)
    run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, steps=50), run_id="tiny-cancel"))
    time.sleep(3)
    record = read_record(run_dir("tiny-cancel"))
    status = cancel_run("tiny-cancel")
    assert status.state == "cancelled"
    assert status.reason == "cancelled on request before its first checkpoint: a resume starts over from step 0"
    assert not is_alive(record)
    with pytest.raises(ProcessLookupError):
        os.killpg(record.pid, 0)


@pytest.mark.slow
def test_a_reward_that_raises_does_not_kill_training(tiny_model_dir, dataset, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    rewards = [*REWARDS, RewardSpec(name="rewards_for_tests:always_raises", role="shaping", weight=0.1)]
    pass_inspection_raising = rewards  # the raising reward is flagged, so review it through the policy path
    with pytest.raises(AssertionError):
        pass_inspection(pass_inspection_raising)
    with pytest.raises(SkillError, match="No passed inspection"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset, rewards)))


def test_concurrency_cap_refuses_with_the_running_runs(tiny_model_dir, dataset, monkeypatch):
    monkeypatch.setenv("GRPO_RLVR_MAX_RUNS", "0")
    with pytest.raises(SkillError, match="already running .* the limit is 0"):
        run_grpo(RunRequest(recipe=recipe(tiny_model_dir, dataset)))


def test_a_model_without_a_shape_blocks_only_an_unforced_run(tiny_model_dir, dataset, tmp_path, monkeypatch):
    """A GPT-NeoX config (a non-gated MLP) has a parameter count but no shape: the memory check cannot run. Unforced
    the run is refused, saying what to send; forced it starts, with a note saying why memory was not checked."""
    from skill.runs.engine_choice import ENGINES  # only to stop the spawn: the checks are what is tested

    # Its own runs directory: the other worker's run_grpo would meet this pid-less run and fail it meanwhile.
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))

    model = tmp_path / "tiny-neox"
    model.mkdir()
    for file in tiny_model_dir.iterdir():
        if file.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            (model / file.name).write_bytes(file.read_bytes())
    neox = {"model_type": "gpt_neox", "hidden_size": 64, "intermediate_size": 2048, "num_hidden_layers": 4}
    neox |= {"num_attention_heads": 4, "vocab_size": 49152}
    (model / "config.json").write_text(json.dumps(neox))
    neox_recipe = recipe(model, dataset)  # no parameters_billions: the count is read from config.json
    assert any(line.startswith("Memory not estimated") for line in neox_recipe.provenance.validation)
    pass_inspection(REWARDS)
    with pytest.raises(SkillError, match="Memory cannot be checked: .*gpt_neox.* pass force with a reason"):
        run_grpo(RunRequest(recipe=neox_recipe))
    monkeypatch.setattr(ENGINES["local"], "submit", lambda directory, resume: read_record(directory))
    status = run_grpo(RunRequest(recipe=neox_recipe, force=True, force_reason="NeoX: memory checked by hand"))
    checks = read_record(run_dir(status.run_id)).checks
    assert any(line.startswith("Memory not checked (forced): ") and "gpt_neox" in line for line in checks)


@pytest.mark.slow
def test_a_run_named_by_relative_paths_trains_from_any_directory(tiny_model_dir, dataset, tmp_path):
    """A user in their project folder: the model, the data and the state root named relative to it, and
    PYTHONPATH=. set. The worker runs with the run directory as its working directory; the paths were resolved at
    the request and the engine hands it absolute ones, so the run trains."""
    import shutil
    import subprocess
    import sys

    work = tmp_path / "project"
    shutil.copytree(tiny_model_dir, work / "model")
    shutil.copy(dataset, work / "data.jsonl")
    request = {
        "model": {"name": "model"},
        "hardware": {"accelerator": "cpu"},
        "method": "full",
        "rewards": [spec.model_dump(mode="json") for spec in REWARDS],
        "dataset": {"name": "data.jsonl", "columns": ["answer"]},
        "overrides": {"per_device_train_batch_size": 8, "max_completion_length": 8, "beta": 0.0},
        "max_steps": 1,
    }
    (work / "request.json").write_text(json.dumps(request))
    environment = {**os.environ, STATE_ROOT_ENV: "state", "PYTHONPATH": "."}
    cli = [sys.executable, "-m", "server.cli"]

    def run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli, *arguments], cwd=work, env=environment, capture_output=True, text=True)

    with pytest.MonkeyPatch.context() as patch:  # the read, on the same state root, absolutely named
        patch.setenv(STATE_ROOT_ENV, str(work / "state"))
        pass_inspection(REWARDS)
    emitted = run("config", "--request", "request.json", "--output", "json")
    assert emitted.returncode == 0, emitted.stderr
    recipe = json.loads(emitted.stdout)
    assert recipe["model"]["name"] == str(work / "model") and recipe["dataset"]["name"] == str(work / "data.jsonl")
    (work / "recipe.json").write_text(emitted.stdout)
    started = run("run", "recipe.json", "--run-id", "relative-paths")
    assert started.returncode == 0, started.stderr
    waited = run("status", "relative-paths", "--wait", "300")
    assert "succeeded" in waited.stdout, (waited.stdout, (work / "state/runs/relative-paths/train.log").read_text())
