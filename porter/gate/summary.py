"""What one output's comparison with its reference comes to, without the arrays: its figures and
verdict (:class:`OutputSummary`), computed by :func:`summarize` in any array module.

:func:`porter.gate.compare.compare` is :func:`summarize` over NumPy with the masks of wrong and
never-written elements kept for localization, so the figures of a comparison on the host and of a
summary made on the GPU (``porter.gate.runner.judge``, the same code over CuPy) come from one rule
(:func:`porter.gate.elementwise.judge`) and one accumulation. Only array operations CuPy has too are
used (``abs``, arithmetic, comparisons, ``isnan``/``isinf``/``isfinite``, ``where``, ``sum``,
``max``, ``min``, ``all``, ``any``, ``count_nonzero``, ``astype``, ``sort``), never a ufunc's ``out=`` or
``where=``; every chunk's figures come back to the host together, as Python numbers, when the
caller reads them (:class:`Figures`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from porter.gate.elementwise import CHUNK, TINY, chunks, judge_everywhere, number_text
from porter.gate.spec import Spec

_MOSTLY = 0.9  # share of the reference within tolerance of 0 that earns a warning
# A reference of a handful of elements (a sweep's n = 1 case) is constant by construction: the
# warning would be noise there. Constant and all-zero references of real size are still flagged.
_CONSTANT_MIN_SIZE = 16
SCALE_SAMPLE = 1 << 16  # elements of a reference a reduction's scale is read from (reference_scale)
SCALE_QUANTILE = 0.9  # ... and the quantile of their magnitudes it is

# A chunk's wrong elements and never-written ones (NaN where the reference has none), or None for none.
Masks = Callable[[slice, Any, Any], None]


@dataclass(frozen=True)
class OutputSummary:
    """One output of one run, compared with its reference: everything an
    :class:`~porter.gate.verdict.OutputCheck` holds but where and how it is wrong (which needs
    the arrays: see :func:`porter.gate.compare.compare`)."""

    passed: bool
    shape: tuple[int, ...]
    dtype: str
    atol: float
    rtol: float
    mismatches: int
    total: int
    nan_count: int
    inf_count: int
    ref_nan_count: int
    unjudged: int
    max_abs_err: float
    max_rel_err: float
    rel_l2: float
    warnings: tuple[str, ...]


def output_terms(xp: Any, spec: Spec, name: str, sizes: dict[str, int], values: str, ref: Any, *,
                 decode: Callable[[Any], Any] | None = None) -> tuple[float, float, float | None]:
    """(atol, rtol, limit) an output is judged with against its reference ``ref`` (flat; its
    elements as ``decode`` reads them): the spec's tolerance at these sizes (atol grown over a
    reduction by the reference's :func:`reference_scale`, and by the value case's factor) and,
    for a float output, its dtype's largest finite value: where the reference is not finite or
    beyond it (inputs span the whole domain), the reference says nothing and the element is left
    out."""
    atol, rtol = spec.tolerance(name, sizes, scale=reference_scale(xp, spec, name, ref, decode=decode))
    if values:
        atol *= spec.value_case(values).atol_scale
    return atol, rtol, output_limit(spec, name)


def output_limit(spec: Spec, name: str) -> float | None:
    """A float output's largest finite value (see :func:`output_terms`); None for an integer one."""
    dtype = spec.param(name).dtype
    return dtype.max_finite if dtype is not None and dtype.is_float else None


