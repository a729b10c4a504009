"""The labelled validation set: series shaped like TRL's GRPO logs, and run health against it (every failure
named by its check across seeds and lengths, no warning on healthy runs of several lengths and seeds, finished
or read every two steps while they train)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

from skill.runs.health import diagnose
from skill.runs.labelled_series import EXPECTED, LENGTHS, labelled_run, measured_runs, real_demo_run, validation_set
from skill.runs.series import BatchShape, finite_values, first_last_means

BENCH = Path(__file__).resolve().parent.parent / "bench" / "health_validation.py"
TRL_KEYS = {  # what GRPOTrainer 1.16 logs for two reward functions, beta > 0, plus the Trainer's own
    "loss", "grad_norm", "learning_rate", "epoch", "num_tokens", "entropy", "kl", "reward", "reward_std",
    "frac_reward_zero_std", "completions/mean_length", "completions/min_length", "completions/max_length",
    "completions/clipped_ratio", "rewards/format/mean", "rewards/format/std", "rewards/exact_match/mean",
    "rewards/exact_match/std", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
}  # fmt: skip
SAMPLING_KEYS = {  # and on the vLLM path with importance-sampling correction
    "sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
    "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
    "sampling/importance_sampling_ratio/max",
}  # fmt: skip


def load_bench():
    spec = importlib.util.spec_from_file_location("health_validation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(labelled):
    return [w.code for w in labelled.diagnose()]


def test_series_are_shaped_like_trl_logs():
    labelled = labelled_run("healthy", seed=3, steps=40, shape=BatchShape(32, 8, 16, 2))
    training = [row for row in labelled.metrics if "loss" in row]
    held_out = [row for row in labelled.metrics if "eval_loss" in row]
    assert [row["step"] for row in training] == list(range(1, 41))
    assert [row["step"] for row in held_out] == [0, 5, 10, 15, 20, 25, 30, 35, 40]  # before step 1, then every 5
    keys = set(training[0]) - {"step", "time"}
    assert keys - {"kl"} - SAMPLING_KEYS <= TRL_KEYS and TRL_KEYS - {"kl"} <= keys
    assert {"eval_rewards/exact_match/mean", "eval_reward", "eval_completions/mean_length"} <= set(held_out[0])
    for row in training:
        assert 0 <= row["frac_reward_zero_std"] <= 1 and 0 <= row["completions/clipped_ratio"] <= 1
        format_weight, correct_weight = (spec.weight for spec in labelled.rewards)
        total = format_weight * row["rewards/format/mean"] + correct_weight * row["rewards/exact_match/mean"]
        assert row["reward"] == pytest.approx(total)
    # Batch noise is that of 32 completions: step-to-step spread of the correctness mean near sqrt(p(1-p)/32).
    flat = labelled_run("all_fail", seed=0, steps=200, shape=BatchShape(32, 8, 16, 2))
    values = finite_values(flat.metrics, "rewards/exact_match/mean")
    assert statistics.fmean(values) < 0.05 and statistics.stdev(values) < 0.1


def test_each_failure_changes_what_it_is_about():
    hacking = labelled_run("reward_hacking", seed=1, steps=100)
    train = first_last_means(hacking.metrics, "rewards/exact_match/mean")
    held = finite_values(hacking.metrics, "eval_rewards/exact_match/mean")
    assert train[1] - train[0] > 0.3 and held[-1] < max(held) - 0.1
    length = first_last_means(labelled_run("length_hacking", seed=1).metrics, "completions/mean_length")
    assert length[0] < 600 and length[1] > 1000
    weights = [spec.weight for spec in labelled_run("well_formed_wrong", seed=1).rewards]
    assert weights == [1.0, 1.0]


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_each_check_fires_on_its_failure_across_seeds(label):
    runs = [labelled_run(label, seed, steps=(40, 100, 200)[seed % 3]) for seed in range(10)]
    named = [check(labelled)[:1] == [EXPECTED[label]] for labelled in runs]
    # A plateau cannot be told from slow learning at 40 steps of 2-8 prompts a step (13/20 over all lengths,
    # bench/RESULTS.md); the held-out fall is read on 16 prompts x 2 completions.
    floor = {"reward_plateau": 5, "heldout_divergence": 8}.get(EXPECTED[label], 9)
    assert sum(named) >= floor, [(labelled.seed, labelled.max_steps, check(labelled)) for labelled in runs]


@pytest.mark.parametrize("steps", LENGTHS)
def test_no_warning_on_healthy_runs(steps):
    alarms = [(seed, check(labelled_run("healthy", seed, steps))) for seed in range(10)]
    assert [alarm for alarm in alarms if alarm[1]] == []


def test_the_projects_measured_runs():
    for labelled in measured_runs(range(10)):
        codes = check(labelled)
        if labelled.label == "measured_demo":
            assert codes == [], (labelled.seed, codes)
        else:
            assert codes[0] == "reward_divergence", (labelled.seed, codes)


def test_the_real_demo_is_told_nothing_while_it_learns_and_solved_at_the_end():
    # The demo's own rows (2026-12-01). Before: entropy_collapse from step 12 on, while held-out rose 0.03 -> 0.81.
    demo = real_demo_run()
    run = (demo.rewards, demo.max_completion_length, demo.shape, demo.max_steps)
    raised = {}
    for step in range(3, 41):
        codes = [w.code for w in diagnose([row for row in demo.metrics if row["step"] <= step], *run)]
        if codes:
            raised[step] = codes
    assert raised == {40: ["no_learning_signal_all_pass"]}


def test_detection_table_meets_the_bar():
    bench = load_bench()
    result = bench.run(seeds=10, healthy_seeds=10)
    assert result["healthy_runs"] >= 30 and result["false_alarms"] == 0
    assert result["detected"] >= 0.9 * result["failing_runs"]
    assert result["named_first"] >= 0.9 * result["failing_runs"]
    assert set(result["labels"]) == set(EXPECTED) | {"healthy", "measured_demo", "measured_equal_weights", "real_demo"}
    table = bench.markdown(result)
    assert "| well_formed_wrong | reward_divergence |" in table and "**all**" in table
    assert len(validation_set(1, 1)) == len(EXPECTED) + len(LENGTHS) + 11


def test_healthy_runs_read_while_they_train_rarely_raise_anything():
    # The bench's live figure: 85 healthy runs (20/40/100/200 steps over 20 seeds, and the reconstructed demo) read
    # every 2 steps with their max_steps, as run_status reads them. Before sequential reading 12 of the first 25
    # raised a warning at some point; measured now: 4/85 runs, 12 of 4,060 reads. The bound leaves a run's noise.
    live = load_bench().live_false_alarms(seeds=3, healthy_seeds=20)
    assert live["healthy_runs"] == 85 and live["reads"] > 4000
    assert live["alarmed_at_some_point"] <= 5, live["codes"]
    assert live["alarmed_reads"] / live["reads"] < 0.005, live


@pytest.mark.parametrize(
    ("seed", "steps", "step", "code"), [(3, 100, 21, "reward_divergence"), (1, 200, 35, "reward_plateau")]
)
def test_an_early_read_is_not_judged_as_a_finished_run(seed, steps, step, code):
    # The same rows: read as step 21 of 100 (format learned, correctness down 0.28 -> 0.16 by the noise of 16
    # completions a step) or 35 of 200, nothing is shown yet; had the run ended there, they are the failure.
    labelled = labelled_run("healthy", seed, steps)
    rows = [row for row in labelled.metrics if row["step"] <= step]
    run = (labelled.rewards, labelled.max_completion_length, labelled.shape)
    assert diagnose(rows, *run, steps) == []
    assert code in [w.code for w in diagnose(rows, *run, step)]
    assert code in [w.code for w in diagnose(rows, *run, None)]  # length unknown: judged as it stands
