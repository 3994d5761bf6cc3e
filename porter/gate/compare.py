"""Compare a kernel's output buffer with its reference, and say where and how it is wrong.

Pure numpy, no GPU: the gate copies each output back to the host and calls :func:`compare`.
Everything is compared in float64 (integers exactly). The gate fills outputs with a poison value
(NaN for floats) before the launch, so NaN in ``out`` where the reference has none marks an element
the kernel never wrote.

When an output fails, :class:`Localization` turns the mismatch mask into short sentences an agent
can act on: which tiles (thread blocks) are wrong, whether only the ragged edge is, whether the
values are off by a scale, an offset, a transpose or a shift. Each pattern is tried on a small
sample first and confirmed on the whole array only if the sample agrees, so a failing 64M-element
output costs a few vectorised passes, not one per hypothesis. Whole-array passes go in chunks of
about a million elements converted to float64 one at a time, so that a 64M-element bf16 output
never needs gigabytes of float64 temporaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from porter.gate.verdict import BadElement, IndexTuple, Localization, OutputCheck

_TINY = float(np.finfo(np.float64).tiny)
_CHUNK = 1 << 20  # elements converted to float64 and judged at a time: cache-sized, no huge temporaries
_SAMPLE = 4096  # elements a pattern is screened on before it is checked everywhere
_MIN_EVIDENCE = 4  # written wrong elements needed before a pattern may explain "every element"
_MAX_SHIFT = 4  # shifts of 1..4 along an axis are tried
_GUESS_TILE_1D = 256
_GUESS_TILE_2D = (64, 64)
_MOSTLY = 0.9  # share of the reference within tolerance of 0 that earns a warning
_SAFE_SCALE = (1e-100, 1e100)  # magnitudes whose squares, summed over a chunk, stay in float64 range



@dataclass(frozen=True)
class _Axis:
    """How an axis is named in sentences: 'row'/'rows' and 'tile row' for axis 0 of a 2-D output."""

    one: str
    many: str
    tile_line: str


def _axes(ndim: int) -> tuple[_Axis, ...]:
    if ndim == 1:
        return (_Axis("element", "elements", "tile"),)
    if ndim == 2:
        return (_Axis("row", "rows", "tile row"), _Axis("column", "columns", "tile column"))
    return tuple(_Axis(f"axis-{d} index", f"axis-{d} indices", f"tile along axis {d}") for d in range(ndim))


# --------------------------------------------------------------------------------------------
# public API


def compare(
    name: str,
    out: np.ndarray,
    ref: np.ndarray,
    *,
    atol: float,
    rtol: float,
    tile: tuple[int, ...] | None = None,
    max_examples: int = 8,
    limit: float | None = None,
) -> OutputCheck:
    """Compare ``out`` with ``ref`` elementwise: ``|out - ref| <= atol + rtol * |ref|``.

    NaN in ``out`` passes only against NaN in ``ref``; an infinity passes only against the same
    infinity. Integer outputs compared with zero tolerance are compared exactly, without float64
    rounding. ``tile`` is the kernel's output tile per block (e.g. ``(128, 128)``) used to name the
    wrong blocks; without it a tile is guessed and the localization says so.

    With ``limit`` (the output dtype's largest finite value), an element whose reference is not
    finite or beyond ``limit`` is left out: the reference says nothing there (inputs porter draws
    across the whole domain, infinities and NaN included, make such elements on purpose), and the
    rest of the output is still judged. ``unjudged`` counts them.
    """
    if atol < 0 or rtol < 0:
        raise ValueError(f"tolerances must be >= 0, got atol={atol}, rtol={rtol}")
    out_arr, ref_arr = np.asarray(out, order="C"), np.asarray(ref, order="C")
    tile_shape, guessed = _resolve_tile(ref_arr.shape, tile)
    warnings = reference_warnings(ref_arr, atol, rtol)
    if out_arr.shape != ref_arr.shape:
        return _shape_mismatch(name, out_arr, ref_arr, atol, rtol, tile_shape, guessed, warnings)

    exact = _is_int(out_arr.dtype) and _is_int(ref_arr.dtype) and atol == 0 and rtol == 0
    out_flat, ref_flat = out_arr.reshape(-1), ref_arr.reshape(-1)
    bad = np.empty(out_flat.size, dtype=bool)
    poison = np.empty(out_flat.size, dtype=bool)
    max_abs = max_rel = 0.0
    nan_count = inf_count = ref_nan_count = unjudged = 0
    err_parts: list[tuple[float, float]] = []
    ref_parts: list[tuple[float, float]] = []
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for sl in _blocks(out_flat.size):
            o, r = _f64(out_flat[sl]), _f64(ref_flat[sl])
            r_raw = r
            ok, absdiff, finite = _judge(o, r, atol, rtol)
            if exact:
                ok = out_flat[sl] == ref_flat[sl]
                # Integers that differ differ by at least 1, even where float64 rounds both alike.
                np.maximum(absdiff, 1.0, out=absdiff, where=~ok)
            np.logical_not(ok, out=bad[sl])
            if finite.all():
                poison[sl] = False
            else:
                o_nan, r_nan = np.isnan(o), np.isnan(r)
                np.logical_and(o_nan, ~r_nan, out=poison[sl])
                nan_count += int(np.count_nonzero(o_nan))
                ref_nan_count += int(np.count_nonzero(r_nan))
                inf_count += int(np.count_nonzero(np.isinf(o)))
                absdiff[~finite] = 0.0
                r = np.where(finite, r, 0.0)
            if limit is not None and (left := _left_out(r_raw, limit)) is not None:
                unjudged += int(np.count_nonzero(left))
                bad[sl] &= ~left
                poison[sl] &= ~left
                absdiff[left] = 0.0
                r = np.where(left, 0.0, r)
            chunk_max = float(absdiff.max())
            max_abs = max(max_abs, chunk_max)
            rel = np.abs(r)
            ref_max = float(rel.max())
            np.maximum(rel, _TINY, out=rel)
            np.divide(absdiff, rel, out=rel)
            max_rel = max(max_rel, float(rel.max()))
            err_parts.append(_partial_l2(absdiff, chunk_max))
            ref_parts.append(_partial_l2(r, ref_max))
    err_norm, ref_norm = _l2(err_parts), _l2(ref_parts)
    rel_l2 = err_norm / ref_norm if ref_norm else (0.0 if err_norm == 0 else math.inf)

    n_bad = int(np.count_nonzero(bad))
    first_bad = tuple(_bad_element(out_arr, ref_arr, i) for i in _first_true(bad, max_examples))
    localization = None
    if n_bad:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            localization = _localize(
                out_arr,
                ref_arr,
                bad.reshape(out_arr.shape),
                poison.reshape(out_arr.shape),
                n_bad,
                atol,
                rtol,
                tile_shape,
                guessed,
                max_examples,
            )
    return _summarised(OutputCheck(
        name=name,
        passed=n_bad == 0,
        shape=tuple(out_arr.shape),
        dtype=str(out_arr.dtype),
        atol=float(atol),
        rtol=float(rtol),
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        rel_l2=rel_l2,
        mismatches=n_bad,
        total=int(out_arr.size),
        nan_count=nan_count,
        inf_count=inf_count,
        ref_nan_count=ref_nan_count,
        first_bad=first_bad,
        localization=localization,
        warnings=warnings,
        unjudged=unjudged,
    ))


def _left_out(ref: np.ndarray, limit: float) -> np.ndarray | None:
    """The elements of a chunk whose reference is not finite or beyond ``limit`` (NaN fails
    ``<=``), or None when there is none (the common case costs one comparison)."""
    with np.errstate(invalid="ignore"):
        left = ~(np.abs(ref) <= limit)
    return left if left.any() else None


def _summarised(check: OutputCheck) -> OutputCheck:
    """The check with its one-text summary (figures, first bad indices, localization)."""
    return replace(check, summary=format_comparison(check))


# A reference of a handful of elements (a sweep's n = 1 case) is constant by construction: the
# warning would be noise there. Constant and all-zero references of real size are still flagged.
_CONSTANT_MIN_SIZE = 16


def reference_warnings(ref: np.ndarray, atol: float, rtol: float) -> tuple[str, ...]:
    """Say when a reference cannot tell a right kernel from a wrong one.

    A constant or all-zero reference cannot catch index or layout errors; one within its tolerance
    of 0 lets an all-zero output pass; a mostly-NaN one checks little more than NaN placement.
    """
    flat = np.asarray(ref, order="C").reshape(-1)
    size = flat.size
    if size == 0:
        return ("the reference is empty: nothing is compared",)
    n_nan = near_zero = 0
    lo, hi = math.inf, -math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        for sl in _blocks(size):
            r = _f64(flat[sl])
            n_nan += int(np.count_nonzero(np.isnan(r)))
            lo = min(lo, float(np.fmin.reduce(r, initial=math.inf)))
            hi = max(hi, float(np.fmax.reduce(r, initial=-math.inf)))
            near_zero += int(np.count_nonzero(np.abs(r) * (1 - rtol) <= atol))
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
            f"the reference is constant ({_num(lo)} everywhere): it cannot catch index, layout or race errors"
        )
    elif biggest * (1 - rtol) <= atol:
        warnings.append(
            f"the reference is too small for its tolerance: max |ref| = {_num(biggest)} with atol "
            f"{_num(atol)}, rtol {_num(rtol)}: an all-zero output would pass"
        )
    elif near_zero >= _MOSTLY * size:
        warnings.append(
            f"{100 * near_zero / size:.0f}% of the reference ({near_zero} of {size}) is within "
            f"its tolerance of 0 (atol {_num(atol)}): a zero written there would pass"
        )
    return tuple(warnings)


def compare_runs(first: np.ndarray, second: np.ndarray) -> str | None:
    """Compare two runs of the same kernel on the same inputs, bit for bit.

    Returns None when they are identical (NaN matching NaN at the same place), else a message with
    the number of differing elements and the first one: a race or an uninitialised read.
    """
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"the two runs returned different outputs: {a.shape} {a.dtype} then {b.shape} {b.dtype}"
    bits = np.dtype(f"u{a.dtype.itemsize}")
    af = np.ascontiguousarray(a).reshape(-1)
    bf = np.ascontiguousarray(b).reshape(-1)
    count = 0
    first_at: int | None = None
    for sl in _blocks(af.size):
        ca, cb = af[sl], bf[sl]
        differ = np.flatnonzero(ca.view(bits) != cb.view(bits))
        if differ.size and not _is_int(a.dtype):
            differ = differ[~(np.isnan(_f64(ca[differ])) & np.isnan(_f64(cb[differ])))]
        if differ.size:
            count += int(differ.size)
            if first_at is None:
                first_at = sl.start + int(differ[0])
    if first_at is None:
        return None
    index = tuple(int(i) for i in np.unravel_index(first_at, a.shape))
    return (
        f"results differ between two identical runs in {count} of {a.size} elements "
        f"(first at {_idx(index)}: {_num(_scalar(a, index))} then {_num(_scalar(b, index))}): "
        "a race or a read of uninitialised memory"
    )


def format_comparison(c: OutputCheck) -> str:
    """A compact multi-line report of one comparison, for the agent and the terminal."""
    tolerance = f"atol {_num(c.atol)}, rtol {_num(c.rtol)}"
    lines: list[str] = []
    if c.passed:
        lines.append(
            f"{c.name}: ok, {_shape(c.shape)} {c.dtype}: max abs err {_err(c.max_abs_err)}, "
            f"max rel err {_err(c.max_rel_err)}, rel L2 {_err(c.rel_l2)} ({tolerance})"
        )
    else:
        lines.append(
            f"{c.name}: FAILED, {c.mismatches} of {c.total} elements wrong, {_shape(c.shape)} {c.dtype} "
            f"({tolerance})"
        )
        lines.append(
            f"  max abs err {_err(c.max_abs_err)}, max rel err {_err(c.max_rel_err)}, rel L2 "
            f"{_err(c.rel_l2)} (over finite pairs); out has {c.nan_count} NaN, {c.inf_count} Inf; ref has {c.ref_nan_count} NaN"
        )
    if c.localization is not None:
        lines.extend(f"  {line}" for line in c.localization.summary.splitlines())
        lines.extend(f"  - {p}" for p in c.localization.patterns[1:])
    if c.first_bad:
        lines.append("  first wrong:")
        lines.extend(
            f"    {_idx(e.index)} got {_num(e.got)}, expected {_num(e.expected)}" for e in c.first_bad
        )
    lines.extend(f"  warning: {w}" for w in c.warnings)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# elementwise judgement and metrics


def _judge(
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


def within_tolerance(xp: Any, o: Any, r: Any, atol: float, rtol: float) -> Any:
    """:func:`_judge`'s ``ok`` in plain array operations of any array module (``xp``: NumPy, or
    CuPy where the worker holds an output to its reference on the GPU): within the tolerance
    where the difference is finite, else equal (the same infinity) or NaN facing NaN."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the NaN rules below decide
        diff = xp.abs(o - r)
        ok = (diff <= atol + rtol * xp.abs(r)) & xp.isfinite(diff)
    return ok | (o == r) | (xp.isnan(o) & xp.isnan(r))


