"""A short smoke of the demo pipeline (make demo runs the full one): every stage runs for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skill.demo.pipeline import run_demo
from skill.runs.jobs import run_status


@pytest.mark.slow
def test_demo_pipeline_runs_every_stage_for_real():
    lines = []
    result = run_demo(steps=2, say=lines.append)
    assert result.route == "grpo", lines
    assert result.inspection_id and result.run_state == "succeeded", lines
    # The run's own held-out evaluation, before the first step and after the last, is what the demo reports.
    assert [(score.step, score.reward) for score in result.held_out] == [(0, "exact_match"), (2, "exact_match")]
    assert Path(result.reward_curve).is_file()
    text = "\n".join(lines)
    for stage in ("route_check", "inspect_rewards", "emit_grpo_config", "estimate_memory", "run_grpo"):
        assert stage in text
    assert f"held-out: {result.held_out[0].describe()} -> " in text
    # The route's completion lengths size the budget, and the screen says how.
    assert "completion lengths: median" in text and "max_completion_length=" in text and "sized from the task" in text
    # The demo passes the gate with a blind read by a program, and says so on screen and in the run's status.
    assert "read blind by a program" in text and "imports nothing from skill.rewards" in text
    assert "verdict: passed" in text
    # The estimated step time before training, the measured one beside it after.
    assert "time, estimated before training: ~" in text
    assert f"time per step: estimated {result.estimated_seconds_per_step:.1f} s | measured " in text
    assert result.measured_seconds_per_step > 0
    status = run_status(result.run_id)
    assert result.reward_review == status.reward_review and status.reward_review.startswith("reviewed: program")
    assert json.loads(Path(status.paths["metrics.header.json"]).read_text())["reviewed"] is True
