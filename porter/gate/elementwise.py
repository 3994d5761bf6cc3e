"""The elementwise judgement that comparison (:mod:`porter.gate.compare`, :mod:`porter.gate.summary`),
localization (:mod:`porter.gate.localize`) and the worker's hold on nondeterministic outputs
(``porter.gate.runner.hold``) share: the tolerance rule (:func:`judge`, written once for any array
module), the passes over an array in chunks of about a million elements converted to float64 one
at a time (so that a 64M-element bf16 output never needs gigabytes of float64 temporaries), and how
one element's index and value are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from porter.gate.verdict import IndexTuple

TINY = float(np.finfo(np.float64).tiny)
CHUNK = 1 << 20  # elements converted to float64 and judged at a time: cache-sized, no huge temporaries


def judge(xp: Any, o: Any, r: Any, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """(ok, |o - r|, whether that difference is finite) for arrays of at least one dimension, in
    the array module ``xp`` (NumPy, or CuPy where the worker judges an output on the GPU).

    The tolerance applies only where the difference is finite: ``rtol * inf`` would otherwise let
    any value pass against an infinite reference. Elsewhere only equality (the same infinity) or
    NaN facing NaN passes. Outputs are mostly finite, so that case is checked once per call and
    the NaN/Inf rules cost nothing when it holds (on a GPU the check is one synchronisation).
    """
    ok, absdiff, finite = _within(xp, o, r, atol, rtol)
    if not bool(finite.all()):
        ok = _elsewhere(xp, ok, finite, o, r)
    return ok, absdiff, finite


def judge_everywhere(xp: Any, o: Any, r: Any, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """:func:`judge` with no test on the host between array operations (the NaN/Inf rules applied
    everywhere: where every difference is finite they change nothing), so that it can be queued on
    a GPU stream without waiting for it (``porter.gate.runner.hold`` counts the elements outside
    the tolerance after every timed launch; :func:`porter.gate.summary.summarize` reads every
    figure back at once)."""
    ok, absdiff, finite = _within(xp, o, r, atol, rtol)
    return _elsewhere(xp, ok, finite, o, r), absdiff, finite


def _within(xp: Any, o: Any, r: Any, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """The rule where the difference is finite: ``|o - r| <= atol + rtol * |r|``."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the NaN rules decide there
        absdiff = xp.abs(o - r)
        tol = xp.abs(r)
        tol *= rtol
        tol += atol
    return absdiff <= tol, absdiff, xp.isfinite(absdiff)


def _elsewhere(xp: Any, ok: Any, finite: Any, o: Any, r: Any) -> Any:
    """The rule everywhere: within tolerance where the difference is finite, else the same value
    (the same infinity) or NaN facing NaN."""
    return (ok & finite) | (o == r) | (xp.isnan(o) & xp.isnan(r))


def chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    """Slices of ``range(n)``, ``size`` elements each (the last one shorter)."""
    return (slice(start, min(start + size, n)) for start in range(0, n, size))


def as_float64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def index_text(index: IndexTuple) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def number_text(x: float | int) -> str:
    if isinstance(x, int):
        return str(x)
    return f"{x:.6g}"