def _partial_l2(x: np.ndarray, scale: float) -> tuple[float, float]:
    """One chunk's part of a Euclidean norm: (scale, sum of (x / scale)^2), where scale is the
    chunk's largest magnitude, so that squares neither overflow nor vanish when combined."""
    if scale == 0:
        return 0.0, 0.0
    if _SAFE_SCALE[0] < scale < _SAFE_SCALE[1]:
        return scale, float(np.dot(x, x)) / scale**2
    y = x / scale
    return scale, float(np.dot(y, y))


def _l2(parts: list[tuple[float, float]]) -> float:
    top = max((scale for scale, _ in parts), default=0.0)
    if top == 0:
        return 0.0
    return top * math.sqrt(sum(ssq * (scale / top) ** 2 for scale, ssq in parts))


def _first_true(mask: np.ndarray, k: int) -> list[int]:
    """Flat indices of the first k True values of a 1-D mask, scanning in chunks so that a mask with
    millions of True values never materialises all their indices."""
    found: list[int] = []
    for sl in _blocks(mask.size):
        if len(found) >= k:
            break
        found.extend(int(i) + sl.start for i in np.flatnonzero(mask[sl])[: k - len(found)])
    return found


def _blocks(n: int) -> Iterator[slice]:
    return (slice(start, min(start + _CHUNK, n)) for start in range(0, n, _CHUNK))


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _bad_element(out: np.ndarray, ref: np.ndarray, flat: int) -> BadElement:
    index = tuple(int(i) for i in np.unravel_index(flat, out.shape))
    return BadElement(index, _scalar(out, index), _scalar(ref, index))


