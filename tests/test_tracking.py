"""Experiment tracking: the recipe's report_to (trackio by default where installed), the refusal of a tracker that is
not installed, where each tracker writes, and two short real runs read back through the trackers' own files: a
trackio run whose reward never passes, so run_status's no-learning-signal warning fires and reaches trackio as an
alert; and an offline W&B run writing its run files. No network: trackio is local, W&B offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from blind_reader import addition_samples, pass_review

from skill.errors import SkillError
from skill.hardware.specs import HardwareSpec
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, SuppliedSample
from skill.recipe.deciding import tracking as recipe_tracking
from skill.recipe.deciding.evaluation_plan import EvaluationPlan
from skill.recipe.emit import RecipeRequest, emit_grpo_config
from skill.recipe.schema import DatasetSpec, ModelSpec
from skill.rewards.spec import RewardSpec
from skill.runs.jobs import RunRequest, run_grpo, run_logs, run_status
from skill.runs.store import read_jsonl, run_dir
from skill.runs.tracking import tracker_environment

# The random 2-layer model never writes the sum: every group scores 0, which run_status calls no learning signal.
NEVER_PASSING = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
]


def short_recipe(model_dir: Path, data: Path, steps: int, report_to: str | None = None):
    """A CPU recipe of a few 8-completion steps, 8 tokens each, no held-out evaluation: seconds a step."""
    return emit_grpo_config(
        RecipeRequest(
            model=ModelSpec(name=str(model_dir)),
            hardware=HardwareSpec(accelerator="cpu"),
            method="full",
            rewards=NEVER_PASSING,
            dataset=DatasetSpec(name=str(data), columns=["answer"]),
            overrides={"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 8},
            max_steps=steps,
            evaluation=EvaluationPlan(every_steps=0),
            report_to=report_to,
        )
    )


def pass_inspection() -> None:
    samples = [SuppliedSample(**sample) for sample in addition_samples()]
    pass_review(inspect_rewards(InspectionRequest(rewards=NEVER_PASSING, samples=samples)))


def finished(run_id: str, timeout: float = 240):
    status = run_status(run_id)
    deadline = time.time() + timeout
    while status.state in ("starting", "running") and time.time() < deadline:
        status = run_status(run_id, wait_seconds=2)
    assert status.state == "succeeded", run_logs(run_id).lines[-20:]
    return status


def test_the_default_tracker_is_trackio_where_installed_else_none(monkeypatch):
    assert recipe_tracking.tracking_fields(None, "trackio")[0][1] == (
        "trackio" if recipe_tracking.is_installed("trackio") else "none"
    )
    monkeypatch.setattr(recipe_tracking, "is_installed", lambda tracker: tracker == "none")
    (field, value, source, reason), *rest = recipe_tracking.tracking_fields(None, "trackio")
    assert (field, value, source, rest) == ("report_to", "none", "seed", [])
    assert "pip install 'grpo-rlvr[tracking]'" in reason
    rows = recipe_tracking.tracking_fields("trackio", "trackio")
    assert rows[1][:2] == ("trackio_space_id", None) and "run_grpo refuses" in rows[0][3]


def test_a_missing_tracker_is_refused_with_what_to_install(monkeypatch):
    monkeypatch.setattr(recipe_tracking, "is_installed", lambda tracker: tracker != "wandb")
    with pytest.raises(SkillError, match=r"wandb, which is not installed.*pip install wandb"):
        recipe_tracking.check_trackers_installed("wandb")
    with pytest.raises(SkillError, match="does not set up"):
        recipe_tracking.check_trackers_installed(["mlflow"])
    assert recipe_tracking.check_trackers_installed(["trackio"]) == "Tracking: trackio (installed)."


def test_run_grpo_refuses_a_recipe_whose_tracker_is_missing(tiny_model_dir, addition_data, monkeypatch):
    recipe = short_recipe(tiny_model_dir, addition_data, steps=1, report_to="tensorboard")
    assert recipe.trl["report_to"] == "tensorboard" and "trackio_space_id" not in recipe.trl
    pass_inspection()
    monkeypatch.setattr(recipe_tracking, "is_installed", lambda tracker: tracker != "tensorboard")
    with pytest.raises(SkillError, match="pip install tensorboard"):
        run_grpo(RunRequest(recipe=recipe, run_id="no-tensorboard"))


def test_trackers_write_where_the_user_said_else_under_the_state_root_and_run():
    run = Path("/state/runs/r7")
    chosen = tracker_environment(run, ["trackio", "wandb", "tensorboard"], {"NETRC": "/nonexistent"})
    assert chosen == {
        "TRACKIO_DIR": "/state/trackio",
        "WANDB_DIR": "/state/runs/r7",
        "WANDB_PROJECT": "grpo-rlvr",
        "WANDB_MODE": "offline",  # no key, no login: offline, never a login prompt
        "TENSORBOARD_LOGGING_DIR": "/state/runs/r7/tensorboard",
    }
    users = {"TRACKIO_DIR": "/t", "WANDB_API_KEY": "k", "TENSORBOARD_LOGGING_DIR": "/tb"}
    mine = tracker_environment(run, ["trackio", "wandb", "tensorboard"], users)
    assert (mine["TRACKIO_DIR"], mine["WANDB_MODE"], mine["TENSORBOARD_LOGGING_DIR"]) == ("/t", "online", "/tb")


READ_BACK = """
import json, sys, trackio
from trackio.sqlite_storage import SQLiteStorage
project = sys.argv[1]
runs = [run.name for run in trackio.Api().runs(project)]
print(json.dumps({"runs": runs, "alerts": trackio.Api().alerts(project),
                  "logs": SQLiteStorage.get_logs(project, runs[0])}, default=str))
