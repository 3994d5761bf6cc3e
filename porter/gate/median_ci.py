"""A distribution-free confidence interval for a median, from order statistics.

Kernel times are not normal (a floor, a long tail of clock and scheduling hiccups), so the
interval assumes nothing of their distribution but continuity: among ``n`` independent draws, the
count below the true median is Binomial(n, 1/2), so the sorted draws ``x_(l) <= x_(n+1-l)`` cover
the median with probability ``1 - 2 P(B <= l - 1)``. The rank ``l`` is the largest for which that
is at least the confidence, computed exactly (integer arithmetic, no normal approximation), so the
interval's coverage is never below what it claims at any ``n``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

CONFIDENCE = 0.95


@lru_cache(maxsize=4096)
def median_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The 1-based rank ``l`` of the interval ``[x_(l), x_(n+1-l)]`` over ``n`` sorted draws: the
    largest with ``2 P(B <= l - 1) <= 1 - confidence``, ``B ~ Binomial(n, 1/2)``. None when even
    ``[min, max]`` covers less than ``confidence`` (fewer than 6 draws at 95%)."""
    if not 0 < confidence < 1:
        raise ValueError(f"a confidence is between 0 and 1, not {confidence}")
    # 2 * sum_{k<=l-1} C(n, k) / 2^n <= 1 - confidence, in integers: sum <= (1 - confidence) 2^(n-1).
    tail = (1 - Fraction(confidence).limit_denominator(10**9)) * 2 ** max(n - 1, 0)
    rank, below, term = 0, 0, 1  # term = C(n, k)
    for k in range(n // 2 + 1):
        below += term
        if below > tail:
            break
        rank = k + 1
        term = term * (n - k) // (k + 1)
    return rank or None


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` interval of the median of the distribution ``samples`` were drawn from
    (see the module docstring); None when there are too few samples to reach the confidence."""
    rank = median_rank(len(samples), confidence)
    if rank is None:
        return None
    ordered = sorted(samples)
    return ordered[rank - 1], ordered[len(ordered) - rank]


def relative_half_width(samples: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """Half the interval's width over the sample median (0.01: ±1%); infinite when there are too
    few samples for an interval, or the median is not positive."""
    interval = median_ci(samples, confidence)
    if interval is None:
        return math.inf
    ordered = sorted(samples)
    middle = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    return (interval[1] - interval[0]) / 2 / middle if middle > 0 else math.inf
