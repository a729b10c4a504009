"""Health checks on what the optimisation says: truncation, entropy, KL, gradients and ratio clipping.

Each check names its statistic and threshold; the keys are TRL 1.16's GRPOTrainer logs
(``completions/clipped_ratio``, ``entropy``, ``kl`` when beta > 0, ``clip_ratio/region_mean`` and
``clip_ratio/low_mean`` / ``high_mean``) and the Trainer's ``grad_norm`` (the norm before clipping
to ``max_grad_norm``).
"""

from __future__ import annotations

import math
import statistics

from skill.runs.health_check import health_check
from skill.runs.health_warning import HealthWarning, RunView, make_warning
from skill.runs.reward_checks import correctness_series, heldout_key
from skill.runs.series import (
    NOISE_Z,
    falls,
    finite_values,
    point_noise,
    proportion_se,
    recent_mean,
    rises,
    trend_of,
)

# Truncation: a third of completions cut off means the reward judges truncated text that often (shown at one
# standard error of the last window, binomial over its completions); a doubling from at least 10% is a surge.
CLIPPED_LIMIT = 0.30
CLIPPED_Z = 1.0
CLIPPED_SURGE_FLOOR = 0.10
CLIPPED_FALL_ABS = 0.05  # a share falling by 5 points and a standard error: the policy is learning to fit
# Entropy collapse: below 0.3 of its start or 0.05 nats per token, the group's samples are nearly identical;
# or falling (2 standard errors) at a rate that reaches 0.05 before the run ends. The rate is exponential
# (entropy decays multiplicatively): ln(first / last) over the steps between the window centres.
ENTROPY_RATIO = 0.30
ENTROPY_FLOOR = 0.05
LEARNED_GAIN = 0.20  # held-out correctness gained since the first evaluation: falling entropy is then no collapse
# KL blow-up: TRL's per-token KL (k3): 0.2 nats per token is ~100 nats over a 500-token answer, far past the drift
# of a healthy beta=0.04 run; ten times the first window means it is still climbing.
KL_RATIO = 10.0
KL_LIMIT = 0.2
KL_CRITICAL = 1.0
# Gradient spikes: a step's grad_norm at 10x the median of the (up to 20) steps before it, after at least 5.
# A healthy run's grad norm spreads about +-50% (log-sd ~0.4): 10x is over 5 of those. Three spikes: critical.
SPIKE_RATIO = 10.0
SPIKE_HISTORY = 20
MIN_SPIKE_HISTORY = 5
SPIKES_CRITICAL = 3
# Vanishing gradients: the last window's median grad_norm under 5% of the first window's while groups still
# carry a learning signal (a zero-advantage batch has no gradient for another reason: no_learning_signal).
VANISH_RATIO = 0.05
# Clip saturation: a fifth of the tokens with their ratio clipped (only possible with num_iterations > 1 or
# steps_per_generation > gradient_accumulation_steps): the update is mostly the clip, not the advantage.
CLIP_LIMIT = 0.2