def _shape_mismatch(
    name: str,
    out: np.ndarray,
    ref: np.ndarray,
    atol: float,
    rtol: float,
    tile: IndexTuple,
    guessed: bool,
    warnings: tuple[str, ...],
) -> OutputCheck:
    pattern = f"out has shape {_shape(out.shape)} but the reference has {_shape(ref.shape)}"
    with np.errstate(invalid="ignore", over="ignore"):
        transposed = (
            out.ndim == 2
            and out.size > 0
            and out.shape == ref.shape[::-1]
            and _holds(out, ref.T, atol, rtol, _same)
        )
    if transposed:
        pattern += ": out holds the reference transposed (a row-/column-major mix-up)"
    elif out.size == ref.size:
        pattern += f": the same {out.size} elements in another shape (a reshape or a stride error?)"
    else:
        pattern += f" ({out.size} vs {ref.size} elements)"
    o, r = _f64(out), _f64(ref)
    localization = Localization(
        summary=pattern,
        patterns=(pattern,),
        bad_tiles=(),
        bad_tile_count=0,
        tile_count=0,
        tile=tile,
        tile_is_guess=guessed,
        bad_region=None,
    )
    return _summarised(OutputCheck(
        name=name,
        passed=False,
        shape=tuple(out.shape),
        dtype=str(out.dtype),
        atol=float(atol),
        rtol=float(rtol),
        max_abs_err=math.nan,
        max_rel_err=math.nan,
        rel_l2=math.nan,
        mismatches=int(r.size),
        total=int(r.size),
        nan_count=int(np.count_nonzero(np.isnan(o))),
        inf_count=int(np.count_nonzero(np.isinf(o))),
        ref_nan_count=int(np.count_nonzero(np.isnan(r))),
        first_bad=(),
        localization=localization,
        warnings=warnings,
    ))


