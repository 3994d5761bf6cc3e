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


_OPS = {"add": lambda x, y, _: x + y, "sub": lambda x, y, _: x - y, "mul": lambda x, y, _: x * y,
        "div": lambda x, y, _: x / y, "fma": lambda x, y, z: x * y + z}


def directed_f64(kind: str, mode: str, *operands: np.ndarray) -> np.ndarray:
    """``add``/``sub``/``mul``/``div``/``fma`` of float64 rounded toward zero (``rz``), down (``rm``)
    or up (``rp``): the exact result (Python's rationals, element by element: directed f64 rounding
    is rare in kernels) and the neighbour on the mode's side of it. Elements with an infinite or
    NaN operand, a zero divisor or a zero result take IEEE 754's value, as the plain operation gives
    it (their rounding does not depend on the mode), but for an exact zero sum under ``.rm``: -0
    unless both addends are +0 (IEEE 754 6.3; the plain sum, rounded to nearest, is +0)."""
    ops = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in operands))
    with np.errstate(all="ignore"):
        plain = _OPS[kind](*ops, *([None] if len(ops) == 2 else []))
    out = np.array(plain, np.float64)
    for i in range(out.size):
        values = [float(x.flat[i]) for x in ops]
        if not all(np.isfinite(values)) or (kind == "div" and values[1] == 0):
            continue
        q = _OPS[kind](*map(Fraction, values), *([None] if len(values) == 2 else []))
        if q != 0:
            out.flat[i] = _round_exact(q, mode)
        elif mode == "rm" and kind != "mul" and kind != "div":
            x, y = values[:2]
            addends = (x * y, values[2]) if kind == "fma" else (x, -y if kind == "sub" else y)
            out.flat[i] = 0.0 if all(x == 0 and not np.signbit(x) for x in addends) else -0.0
    return out


_BIG = Fraction(float(np.finfo(np.float64).max))


def _round_exact(q: Fraction, mode: str) -> float:
    """The float64 that the exact nonzero ``q`` rounds to toward zero, down or up."""
    up = mode == "rp" or (mode == "rz" and q < 0)  # the direction the result moves from q: toward +inf?
    if abs(q) > _BIG:  # overflow: infinity when rounding away from zero, else the largest finite value
        magnitude = np.inf if (q > 0) == up else float(_BIG)
        return magnitude if q > 0 else -magnitude
    near = float(q)  # correctly rounded to nearest
    if Fraction(near) == q:
        return near
    below = near if Fraction(near) < q else float(np.nextafter(near, -np.inf))
    return float(np.nextafter(below, np.inf)) if up else below
