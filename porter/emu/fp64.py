"""float64 fused multiply-add rounded once, in NumPy (``fma.rn.f64``, ``mad.rn.f64``).

NumPy has no fma, and ``a * b + c`` in float64 rounds twice. CUDA's double-precision library is
built on fmas that are exact: ``fma(a, b, -a * b)`` is the rounding error of a product, and
pow, exp and sin's argument reduction carry such errors along; rounded twice, those are lost
(pow was ~100 ulps off). Here the product is split exactly into ``uh + ul`` (Veltkamp and
Dekker), ``c + uh`` exactly into ``th + tl`` (Knuth), and ``th + RO(tl + ul)`` rounded once,
where RO rounds to odd: Boldo and Melquiond's emulation of an fma, proved correct when nothing
overflows or leaves the normal range. Elements near those ranges (and infinities, NaN) take the
exact way: Python's rationals, whose conversion to float is correctly rounded; a product that is
exact in float64 already needs no more than ``a * b + c``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from porter.emu.fp import two_sum

_SPLIT = 2.0**27 + 1.0
_HUGE = 2.0**995  # past this an operand's split, or the sums, could overflow
_TINY = 2.0**-900  # below this a product's error term, or a sum's, could be subnormal


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = a * _SPLIT
    hi = g - (g - a)
    return hi, a - hi


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b rounded to odd: the nearest float of odd significand when the sum is inexact."""
    s, err = two_sum(a, b)
    even = (s.view(np.int64) & 1) == 0
    step = (err != 0) & even
    return np.where(step, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _exact(a: float, b: float, c: float) -> float:
    q = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(q)
    except OverflowError:
        return float("inf") if q > 0 else float("-inf")


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to nearest even, elementwise."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        p = a * b
        out = p + c
        finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        huge = (np.abs(a) > _HUGE) | (np.abs(b) > _HUGE) | (np.abs(p) > _HUGE) | (np.abs(c) > _HUGE)
        tiny = ((a != 0) & (b != 0) & (np.abs(p) < _TINY)) | ((c != 0) & (np.abs(c) < _TINY))
        fast = finite & ~huge & ~tiny & (p != 0)
        uh, ul = _two_product(a[fast], b[fast])
        th, tl = two_sum(c[fast], uh)
        out[fast] = th + _round_odd_sum(tl, ul)
    for i in np.flatnonzero(finite & (huge | tiny)):
        out.flat[i] = _exact(float(a.flat[i]), float(b.flat[i]), float(c.flat[i]))
    return out
