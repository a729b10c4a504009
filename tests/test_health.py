"""Run health: each detector on synthetic metric series, a true positive and a true negative each,
and the two measured CPU runs (SmolLM2-135M, format + correctness) reconstructed as 40-point series."""

from __future__ import annotations

import math
import random

import pytest

from skill.recipe.deciding.variants import SYMPTOMS, select_variants
from skill.rewards.spec import RewardSpec, metric_names
from skill.runs.health import CAUSE_ORDER, diagnose, headline, symptoms
from skill.runs.series import BatchShape, finite_values, first_last_means

N = 40
EQUAL = [
    RewardSpec(name="format", role="format", weight=1.0),
    RewardSpec(name="exact_match", role="correctness", weight=1.0),
]
CORRECTNESS_LED = [
    RewardSpec(name="format", role="format", weight=0.2),
    RewardSpec(name="exact_match", role="correctness", weight=1.0),
]
FORMAT = "rewards/format/mean"
CORRECT = "rewards/exact_match/mean"
FORMAT_, CORRECT_ = FORMAT.replace("/", "__"), CORRECT.replace("/", "__")  # as keyword names for run()


def ramp(first: float, last: float, *, n: int = N, noise: float = 0.0, seed: int = 0, clamp: bool = True):
    """A linear series whose first-k and last-k means (k = n // 4) are ``first`` and ``last``, plus noise."""
    rng = random.Random(seed)
    k = max(3, n // 4)
    start, end = (k - 1) / 2, n - 1 - (k - 1) / 2
    values = [first + (last - first) * (i - start) / (end - start) + rng.gauss(0, noise) for i in range(n)]
    return [min(max(v, 0.0), 1.0) for v in values] if clamp else values


def run(n: int = N, **series) -> list[dict]:
    """Metric points from named series (keys use '__' for '/'), plus the step number."""
    points = [{"step": i + 1} for i in range(n)]
    for name, values in series.items():
        for point, value in zip(points, values, strict=True):
            point[name.replace("__", "/")] = value
    return points


def codes(warnings) -> list[str]:
    return [w.code for w in warnings]


def measured(format_: tuple[float, float], correct: tuple[float, float], seed: int = 0, noise: float = 0.04):
    return run(
        **{
            "rewards__format__mean": ramp(*format_, noise=noise, seed=seed),
            "rewards__exact_match__mean": ramp(*correct, noise=noise, seed=seed + 1000),
        }
    )


# --- the two measured runs -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_equal_weights_run_is_flagged_well_formed_but_wrong(seed):
    # Measured: format 0.11 -> 0.85 while correctness fell 0.19 -> 0.12 (first vs last 10 of 40 steps).
    metrics = measured((0.11, 0.85), (0.19, 0.12), seed=seed)
    first, last = first_last_means(metrics, CORRECT)
    assert last < first
    [warning] = [w for w in diagnose(metrics, EQUAL) if w.code == "reward_divergence"]
    assert warning.severity == "critical"
    assert warning.symptom is None and warning.suggested_variant is None
    assert "format at most 0.2" in warning.suggested_change
    assert "now format 1, exact_match 1" in warning.suggested_change
    assert warning.evidence["format_last"] > 0.7 and warning.evidence["exact_match_first"] > 0.15


@pytest.mark.parametrize("seed", range(5))
def test_correctness_led_run_is_healthy(seed):
    # Measured: correctness 1.0 / format 0.2 lifted correctness 0.16 -> 0.79; format rose too.
    metrics = measured((0.3, 0.95), (0.16, 0.79), seed=seed)
    assert diagnose(metrics, CORRECTNESS_LED) == []


def test_divergence_when_the_weights_already_favour_correctness_says_so():
    warning = next(w for w in diagnose(measured((0.11, 0.85), (0.19, 0.08)), CORRECTNESS_LED))
    assert warning.code == "reward_divergence" and warning.severity == "critical"
    assert "already favour exact_match" in warning.suggested_change


def test_format_learned_while_correctness_stands_still_is_a_warning_only_with_heavy_format_weight():
    metrics = measured((0.11, 0.85), (0.16, 0.16), noise=0.0)
    [warning] = [w for w in diagnose(metrics, EQUAL) if w.code == "reward_divergence"]
    assert warning.severity == "warning"
    assert not [w for w in diagnose(metrics, CORRECTNESS_LED) if w.code == "reward_divergence"]


def test_a_shaping_reward_can_diverge_too():
    rewards = [
        RewardSpec(name="exact_match", role="correctness", weight=1.0),
        RewardSpec(name="length_penalty", role="shaping", weight=1.0),
    ]
    metrics = run(rewards__exact_match__mean=ramp(0.5, 0.3), rewards__length_penalty__mean=ramp(0.2, 0.9))
    assert "reward_divergence" in codes(diagnose(metrics, rewards))


# --- one detector at a time ------------------------------------------------------------------------


def test_no_learning_signal_says_which_way():
    flagged = diagnose(run(frac_reward_zero_std=ramp(0.95, 0.97, noise=0.01), reward=[0.0] * N), EQUAL)
    assert codes(flagged) == ["no_learning_signal_all_fail"]
    assert flagged[0].symptom == "no_learning_signal" and flagged[0].suggested_variant == "more_exploration"
    assert flagged[0].evidence["frac_reward_zero_std_recent"] >= 0.9
    # All-pass needs the opposite fix: harder prompts, not more exploration.
    solved = diagnose(run(frac_reward_zero_std=[0.8] * N, **{CORRECT_: [0.97] * N}), CORRECTNESS_LED)
    assert codes(solved) == ["no_learning_signal_all_pass"]
    assert solved[0].suggested_variant is None and "harder prompts" in solved[0].suggested_change
    assert solved[0].evidence["all_pass_share"] > 0.7
    assert diagnose(run(frac_reward_zero_std=ramp(0.3, 0.2, noise=0.05)), EQUAL) == []


def test_three_quarters_uniform_groups_is_no_signal_at_8_completions_per_group():
    # The case: 75% of groups all-correct or all-wrong drew no warning under a 0.9 limit.
    shape = BatchShape(completions=64, group_size=8)  # 8 groups of 8 per logged step
    metrics = run(frac_reward_zero_std=[0.75] * N, **{CORRECT_: [0.1] * N})
    assert codes(diagnose(metrics, EQUAL, shape=shape))[0] == "no_learning_signal_all_fail"
    # A healthy run sits near 0.02; half the groups at the noise of 2 groups a step is not shown above 0.5.
    assert diagnose(run(frac_reward_zero_std=[0.02] * N), EQUAL, shape=shape) == []
    assert diagnose(run(n=6, frac_reward_zero_std=[0.5, 0.75] * 3), EQUAL, shape=BatchShape(16, 8)) == []


def test_length_growth_without_accuracy():
    metrics = run(
        completions__mean_length=ramp(100, 180, noise=5, clamp=False), **{CORRECT_: ramp(0.3, 0.3, noise=0.03)}
    )
    warnings = diagnose(metrics, EQUAL, max_completion_length=256)
    assert codes(warnings) == ["length_growth"]  # the flat correctness it explains is not a plateau on top
    warning = warnings[0]
    assert warning.symptom == "length_growth_without_accuracy"
    assert warning.suggested_variant == "dr_grpo"
    assert warning.evidence["length_growth"] > 0.3 and 0.6 < warning.evidence["length_last_of_max"] < 0.8
    accurate = run(completions__mean_length=ramp(100, 180, clamp=False), **{CORRECT_: ramp(0.2, 0.6)})
    assert diagnose(accurate, EQUAL) == []


def test_length_growth_falls_back_to_the_total_reward():
    metrics = run(completions__mean_length=ramp(100, 180, clamp=False), reward=ramp(0.5, 0.5))
    assert codes(diagnose(metrics, [])) == ["length_growth"]
    metrics = run(completions__mean_length=ramp(100, 180, clamp=False), reward=ramp(0.2, 0.9))
    assert diagnose(metrics, []) == []


def test_entropy_collapse():
    [warning] = diagnose(run(entropy=ramp(1.2, 0.2, noise=0.02, clamp=False)), EQUAL)
    assert warning.symptom == "entropy_collapse" and warning.evidence["ratio"] < 0.3
    assert diagnose(run(entropy=ramp(1.2, 0.9, noise=0.02, clamp=False)), EQUAL) == []
    # Already low at the start and still falling: the absolute floor catches it.
    assert codes(diagnose(run(entropy=ramp(0.12, 0.04, clamp=False)), EQUAL)) == ["entropy_collapse"]


def test_clipped_completions():
    [warning] = diagnose(run(completions__clipped_ratio=ramp(0.35, 0.45, noise=0.03)), EQUAL, 512)
    assert warning.symptom == "many_truncated_completions" and warning.suggested_variant == "overlong"
    assert warning.evidence["max_completion_length"] == 512 and "(512)" in warning.message
    surge = run(completions__clipped_ratio=ramp(0.04, 0.2, noise=0.01))
    assert codes(diagnose(surge, EQUAL)) == ["clipped_completions"]
    assert diagnose(run(completions__clipped_ratio=ramp(0.05, 0.07, noise=0.01)), EQUAL) == []


def test_kl_blowup():
    [warning] = diagnose(run(kl=ramp(0.002, 0.5, noise=0.001, clamp=False)), EQUAL)
    assert warning.symptom == "kl_blowup" and warning.severity == "warning" and warning.evidence["ratio"] > 10
    assert diagnose(run(kl=ramp(0.0, 2.0, clamp=False)), EQUAL)[0].severity == "critical"
    assert diagnose(run(kl=ramp(0.002, 0.05, noise=0.005, clamp=False)), EQUAL) == []
    # Large but not climbing: a high-beta run that started far from its reference is not a blow-up.
    assert diagnose(run(kl=ramp(0.3, 0.35, noise=0.01, clamp=False)), EQUAL) == []


def test_reward_plateau():
    rising_then_flat = ramp(0.1, 0.4, n=20, noise=0.0) + ramp(0.4, 0.4, n=20, noise=0.02, seed=3)
    [warning] = diagnose(run(**{CORRECT_: rising_then_flat}), EQUAL)
    assert warning.code == "reward_plateau" and warning.symptom == "early_plateau"
    assert warning.suggested_variant == "dapo"
    assert diagnose(run(**{CORRECT_: ramp(0.1, 0.7, noise=0.03)}), EQUAL) == []
    assert diagnose(run(**{CORRECT_: ramp(0.93, 0.95, noise=0.02)}), EQUAL) == []  # near the maximum
    # Not reported on top of its cause.
    starved = run(**{CORRECT_: [0.0] * N}, frac_reward_zero_std=[1.0] * N)
    assert codes(diagnose(starved, EQUAL)) == ["no_learning_signal_all_fail"]


def test_reward_failures_are_critical_and_first():
    metrics = run(
        completions__clipped_ratio=[0.5] * N,
        rewards__exact_match__failure_rate=[0.0] * 30 + [0.2] * 10,
        rewards__format__failure_rate=[0.01] * N,
        **{CORRECT_: [0.5] * 30 + [math.nan] * 10},
    )
    warnings = diagnose(metrics, EQUAL)
    assert codes(warnings) == ["reward_failures", "clipped_completions"]
    assert warnings[0].severity == "critical" and "exact_match" in warnings[0].message
    assert warnings[0].evidence == {"exact_match_failure_rate_recent": 0.2}


# --- robustness ------------------------------------------------------------------------------------


def test_too_short_a_series_gives_no_trend_warnings():
    metrics = run(
        n=5,
        completions__mean_length=[100, 150, 200, 250, 300],
        entropy=[1.0, 0.5, 0.2, 0.1, 0.05],
        kl=[0.0, 0.5, 1.0, 2.0, 4.0],
        **{FORMAT_: [0.1, 0.5, 0.8, 0.9, 0.95], CORRECT_: [0.3, 0.2, 0.1, 0.05, 0.0]},
    )
    assert diagnose(metrics, EQUAL) == []
    assert first_last_means(metrics, "kl") is None
    # Level checks still read a short series.
    short = run(n=3, frac_reward_zero_std=[1.0, 1.0, 1.0])
    assert codes(diagnose(short, EQUAL)) == ["no_learning_signal_all_fail"]
    assert diagnose(run(n=2, frac_reward_zero_std=[1.0, 1.0]), EQUAL) == []


def test_none_and_nan_are_skipped_not_read_as_zero():
    metrics = measured((0.11, 0.85), (0.19, 0.12))
    for i in range(0, N, 7):
        metrics[i][CORRECT] = None
        metrics[i + 1][FORMAT] = math.nan
        metrics[i + 2]["entropy"] = "n/a"
    assert len(finite_values(metrics, CORRECT)) == N - 6
    assert "reward_divergence" in codes(diagnose(metrics, EQUAL))
    assert diagnose([{}, {"reward": None}, {"kl": math.inf}] * 4, EQUAL) == []
    assert diagnose([], []) == []


def test_user_reward_names_match_what_trl_logs():
    specs = [
        RewardSpec(name="my_rewards:score", role="correctness"),
        RewardSpec(name="format", role="format"),
        RewardSpec(name="format", role="shaping"),
    ]
    assert [name for _, name in metric_names(specs)] == ["score", "format", "format_2"]
    metrics = run(rewards__score__mean=ramp(0.19, 0.1), rewards__format_2__mean=ramp(0.1, 0.9))
    assert "format_2 (shaping) rose" in diagnose(metrics, specs)[0].message


def test_symptoms_are_keys_of_the_variant_table():
    metrics = run(
        frac_reward_zero_std=[0.95] * N,
        completions__mean_length=ramp(100, 200, clamp=False),
        completions__clipped_ratio=[0.4] * N,
        entropy=ramp(1.0, 0.1, clamp=False),
        kl=ramp(0.001, 0.6, clamp=False),
        **{CORRECT_: [0.2] * N},
    )
    warnings = diagnose(metrics, EQUAL, max_completion_length=256)
    names = symptoms(warnings)
    assert set(names) == {
        "no_learning_signal",
        "length_growth_without_accuracy",
        "many_truncated_completions",
        "entropy_collapse",
        "kl_blowup",
    }
    for warning in warnings:
        assert warning.symptom in SYMPTOMS
        assert warning.suggested_variant == SYMPTOMS[warning.symptom]
        assert all(math.isfinite(value) for value in warning.evidence.values())
    plateau = diagnose(run(**{CORRECT_: ramp(0.1, 0.4, n=20) + [0.4] * 20}), EQUAL)
    assert symptoms(plateau + warnings + plateau).count("early_plateau") == 1
    assert select_variants([], symptoms(plateau + warnings))[0]  # emit_grpo_config accepts them
    ranks = [CAUSE_ORDER.index(w.code) for w in warnings]
    assert ranks == sorted(ranks) and warnings[0].code == "no_learning_signal_all_fail"


# --- held-out rows, gradients, clipping, composition, ranking ----------------------------------------


def with_heldout(metrics: list[dict], values: list[float], every: int = 5) -> list[dict]:
    """Training rows with held-out rows (TRL's eval_* keys) at step 0 and every ``every`` steps, in log order."""
    rows = [{"step": 0, "eval_loss": 0.0, "eval_rewards/exact_match/mean": values[0]}]
    for point in metrics:
        rows.append(point)
        if point["step"] % every == 0 and point["step"] // every < len(values):
            rows.append(
                {
                    "step": point["step"],
                    "eval_loss": 0.0,
                    "eval_rewards/exact_match/mean": values[point["step"] // every],
                }
            )
    return rows


HELDOUT_SHAPE = BatchShape(completions=32, group_size=8, eval_prompts=16, eval_generations=2)


def test_training_rising_while_heldout_peaks_and_falls_is_named():
    train = run(**{CORRECT_: ramp(0.2, 0.8, noise=0.03)})
    hacked = with_heldout(train, [0.2, 0.3, 0.45, 0.5, 0.45, 0.35, 0.25, 0.15, 0.1])
    [warning] = diagnose(hacked, CORRECTNESS_LED, shape=HELDOUT_SHAPE)
    assert warning.code == "heldout_divergence" and warning.severity == "critical"
    assert warning.evidence["heldout_best"] > 0.4 and warning.evidence["heldout_last"] < 0.2
    assert "checkpoint from around step" in warning.suggested_change
    learning = with_heldout(train, [0.2, 0.27, 0.35, 0.42, 0.5, 0.56, 0.63, 0.7, 0.75])
    assert diagnose(learning, CORRECTNESS_LED, shape=HELDOUT_SHAPE) == []
    # The same fall within the noise of a 4-prompt sample is not shown.
    small = BatchShape(32, 8, eval_prompts=2, eval_generations=2)
    wobble = with_heldout(train, [0.2, 0.3, 0.45, 0.5, 0.45, 0.4, 0.5, 0.35, 0.4])
    assert diagnose(wobble, CORRECTNESS_LED, shape=small) == []


def test_length_hacking_is_seen_through_the_heldout_score():
    # The case: length 438 -> 1205 while a hackable correctness reward rises; held-out does not.
    train = run(completions__mean_length=ramp(438, 1205, noise=20, clamp=False), **{CORRECT_: ramp(0.3, 0.65)})
    assert diagnose(train, CORRECTNESS_LED, max_completion_length=2048) == []  # invisible without held-out rows
    hacked = with_heldout(train, [0.3, 0.31, 0.29, 0.3, 0.32, 0.3, 0.28, 0.3, 0.29])
    [warning] = diagnose(hacked, CORRECTNESS_LED, max_completion_length=2048, shape=HELDOUT_SHAPE)
    assert warning.code == "length_growth" and warning.suggested_variant == "dr_grpo"
    assert "held-out exact_match" in warning.message


def test_gradient_spikes_and_vanishing_gradients():
    norms = [0.5 * (1.2 if i % 3 else 0.8) for i in range(N)]
    spiky = list(norms)
    spiky[25] *= 150
    [warning] = diagnose(run(grad_norm=spiky), EQUAL)
    assert warning.code == "gradient_spikes" and warning.suggested_variant == "gspo"
    assert warning.evidence["worst_ratio"] > 100 and warning.evidence["worst_step"] == 26
    assert diagnose(run(grad_norm=norms), EQUAL) == []
    fading = [0.5 * 0.001 ** (i / (N - 1)) for i in range(N)]
    [warning] = diagnose(run(grad_norm=fading, frac_reward_zero_std=[0.05] * N), EQUAL)
    assert warning.code == "vanishing_gradients" and "fp32 master weights" in warning.suggested_change
    # No gradient because every group is uniform is the learning signal's failure, not this one.
    assert "vanishing_gradients" not in codes(diagnose(run(grad_norm=fading, frac_reward_zero_std=[1.0] * N), EQUAL))


def test_clip_saturation():
    [warning] = diagnose(run(**{"clip_ratio__region_mean": ramp(0.05, 0.35, clamp=False)}), EQUAL)
    assert warning.code == "clip_saturation" and warning.symptom == "multi_step_instability"
    assert diagnose(run(**{"clip_ratio__region_mean": [0.04] * N}), EQUAL) == []


GSPO = {"importance_sampling_level": "sequence", "loss_type": "dapo"}
GAP = "sampling__sampling_logp_difference__mean"


def test_a_symptom_never_suggests_the_loss_the_run_already_trains_with():
    norms = [0.5 * (1.2 if i % 3 else 0.8) for i in range(N)]
    norms[25] *= 150
    spiky = run(grad_norm=norms)
    # Spikes call for GSPO; under GSPO already, for SAPO's soft gate; under SAPO, for a lower learning rate.
    assert diagnose(spiky, EQUAL)[0].suggested_variant == "gspo"
    [under_gspo] = diagnose(spiky, EQUAL, trl=GSPO)
    assert (under_gspo.symptom, under_gspo.suggested_variant) == ("instability_despite_gspo", "sapo")
    [under_sapo] = diagnose(spiky, EQUAL, trl={"loss_type": "sapo"})
    assert under_sapo.suggested_variant is None and "learning_rate" in under_sapo.suggested_change
    saturated = run(**{"clip_ratio__region_mean": ramp(0.05, 0.35, clamp=False)})
    assert diagnose(saturated, EQUAL, trl=GSPO)[0].suggested_variant == "sapo"


def test_training_inference_mismatch():
    # Healthy pairs hold ~0.011 nats per token (vllm-project/vime#64); a drift past 0.03 that doubled is flagged.
    drifting = run(**{GAP: ramp(0.011, 0.06, noise=0.002, clamp=False)})
    [warning] = diagnose(drifting, EQUAL, trl={"use_vllm": True})
    assert (warning.code, warning.suggested_variant, warning.severity) == (
        "training_inference_mismatch",
        "vespo",
        "warning",
    )
    assert warning.evidence["logp_difference_last"] == pytest.approx(0.06, rel=0.1)
    assert diagnose(run(**{GAP: ramp(0.011, 0.013, noise=0.001, clamp=False)}), EQUAL) == []
    assert diagnose(run(**{GAP: ramp(0.035, 0.04, noise=0.001, clamp=False)}), EQUAL) == []  # high but steady
    [severe] = diagnose(run(**{GAP: ramp(0.12, 0.13, clamp=False)}), EQUAL)
    assert severe.severity == "critical"
    [on_vespo] = diagnose(drifting, EQUAL, trl={"loss_type": "vespo"})
    assert on_vespo.suggested_variant is None and "dtype" in on_vespo.suggested_change


def test_rare_tokens_clipped_at_the_upper_bound():
    skewed = run(clip_ratio__low_mean=[0.002] * N, clip_ratio__high_mean=ramp(0.01, 0.03, clamp=False))
    [warning] = diagnose(skewed, EQUAL)
    assert (warning.code, warning.suggested_variant) == ("rare_tokens_clipped", "cispo")
    assert diagnose(run(clip_ratio__low_mean=[0.01] * N, clip_ratio__high_mean=[0.012] * N), EQUAL) == []
    assert diagnose(skewed, EQUAL, trl={"loss_type": "cispo"}) == []


def test_length_collapse_under_sequence_ratios():
    shrinking = run(completions__mean_length=ramp(400, 120, clamp=False), **{CORRECT_: [0.3] * N, FORMAT_: [0.9] * N})
    warning = diagnose(shrinking, CORRECTNESS_LED, trl=GSPO)[0]  # ahead of the plateau it explains
    assert (warning.code, warning.suggested_variant) == ("length_collapse", "luspo")
    assert "length_collapse" not in codes(diagnose(shrinking, CORRECTNESS_LED))  # token ratios: not GSPO's bias
    assert "length_collapse" not in codes(diagnose(shrinking, CORRECTNESS_LED, trl=GSPO | {"loss_type": "luspo"}))
    learning = run(
        completions__mean_length=ramp(400, 120, clamp=False), **{CORRECT_: ramp(0.1, 0.8), FORMAT_: [0.9] * N}
    )
    assert diagnose(learning, CORRECTNESS_LED, trl=GSPO) == []  # shorter and better: conciseness


def test_a_format_reward_carrying_the_variance_is_named_not_a_plateau():
    metrics = run(
        rewards__format__mean=[0.5] * N,
        rewards__format__std=[0.5] * N,
        rewards__exact_match__std=[0.3] * N,
        **{CORRECT_: ramp(0.12, 0.11, noise=0.01)},
    )
    warnings = diagnose(metrics, EQUAL)
    assert codes(warnings) == ["reward_composition"]
    assert warnings[0].evidence["format_variance_share"] > 0.7
    assert "at most 0.2" in warnings[0].suggested_change
    assert codes(diagnose(metrics, CORRECTNESS_LED)) == ["reward_plateau"]  # a fifth of the weight: 10% share


def test_entropy_on_course_for_its_floor_before_the_run_ends():
    falling = run(n=20, entropy=ramp(1.0, 0.5, n=20, clamp=False))
    [warning] = diagnose(falling, EQUAL, max_steps=200)
    assert warning.code == "entropy_collapse" and 0 < warning.evidence["steps_to_floor"] < 180
    assert "in about" in warning.message
    assert diagnose(falling, EQUAL, max_steps=30) == []  # ends before it gets there


def test_status_headline_leads_with_the_most_likely_cause():
    metrics = run(frac_reward_zero_std=[0.95] * N, entropy=ramp(1.0, 0.1, clamp=False), **{CORRECT_: [0.01] * N})
    warnings = diagnose(metrics, EQUAL)
    assert codes(warnings) == ["no_learning_signal_all_fail", "entropy_collapse"]
    line = headline(warnings)
    assert line.startswith("Most likely cause: ") and "more_exploration" in line and "(1 more below)" in line
    assert headline([]) is None


@pytest.mark.parametrize("seed", range(20))
def test_equal_weights_run_that_learns_is_not_a_divergence_under_batch_noise(seed):
    # Format learned fast, correctness rising slowly, at the demo's batch (16 completions per step).
    metrics = measured((0.11, 0.85), (0.16, 0.40), seed=seed, noise=0.09)
    assert "reward_divergence" not in codes(diagnose(metrics, EQUAL, shape=BatchShape(16, 8)))


@pytest.mark.parametrize("seed", range(20))
def test_measured_equal_weights_run_is_caught_under_batch_noise(seed):
    metrics = measured((0.11, 0.85), (0.19, 0.12), seed=seed, noise=0.09)
    assert diagnose(metrics, EQUAL, shape=BatchShape(16, 8))[0].code == "reward_divergence"


# --- the contract: a check declares itself, and a check that cannot run says so ------------------------------


def test_every_check_declares_codes_a_rank_and_the_metrics_it_reads():
    from skill.runs.health_check import registry

    checks = registry()
    assert [check.rank for check in checks] == sorted({check.rank for check in checks})  # unique, in order
    assert tuple(code for check in checks for code in check.codes) == CAUSE_ORDER
    assert len(CAUSE_ORDER) == len(set(CAUSE_ORDER)) == 17 and CAUSE_ORDER[-1] == "reward_plateau"
    assert all(check.needs for check in checks)
    plateau = next(check for check in checks if check.codes == ("reward_plateau",))
    assert {"no_learning_signal_all_fail", "reward_divergence"} <= set(plateau.unless)


def test_a_new_check_is_one_decorated_function_and_runs_in_its_rank(monkeypatch):
    """The worked example of adding a check: one function where it belongs, nothing else edited."""
    from skill.runs import health_check

    monkeypatch.setattr(health_check, "_REGISTRY", list(health_check.registry()))  # the example leaves no trace

    @health_check.health_check("tokens_per_second_drop", rank=115, needs=("tokens_per_second",))
    def tokens_per_second_drop(view):
        values = finite_values(view.metrics, "tokens_per_second")
        if len(values) >= 4 and values[-1] < 0.5 * values[0]:
            return health_check.HealthWarning(code="tokens_per_second_drop", severity="warning", message="slower")
        return None

    slower = [{"step": i, "tokens_per_second": 100.0 - 20 * i} for i in range(4)]
    assert [w.code for w in diagnose(slower, EQUAL)] == ["tokens_per_second_drop"]
    assert "tokens_per_second_drop" not in health_check.unchecked(slower)
    assert "tokens_per_second_drop" in health_check.unchecked([{"step": 1, "reward": 0.5}])


def test_checks_whose_metrics_were_never_logged_are_listed_not_read_as_healthy():
    from skill.runs.health_check import unchecked

    rewards_only = run(**{CORRECT_: ramp(0.2, 0.6), FORMAT_: ramp(0.3, 0.9)})
    assert not [key for point in rewards_only for key in point if key in ("kl", "grad_norm", "entropy")]
    skipped = unchecked(rewards_only)
    assert {"kl_blowup", "gradient_spikes", "vanishing_gradients", "entropy_collapse"} <= set(skipped)
    assert "plateau" not in skipped and "reward_divergence" not in skipped