"""


def read_back_from_trackio(directory: str, project: str) -> dict:
    """trackio's own reader, in a fresh process pointed at the run's TRACKIO_DIR (trackio reads it at import)."""
    done = subprocess.run(
        [sys.executable, "-c", READ_BACK, project],
        env={**os.environ, "TRACKIO_DIR": directory},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_trackio_run_gets_its_metrics_and_the_health_alert(
    tiny_model_dir, addition_data, isolated_state_root, monkeypatch
):
    monkeypatch.delenv("TRACKIO_DIR", raising=False)  # the runner's own choice: the state root's trackio/
    pass_inspection()
    recipe = short_recipe(tiny_model_dir, addition_data, steps=3, report_to="trackio")
    assert recipe.trl["report_to"] == "trackio" and recipe.trl["trackio_space_id"] is None
    run_grpo(RunRequest(recipe=recipe, run_id="tracked-trackio"))
    status = finished("tracked-trackio")
    assert "no_learning_signal_all_fail" in [warning["code"] for warning in status.health]
    (shown,) = status.tracking
    where = str(isolated_state_root / "trackio")
    assert (shown.tracker, shown.project, shown.location) == ("trackio", "tracked-trackio", where)
    assert shown.command == f"TRACKIO_DIR={where} trackio show --project tracked-trackio"

    stored = read_back_from_trackio(where, "tracked-trackio")
    assert stored["runs"] == ["tracked-trackio"]
    logged = {row["step"]: row["train/reward"] for row in stored["logs"] if "train/reward" in row}  # TRL's prefix
    ours = {row["step"]: row["reward"] for row in read_jsonl(run_dir("tracked-trackio") / "metrics.jsonl")}
    assert logged == ours and sorted(logged) == [1, 2, 3]
    (alert,) = [alert for alert in stored["alerts"] if "no_learning_signal_all_fail" in alert["title"]]
    shown_warning = next(w for w in status.health if w["code"] == "no_learning_signal_all_fail")
    assert alert["level"] == "error" and alert["text"].startswith(shown_warning["message"])  # critical -> error
    assert len(stored["alerts"]) == len({a["title"] for a in stored["alerts"]})  # each warning sent once
    sent = [row["code"] for row in read_jsonl(run_dir("tracked-trackio") / "alerts.jsonl")]  # not resent on resume
    assert sorted(sent) == sorted(alert["title"].removeprefix("GRPO health: ") for alert in stored["alerts"])


@pytest.mark.slow
def test_an_offline_wandb_run_writes_its_run_files(tiny_model_dir, addition_data, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(Path(os.devnull)))  # no W&B login: the runner picks offline by itself
    pass_inspection()
    run_grpo(RunRequest(recipe=short_recipe(tiny_model_dir, addition_data, steps=1, report_to="wandb"), run_id="wb"))
    status = finished("wb")
    (offline,) = list((run_dir("wb") / "wandb").glob("offline-run-*"))
    assert [path.stat().st_size > 0 for path in offline.glob("run-*.wandb")] == [True]
    (shown,) = status.tracking
    assert (shown.tracker, shown.location, shown.command) == ("wandb", str(offline), f"wandb sync {offline}")
    assert "offline" in shown.note
