"""The statistics the tools decide on: the 95% interval on every rate they report (a route's pass@1 and learnable
fraction, a declared pass rate, a run's held-out score and its paired change), and the agreement of two pass/fail
judgments (a reader's blind labels and a reward; a judge and a person).

Wilson's score interval, because these rates are often near 0 or 1 on small samples, where the normal
interval leaves [0, 1] or collapses to a point (0 successes in 20 give 0 +- 0). Cohen's kappa, because raw
agreement rewards a labeller who says the majority class every time (kappa gives it 0). Fisher's exact test,
because whether two judgments agree beyond chance must hold at 6 passes in 60 as at 30, where kappa punishes two
misreads of a rare outcome as hard as twenty of a common one.
"""

from __future__ import annotations

import math

Z_95 = 1.96
MAX_DISAGREEING_SHARE = 0.1  # a reward (or a judge) may differ from a person's blind labels on at most this share
Z_80_POWER = 0.8416  # the standard normal's 80th percentile: a test at 95% that finds a true change 4 times in 5


def t_95(degrees_of_freedom: int) -> float:
    """Student's t two-sided 95% critical value, by the Cornish-Fisher expansion around the normal's (within 0.3%
    of the tables from 3 degrees of freedom on; 12.71 at 1 is the table's).

    >>> round(t_95(15), 3), round(t_95(31), 3), t_95(1)
    (2.131, 2.04, 12.706)
    """
    if degrees_of_freedom <= 1:
        return 12.706
    v, z = degrees_of_freedom, Z_95
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def paired_change(before: list[float], after: list[float]) -> tuple[float, float, float, int | None]:
    """The mean change from ``before`` to ``after`` over the same items (a score per prompt at two steps), its 95%
    t interval, and how many items a paired test at 95% would need to find a change of this size 4 times in 5
    (None when nothing changed or nothing varies). Pairing removes what the items share (one prompt is hard at
    both steps), so the interval is narrower than two separate ones.

    >>> change, low, high, needed = paired_change([0, 0, 1, 0] * 4, [1, 0, 1, 0] * 4)
    >>> round(change, 3), round(low, 3), round(high, 3), needed
    (0.25, 0.012, 0.488, 26)
    """
    n = len(before)
    if n != len(after) or n == 0:
        raise ValueError(f"two scores of the same items are needed (got {len(before)} and {len(after)})")
    differences = [b - a for a, b in zip(before, after, strict=True)]
    change = sum(differences) / n
    spread = math.sqrt(sum((d - change) ** 2 for d in differences) / (n - 1)) if n > 1 else 0.0
    half = t_95(n - 1) * spread / math.sqrt(n)
    needed = None if not change or not spread else math.ceil(((Z_95 + Z_80_POWER) * spread / change) ** 2)
    return change, change - half, change + half, needed


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


def cohen_kappa(first: list[bool], second: list[bool]) -> float | None:
    """Cohen's kappa of two pass/fail judgments of the same items: 1 for full agreement, about 0 for chance (a
    constant or random labeller); None when both judgments are constant, where agreement by chance is certain.

    >>> cohen_kappa([True, True, False, False], [True, True, False, False])
    1.0
    >>> cohen_kappa([True, True, True, True], [True, False, True, False])
    0.0
    >>> cohen_kappa([True, True], [True, True]) is None
    True
    """
    n = len(first)
    if n == 0 or n != len(second):
        raise ValueError(f"two judgments of the same items are needed (got {len(first)} and {len(second)})")
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    p_first, p_second = sum(first) / n, sum(second) / n
    expected = p_first * p_second + (1 - p_first) * (1 - p_second)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def fisher_agreement_p(first: list[bool], second: list[bool]) -> float:
    """Fisher's exact test, one-sided: the probability that judgments unrelated to each other, with the same
    numbers of passes, agree on at least as many passes as these (hypergeometric tail). Near 0: related; 1 when
    either judgment is constant, since then agreement tells nothing.

    >>> round(fisher_agreement_p([True] * 6 + [False] * 54, [True] * 4 + [False] * 56), 6)  # 2 passes missed
    3.1e-05
    >>> fisher_agreement_p([True, False] * 30, [False] * 60)
    1.0
    """
    n = len(first)
    if n == 0 or n != len(second):
        raise ValueError(f"two judgments of the same items are needed (got {len(first)} and {len(second)})")
    passes_first, passes_second = sum(first), sum(second)
    both = sum(a and b for a, b in zip(first, second, strict=True))
    top = min(passes_first, passes_second)
    tail = sum(
        math.comb(passes_first, k) * math.comb(n - passes_first, passes_second - k) for k in range(both, top + 1)
    )
    return min(1.0, tail / math.comb(n, passes_second))
