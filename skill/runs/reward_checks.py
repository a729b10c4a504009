"""Health checks on what the rewards and the held-out scores say, each with its statistic and threshold.

Noise: a logged point averages one batch (BatchShape.completions completions in BatchShape.groups
groups), so a [0, 1] reward mean moves by about sqrt(m (1 - m) / completions) on noise alone (0.09 at
m = 0.15 and 16 completions, the CPU demo), and the zero-std fraction by sqrt(f (1 - f) / groups).
Held-out scores average eval_prompts x eval_generations completions of a fixed prompt sample, so
one evaluation differs from the next only by the completions drawn: at most sqrt(p (1 - p) / n) over
those n samples (a trend on a fixed sample carries no prompt-sampling noise; 0.08 at p = 0.3 and
16 prompts x 2). Every threshold below is a floor *and* a number of
these standard errors (skill.runs.series), so a run with a bigger batch is read more finely.

Held-out rows are TRL's evaluation log (``eval_rewards/<name>/mean``, ``eval_completions/mean_length``,
``eval_reward``), written to metrics.jsonl beside the training rows every ``evaluation.every_steps``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec, metric_names
from skill.runs.health_check import health_check
from skill.runs.health_warning import HealthWarning, RunView, make_warning
from skill.runs.series import (
    NOISE_Z,
    REWARD_RISE_ABS,
    Trend,
    falls,
    finite_values,
    half_gain,
    hinge_gain,
    look_z,
    point_noise,
    proportion_se,
    recent_mean,
    rises,
    share_se,
    shown_flat,
    steps_of,
    trend_of,
    window_size,
)

AUXILIARY_ROLES = ("format", "shaping")
REWARD_MAX = 1.0  # the registry's rewards lie in [0, 1]; a user reward above 1 is not judged on levels
Series = tuple[str, str, float]  # (label, training metric key, assumed maximum) of a correctness signal

# No learning signal: more than half the groups (all completions scoring alike) give zero advantage,
# shown at 2 standard errors of the last window's fraction. Healthy runs sit near 0.02 on a composite
# reward; 8 completions at a pass rate of 0.92 or 0.08 already make half the groups uniform.
ZERO_STD_LIMIT = 0.5
ZERO_STD_Z = 2.0
# Divergence (format over correctness): see reward_divergence.
DIVERGE_AUX_RISE = 0.2
DIVERGE_FALL_ABS = 0.03
DIVERGE_FALL_Z = 1.0
DIVERGE_FLAT_Z = 0.5
DIVERGE_WEIGHT_RATIO = 0.2  # format at most a fifth of correctness (the measured run that worked: 0.2 / 1.0)
NEAR_MAX = 0.8
# Held-out divergence: the held-out score falls from its best window of evaluations by at least 0.1 and
# 2 standard errors of the fixed sample's binomial noise while training rises (the best of several windows is
# biased up by noise; validated against healthy runs in bench/health_validation.py).
MIN_EVAL_POINTS = 4
HELDOUT_DROP_ABS = 0.1
HELDOUT_DROP_Z = 2.0
# Length growth: +30% over the run, significant, while the held-out score (training correctness when no
# held-out rows were logged) gains under REWARD_RISE_ABS.
LENGTH_GROWTH = 0.30
# Reward composition: a format/shaping reward carrying 60% of the reward variance of the batch while
# correctness does not rise. Share of reward i = (w_i sd_i)^2 / sum_j (w_j sd_j)^2 from the logged
# per-reward std (rewards/<name>/std, over the whole batch: between-prompt spread counts too, so this
# overstates correctness's part of the within-group variance that makes advantages, erring to silence).
COMPOSITION_SHARE = 0.6
COMPOSITION_Z = 1.0  # the share above it by one standard error of the window's mean share (a level, as CLIPPED_Z)
# Plateau: see plateau(); a gain of 0.1 over the last half is 0.05 a quarter, shown at NOISE_Z.
PLATEAU_RISE = 0.1
PLATEAU_Z = NOISE_Z
MIN_PLATEAU_POINTS = 20
# Same bar as the inspection gate: over 5% failures and the logged mean (failures dropped) lies.
FAILURE_LIMIT = 0.05


def reward_keys(view: RunView, roles: tuple[str, ...], prefix: str = "") -> list[tuple[RewardSpec, str, str]]:
    """(spec, name, key) for the rewards of ``roles`` that have logged means (``prefix='eval_'``: held-out)."""
    named = [(s, name, f"{prefix}rewards/{name}/mean") for s, name in metric_names(view.rewards) if s.role in roles]
    return [(spec, name, key) for spec, name, key in named if finite_values(view.metrics, key)]


def correctness_series(view: RunView) -> list[Series]:
    """(label, key, assumed maximum) of the correctness signals; the total ``reward`` when none is logged."""
    found = [(name, key, REWARD_MAX) for _, name, key in reward_keys(view, CORRECTNESS_ROLES)]
    if found or not finite_values(view.metrics, "reward"):
        return found
    total_max = sum(max(spec.weight, 0.0) for spec in view.rewards) * REWARD_MAX if view.rewards else REWARD_MAX
    return [("reward", "reward", total_max)]


def heldout_key(key: str) -> str:
    """The held-out twin of a training key, as TRL's evaluation logs it.

    >>> heldout_key("rewards/exact_match/mean")
    'eval_rewards/exact_match/mean'
    """
    return f"eval_{key}"


def _ends(label: str, trend: Trend) -> dict[str, float]:
    return {f"{label}_first": trend.first, f"{label}_last": trend.last}


def _eval_noise(view: RunView, values: list[float], top: float) -> float:
    """Per-evaluation noise. The held-out sample is fixed, so one evaluation differs from the next only by the
    completions sampled: at most the binomial noise of prompts x generations samples (the prompts' differing
    pass rates only lower it). Without the shape, the spread of successive differences."""
    if view.shape and view.shape.eval_prompts:
        samples = view.shape.eval_prompts * max(1, view.shape.eval_generations)
        return top * proportion_se(statistics.fmean(values) / top, samples)
    return point_noise(values)


def heldout_trend(view: RunView, key: str, top: float) -> Trend | None:
    """First vs last window of held-out evaluations (windows of a third, at least 2); None below 4 evaluations."""
    values = finite_values(view.metrics, heldout_key(key))
    if len(values) < MIN_EVAL_POINTS:
        return None
    w = max(2, len(values) // 3)
    se = _eval_noise(view, values, top) * math.sqrt(2 / w)
    return Trend(statistics.fmean(values[:w]), statistics.fmean(values[-w:]), se)


@health_check("no_learning_signal_all_fail", "no_learning_signal_all_pass", rank=20, needs=("frac_reward_zero_std",))
def no_learning_signal(view: RunView) -> HealthWarning | None:
    """Over half the groups score alike, split by which way: all-pass (solved) and all-fail need opposite fixes."""
    correct = correctness_series(view)
    values = finite_values(view.metrics, "frac_reward_zero_std")
    recent = recent_mean(view.metrics, "frac_reward_zero_std")
    if recent is None:
        return None
    k = min(window_size(len(values)), len(values))
    se = point_noise(values) / math.sqrt(k)
    if view.shape:
        se = max(se, proportion_se(recent, k * view.shape.groups))
    if recent - ZERO_STD_Z * se < ZERO_STD_LIMIT:
        return None
    # A uniform group is all-pass or all-fail; mixed groups average about one half. So the correctness level m
    # splits the uniform share f: all-pass ~ m - (1 - f) / 2, clamped to [0, f].
    label, key, top = correct[0] if correct else ("reward", "reward", REWARD_MAX)
    level = recent_mean(view.metrics, key)
    passing = None if level is None else min(max(level / top - (1 - recent) / 2, 0.0), recent)
    evidence = {"frac_reward_zero_std_recent": recent, "se": se, f"{label}_recent": level}
    if passing is not None:
        evidence |= {"all_pass_share": passing, "all_fail_share": recent - passing}
    uniform = f"{recent:.0%} of prompt groups score identically, so their advantage is zero and they teach nothing"
    if passing is not None and passing >= recent / 2:
        return make_warning(
            "no_learning_signal_all_pass",
            "critical",
            f"{uniform}: mostly all-pass ({label} {level:.3g}). The prompts are solved.",
            evidence=evidence,
            change="Use harder prompts (drop those every sample solves) or stop here; more generations only spend "
            "compute on solved groups.",
        )
    return make_warning(
        "no_learning_signal_all_fail",
        "critical",
        f"{uniform}: mostly all-fail ({label} {level if level is not None else float('nan'):.3g}).",
        "no_learning_signal",
        evidence=evidence,
        change="More generations and a higher temperature find the rare successes; if the base model almost never "
        "succeeds, use easier prompts or SFT first, and check that the correctness reward can pass at all.",
    )


@health_check("reward_divergence", rank=40, needs=("rewards/{reward}/mean",))
def reward_divergence(view: RunView) -> list[HealthWarning]:
    """A format/shaping reward rising by at least 0.2 while correctness falls (critical: at least 0.03 and one
    standard error) or, where the format weight is above a fifth of correctness's, is shown not to rise (its gain
    plus half a standard error stays under 0.05; warning). The fall alone is near the noise of a small batch
    (measured: 0.19 -> 0.12 against a standard error of about 0.04 at 16 completions per step); the conjunction
    with a large format rise makes the pattern, and a slow real rise of correctness is not read as flat.

    Those are the verdicts on a finished run. While it trains, "does not rise" is judged at the pace that reaches
    0.05 by the planned end (series.shown_flat), and every z is this read's sequential boundary (series.look_z):
    in an equal-weights run format is learned within the first steps while correctness climbs slowly, and one
    read of twenty steps at 16 completions (a standard error near 0.08) shows that pattern by noise alone."""
    weights = ", ".join(f"{name} {spec.weight:g}" for spec, name in metric_names(view.rewards))
    found, done = [], view.progress()
    for c_spec, c_name, c_key in reward_keys(view, CORRECTNESS_ROLES):
        c = trend_of(view.metrics, c_key, samples=view.samples())
        if c is None or not shown_flat(c, done, DIVERGE_FLAT_Z):
            continue  # correctness may be rising: not shown flat (a fall is flat too)
        falling = falls(c, floor=DIVERGE_FALL_ABS, z=look_z(DIVERGE_FALL_Z, done))
        target = DIVERGE_WEIGHT_RATIO * c_spec.weight
        for a_spec, a_name, a_key in reward_keys(view, AUXILIARY_ROLES):
            a = trend_of(view.metrics, a_key, samples=view.samples())
            heavy = a_spec.weight > target and c.last < NEAR_MAX * REWARD_MAX
            aux_rising = a is not None and rises(a, floor=DIVERGE_AUX_RISE, z=look_z(NOISE_Z, done))
            if not aux_rising or not (falling or heavy):
                continue
            change = (
                f"Re-weight: {c_name} {c_spec.weight:g}, {a_name} at most {target:g} (now {weights}), so a "
                "well-formed wrong answer scores below a correct one."
                if a_spec.weight > target
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
            found.append(make_warning("reward_divergence", severity, message, evidence=evidence, change=change))
    return found


@health_check("heldout_divergence", rank=60, needs=("eval_rewards/{reward}/mean", "eval_reward"))
def heldout_divergence(view: RunView) -> list[HealthWarning]:
    """Training correctness rises while the held-out score has fallen from its best window of evaluations:
    the policy is exploiting the training reward (or memorising its prompts), not getting better."""
    found = []
    for label, key, top in correctness_series(view):
        evals = finite_values(view.metrics, heldout_key(key))
        train = trend_of(view.metrics, key, samples=view.samples() if top == REWARD_MAX else None)
        if len(evals) < MIN_EVAL_POINTS or train is None or not rises(train):
            continue
        w = max(2, len(evals) // 3)
        windows = [statistics.fmean(evals[i : i + w]) for i in range(len(evals) - w + 1)]
        best = max(range(len(windows)), key=windows.__getitem__)
        se = _eval_noise(view, evals, top) * math.sqrt(2 / w)
        drop = windows[best] - windows[-1]
        if best == len(windows) - 1 or drop < max(HELDOUT_DROP_ABS * top, HELDOUT_DROP_Z * se):
            continue
        steps = [step for step, _ in steps_of(view.metrics, heldout_key(key))]
        evidence = _ends(f"train_{label}", train) | {"heldout_best": windows[best], "heldout_last": windows[-1]}
        evidence |= {"heldout_drop_se": se, "heldout_best_step": steps[best + w - 1]}
        found.append(
            make_warning(
                "heldout_divergence",
                "critical",
                f"Training {label} rose {train.first:.3g} -> {train.last:.3g} while held-out {label} fell from "
                f"{windows[best]:.3g} (evaluations up to step {steps[best + w - 1]}) to {windows[-1]:.3g}: the "
                "policy is exploiting the training reward, not learning the task.",
                evidence=evidence,
                change=f"Take the checkpoint from around step {steps[best + w - 1]}; read completions that pass "
                f"{label} on training prompts (inspect_rewards with hack probes) and close the loophole before "
                "training on.",
            )
        )
    return found


@health_check("length_growth", rank=50, needs=("completions/mean_length",))
def length_growth(view: RunView) -> HealthWarning | None:
    """Completions grow 30%+ (significantly) while the held-out score does not gain (training correctness
    when there are no held-out rows, which a length-hackable reward would hide)."""
    length = trend_of(view.metrics, "completions/mean_length")
    if length is None or length.first <= 0 or not rises(length, floor=LENGTH_GROWTH * length.first):
        return None
    judged: list[tuple[str, Trend]] = []
    for label, key, top in correctness_series(view):
        held = heldout_trend(view, key, top)
        trend = held if held is not None else trend_of(view.metrics, key)
        if trend is not None:
            judged.append((f"held-out {label}" if held is not None else label, trend))
    if not judged or any(t.delta >= REWARD_RISE_ABS for _, t in judged):
        return None
    evidence = _ends("length", length) | {"length_growth": length.delta / length.first}
    for label, t in judged:
        evidence |= _ends(label.replace("held-out ", "heldout_"), t)
    room = ""
    if view.max_completion_length:
        evidence["length_last_of_max"] = length.last / view.max_completion_length
        room = f" ({length.last / view.max_completion_length:.0%} of max_completion_length)"
    return make_warning(
        "length_growth",
        "warning",
        f"Completions grew {length.delta / length.first:.0%} ({length.first:.0f} -> {length.last:.0f} tokens{room}) "
        f"while {', '.join(label for label, _ in judged)} did not rise: length is being rewarded, not accuracy.",
        "length_growth_without_accuracy",
        evidence=evidence,
    )


@health_check("reward_composition", rank=70, needs=("rewards/{reward}/std",))
def reward_composition(view: RunView) -> list[HealthWarning]:
    """Which reward carries the batch's reward variance (and so the advantages): an auxiliary one carrying over
    60% while correctness does not rise means the run optimises the auxiliary reward.

    The share is read from the last window (k points) and must clear 60% by COMPOSITION_Z standard errors of its
    window mean (the step-to-step spread of each batch's share over sqrt(k)); "does not rise" is a gain under
    REWARD_RISE_ABS at the pace that reaches it by the planned end (x view.progress()). The share's z is this
    read's sequential boundary (look_z): early in a run a 0/1 format reward half learned (variance p (1 - p) near
    its peak) beside a low correctness reward already carries 60%, and correctness has had no time to rise."""
    named = metric_names(view.rewards)
    spreads = {name: (spec, sd) for spec, name in named if (sd := recent_mean(view.metrics, f"rewards/{name}/std"))}
    total = sum((spec.weight * sd) ** 2 for spec, sd in spreads.values())
    found, done = [], view.progress()
    for c_spec, c_name, c_key in reward_keys(view, CORRECTNESS_ROLES):
        c = trend_of(view.metrics, c_key, samples=view.samples())
        if total <= 0 or c is None or c.delta >= REWARD_RISE_ABS * done:
            continue
        for a_spec, a_name, _ in reward_keys(view, AUXILIARY_ROLES):
            share = (a_spec.weight * spreads[a_name][1]) ** 2 / total if a_name in spreads else 0.0
            if share < COMPOSITION_SHARE:
                continue
            noise = share_se(view.metrics, {name: spec.weight for name, (spec, _) in spreads.items()}, a_name)
            if share - look_z(COMPOSITION_Z, done) * noise < COMPOSITION_SHARE:
                continue  # not shown above the limit
            c_share = (c_spec.weight * spreads[c_name][1]) ** 2 / total if c_name in spreads else 0.0
            target = DIVERGE_WEIGHT_RATIO * c_spec.weight
            found.append(
                make_warning(
                    "reward_composition",
                    "warning",
                    f"{a_name} ({a_spec.role}, weight {a_spec.weight:g}) carries {share:.0%} of the reward variance "
                    f"and {c_name} {c_share:.0%}: the advantages mostly rank {a_name}, so {c_name} stays at "
                    f"{c.last:.3g} ({c.first:.3g} at the start).",
                    evidence={f"{a_name}_variance_share": share, f"{c_name}_variance_share": c_share}
                    | {f"{a_name}_variance_share_se": noise}
                    | _ends(c_name, c),
                    change=f"Lower {a_name}'s weight to at most {target:g} (a fifth of {c_name}'s), or make "
                    f"{a_name} pass-or-fail on what the task needs so it stops ranking completions on its own.",
                )
            )
    return found


def _heldout_half_gain(view: RunView, key: str, top: float) -> tuple[float, float] | None:
    """Least-squares gain of the held-out score over the last half of the evaluations (at least 4 there), with the
    fixed sample's binomial error; None without enough evaluations or a known sample size."""
    evals = finite_values(view.metrics, heldout_key(key))
    half = evals[len(evals) // 2 :]
    if len(half) < MIN_EVAL_POINTS or not (view.shape and view.shape.eval_prompts):
        return None
    gain, _ = half_gain(half)
    n = len(half)
    sxx = sum((i - (n - 1) / 2) ** 2 for i in range(n))
    return gain, _eval_noise(view, evals, top) / math.sqrt(sxx) * (n - 1)


LIKELIER_THAN_A_PLATEAU = (
    "no_learning_signal_all_fail",
    "no_learning_signal_all_pass",
    "reward_divergence",
    "length_growth",
    "heldout_divergence",
    "reward_composition",
)


@health_check("reward_plateau", rank=170, needs=("rewards/{reward}/mean", "reward"), unless=LIKELIER_THAN_A_PLATEAU)
def plateau(view: RunView) -> list[HealthWarning]:
    """Over the last half of the run (at least 10 points), the gain stays under 0.1 even PLATEAU_Z standard errors
    above its estimate (flatness must be shown, not a rise merely missed in the noise), while the last half's mean
    is below 0.8 of the reward's maximum (near the top, flat is done, not stuck).

    The gain: series.hinge_gain (per-point noise at least the step-to-step spread and the batch's binomial noise),
    pooled by inverse variance with the held-out gain over the last half of the evaluations (the same progress on
    a fixed sample). While the run trains, 0.1 becomes the pace that reaches it over half the planned run (x
    view.progress(): at step 20 of 200 the last half is ten steps) and PLATEAU_Z this read's boundary (look_z).
    PLATEAU_Z is NOISE_Z, not 1.5: run_status reads a run tens of times near its end, and the slowest healthy
    learners gain little over 0.1 in a last half whose gain has a standard error of 0.05-0.09. A failing reward's
    series is not judged: its mean is not the policy's."""
    found, done = [], view.progress()
    failing = failing_rewards(view.metrics)
    for label, key, top in [series for series in correctness_series(view) if series[0] not in failing]:
        values = finite_values(view.metrics, key)
        if len(values) < MIN_PLATEAU_POINTS or max(values) > top:
            continue  # too short to split the last half, or the reward's scale is unknown
        half = values[len(values) // 2 :]
        noise = point_noise(values)
        if view.shape and top == REWARD_MAX:
            noise = max(noise, proportion_se(statistics.fmean(half), view.shape.completions))
        gain, se = hinge_gain(values, noise)
        held = _heldout_half_gain(view, key, top)
        if held is not None:  # the same progress measured twice: pool by inverse variance
            weights = (1 / se**2, 1 / held[1] ** 2)
            gain = (gain * weights[0] + held[0] * weights[1]) / sum(weights)
            se = 1 / math.sqrt(sum(weights))
        level = statistics.fmean(half)
        if level >= NEAR_MAX * top or gain + look_z(PLATEAU_Z, done) * se >= PLATEAU_RISE * done:
            continue
        found.append(
            make_warning(
                "reward_plateau",
                "warning",
                f"{label} has not improved over the last half of the run (gain {gain:+.3g}, standard error "
                f"{se:.2g}) and sits at {level:.3g} of a possible {top:g}.",
                "early_plateau",
                evidence={f"{label}_last_half": level, "last_half_gain": gain, "last_half_gain_se": se},
            )
        )
    return found


def failing_rewards(metrics: list[dict[str, Any]]) -> dict[str, float]:
    """Reward name -> recent failure rate, for the rewards failing over FAILURE_LIMIT."""
    keys = sorted({key for point in metrics for key in point if key.startswith("rewards/")})
    rates = {
        key.removeprefix("rewards/").removesuffix("/failure_rate"): recent_mean(metrics, key)
        for key in keys
        if key.endswith("/failure_rate")
    }
    return {name: rate for name, rate in rates.items() if rate is not None and rate > FAILURE_LIMIT}


@health_check("reward_failures", rank=10, needs=("rewards/{reward}/failure_rate",))
def reward_failures(view: RunView) -> list[HealthWarning]:
    """Each reward failing on more than FAILURE_LIMIT of its completions: its logged mean is not the policy's."""
    return [reward_failure(name, rate) for name, rate in failing_rewards(view.metrics).items()]


def reward_failure(name: str, rate: float) -> HealthWarning:
    return make_warning(
        "reward_failures",
        "critical",
        f"Reward {name} fails on {rate:.0%} of completions; TRL drops the failures from the mean, so "
        f"rewards/{name}/mean looks better than the policy is.",
        change=f"Fix {name} (inspect_rewards shows the errors) before reading any curve.",
        evidence={f"{name}_failure_rate_recent": rate},
    )
