"""Metric series: the finite values of one logged metric, and window statistics that beat batch noise.

A trend is the difference between the means of the first and last k points (k = max(3, n // 4)); it
counts only when it beats both an absolute floor and the noise (the windows' standard error,
estimated from the spread of step-to-step differences). Where the run's batch shape is known
(BatchShape: completions behind one logged point, the group size, the held-out sample) the noise is
never taken below what that many samples allow: a [0, 1] mean over n completions has a standard
error of at least sqrt(m (1 - m) / n) (prompt difficulty only adds to it), and a fraction of g groups
sqrt(f (1 - f) / g). A short series' empirical spread can be luckily small; the sample size cannot.
Imports nothing from the project but the reward spec.
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


class BatchShape(NamedTuple):
    """How many samples stand behind one logged point, which is what sets the noise of every statistic.

    >>> shape = BatchShape.from_trl({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2})
    >>> shape.completions, shape.group_size, shape.groups
    (16, 8, 2)
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
        per_step = int(trl.get("per_device_train_batch_size") or 8) * int(trl.get("gradient_accumulation_steps") or 1)
        completions = per_step * max(1, world_size) * int(trl.get("logging_steps") or 1)
        return cls(completions, int(trl.get("num_generations") or 8), eval_prompts, eval_generations)


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
