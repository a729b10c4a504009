"""The ETA a run reports counts the held-out evaluations still to run, at their own duration."""

from __future__ import annotations

import json
from pathlib import Path

from skill.runs.time_estimate import ESTIMATE_FILE, time_fields


def _estimate(directory: Path, **fields: float) -> None:
    stored = {"seconds_per_step": 10.0, "fixed_per_step_s": 0.0, "evaluation_s": 50.0, "evaluations": 3, **fields}
    (directory / ESTIMATE_FILE).write_text(json.dumps(stored))


def test_before_step_one_the_eta_adds_every_planned_evaluation_at_its_estimate(tmp_path: Path) -> None:
    _estimate(tmp_path)
    fields = time_fields(tmp_path, [], remaining_steps=10, state="running")
    assert fields["eta_seconds"] == 10 * 10.0 + 3 * 50.0


def test_measured_evaluations_replace_the_estimate_and_leave_the_step_rate(tmp_path: Path) -> None:
    _estimate(tmp_path)
    metrics = [
        {"step": 0, "time": 100.0, "eval_loss": 0.0, "eval_runtime": 80.0},
        {"step": 1, "time": 110.0, "loss": 0.1},
        {"step": 2, "time": 120.0, "loss": 0.1},
        {"step": 2, "time": 200.0, "eval_loss": 0.0, "eval_runtime": 80.0},
        {"step": 3, "time": 210.0, "loss": 0.1},
    ]
    fields = time_fields(tmp_path, metrics, remaining_steps=7, state="running")
    assert fields["seconds_per_step"] == 10.0  # (210 - 110 - 80) / 2: the evaluation at step 2 is not a step
    assert fields["eta_seconds"] == 7 * 10.0 + 1 * 80.0  # 3 planned, 2 done, at their measured 80 s


def test_a_run_past_step_zero_that_logged_no_evaluation_has_none_left(tmp_path: Path) -> None:
    _estimate(tmp_path)
    metrics = [{"step": 1, "time": 0.0, "loss": 0.1}, {"step": 2, "time": 10.0, "loss": 0.1}]
    assert time_fields(tmp_path, metrics, remaining_steps=8, state="running")["eta_seconds"] == 80.0


def test_a_finished_run_has_no_eta(tmp_path: Path) -> None:
    _estimate(tmp_path)
    assert time_fields(tmp_path, [], remaining_steps=0, state="succeeded")["eta_seconds"] is None
