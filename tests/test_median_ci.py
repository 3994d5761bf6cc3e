"""The median's confidence interval (porter.gate.median_ci): properties over samples, and its
coverage over many seeded draws from distributions whose median is known."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate.median_ci import median_ci, median_rank, relative_half_width


def _coverage(n: int, rank: int) -> float:
    """The exact coverage of [x_(rank), x_(n+1-rank)]: 1 - 2 P(B <= rank - 1), B ~ Binomial(n, 1/2)."""
    return 1 - 2 * sum(math.comb(n, k) for k in range(rank)) / 2**n


_times = st.lists(st.floats(0.001, 1000.0, allow_nan=False), min_size=1, max_size=400)


@settings(max_examples=300, deadline=None)
@given(samples=_times)
def test_the_interval_holds_the_sample_median_and_lies_within_the_samples(samples: list[float]) -> None:
    interval = median_ci(samples)
    if len(samples) < 6:  # even [min, max] covers less than 95%: no interval is claimed
        assert interval is None and relative_half_width(samples) == math.inf
        return
    assert interval is not None
    low, high = interval
    assert min(samples) <= low <= statistics.median(samples) <= high <= max(samples)
    assert 0 <= relative_half_width(samples) < math.inf


@settings(max_examples=200, deadline=None)
@given(n=st.integers(6, 3000))
def test_the_rank_is_the_largest_whose_exact_coverage_reaches_95_percent(n: int) -> None:
    rank = median_rank(n)
    assert rank is not None and 1 <= rank <= (n + 1) // 2

    assert _coverage(n, rank) >= 0.95
    assert rank == (n + 1) // 2 or _coverage(n, rank + 1) < 0.95


def test_known_ranks() -> None:
    """The textbook table of the 95% interval's ranks."""
    assert [median_rank(n) for n in (5, 6, 10, 20, 50, 100)] == [None, 1, 2, 6, 18, 40]


@settings(max_examples=100, deadline=None)
@given(n=st.integers(6, 500), spread=st.floats(0.001, 2.0))
def test_it_narrows_as_samples_grow_for_a_fixed_distribution(n: int, spread: float) -> None:
    """Samples at a log-normal's quantiles (what a large draw looks like): four times as many
    samples give a narrower interval."""
    from statistics import NormalDist

    def quantiles(count: int) -> list[float]:
        return [math.exp(spread * NormalDist().inv_cdf((k + 0.5) / count)) for k in range(count)]

    assert relative_half_width(quantiles(4 * n)) < relative_half_width(quantiles(n))


@pytest.mark.parametrize("n", [10, 31, 64, 200])
def test_it_covers_the_true_median_95_percent_of_the_time(n: int) -> None:
    """2000 seeded samples of a skewed distribution (log-normal: median 1) and of a heavy-tailed
    one (Cauchy: median 0, shifted to 5). The interval's exact coverage is at least 95% (a bit
    more, ranks being whole); the count lands within 0.02 of it (five standard deviations; the
    seeds are fixed, so it cannot flake), whatever the distribution."""
    rank = median_rank(n)
    assert rank is not None
    expected = _coverage(n, rank)
    assert expected >= 0.95
    rng = np.random.default_rng(20240532 + n)
    for draw, median in ((lambda: rng.lognormal(0.0, 0.5, n), 1.0), (lambda: 5.0 + rng.standard_cauchy(n), 5.0)):
        hits = 0
        for _ in range(2000):
            interval = median_ci(list(draw()))
            assert interval is not None
            hits += interval[0] <= median <= interval[1]
        assert abs(hits / 2000 - expected) < 0.02


def test_a_median_not_positive_has_no_relative_width() -> None:
    assert relative_half_width([0.0] * 10) == math.inf
    assert relative_half_width([1.0] * 10) == 0.0