@health_check("clipped_completions", rank=80, needs=("completions/clipped_ratio",))
def clipped_completions(view: RunView) -> HealthWarning | None:
    key = "completions/clipped_ratio"
    values = finite_values(view.metrics, key)
    recent = recent_mean(view.metrics, key)
    if recent is None:
        return None
    k = max(1, min(len(values), max(3, len(values) // 4)))
    se = point_noise(values) / math.sqrt(k)
    if view.shape:
        se = max(se, proportion_se(recent, k * view.shape.completions))
    trend = trend_of(view.metrics, key, samples=view.samples())
    surge = trend is not None and recent >= CLIPPED_SURGE_FLOOR and recent >= 2 * trend.first and rises(trend)
    if recent - CLIPPED_Z * se < CLIPPED_LIMIT and not surge:
        return None
    if trend is None or falls(trend, floor=CLIPPED_FALL_ABS, z=1.0):
        # Too early to tell a start the policy soon leaves from a lasting cut-off, or already falling: the
        # policy is learning to fit the budget (the CPU demo: 63% cut off over the first steps, 19% by step 17).
        return None
    max_len = view.max_completion_length
    first = trend.first if trend else None
    evidence = {"clipped_ratio_recent": recent, "clipped_ratio_first": first, "max_completion_length": max_len}
    return make_warning(
        "clipped_completions",
        "warning",
        f"{recent:.0%} of completions hit max_completion_length{f' ({max_len})' if max_len else ''}: the reward "
        "scores cut-off text.",
        "many_truncated_completions",
        evidence=evidence,
    )


def _steps_between_windows(view: RunView, key: str) -> float:
    """Steps between the centres of the first and last windows of ``key`` (trend_of's windows)."""
    steps = [int(p.get("step") or 0) for p in view.metrics if isinstance(p.get(key), int | float)]
    k = max(3, len(steps) // 4)
    return max(1.0, statistics.fmean(steps[-k:]) - statistics.fmean(steps[:k]))


@health_check("entropy_collapse", rank=150, needs=("entropy",))
def entropy_collapse(view: RunView) -> HealthWarning | None:
    entropy = trend_of(view.metrics, "entropy")
    if entropy is None or entropy.first <= 0 or entropy.last <= 0 or not falls(entropy, floor=0.0):
        return None
    rate = math.log(entropy.first / entropy.last) / _steps_between_windows(view, "entropy")
    to_floor = max(0.0, math.log(entropy.last / ENTROPY_FLOOR) / rate)
    step = int(view.metrics[-1].get("step") or 0) if view.metrics else 0
    left = (view.max_steps - step) if view.max_steps else step  # no known end: as long again as so far
    collapsed = entropy.last < ENTROPY_RATIO * entropy.first or entropy.last < ENTROPY_FLOOR
    if not collapsed and to_floor >= left:
        return None
    if entropy.last >= ENTROPY_FLOOR and (still_learning(view) or learned(view)):
        return None  # sharpening onto what scores (the real CPU demo: 1.5 -> 0.08 nats, held-out 0.03 -> 0.75)
    when = "already" if entropy.last < ENTROPY_FLOOR else f"in about {to_floor:.0f} steps at this rate"
    return make_warning(
        "entropy_collapse",
        "warning",
        f"Token entropy fell from {entropy.first:.3g} to {entropy.last:.3g} and reaches {ENTROPY_FLOOR} nats "
        f"{when}: the policy stops exploring, groups turn uniform and learning stalls.",
        "entropy_collapse",
        evidence={"entropy_first": entropy.first, "entropy_last": entropy.last, "ratio": entropy.last / entropy.first}
        | {"steps_to_floor": to_floor, "steps_left": left},
    )


def still_learning(view: RunView, z: float = 1.0) -> bool:
    """A correctness signal rises beyond ``z`` standard errors over the later half: falling entropy is the policy
    narrowing onto what scores, not the stall that collapse causes (that stall shows as flat correctness and
    uniform groups)."""
    later_half = view.metrics[len(view.metrics) // 2 :]  # progress now, not a rise that has since stalled
    for _label, key, _maximum in correctness_series(view):
        trend = trend_of(later_half, key, samples=view.samples())
        if trend is not None and rises(trend, z=z):
            return True
    return False


def learned(view: RunView) -> bool:
    """The held-out correctness (the run's own evaluations on fixed prompts) gained at least LEARNED_GAIN from
    its first evaluation to its latest, beyond twice the binomial noise of the two: entropy that fell along with
    such a gain is the policy settling on answers that score (a solved task then shows as all-pass groups, its own
    check). A collapse stalls learning before it gets that far (the labelled collapses stall after gaining 0.05
    to 0.15); a run without evaluations is judged by ``still_learning`` alone."""
    evaluated = view.shape.eval_prompts * view.shape.eval_generations if view.shape else 0
    for _label, key, maximum in correctness_series(view):
        heldout = finite_values(view.metrics, heldout_key(key))
        if evaluated and len(heldout) >= 2:
            first, last = (min(max(v / maximum, 0.0), 1.0) for v in (heldout[0], heldout[-1]))
            se = math.sqrt((first * (1 - first) + last * (1 - last)) / evaluated)
            if last - first >= max(LEARNED_GAIN, NOISE_Z * se):
                return True
    return False


@health_check("kl_blowup", rank=110, needs=("kl",))
def kl_blowup(view: RunView) -> HealthWarning | None:
    kl = trend_of(view.metrics, "kl")
    if kl is None or kl.last < KL_LIMIT or kl.last < KL_RATIO * max(kl.first, 0.0) or not rises(kl, floor=0.0):
        return None
    evidence = {"kl_first": kl.first, "kl_last": kl.last, "ratio": kl.last / kl.first if kl.first > 0 else None}
    return make_warning(
        "kl_blowup",
        "critical" if kl.last >= KL_CRITICAL else "warning",
        f"KL to the reference rose from {kl.first:.3g} to {kl.last:.3g} per token: the policy is leaving the "
        "region where the reward can be trusted.",
        "kl_blowup",
        evidence=evidence,
    )


@health_check("gradient_spikes", rank=120, needs=("grad_norm",))
def gradient_spikes(view: RunView) -> HealthWarning | None:
    points = [(p.get("step"), v) for p in view.metrics if (v := p.get("grad_norm")) is not None]
    points = [(step, float(v)) for step, v in points if isinstance(v, int | float) and math.isfinite(v)]
    spikes = []
    for i in range(MIN_SPIKE_HISTORY, len(points)):
        median = statistics.median(v for _, v in points[max(0, i - SPIKE_HISTORY) : i])
        if median > 0 and points[i][1] >= SPIKE_RATIO * median:
            spikes.append((points[i][0], points[i][1] / median))
    if not spikes:
        return None
    worst = max(spikes, key=lambda spike: spike[1])
    return make_warning(
        "gradient_spikes",
        "critical" if len(spikes) >= SPIKES_CRITICAL else "warning",
        f"grad_norm spiked {len(spikes)} time(s) to {SPIKE_RATIO:g}x or more its running median (worst "
        f"{worst[1]:.0f}x at step {worst[0]}): single batches are pushing the policy hard.",
        instability_symptom(view, "instability"),
        evidence={"spikes": len(spikes), "worst_ratio": worst[1], "worst_step": worst[0]},
        change="Lower learning_rate (halve it); keep max_grad_norm at 1.0 or below.",
    )


def instability_symptom(view: RunView, symptom: str) -> str | None:
    """What an unstable run calls for, given the loss it already trains with: GSPO's sequence ratios first
    (``symptom``); under sequence ratios already, SAPO's soft gate; under SAPO, no variant is left (the learning
    rate is)."""
    if view.loss_type() == "sapo":
        return None
    return "instability_despite_gspo" if view.sequence_ratios() else symptom


@health_check("vanishing_gradients", rank=160, needs=("grad_norm",))
def vanishing_gradients(view: RunView) -> HealthWarning | None:
    values = finite_values(view.metrics, "grad_norm")
    zero_std_recent = recent_mean(view.metrics, "frac_reward_zero_std")  # uniform groups explain small gradients
    if len(values) < 6 or (zero_std_recent is not None and zero_std_recent >= 0.5):
        return None
    k = max(3, len(values) // 4)
    first, last = statistics.median(values[:k]), statistics.median(values[-k:])
    if first <= 0 or last >= VANISH_RATIO * first:
        return None
    return make_warning(
        "vanishing_gradients",
        "warning",
        f"grad_norm fell from a median {first:.3g} to {last:.3g} ({last / first:.1%}) while groups still differ: "
        "the updates no longer move the policy.",
        evidence={"grad_norm_first_median": first, "grad_norm_last_median": last},
        change="Check the learning-rate schedule (has it decayed to ~0?) and precision: weights held in bf16 and "
        "stepped by plain AdamW barely move; keep fp32 master weights (bf16 autocast).",
    )


@health_check(
    "clip_saturation", rank=130, needs=("clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean")
)
def clip_saturation(view: RunView) -> HealthWarning | None:
    region = recent_mean(view.metrics, "clip_ratio/region_mean")
    if region is None:
        low, high = recent_mean(view.metrics, "clip_ratio/low_mean"), recent_mean(view.metrics, "clip_ratio/high_mean")
        region = None if low is None or high is None else low + high
    if region is None or region < CLIP_LIMIT:
        return None
    return make_warning(
        "clip_saturation",
        "warning",
        f"{region:.0%} of tokens have their importance ratio clipped: the policy moves too far between the "
        "generation and the update, and the clip, not the advantage, sets the step.",
        instability_symptom(view, "multi_step_instability"),
        evidence={"clip_ratio_recent": region},
        change="Lower num_iterations (or steps_per_generation) or the learning rate.",
    )