def reference_scale(xp: Any, spec: Spec, name: str, ref: Any, *,
                    decode: Callable[[Any], Any] | None = None) -> float:
    """The :data:`SCALE_QUANTILE` quantile of the magnitudes of the judged elements (finite,
    within the output's limit) of ``ref`` (flat), over an evenly spaced sample of at most
    :data:`SCALE_SAMPLE`, where output ``name``'s tolerance declares a reduction: the magnitude an
    element's partial sums may run at, which :meth:`Spec.tolerance` grows atol by. An element's
    partial sums run at the magnitude of its row's and column's larger elements, not its own (a
    sum that cancels to near 0 passed through them), so the median is too low: an honest
    truncating accumulator failed 1 large case in 40 with it. The 90th percentile, not the
    maximum or an RMS: the few rows porter's input mixture makes huge (under 1% of a sweep
    case's elements) would lift those a hundredfold, and with them every element's tolerance.
    0.0 for any other output, without reading ``ref``."""
    limit = output_limit(spec, name)
    if spec.tolerances[name].reduction is None or limit is None:  # integers compare as they are
        return 0.0
    size = int(ref.size)
    stride = max(1, -(-size // SCALE_SAMPLE))
    widen = decode if decode is not None else (lambda a: a.astype(xp.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        sample = xp.abs(widen(ref[::stride]))
        judged = xp.sort(sample[sample <= limit])  # NaN fails <=
        return float(judged[int(SCALE_QUANTILE * (judged.size - 1))]) if judged.size else 0.0


def summarize_output(xp: Any, spec: Spec, name: str, sizes: dict[str, int], values: str, out: Any, ref: Any, *,
                     decode: Callable[[Any], Any] | None = None, decode_reference: Callable[[Any], Any] | None = None,
                     chunk: int = CHUNK, terms: tuple[float, float, float | None] | None = None) -> OutputSummary:
    """:func:`output_figures`, read."""
    return output_figures(xp, spec, name, sizes, values, out, ref, decode=decode, decode_reference=decode_reference,
                          chunk=chunk, terms=terms).read()


def output_figures(xp: Any, spec: Spec, name: str, sizes: dict[str, int], values: str, out: Any, ref: Any, *,
                   decode: Callable[[Any], Any] | None = None, decode_reference: Callable[[Any], Any] | None = None,
                   chunk: int = CHUNK, terms: tuple[float, float, float | None] | None = None) -> Figures:
    """:func:`figures` for output ``name`` of a case (sizes, value case) with the terms it is
    judged by (:func:`output_terms`, unless given: the worker reads them from the reference on the
    host, where it is, rather than from its device copy): ``out`` flat, its elements as ``decode``
    reads them (default: of the output's dtype), ``ref`` flat."""
    atol, rtol, limit = terms if terms is not None else output_terms(xp, spec, name, sizes, values, ref,
                                                                     decode=decode_reference)
    p = spec.param(name)
    assert p.dtype is not None  # an output buffer has a dtype
    dtype = np.dtype(p.dtype.numpy)
    exact = dtype.kind in "biu" and ref.dtype.kind in "biu" and atol == 0 and rtol == 0
    return figures(xp, out, ref, atol=atol, rtol=rtol, limit=limit, exact=exact, shape=tuple(spec.shape(p, sizes)),
                   dtype=str(dtype), values=decode, reference=decode_reference, chunk=chunk)


@dataclass
class _Tally:
    """Figures summed over chunks."""

    count: int = 0
    bad: int = 0
    nan: int = 0
    inf: int = 0
    ref_nan: int = 0
    unjudged: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    near_zero: int = 0
    lo: float = math.inf
    hi: float = -math.inf
    err_parts: list[tuple[float, float]] = field(default_factory=list)
    ref_parts: list[tuple[float, float]] = field(default_factory=list)

    def add(self, row: list[float]) -> None:
        """Add one chunk's :func:`_chunk_figures`, in their order."""
        (count, lo, hi, near_zero, nan, ref_nan, inf, unjudged, bad, max_abs, max_rel,
         err_scale, err_ssq, ref_scale, ref_ssq) = row
        self.count += int(count)
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        self.near_zero += int(near_zero)
        self.nan += int(nan)
        self.ref_nan += int(ref_nan)
        self.inf += int(inf)
        self.unjudged += int(unjudged)
        self.bad += int(bad)
        self.max_abs, self.max_rel = max(self.max_abs, max_abs), max(self.max_rel, max_rel)
        self.err_parts.append((err_scale, err_ssq))
        self.ref_parts.append((ref_scale, ref_ssq))


def summarize(xp: Any, out: Any, ref: Any, *, atol: float, rtol: float, limit: float | None, exact: bool,
              shape: tuple[int, ...], dtype: str, values: Callable[[Any], Any] | None = None,
              reference: Callable[[Any], Any] | None = None, chunk: int = CHUNK,
              masks: Masks | None = None) -> OutputSummary:
    """:func:`figures`, read."""
    return figures(xp, out, ref, atol=atol, rtol=rtol, limit=limit, exact=exact, shape=shape, dtype=dtype,
                   values=values, reference=reference, chunk=chunk, masks=masks).read()


@dataclass(frozen=True)
class Figures:
    """One output's comparison, computed and not yet read: ``rows`` holds each chunk's figures
    (:data:`FIGURES` float64 numbers a chunk, in :meth:`_Tally.add`'s order, where the array module
    keeps its arrays: on a GPU they are read with whatever else the caller reads at that moment);
    the rest is what turns them into an :class:`OutputSummary`."""

    rows: Any  # (chunks, FIGURES) float64; None for an empty output
    total: int
    shape: tuple[int, ...]
    dtype: str
    atol: float
    rtol: float

    def read(self) -> OutputSummary:
        """The summary, the rows read where they are (one synchronisation on a GPU)."""
        return self.summary(self.rows.tolist() if self.rows is not None else [])

    def summary(self, rows: list[list[float]]) -> OutputSummary:
        """The summary from the rows, as read. Each chunk counts the elements it judged: rows that
        were lost on the way (zeroed, or not the rows of this comparison) cannot read as a pass."""
        t = _Tally()
        for row in rows:
            t.add(row)
        if t.count != self.total:
            raise RuntimeError(f"a summary's figures cover {t.count} of its {self.total} elements: they did not come "
                               "back as computed")
        err_norm, ref_norm = _l2(t.err_parts), _l2(t.ref_parts)
        rel_l2 = err_norm / ref_norm if ref_norm else (0.0 if err_norm == 0 else math.inf)
        size, atol, rtol = self.total, self.atol, self.rtol
        return OutputSummary(
            passed=t.bad == 0, shape=self.shape, dtype=self.dtype, atol=atol, rtol=rtol,
            mismatches=t.bad, total=size, nan_count=t.nan, inf_count=t.inf, ref_nan_count=t.ref_nan,
            unjudged=t.unjudged, max_abs_err=t.max_abs, max_rel_err=t.max_rel, rel_l2=rel_l2,
            warnings=_warnings(size, t, atol, rtol))


FIGURES = 15  # numbers a chunk's figures hold (see _chunk_figures)


def figures(xp: Any, out: Any, ref: Any, *, atol: float, rtol: float, limit: float | None, exact: bool,
            shape: tuple[int, ...], dtype: str, values: Callable[[Any], Any] | None = None,
            reference: Callable[[Any], Any] | None = None, chunk: int = CHUNK,
            masks: Masks | None = None) -> Figures:
    """Compare the flat arrays ``out`` and ``ref`` (the same size) elementwise, ``chunk`` elements
    at a time: ``|out - ref| <= atol + rtol * |ref|`` (:func:`porter.gate.elementwise.judge`).

    ``values`` turns a chunk of ``out`` into float64 (default: ``astype``; the worker decodes
    bf16 and fp8 bit patterns through a table), ``reference`` a chunk of ``ref`` (default:
    ``astype``; the worker sends a float32 reference as its bits, half the bytes); ``exact``
    compares ``out`` and ``ref`` as they are (integers with zero tolerance), where a difference
    counts at least 1. ``limit``: see :func:`output_terms`. ``masks`` receives each chunk's wrong
    and never-written elements.

    Every figure of every chunk is an array operation with no test on the host between them, and
    none is read here (:meth:`Figures.read`): on a GPU, the worker reads a case's figures with
    the rest of what its runs left, in one synchronisation (a synchronisation waits out another
    process's time slice on a shared GPU: about 2.3 ms on the H100, 2026-12-06, against 0.04 ms
    on an idle one).
    """
    if atol < 0 or rtol < 0:
        raise ValueError(f"tolerances must be >= 0, got atol={atol}, rtol={rtol}")
    decode = values if values is not None else (lambda a: a.astype(xp.float64))
    decode_ref = reference if reference is not None else (lambda a: a.astype(xp.float64))
    size = int(out.size)
    rows = []
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for sl in chunks(size, chunk):
            rows.append(_chunk_figures(xp, sl, out, ref, decode(out[sl]), decode_ref(ref[sl]), atol, rtol, limit,
                                       exact, masks))
    return Figures(xp.stack(rows) if rows else None, size, tuple(int(n) for n in shape), dtype, float(atol),
                   float(rtol))


def _chunk_figures(xp: Any, sl: slice, out: Any, ref: Any, o: Any, r: Any, atol: float, rtol: float,
                   limit: float | None, exact: bool, masks: Masks | None) -> Any:
    """One chunk's figures as one float64 vector of :data:`FIGURES`, in :meth:`_Tally.add`'s order
    (its element count first): ``o`` and ``r`` are the chunk of ``out`` and ``ref`` in float64.
    The NaN/Inf rules and the limit apply everywhere (where every element is finite and judged
    they change nothing)."""
    lo, hi, near_zero = _reference_terms(xp, r, atol, rtol)
    ok, absdiff, finite = judge_everywhere(xp, o, r, atol, rtol)
    if exact:
        ok = out[sl] == ref[sl]
        # Integers that differ differ by at least 1, even where float64 rounds both alike.
        absdiff = xp.where(~ok & (absdiff < 1.0), 1.0, absdiff)
    o_nan, r_nan = xp.isnan(o), xp.isnan(r)
    bad = ~ok
    poison = o_nan & ~r_nan
    absdiff = xp.where(finite, absdiff, 0.0)
    judged_ref = xp.where(finite, r, 0.0)
    unjudged = xp.zeros((), dtype=np.int64)
    if limit is not None:
        left = ~(xp.abs(r) <= limit)  # NaN fails <=
        unjudged = xp.count_nonzero(left)
        bad &= ~left
        poison &= ~left
        absdiff = xp.where(left, 0.0, absdiff)
        judged_ref = xp.where(left, 0.0, judged_ref)
    if masks is not None:
        masks(sl, bad, poison)
    max_abs = absdiff.max()
    magnitude = xp.abs(judged_ref)
    ref_max = magnitude.max()
    max_rel = (absdiff / xp.where(magnitude < TINY, TINY, magnitude)).max()
    nan = xp.count_nonzero(o_nan)
    # the chunk's elements counted on the device, from the data: rows lost on their way back count none
    count = nan + xp.count_nonzero(~o_nan)
    figures = [count, lo, hi, near_zero, nan, xp.count_nonzero(r_nan), xp.count_nonzero(xp.isinf(o)), unjudged,
               xp.count_nonzero(bad), max_abs, max_rel, *_partial_l2(xp, absdiff, max_abs), *_partial_l2(xp, judged_ref, ref_max)]
    return xp.stack([xp.asarray(f, dtype=np.float64) for f in figures])


def reference_warnings(xp: Any, ref: Any, atol: float, rtol: float, chunk: int = CHUNK) -> tuple[str, ...]:
    """What :func:`summarize` warns of the reference ``ref`` (see :func:`_warnings`), alone."""
    t = _Tally()
    ref = ref.reshape(-1)
    size = int(ref.size)
    with np.errstate(invalid="ignore", over="ignore"):
        for sl in chunks(size, chunk):
            r = ref[sl].astype(xp.float64)
            lo, hi, near_zero = _reference_terms(xp, r, atol, rtol)
            t.lo, t.hi = min(t.lo, float(lo)), max(t.hi, float(hi))
            t.near_zero += int(near_zero)
            t.ref_nan += int(xp.count_nonzero(xp.isnan(r)))
    return _warnings(size, t, atol, rtol)


def _reference_terms(xp: Any, r: Any, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """One chunk of the reference's (float64) figures its warnings need: its least and greatest
    value (NaN aside) and how many of its elements lie within the tolerance of 0."""
    nan = xp.isnan(r)
    return (xp.where(nan, math.inf, r).min(), xp.where(nan, -math.inf, r).max(),
            xp.count_nonzero(xp.abs(r) * (1 - rtol) <= atol))


def _warnings(size: int, t: _Tally, atol: float, rtol: float) -> tuple[str, ...]:
    """Say when a reference cannot tell a right kernel from a wrong one.

    A constant or all-zero reference cannot catch index or layout errors; one within its tolerance
    of 0 lets an all-zero output pass; a mostly-NaN one checks little more than NaN placement.
    ``t.ref_nan`` counts the reference's NaN (its non-finite elements are counted where the
    difference is not finite, which covers them all).
    """
    n_nan, lo, hi, near_zero = t.ref_nan, t.lo, t.hi, t.near_zero
    if size == 0:
        return ("the reference is empty: nothing is compared",)
    if n_nan == size:
        return ("the reference is all NaN: only NaN placement is checked",)
    warnings: list[str] = []
    if 2 * n_nan > size:
        warnings.append(
            f"the reference is {100 * n_nan / size:.0f}% NaN ({n_nan} of {size}): "
            "those elements only check that out is NaN there too"
        )
    biggest = max(abs(lo), abs(hi))
    if lo == hi == 0:
        warnings.append("the reference is all zeros: a kernel that writes only zeros passes")
    elif lo == hi and size >= _CONSTANT_MIN_SIZE:
        warnings.append(
            f"the reference is constant ({number_text(lo)} everywhere): it cannot catch index, layout or race errors"
        )
    elif biggest * (1 - rtol) <= atol:
        warnings.append(
            f"the reference is too small for its tolerance: max |ref| = {number_text(biggest)} with atol "
            f"{number_text(atol)}, rtol {number_text(rtol)}: an all-zero output would pass"
        )
    elif near_zero >= _MOSTLY * size:
        warnings.append(
            f"{100 * near_zero / size:.0f}% of the reference ({near_zero} of {size}) is within "
            f"its tolerance of 0 (atol {number_text(atol)}): a zero written there would pass"
        )
    return tuple(warnings)


def _partial_l2(xp: Any, x: Any, scale: Any) -> tuple[Any, Any]:
    """One chunk's part of a Euclidean norm: (scale, sum of (x / scale)^2), where scale is the
    chunk's largest magnitude (an array), so that squares neither overflow nor vanish when combined."""
    y = x / xp.where(scale == 0, 1.0, scale)
    return scale, (y * y).sum()


def _l2(parts: list[tuple[float, float]]) -> float:
    top = max((scale for scale, _ in parts), default=0.0)
    if top == 0:
        return 0.0
    return top * math.sqrt(sum(ssq * (scale / top) ** 2 for scale, ssq in parts))
