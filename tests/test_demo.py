"""A short smoke of the demo pipeline (make demo runs the full one): every stage runs for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from skill.demo.pipeline import run_demo


@pytest.mark.slow
def test_demo_pipeline_runs_every_stage_for_real():
    lines = []
    result = run_demo(steps=2, eval_prompts=8, samples_per_prompt=2, say=lines.append)
    assert result.route == "grpo", lines
    assert result.inspection_id and result.run_state == "succeeded", lines
    assert result.before is not None and result.after is not None
    assert result.before.prompts == result.after.prompts == 8
    assert Path(result.reward_curve).is_file()
    text = "\n".join(lines)
    for stage in ("route_check", "inspect_rewards", "emit_grpo_config", "estimate_memory", "run_grpo"):
        assert stage in text
    assert "recorded as unread" in text
