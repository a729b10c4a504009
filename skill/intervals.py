"""The 95% interval the tools put on every rate they report: a route's pass@1 and learnable fraction, a declared
pass rate, a run's held-out score.

Wilson's score interval, because these rates are often near 0 or 1 on small samples, where the normal
interval leaves [0, 1] or collapses to a point (0 successes in 20 give 0 +- 0).
"""

from __future__ import annotations

import math

Z_95 = 1.96


def wilson_interval(successes: float, n: int) -> tuple[float, float]:
    """Wilson score 95% interval of a proportion of ``successes`` in ``n`` trials.

    ``successes`` may be fractional (a mean of a [0, 1] score times n): a [0, 1] variable with mean p has at
    most the variance p (1 - p) of a 0/1 one, so the interval is then conservative, never too narrow.

    >>> [round(x, 3) for x in wilson_interval(0, 20)], [round(x, 3) for x in wilson_interval(30, 100)]
    ([0.0, 0.161], [0.219, 0.396])
    """
    p = min(max(successes / n, 0.0), 1.0)
    denominator = 1 + Z_95**2 / n
    centre = (p + Z_95**2 / (2 * n)) / denominator
    half = Z_95 * math.sqrt(p * (1 - p) / n + Z_95**2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
