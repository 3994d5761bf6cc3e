"""The elementwise judgement that comparison (:mod:`porter.gate.compare`) and localization
(:mod:`porter.gate.localize`) share: the tolerance rule (:func:`judge`), the passes over an array
in chunks of about a million elements converted to float64 one at a time (so that a 64M-element
bf16 output never needs gigabytes of float64 temporaries), and how one element's index and value
are written.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from porter.gate.verdict import IndexTuple

TINY = float(np.finfo(np.float64).tiny)
CHUNK = 1 << 20  # elements converted to float64 and judged at a time: cache-sized, no huge temporaries


def judge(
    o: np.ndarray, r: np.ndarray, atol: float, rtol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, |o - r|, whether that difference is finite) for arrays of at least one dimension.

    The tolerance applies only where the difference is finite: ``rtol * inf`` would otherwise let
    any value pass against an infinite reference. Elsewhere only equality (the same infinity) or
    NaN facing NaN passes. Outputs are mostly finite, so that case is checked once per call and
    the NaN/Inf rules cost nothing when it holds.
    """
    absdiff = np.subtract(o, r)
    np.abs(absdiff, out=absdiff)
    tol = np.abs(r)
    tol *= rtol
    tol += atol
    ok = absdiff <= tol
    del tol
    finite = np.isfinite(absdiff)
    if not finite.all():
        ok &= finite
        ok |= o == r
        ok |= np.isnan(o) & np.isnan(r)
    return ok, absdiff, finite


def chunks(n: int) -> Iterator[slice]:
    """Slices of ``range(n)``, :data:`CHUNK` elements each (the last one shorter)."""
    return (slice(start, min(start + CHUNK, n)) for start in range(0, n, CHUNK))


def as_float64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def index_text(index: IndexTuple) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def number_text(x: float | int) -> str:
    if isinstance(x, int):
        return str(x)
    return f"{x:.6g}"