# --------------------------------------------------------------------------------------------
# localization


def _resolve_tile(shape: IndexTuple, tile: tuple[int, ...] | None) -> tuple[IndexTuple, bool]:
    """The tile per axis, and whether it was guessed. A tile shorter than the shape covers the
    trailing axes (a (128, 128) GEMM tile on a batched (B, M, N) output); leading axes get 1."""
    ndim = len(shape)
    if tile is None:
        if ndim == 0:
            return (), True
        if ndim == 1:
            return (_GUESS_TILE_1D,), True
        return (1,) * (ndim - 2) + _GUESS_TILE_2D, True
    if len(tile) > ndim or any(int(t) < 1 for t in tile):
        raise ValueError(f"tile {tuple(tile)} does not fit an output of shape {shape}")
    return (1,) * (ndim - len(tile)) + tuple(int(t) for t in tile), False


def _localize(
    o: np.ndarray,
    r: np.ndarray,
    bad: np.ndarray,
    poison: np.ndarray,
    n_bad: int,
    atol: float,
    rtol: float,
    tile: IndexTuple,
    guessed: bool,
    max_examples: int,
) -> Localization:
    axes = _axes(o.ndim)
    lo, hi = _bbox(bad)
    patterns: list[str] = []

    n_poison = int(np.count_nonzero(poison))
    if n_poison:
        patterns.append(_never_written(poison, n_poison, n_bad, axes))
    written_bad = bad & ~poison
    n_written_bad = n_bad - n_poison
    if n_written_bad >= _MIN_EVIDENCE and o.ndim:
        patterns.extend(_value_patterns(o, r, written_bad, n_written_bad, atol, rtol, axes))

    grid = _tile_grid(bad, tile)
    coords = np.argwhere(grid)
    bad_tiles = tuple(tuple(int(v) for v in c) for c in coords[:max_examples])
    patterns.extend(_tile_patterns(grid.shape, coords, bad_tiles, o.shape, tile, guessed, axes, n_bad))
    if o.ndim:
        patterns.extend(p for p in (_describe(_profile(bad, d), ax) for d, ax in enumerate(axes)) if p)

    summary = f"{n_bad} of {bad.size} elements wrong, in {_region(lo, hi, axes)}"
    if patterns:
        summary += "\n" + patterns[0]
    return Localization(
        summary=summary,
        patterns=tuple(patterns),
        bad_tiles=bad_tiles,
        bad_tile_count=len(coords),
        tile_count=int(grid.size),
        tile=tile,
        tile_is_guess=guessed,
        bad_region=(lo, hi),
    )


