"""Metric series: the finite values of one logged metric, and window statistics that beat batch noise.

A trend is the difference between the means of the first and last k points (k = max(3, n // 4)); it
counts only when it beats both an absolute floor and the noise (the windows' standard error,
estimated from the spread of step-to-step differences). Imports nothing from the project but the
reward spec.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, NamedTuple

from skill.rewards.spec import RewardSpec

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


def trend_of(metrics: list[dict[str, Any]], key: str, k: int | None = None) -> Trend | None:
    values = finite_values(metrics, key)
    if len(values) < MIN_TREND_POINTS:
        return None
    k = min(k or window_size(len(values)), len(values) // 2)
    se = point_noise(values) * math.sqrt(2 / k)
    return Trend(statistics.fmean(values[:k]), statistics.fmean(values[-k:]), se)


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


def metric_names(rewards: list[RewardSpec]) -> list[tuple[RewardSpec, str]]:
    """Each spec with the name TRL logs it under (as skill.rewards.registry names the functions:
    a user 'module:function' keeps its function name; a repeated name gets _2, _3, ...)."""
    seen: dict[str, int] = {}
    named = []
    for spec in rewards:
        base = spec.name.rpartition(":")[2]
        seen[base] = seen.get(base, 0) + 1
        named.append((spec, base if seen[base] == 1 else f"{base}_{seen[base]}"))
    return named
