"""Compare a kernel's output buffer with its reference: whether it is within tolerance, by how much
it is off, and whether two identical runs agree bit for bit.

Pure numpy, no GPU: the gate copies each output back to the host and calls :func:`compare`.
Everything is compared in float64 (integers exactly). The gate fills outputs with a poison value
(NaN for floats) before the launch, so NaN in ``out`` where the reference has none marks an element
the kernel never wrote. Where an output fails, :func:`porter.gate.localize.localize` says where and
how it is wrong.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from porter.gate.elementwise import TINY, as_float64, chunks, index_text, judge, number_text
from porter.gate.localize import holds, localize, resolve_tile, same
from porter.gate.verdict import BadElement, IndexTuple, Localization, OutputCheck

_MOSTLY = 0.9  # share of the reference within tolerance of 0 that earns a warning
_SAFE_SCALE = (1e-100, 1e100)  # magnitudes whose squares, summed over a chunk, stay in float64 range


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
    tile_shape, guessed = resolve_tile(ref_arr.shape, tile)
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
        for sl in chunks(out_flat.size):
            o, r = as_float64(out_flat[sl]), as_float64(ref_flat[sl])
            r_raw = r
            ok, absdiff, finite = judge(o, r, atol, rtol)
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
            np.maximum(rel, TINY, out=rel)
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
            localization = localize(
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
        for sl in chunks(size):
            r = as_float64(flat[sl])
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
    for sl in chunks(af.size):
        ca, cb = af[sl], bf[sl]
        differ = np.flatnonzero(ca.view(bits) != cb.view(bits))
        if differ.size and not _is_int(a.dtype):
            differ = differ[~(np.isnan(as_float64(ca[differ])) & np.isnan(as_float64(cb[differ])))]
        if differ.size:
            count += int(differ.size)
            if first_at is None:
                first_at = sl.start + int(differ[0])
    if first_at is None:
        return None
    index = tuple(int(i) for i in np.unravel_index(first_at, a.shape))
    return (
        f"results differ between two identical runs in {count} of {a.size} elements "
        f"(first at {index_text(index)}: {number_text(_scalar(a, index))} then {number_text(_scalar(b, index))}): "
        "a race or a read of uninitialised memory"
    )


def format_comparison(c: OutputCheck) -> str:
    """A compact multi-line report of one comparison, for the agent and the terminal."""
    tolerance = f"atol {number_text(c.atol)}, rtol {number_text(c.rtol)}"
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
            f"    {index_text(e.index)} got {number_text(e.got)}, expected {number_text(e.expected)}" for e in c.first_bad
        )
    lines.extend(f"  warning: {w}" for w in c.warnings)
    return "\n".join(lines)


def within_tolerance(xp: Any, o: Any, r: Any, atol: float, rtol: float) -> Any:
    """:func:`judge`'s ``ok`` in plain array operations of any array module (``xp``: NumPy, or
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
    for sl in chunks(mask.size):
        if len(found) >= k:
            break
        found.extend(int(i) + sl.start for i in np.flatnonzero(mask[sl])[: k - len(found)])
    return found


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
            and holds(out, ref.T, atol, rtol, same)
        )
    if transposed:
        pattern += ": out holds the reference transposed (a row-/column-major mix-up)"
    elif out.size == ref.size:
        pattern += f": the same {out.size} elements in another shape (a reshape or a stride error?)"
    else:
        pattern += f" ({out.size} vs {ref.size} elements)"
    o, r = as_float64(out), as_float64(ref)
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


def _shape(shape: IndexTuple) -> str:
    return index_text(shape) if shape else "() (a scalar)"


def _err(x: float) -> str:
    return f"{x:.3g}"


def _scalar(a: np.ndarray, index: IndexTuple) -> float | int:
    return int(a[index]) if _is_int(a.dtype) else float(a[index])


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "biu"