def _never_written(poison: np.ndarray, n_poison: int, n_bad: int, axes: tuple[_Axis, ...]) -> str:
    if n_poison == poison.size:
        return (
            "nothing was written (every element is still poison): the kernel did not run, "
            "or wrote through another pointer"
        )
    lo, hi = _bbox(poison)
    box = math.prod(h - low + 1 for low, h in zip(lo, hi, strict=True))
    lead = (
        f"{n_poison} elements never written (still poison)"
        if n_poison == n_bad
        else f"{n_poison} of the {n_bad} wrong elements never written (still poison)"
    )
    fill = ", filling that box" if n_poison == box and n_poison > 1 else ""
    return f"{lead}, in {_region(lo, hi, axes)}{fill}"


def _value_patterns(
    o: np.ndarray,
    r: np.ndarray,
    written_bad: np.ndarray,
    n_written_bad: int,
    atol: float,
    rtol: float,
    axes: tuple[_Axis, ...],
) -> list[str]:
    """Explanations of the written values as a whole: the first that holds everywhere wins, then
    whether the wrong ones are zeros."""
    found: list[str] = []
    explanation: str | None = None
    lo, hi = _range(o)
    constant = lo if lo == hi else None
    r_lo, r_hi = _range(r)
    if constant is not None and r_lo < r_hi:
        explanation = (
            f"out is constant {_num(constant)} while the reference varies ({_num(r_lo)}..{_num(r_hi)}): "
            "one value is written everywhere (a zero stride, a broadcast, or a result never accumulated)"
        )
    else:
        constant = None
        explanation = _scale_or_offset(o, r, atol, rtol)
    if explanation is None and o.ndim == 2 and o.shape[0] == o.shape[1] and _holds(o, r.T, atol, rtol, _same):
        explanation = (
            "out ≈ ref.T: rows and columns are swapped (a row-/column-major mix-up or swapped strides)"
        )
    if explanation is None:
        explanation = _shift(o, r, written_bad, atol, rtol, axes)
    if explanation:
        found.append(explanation)
    if constant != 0:
        wb, of = written_bad.reshape(-1), o.reshape(-1)
        n_zero = sum(int(np.count_nonzero(wb[sl] & (_f64(of[sl]) == 0))) for sl in _blocks(of.size))
        if n_zero == n_written_bad:
            found.append(
                f"all {n_zero} wrong written elements are exactly 0 where the reference is not: "
                "a load or store masked off, or an accumulator never added to"
            )
    return found


