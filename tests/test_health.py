"""Run health: each detector on synthetic metric series, a true positive and a true negative each,
and the two measured CPU runs (SmolLM2-135M, format + correctness) reconstructed as 40-point series."""

from __future__ import annotations

import math
import random

import pytest

from skill.recipe.variants import SYMPTOMS, select_variants
from skill.rewards.spec import RewardSpec
from skill.runs.health import diagnose, symptoms
from skill.runs.series import finite_values, first_last_means, metric_names

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


def test_no_learning_signal():
    flagged = diagnose(run(frac_reward_zero_std=ramp(0.95, 0.97, noise=0.01), reward=[0.0] * N), EQUAL)
    assert codes(flagged) == ["no_learning_signal"]
    assert flagged[0].symptom == "no_learning_signal" and flagged[0].suggested_variant == "more_exploration"
    assert flagged[0].evidence["frac_reward_zero_std_recent"] >= 0.9
    assert diagnose(run(frac_reward_zero_std=ramp(0.6, 0.5, noise=0.05)), EQUAL) == []


def test_length_growth_without_accuracy():
    metrics = run(
        completions__mean_length=ramp(100, 180, noise=5, clamp=False), **{CORRECT_: ramp(0.3, 0.3, noise=0.03)}
    )
    warnings = diagnose(metrics, EQUAL, max_completion_length=256)
    assert codes(warnings) == ["length_growth", "reward_plateau"]  # flat correctness is a plateau too
    warning = warnings[0]
    assert warning.symptom == "length_growth_without_accuracy"
    assert warning.suggested_variant == "dr_grpo"
    assert warning.evidence["length_growth"] > 0.3 and 0.6 < warning.evidence["length_last_of_max"] < 0.8
    accurate = run(completions__mean_length=ramp(100, 180, clamp=False), **{CORRECT_: ramp(0.2, 0.6)})
    assert diagnose(accurate, EQUAL) == []


def test_length_growth_falls_back_to_the_total_reward():
    metrics = run(completions__mean_length=ramp(100, 180, clamp=False), reward=ramp(0.5, 0.5))
    assert codes(diagnose(metrics, [])) == ["length_growth", "reward_plateau"]
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
    assert codes(diagnose(starved, EQUAL)) == ["no_learning_signal"]


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
    assert codes(diagnose(short, EQUAL)) == ["no_learning_signal"]
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
    assert [w.severity for w in warnings] == sorted((w.severity for w in warnings), key=lambda s: s != "critical")
