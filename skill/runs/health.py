"""Run health: read the metrics TRL has logged so far and say what is going wrong, with the numbers.

A logging step averages one batch (16 completions on the CPU demo), so one step's reward moves by
about 0.1 on noise alone. Every check therefore compares windows, never single points: a trend is
the difference between the means of the first and last k points (k = max(3, n // 4)), and it counts
only when it beats both an absolute floor and the noise (the windows' standard error, estimated from
the spread of step-to-step differences, which a steady trend barely inflates). A level check (a rate
that is simply too high) reads the last window only. None and NaN (a reward that failed on a whole
batch) are skipped, not read as zero.

The absolute floors on reward means assume rewards in [0, 1], as the registry's format and
correctness rewards are; the noise term scales with any reward.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Literal

from pydantic import BaseModel, Field

from skill.recipe.variants import SYMPTOMS
from skill.rewards.spec import RewardSpec
from skill.runs.series import (
    Trend,
    falls,
    finite_values,
    metric_names,
    point_noise,
    recent_mean,
    rises,
    trend_of,
)

# 1. Nine groups in ten with identical rewards leave nine tenths of the batch with zero advantage.
ZERO_STD_LIMIT = 0.9
# 2. Dr. GRPO's length bias shows as steady growth; 30% over a run is well past sampling drift. It
# must be significant; correctness "not rising" is judged on the point estimate (gain under 0.05).
LENGTH_GROWTH = 0.30
# 3. DAPO reports entropy collapsing to a small fraction of its start; below 0.05 nats per token the
# group's samples are nearly identical whatever the start was.
ENTROPY_RATIO = 0.30
ENTROPY_FLOOR = 0.05
# 4. When a third of completions are cut off, the reward judges truncated text that often; a
# doubling from at least 10% is a surge on its way there.
CLIPPED_LIMIT = 0.30
CLIPPED_SURGE_FLOOR = 0.10
# 5. TRL's per-token KL (k3 estimator): 0.2 nats per token is ~100 nats over a 500-token answer, far
# past the drift of a healthy beta=0.04 run; ten times the first window means it is still climbing.
KL_RATIO = 10.0
KL_LIMIT = 0.2
KL_CRITICAL = 1.0
# 6. Plateau: the last quarter gains less than 0.05 over the third even one standard error above the
# measured gain (flatness must be shown, not a rise merely missed in the noise), over quarters of at
# least 5 points (over fewer steps a healthy run's gain per quarter is itself under the bar), while the
# last half's mean is below NEAR_MAX of the reward's maximum (REWARD_MAX assumed; not judged once a
# mean exceeds it): near the top, flat is done, not stuck.
PLATEAU_RISE = 0.05
PLATEAU_Z = 1.0
MIN_PLATEAU_POINTS = 20
NEAR_MAX = 0.8
REWARD_MAX = 1.0
# 7. Divergence: a format/shaping reward rising by at least 0.2 while a correctness reward falls by at
# least 0.03 and one standard error is critical. The fall alone is near the noise of a small batch
# (measured run: 0.19 -> 0.12 against a standard error of about 0.04 at 16 completions per step); it
# is the conjunction with a large format rise that makes the pattern. Where the format weight is
# above a fifth of the correctness weight, correctness merely not rising (and not near its maximum) is
# already a warning: the advice (lower the format weight) is right either way.
DIVERGE_AUX_RISE = 0.2
DIVERGE_FALL_ABS = 0.03
DIVERGE_FALL_Z = 1.0
# A well-formed wrong answer must score below a correct one: format at most a fifth of correctness
# (the measured run that worked used 0.2 / 1.0).
DIVERGE_WEIGHT_RATIO = 0.2
# 8. Same bar as the inspection gate: over 5% failures and the logged mean (failures dropped) lies.
FAILURE_LIMIT = 0.05

CORRECTNESS_ROLES = ("correctness", "judge")
Series = tuple[str, str, float]  # (label, metric key, assumed maximum) of a correctness signal
AUXILIARY_ROLES = ("format", "shaping")


class HealthWarning(BaseModel):
    """One thing wrong with a run, the numbers that show it, and what to change.

    >>> HealthWarning(code="kl_blowup", severity="warning", message="KL climbing.", symptom="kl_blowup").symptom
    'kl_blowup'
    """

    code: str = Field(description="Which check fired, e.g. 'reward_divergence'.")
    severity: Literal["warning", "critical"]
    message: str
    symptom: str | None = Field(default=None, description="A key of skill.recipe.variants.SYMPTOMS, or None.")
    suggested_variant: str | None = Field(default=None, description="The variant the symptom selects.")
    suggested_change: str | None = Field(default=None, description="What to change that no variant does.")
    evidence: dict[str, float] = Field(default_factory=dict, description="Window means, ratios, standard errors.")


def _num(value: float) -> float:
    return float(f"{value:.4g}")


def _reward_keys(
    metrics: list[dict[str, Any]], rewards: list[RewardSpec], roles: tuple[str, ...]
) -> list[tuple[RewardSpec, str, str]]:
    """(spec, name, key) for the rewards of ``roles`` that have logged means."""
    named = [(spec, name, f"rewards/{name}/mean") for spec, name in metric_names(rewards) if spec.role in roles]
    return [(spec, name, key) for spec, name, key in named if finite_values(metrics, key)]


def _correctness_series(metrics: list[dict[str, Any]], rewards: list[RewardSpec]) -> list[Series]:
    """(label, key, assumed maximum) of the correctness signals; the total ``reward`` when none is logged."""
    found = [(name, key, REWARD_MAX) for _, name, key in _reward_keys(metrics, rewards, CORRECTNESS_ROLES)]
    if found or not finite_values(metrics, "reward"):
        return found
    total_max = sum(max(spec.weight, 0.0) for spec in rewards) * REWARD_MAX if rewards else REWARD_MAX
    return [("reward", "reward", total_max)]


def _ends(label: str, trend: Trend) -> dict[str, float]:
    return {f"{label}_first": trend.first, f"{label}_last": trend.last}


def _warning(
    code: str, severity: str, message: str, symptom: str | None = None, *, evidence: dict, change: str | None = None
) -> HealthWarning:
    """A warning; evidence values that are None or not finite are left out (the model must stay JSON)."""
    numbers = {key: _num(value) for key, value in evidence.items() if value is not None and math.isfinite(value)}
    variant = SYMPTOMS.get(symptom) if symptom else None
    fields = {"symptom": symptom, "suggested_variant": variant, "suggested_change": change, "evidence": numbers}
    return HealthWarning(code=code, severity=severity, message=message, **fields)


def _no_learning_signal(metrics: list[dict[str, Any]]) -> HealthWarning | None:
    recent = recent_mean(metrics, "frac_reward_zero_std")
    if recent is None or recent < ZERO_STD_LIMIT:
        return None
    evidence = {"frac_reward_zero_std_recent": recent, "reward_recent": recent_mean(metrics, "reward")}
    return _warning(
        "no_learning_signal",
        "critical",
        f"{recent:.0%} of prompt groups score identically: their advantage is zero and nothing is learned. "
        "If the reward is near its maximum the prompts are solved; use harder ones.",
        "no_learning_signal",
        evidence=evidence,
    )


def _length_growth(metrics: list[dict[str, Any]], correct: list[Series], max_len: int | None) -> HealthWarning | None:
    length = trend_of(metrics, "completions/mean_length")
    if length is None or length.first <= 0 or not rises(length, floor=LENGTH_GROWTH * length.first):
        return None
    trends = [(label, t) for label, key, _ in correct if (t := trend_of(metrics, key)) is not None]
    if not trends or any(rises(t, z=0.0) for _, t in trends):
        return None
    evidence = _ends("length", length) | {"length_growth": length.delta / length.first}
    for label, t in trends:
        evidence |= _ends(label, t)
    room = ""
    if max_len:
        evidence["length_last_of_max"] = length.last / max_len
        room = f" ({length.last / max_len:.0%} of max_completion_length)"
    return _warning(
        "length_growth",
        "warning",
        f"Completions grew {length.delta / length.first:.0%} ({length.first:.0f} -> {length.last:.0f} tokens{room}) "
        f"while {', '.join(label for label, _ in trends)} did not rise: length is being rewarded, not accuracy.",
        "length_growth_without_accuracy",
        evidence=evidence,
    )


def _entropy_collapse(metrics: list[dict[str, Any]]) -> HealthWarning | None:
    entropy = trend_of(metrics, "entropy")
    if entropy is None or entropy.first <= 0 or not falls(entropy, floor=0.0):
        return None
    if entropy.last >= ENTROPY_RATIO * entropy.first and entropy.last >= ENTROPY_FLOOR:
        return None
    return _warning(
        "entropy_collapse",
        "warning",
        f"Token entropy fell from {entropy.first:.3g} to {entropy.last:.3g}: the policy stops exploring, groups "
        "turn uniform and learning stalls.",
        "entropy_collapse",
        evidence=_ends("entropy", entropy) | {"ratio": entropy.last / entropy.first},
    )


def _clipped(metrics: list[dict[str, Any]], max_len: int | None) -> HealthWarning | None:
    key = "completions/clipped_ratio"
    recent = recent_mean(metrics, key)
    if recent is None:
        return None
    trend = trend_of(metrics, key)
    surge = trend is not None and recent >= CLIPPED_SURGE_FLOOR and recent >= 2 * trend.first and rises(trend)
    if recent < CLIPPED_LIMIT and not surge:
        return None
    first = trend.first if trend else None
    evidence = {"clipped_ratio_recent": recent, "clipped_ratio_first": first, "max_completion_length": max_len}
    return _warning(
        "clipped_completions",
        "warning",
        f"{recent:.0%} of completions hit max_completion_length{f' ({max_len})' if max_len else ''}: the reward "
        "scores cut-off text.",
        "many_truncated_completions",
        evidence=evidence,
    )


def _kl_blowup(metrics: list[dict[str, Any]]) -> HealthWarning | None:
    kl = trend_of(metrics, "kl")
    if kl is None or kl.last < KL_LIMIT or kl.last < KL_RATIO * max(kl.first, 0.0) or not rises(kl, floor=0.0):
        return None
    evidence = _ends("kl", kl) | {"ratio": kl.last / kl.first if kl.first > 0 else None}
    return _warning(
        "kl_blowup",
        "critical" if kl.last >= KL_CRITICAL else "warning",
        f"KL to the reference rose from {kl.first:.3g} to {kl.last:.3g} per token: the policy is leaving the "
        "region where the reward can be trusted.",
        "kl_blowup",
        evidence=evidence,
    )


def _plateau(metrics: list[dict[str, Any]], correct: list[Series]) -> list[HealthWarning]:
    found = []
    for label, key, top in correct:
        values = finite_values(metrics, key)
        if len(values) < MIN_PLATEAU_POINTS or max(values) > top:
            continue  # too short to split the last half, or the reward's scale is unknown
        half = values[len(values) // 2 :]
        quarter = len(half) // 2
        se = point_noise(half) * math.sqrt(2 / quarter)
        trend = Trend(statistics.fmean(half[:quarter]), statistics.fmean(half[quarter:]), se)
        level = statistics.fmean(half)
        if level >= NEAR_MAX * top or trend.delta + PLATEAU_Z * trend.se >= PLATEAU_RISE:
            continue
        found.append(
            _warning(
                "reward_plateau",
                "warning",
                f"{label} has not improved over the last half of the run ({trend.first:.3g} -> {trend.last:.3g}) "
                f"and sits at {level:.3g} of a possible {top:g}.",
                "early_plateau",
                evidence={f"{label}_last_half": level, "quarter_3": trend.first, "quarter_4": trend.last},
            )
        )
    return found


def _divergence(metrics: list[dict[str, Any]], rewards: list[RewardSpec]) -> list[HealthWarning]:
    weights = ", ".join(f"{name} {spec.weight:g}" for spec, name in metric_names(rewards))
    found = []
    for c_spec, c_name, c_key in _reward_keys(metrics, rewards, CORRECTNESS_ROLES):
        c = trend_of(metrics, c_key)
        if c is None or c.delta > 0:
            continue
        falling = falls(c, floor=DIVERGE_FALL_ABS, z=DIVERGE_FALL_Z)
        target = DIVERGE_WEIGHT_RATIO * c_spec.weight
        for a_spec, a_name, a_key in _reward_keys(metrics, rewards, AUXILIARY_ROLES):
            a = trend_of(metrics, a_key)
            heavy = a_spec.weight > target and c.last < NEAR_MAX * REWARD_MAX
            if a is None or not rises(a, floor=DIVERGE_AUX_RISE) or not (falling or heavy):
                continue
            change = (
                f"Re-weight: {c_name} {c_spec.weight:g}, {a_name} at most {target:g} (now {weights}), so a "
                "well-formed wrong answer scores below a correct one."
                if heavy
                else f"The weights already favour {c_name} ({weights}): check that what {a_name} asks for leaves "
                f"room for a correct answer (inspect completions that pass {a_name} and fail {c_name}), or drop it."
            )
            message = (
                f"{a_name} ({a_spec.role}) rose {a.first:.3g} -> {a.last:.3g} while {c_name} "
                f"{'fell' if falling else 'did not rise'} ({c.first:.3g} -> {c.last:.3g}): the policy is learning "
                "to be well-formed, not right."
            )
            evidence = _ends(a_name, a) | _ends(c_name, c) | {f"{c_name}_se": c.se}
            evidence |= {f"{a_name}_weight": a_spec.weight, f"{c_name}_weight": c_spec.weight}
            severity = "critical" if falling else "warning"
            found.append(_warning("reward_divergence", severity, message, evidence=evidence, change=change))
    return found


def _failing(metrics: list[dict[str, Any]]) -> dict[str, float]:
    """Reward name -> recent failure rate, for the rewards failing over FAILURE_LIMIT."""
    keys = sorted({key for point in metrics for key in point if key.startswith("rewards/")})
    rates = {
        key.removeprefix("rewards/").removesuffix("/failure_rate"): recent_mean(metrics, key)
        for key in keys
        if key.endswith("/failure_rate")
    }
    return {name: rate for name, rate in rates.items() if rate is not None and rate > FAILURE_LIMIT}


def _failure(name: str, rate: float) -> HealthWarning:
    return _warning(
        "reward_failures",
        "critical",
        f"Reward {name} fails on {rate:.0%} of completions; TRL drops the failures from the mean, so "
        f"rewards/{name}/mean looks better than the policy is.",
        change=f"Fix {name} (inspect_rewards shows the errors) before reading any curve.",
        evidence={f"{name}_failure_rate_recent": rate},
    )


def diagnose(
    metrics: list[dict[str, Any]], rewards: list[RewardSpec], max_completion_length: int | None = None
) -> list[HealthWarning]:
    """What is going wrong in a run, from the metric points logged so far (one dict per step, in order).

    Critical warnings come first. A plateau is not reported on top of its likelier cause (no learning
    signal, a divergence) nor for a reward that is failing (its mean is not the policy's).

    >>> flat = [{"frac_reward_zero_std": 1.0, "reward": 0.0} for _ in range(8)]
    >>> [w.code for w in diagnose(flat, [RewardSpec(name="exact_match", role="correctness")])]
    ['no_learning_signal']
    >>> diagnose(flat[:2], [])
    []
    """
    failing = _failing(metrics)
    correct = _correctness_series(metrics, rewards)
    signal, diverging = _no_learning_signal(metrics), _divergence(metrics, rewards)
    found = [_failure(name, rate) for name, rate in failing.items()] + diverging
    optional = (signal, _kl_blowup(metrics), _length_growth(metrics, correct, max_completion_length))
    found += [w for w in (*optional, _entropy_collapse(metrics), _clipped(metrics, max_completion_length)) if w]
    if signal is None and not diverging:
        found += _plateau(metrics, [series for series in correct if series[0] not in failing])
    return sorted(found, key=lambda w: w.severity != "critical")


def symptoms(warnings: list[HealthWarning]) -> list[str]:
    """The symptoms the warnings name, once each, in order: what ``emit_grpo_config(symptoms=...)`` takes.

    >>> symptoms([HealthWarning(code="a", severity="warning", message="", symptom="entropy_collapse"),
    ...           HealthWarning(code="b", severity="critical", message="")])
    ['entropy_collapse']
    """
    return list(dict.fromkeys(w.symptom for w in warnings if w.symptom))