def _range(a: np.ndarray) -> tuple[float, float]:
    """The smallest and largest value, NaN ignored; (inf, -inf) when there is none."""
    flat = a.reshape(-1)
    lo, hi = math.inf, -math.inf
    for sl in _blocks(flat.size):
        chunk = _f64(flat[sl])
        lo = min(lo, float(np.fmin.reduce(chunk, initial=math.inf)))
        hi = max(hi, float(np.fmax.reduce(chunk, initial=-math.inf)))
    return lo, hi


def _scale_or_offset(o: np.ndarray, r: np.ndarray, atol: float, rtol: float) -> str | None:
    """out ≈ c·ref or out ≈ ref + c everywhere, with c estimated as a median over a sample."""
    idx = _sample(o.shape)
    os, rs = _f64(o[idx]), _f64(r[idx])
    usable = np.isfinite(os) & np.isfinite(rs)
    significant = usable & (np.abs(rs) > max(atol, _TINY))
    if np.count_nonzero(significant) >= _MIN_EVIDENCE:
        factor = float(np.median(os[significant] / rs[significant]))
        if math.isfinite(factor) and factor not in (0.0, 1.0) and _holds(o, r, atol, rtol, _times(factor)):
            return f"out ≈ {_factor(factor)} × ref everywhere: {_scale_hint(factor)}"
    if np.count_nonzero(usable) >= _MIN_EVIDENCE:
        offset = float(np.median(os[usable] - rs[usable]))
        if offset != 0 and _holds(o, r, atol, rtol, _plus(offset)):
            return (
                f"out ≈ ref {'+' if offset > 0 else '-'} {_num(abs(offset))} everywhere: a constant offset "
                "(a bias added twice or missing, or an accumulator not cleared)"
            )
    return None


def _scale_hint(factor: float) -> str:
    nearest = round(factor)
    if abs(factor - nearest) > 1e-3 * abs(factor):
        return "a wrong scale factor (alpha, a softmax or 1/sqrt(d) scale, a missing or doubled multiply)"
    if nearest == -1:
        return "the sign is flipped"
    if nearest == 2:
        return "a scale applied twice or an accumulation counted twice"
    if nearest > 2:
        return (
            f"a sum accumulated {nearest} times (a loop or split-K reduction run too often) or a wrong scale"
        )
    return "a wrong sign and scale"


def _shift(
    o: np.ndarray, r: np.ndarray, written_bad: np.ndarray, atol: float, rtol: float, axes: tuple[_Axis, ...]
) -> str | None:
    """out[i] = ref[i - k] along one axis for a small k, over the overlap.

    The shift only counts if some wrong element lies inside the overlap: otherwise the overlap
    already matched unshifted (a reference constant along the axis) and the shift explains nothing.
    """
    for axis, ax in enumerate(axes):
        n = o.shape[axis]
        for k in range(1, _MAX_SHIFT + 1):
            if n <= 2 * k:
                break
            for step in (k, -k):
                # step > 0: out[i] = ref[i - k], so out[k:] faces ref[:-k]; step < 0 the other way.
                out_part, ref_part = (slice(k, None), slice(None, -k))[:: 1 if step > 0 else -1]
                o_sl = (slice(None),) * axis + (out_part,)
                r_sl = (slice(None),) * axis + (ref_part,)
                if _holds(o[o_sl], r[r_sl], atol, rtol, _same) and written_bad[o_sl].any():
                    return (
                        f"out {ax.one} i holds reference {ax.one} i{-step:+d} ({ax.many} shifted by {step:+d}): "
                        f"an off-by-{k} in the {ax.one} index or pointer"
                    )
    return None


