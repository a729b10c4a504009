"""A short smoke of the demo pipeline (make demo runs the full one): every stage runs for real."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from skill.demo.pipeline import DemoStepFailed, run_demo
from skill.runs.jobs import run_status
from skill.state import STATE_ROOT_ENV

ROOT = Path(__file__).resolve().parent.parent


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


def _interrupt_when(marker: str, lines: list[str]):
    """A ``say`` that keeps the lines and interrupts (as Ctrl-C would) on the first one holding ``marker``."""

    def say(line: str) -> None:
        lines.append(line)
        if marker in line:
            raise KeyboardInterrupt

    return say


@pytest.mark.slow
def test_the_demo_starts_again_after_an_interrupt_at_any_step_on_a_state_root_that_read_before(tmp_path, monkeypatch):
    """Interrupted in the route's sampling, then after its read revealed the draw, then during its run: each time
    started again on the same state root, and the next start reaches a passed read and a run; the last one
    trains to the end. The read after a reveal samples fresh prompts rather than failing on the seen ones."""
    from skill.models.sources import embedded_model_dir, embedded_tokenizer_dir
    from skill.runs.jobs import list_runs

    embedded_model_dir(), embedded_tokenizer_dir()  # built once per session, under the session's state root
    root = tmp_path / "state"
    root.mkdir()
    (root / "cache").symlink_to(embedded_model_dir().parent, target_is_directory=True)  # shared, not rebuilt
    monkeypatch.setenv(STATE_ROOT_ENV, str(root))

    def stop_sampling(done: float, total: float, message: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(DemoStepFailed, match="step 1/5 route_check: interrupted") as stopped:
        run_demo(steps=1, say=[].append, progress=stop_sampling)
    assert stopped.value.interrupted and not list((root / "routes").glob("*.json"))

    first: list[str] = []
    with pytest.raises(DemoStepFailed, match="step 2/5 inspect_rewards: interrupted"):
        run_demo(steps=1, say=_interrupt_when("verdict: passed", first))  # the draw's scores are now revealed
    assert not list_runs().runs

    second: list[str] = []
    with pytest.raises(DemoStepFailed, match="step 5/5 run_grpo: interrupted"):
        run_demo(steps=1, say=_interrupt_when("held-out: correctness", second))
    text = "\n".join(second)
    assert "samples revealed before on this state root left out" in text, text
    assert "fresh samples of the policy were collected" in text and "prompts no read had revealed" in text, text
    assert "verdict: passed" in text, text
    (started,) = list_runs().runs
    assert started.state == "cancelled" and f"run {started.run_id} cancelled" in text  # not left training

    third: list[str] = []
    result = run_demo(steps=1, say=third.append)
    assert result.run_state == "succeeded" and "verdict: passed" in "\n".join(third), third
    assert "fresh samples of the policy were collected" in "\n".join(third)


def test_a_failed_step_ends_make_demo_with_a_non_zero_status_and_one_line(tmp_path):
    """A state root that cannot be made (a file stands where it should be) fails the first step: make demo exits
    non-zero and stderr names the step and why, in one line, with no traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, STATE_ROOT_ENV: str(blocker / "state")}
    done = subprocess.run(
        ["make", "--no-print-directory", "--old-file=.venv/.installed", "demo"],  # the test's own .venv, as it is
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0, done.stdout
    failed = [line for line in done.stderr.splitlines() if line.startswith("grpo-rlvr demo failed at")]
    assert failed == [line for line in failed if line.startswith("grpo-rlvr demo failed at step 1/5 route_check: ")]
    assert len(failed) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "a-file" in failed[0]  # why: the path that could not be made
