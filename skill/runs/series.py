"""Metric series: the finite values of one logged metric, and window statistics that beat batch noise.

A trend is the difference between the means of the first and last k points (k = max(3, n // 4)); it
counts only when it beats both an absolute floor and the noise (the windows' standard error,
estimated from the spread of step-to-step differences). Where the run's batch shape is known
(BatchShape: completions behind one logged point, the group size, the held-out sample) the noise is
never taken below what that many samples allow: a [0, 1] mean over n completions has a standard
error of at least sqrt(m (1 - m) / n) (prompt difficulty only adds to it), and a fraction of g groups
sqrt(f (1 - f) / g). A short series' empirical spread can be luckily small; the sample size cannot.
A run read while it trains is judged at its progress (the share of max_steps logged) and at a sequential
boundary (look_z), since the same run is read many times.
Imports nothing from the project but the reward spec.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, NamedTuple

from skill.grpo_fields import GRPOFields

# Windows. Six points is the least that gives two disjoint windows of three; three points average
# out one unlucky batch for a level check.
MIN_TREND_POINTS = 6
MIN_LEVEL_POINTS = 3
MIN_WINDOW = 3
# A change must exceed this many standard errors of the window difference: about a 2.5% one-sided
# false alarm on a flat noisy series.
NOISE_Z = 2.0
# A reward "rises" only by at least this much (on a [0, 1] reward): smaller moves are not progress.
REWARD_RISE_ABS = 0.05


class BatchShape(NamedTuple):
    """How many samples stand behind one logged point, which is what sets the noise of every statistic.

    >>> per_device = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}
    >>> shape = BatchShape.from_trl({**per_device, "logging_steps": 1})
    >>> shape.completions, shape.group_size, shape.groups
    (16, 8, 2)
    >>> BatchShape.from_trl(per_device).completions  # logging_steps left out: TRL logs every 10 steps
    160
    """

    completions: int  # completions averaged into one logged training point
    group_size: int  # num_generations: completions per prompt group
    eval_prompts: int = 0  # held-out prompts scored at each evaluation (0: no evaluation during training)
    eval_generations: int = 0  # completions per held-out prompt

    @property
    def groups(self) -> int:
        return max(1, self.completions // max(1, self.group_size))

    @classmethod
    def from_trl(
        cls, trl: dict[str, Any], world_size: int = 1, eval_prompts: int = 0, eval_generations: int = 0
    ) -> BatchShape:
        """From GRPOConfig kwargs (TRL's defaults where unset): TRL averages every metric over one optimizer step
        (per device batch x accumulation x processes completions) and then over ``logging_steps`` steps."""
        fields = GRPOFields(trl)
        per_step = int(fields.per_device_train_batch_size) * int(fields.gradient_accumulation_steps)
        completions = per_step * max(1, world_size) * max(1, int(fields.logging_steps))
        return cls(completions, int(fields.num_generations), eval_prompts, eval_generations)


def proportion_se(p: float, n: float) -> float:
    """Standard error of a proportion ``p`` (or a [0, 1] mean) over ``n`` independent samples.

    >>> round(proportion_se(0.5, 16), 3), proportion_se(1.2, 4)
    (0.125, 0.0)
    """
    p = min(max(p, 0.0), 1.0)
    return math.sqrt(p * (1 - p) / max(n, 1.0))


def steps_of(metrics: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """(step, value) of every finite point of ``key``, in order (held-out rows carry their own steps)."""
    return [(int(point.get("step") or 0), v) for point in metrics if (v := finite(point.get(key))) is not None]


class Trend(NamedTuple):
    """First- and last-window means of one series, and the standard error of their difference."""

    first: float
    last: float
    se: float

    @property
    def delta(self) -> float:
        return self.last - self.first


def finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def finite_values(metrics: list[dict[str, Any]], key: str) -> list[float]:
    """The finite values logged under ``key``, in order; None, NaN and missing points are skipped."""
    return [v for point in metrics if (v := finite(point.get(key))) is not None]


def window_size(n: int) -> int:
    return max(MIN_WINDOW, n // 4)


def point_noise(values: list[float]) -> float:
    """Per-point noise from step-to-step differences (a linear trend shifts them, it does not spread them)."""
    if len(values) < 3:
        return 0.0
    return statistics.stdev(b - a for a, b in zip(values, values[1:], strict=False)) / math.sqrt(2)


def first_last_means(metrics: list[dict[str, Any]], key: str, k: int | None = None) -> tuple[float, float] | None:
    """Means of the first and last ``k`` finite points of ``key``; None below MIN_TREND_POINTS.

    >>> first_last_means([{"kl": float(i)} for i in range(8)], "kl")
    (1.0, 6.0)
    """
    trend = trend_of(metrics, key, k)
    return None if trend is None else (trend.first, trend.last)


def trend_of(metrics: list[dict[str, Any]], key: str, k: int | None = None, samples: int | None = None) -> Trend | None:
    """First/last window trend of ``key``; with ``samples`` (completions behind one point of a [0, 1] mean) the
    per-point noise is at least the binomial one."""
    values = finite_values(metrics, key)
    if len(values) < MIN_TREND_POINTS:
        return None
    k = min(k or window_size(len(values)), len(values) // 2)
    noise = point_noise(values)
    if samples:
        noise = max(noise, proportion_se(statistics.fmean(values), samples))
    se = noise * math.sqrt(2 / k)
    return Trend(statistics.fmean(values[:k]), statistics.fmean(values[-k:]), se)


def half_gain(values: list[float]) -> tuple[float, float]:
    """Least-squares gain across ``values`` (slope x span) and its standard error from the residuals.

    >>> gain, se = half_gain([0.1, 0.2, 0.3, 0.4, 0.5])
    >>> round(gain, 3), round(se, 3)
    (0.4, 0.0)
    """
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, statistics.fmean(values)
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    slope = sum((i - x_mean) * (y - y_mean) for i, y in enumerate(values)) / sxx
    residuals = [y - (y_mean + slope * (i - x_mean)) for i, y in enumerate(values)]
    sigma = math.sqrt(sum(r * r for r in residuals) / max(1, n - 2))
    return slope * (n - 1), sigma / math.sqrt(sxx) * (n - 1)


def _residuals(values: list[float], x: list[float]) -> list[float]:
    """What is left of ``values`` after a least-squares line in ``x``."""
    x_mean, y_mean = statistics.fmean(x), statistics.fmean(values)
    sxx = sum((xi - x_mean) ** 2 for xi in x)
    slope = sum((xi - x_mean) * (y - y_mean) for xi, y in zip(x, values, strict=True)) / sxx if sxx else 0.0
    return [y - y_mean - slope * (xi - x_mean) for xi, y in zip(x, values, strict=True)]


def hinge_gain(values: list[float], noise: float = 0.0) -> tuple[float, float]:
    """Gain over the last half of ``values`` and its standard error, from a continuous two-piece line bent at the
    half (least squares on 1, min(i - m, 0), max(i - m, 0)). The level where the halves meet is fitted from both,
    so the last half's slope is known better than from its own points alone (about 0.7 of that error); the
    per-point noise is at least ``noise`` (the step-to-step spread, the batch's binomial noise).

    >>> gain, se = hinge_gain([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7])
    >>> round(gain, 6), round(se, 6)
    (0.2, 0.0)
    """
    n = len(values)
    m = n // 2
    early = [float(min(i - m, 0)) for i in range(n)]
    late = _residuals([float(max(i - m, 0)) for i in range(n)], early)
    rest = _residuals(values, early)
    sxx = sum(v * v for v in late)
    slope = sum(a * b for a, b in zip(late, rest, strict=True)) / sxx
    rss = sum((r - slope * v) ** 2 for r, v in zip(rest, late, strict=True))
    sigma = max(math.sqrt(rss / max(1, n - 3)), noise)
    span = n - 1 - m
    return slope * span, sigma / math.sqrt(sxx) * span


def recent_mean(metrics: list[dict[str, Any]], key: str) -> float | None:
    """Mean of the last window of ``key``; None below MIN_LEVEL_POINTS."""
    values = finite_values(metrics, key)
    if len(values) < MIN_LEVEL_POINTS:
        return None
    return statistics.fmean(values[-window_size(len(values)) :])


def rises(trend: Trend, floor: float = REWARD_RISE_ABS, z: float = NOISE_Z) -> bool:
    return trend.delta >= max(floor, z * trend.se)


def falls(trend: Trend, floor: float = REWARD_RISE_ABS, z: float = NOISE_Z) -> bool:
    return -trend.delta >= max(floor, z * trend.se)


def progress(metrics: list[dict[str, Any]], max_steps: int | None) -> float:
    """Share of the planned run logged so far: the last logged step over ``max_steps`` (1.0 when the length is
    unknown or the run is over, so a finished run is judged as it always was).

    >>> progress([{"step": 5}, {"step": 10}], 40), progress([{"step": 10}], None), progress([], 40)
    (0.25, 1.0, 0.025)
    """
    if not max_steps or max_steps <= 0:
        return 1.0
    last = max((int(point.get("step") or 0) for point in metrics), default=0)
    return min(1.0, max(1, last) / max_steps)


def look_z(z: float, fraction: float) -> float:
    """The z a verdict needs at this read of a run that is ``fraction`` done: ``z / sqrt(fraction)``.

    run_status reads a run again and again while it trains, and a test at a fixed z raised at any one of those
    reads alarms far more often than its one-read rate. The O'Brien-Fleming group-sequential boundary (O'Brien
    and Fleming, Biometrics 35:549, 1979) spends almost none of the error on early reads, where the windows hold
    few points, and leaves the last read (the finished run) at the nominal z.

    >>> look_z(1.5, 1.0), look_z(1.5, 0.25)
    (1.5, 3.0)
    """
    return z / math.sqrt(min(1.0, max(fraction, 1e-6)))


def shown_flat(trend: Trend, done: float, z: float) -> bool:
    """A [0, 1] reward shown not to rise: its gain stays under REWARD_RISE_ABS at the pace that would reach it by the
    planned end (REWARD_RISE_ABS x ``done``, the share of the run logged so far: a run that gains 0.05 over 100
    steps gains 0.01 in its first 20) even ``z`` standard errors above its estimate, at this read's boundary
    (look_z). A fall is flat too.

    >>> shown_flat(Trend(0.2, 0.2, 0.02), 1.0, 0.5), shown_flat(Trend(0.2, 0.2, 0.02), 0.2, 0.5)
    (True, False)
    """
    return trend.delta + look_z(z, done) * trend.se < REWARD_RISE_ABS * done


def share_se(metrics: list[dict[str, Any]], weights: dict[str, float], name: str) -> float:
    """Standard error of reward ``name``'s share of the weighted reward variance, (w sd)^2 / sum (w_j sd_j)^2, over
    the last window: the step-to-step spread of the share each logged batch gives (``rewards/<name>/std``), over
    the square root of the window's points.

    >>> rows = [{"rewards/a/std": 0.5, "rewards/b/std": sd} for sd in (0.3, 0.4) * 4]
    >>> round(share_se(rows, {"a": 1.0, "b": 1.0}, "a"), 3)
    0.055
    """
    shares = []
    for point in metrics:
        parts = {other: finite(point.get(f"rewards/{other}/std")) for other in weights}
        if all(sd is not None for sd in parts.values()):
            total = sum((weights[other] * sd) ** 2 for other, sd in parts.items())
            if total > 0:
                shares.append((weights[name] * parts[name]) ** 2 / total)
    k = min(window_size(len(shares)), len(shares))
    return point_noise(shares) / math.sqrt(k) if k else 0.0