def _holds(
    o: np.ndarray, target: np.ndarray, atol: float, rtol: float, transform: Callable[[np.ndarray], np.ndarray]
) -> bool:
    """Whether every written element of o (not NaN) passes against transform(target).

    Screened on an evenly spaced sample first: a sample that fails settles it cheaply, and only a
    sample that passes is confirmed on the whole array, a block of leading-axis slices at a time.
    """
    idx = _sample(o.shape)
    if not _all_pass(_f64(o[idx]), transform(_f64(target[idx])), atol, rtol):
        return False
    step = max(1, _CHUNK // max(1, math.prod(o.shape[1:])))
    return all(
        _all_pass(_f64(o[i : i + step]), transform(_f64(target[i : i + step])), atol, rtol)
        for i in range(0, o.shape[0], step)
    )


def _all_pass(o: np.ndarray, target: np.ndarray, atol: float, rtol: float) -> bool:
    ok = _judge(o, target, atol, rtol)[0]
    ok |= np.isnan(o)
    return bool(ok.all())


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _times(factor: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x * factor


def _plus(offset: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x + offset


def _sample(shape: IndexTuple) -> tuple[np.ndarray, ...]:
    size = math.prod(shape)
    flat = np.unique(np.linspace(0, size - 1, min(size, _SAMPLE)).astype(np.intp))
    return np.unravel_index(flat, shape)


def _tile_grid(bad: np.ndarray, tile: IndexTuple) -> np.ndarray:
    """One bool per tile: whether it holds a wrong element."""
    grid = bad
    for axis, t in enumerate(tile):
        if t > 1:
            grid = np.logical_or.reduceat(grid, np.arange(0, grid.shape[axis], t), axis=axis)
    return grid


def _tile_patterns(
    grid_shape: IndexTuple,
    coords: np.ndarray,
    bad_tiles: tuple[IndexTuple, ...],
    shape: IndexTuple,
    tile: IndexTuple,
    guessed: bool,
    axes: tuple[_Axis, ...],
    n_bad_elements: int,
) -> list[str]:
    n_tiles = math.prod(grid_shape)
    n_bad = len(coords)
    if not shape or n_tiles == 1:
        return []
    size = "×".join(str(t) for t in tile)
    guess = "; the tile is a guess, pass tile= for the kernel's block tile" if guessed else ""
    if n_bad == n_tiles:
        return [
            f"every tile is bad ({n_tiles} tiles of {size}{guess}): the error is in the common path, "
            "not at an edge or in one block"
        ]
    patterns: list[str] = []
    if n_bad == 1 and not any(bad_tiles[0]) and n_bad_elements > _MIN_EVIDENCE:
        patterns.append(
            f"only the first tile {_idx(bad_tiles[0])} is bad: block 0 takes another path, "
            "or another block writes over it"
        )
    else:
        ragged = _ragged_edge(grid_shape, coords, shape, tile, axes)
        if ragged:
            patterns.append(ragged)
    listed = ", ".join(_idx(t) for t in bad_tiles) + (", ..." if n_bad > len(bad_tiles) else "")
    patterns.append(
        f"{n_bad} of {n_tiles} tiles of {size} bad: {listed} (tile coordinates ≈ block indices{guess})"
    )
    return patterns


def _ragged_edge(
    grid_shape: IndexTuple, coords: np.ndarray, shape: IndexTuple, tile: IndexTuple, axes: tuple[_Axis, ...]
) -> str | None:
    """Whether every bad tile is the last, partial one along some axis the tile does not divide."""
    ragged = [d for d in range(len(shape)) if grid_shape[d] > 1 and shape[d] % tile[d]]
    on_edge = {d: coords[:, d] == grid_shape[d] - 1 for d in ragged}
    alone = [d for d in ragged if on_edge[d].all()]
    if alone:
        used = alone
    elif len(ragged) > 1 and np.logical_or.reduce([on_edge[d] for d in ragged]).all():
        used = ragged
    else:
        return None
    lines = " and ".join(f"last, partial {axes[d].tile_line}" for d in used)
    ranges = ", ".join(
        f"{axes[d].many} {(grid_shape[d] - 1) * tile[d]}..{shape[d] - 1} of {shape[d]}" for d in used
    )
    verb = "are" if len(used) > 1 else "is"
    size = "×".join(str(t) for t in tile)
    return (
        f"only the {lines} {verb} bad ({ranges}; the {size} tile does not divide the shape): "
        "check the bounds at the ragged edge"
    )


def _profile(mask: np.ndarray, axis: int) -> np.ndarray:
    """Per index along ``axis``: whether any element with that index is True."""
    others = tuple(d for d in range(mask.ndim) if d != axis)
    return mask.any(axis=others) if others else mask


def _bbox(mask: np.ndarray) -> tuple[IndexTuple, IndexTuple]:
    lo: list[int] = []
    hi: list[int] = []
    for axis in range(mask.ndim):
        hits = np.flatnonzero(_profile(mask, axis))
        lo.append(int(hits[0]))
        hi.append(int(hits[-1]))
    return tuple(lo), tuple(hi)


def _describe(profile: np.ndarray, ax: _Axis) -> str | None:
    """A sentence about which indices along an axis are bad: a range, a stride, or a list of ranges."""
    n = profile.size
    count = int(np.count_nonzero(profile))
    if count == n:
        return None
    edges = np.diff(np.concatenate(([0], profile.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    of = f"{count} of {n}"
    if len(starts) == 1:
        if starts[0] == ends[0]:
            return f"only {ax.one} {starts[0]} is bad"
        return f"bad {ax.many} {starts[0]}..{ends[0]} only ({of})"
    lengths = ends - starts + 1
    gaps = np.diff(starts)
    if (
        len(starts) >= 3
        and (gaps == gaps[0]).all()
        and (lengths[:-1] == lengths[0]).all()
        and lengths[-1] <= lengths[0]
    ):
        period, width, s0 = int(gaps[0]), int(lengths[0]), int(starts[0])
        if width == 1:
            return f"bad {ax.many}: every {_ordinal(period)} {ax.one} from {s0} ({s0}, {s0 + period}, {s0 + 2 * period}, ...; {of})"
        return (
            f"bad {ax.many}: {width} of every {period}, from {s0} ({s0}..{s0 + width - 1}, "
            f"{s0 + period}..{s0 + period + width - 1}, ...; {of})"
        )
    runs = ", ".join(_run(int(a), int(b)) for a, b in zip(starts[:4], ends[:4], strict=True))
    more = ", ..." if len(starts) > 4 else ""
    return f"bad {ax.many}: {runs}{more} ({of}, in {len(starts)} ranges)"


# --------------------------------------------------------------------------------------------
# text helpers


def _region(lo: IndexTuple, hi: IndexTuple, axes: tuple[_Axis, ...]) -> str:
    if not lo:
        return "the only element"
    if len(lo) > 2:
        return f"{_idx(lo)}" if lo == hi else f"the box {_idx(lo)}..{_idx(hi)}"
    return ", ".join(
        f"{ax.one} {a}" if a == b else f"{ax.many} {a}..{b}" for ax, a, b in zip(axes, lo, hi, strict=True)
    )


def _run(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}..{b}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _idx(index: IndexTuple) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def _shape(shape: IndexTuple) -> str:
    return _idx(shape) if shape else "() (a scalar)"


def _num(x: float | int) -> str:
    if isinstance(x, int):
        return str(x)
    return f"{x:.6g}"


def _err(x: float) -> str:
    return f"{x:.3g}"


def _factor(x: float) -> str:
    return f"{x:.3f}" if 1e-3 <= abs(x) < 1e4 else f"{x:.4g}"


def _scalar(a: np.ndarray, index: IndexTuple) -> float | int:
    return int(a[index]) if _is_int(a.dtype) else float(a[index])


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "biu"
