"""Compare a kernel's output buffer with its reference: whether it is within tolerance, by how much
it is off, and whether two identical runs agree bit for bit.

Pure numpy, no GPU: the figures and the verdict are :func:`porter.gate.summary.summarize`'s (the
same code the worker runs on the GPU: an output that passes there never comes back, and
:func:`passing_check` makes its check); :func:`compare` keeps the masks of wrong elements as well,
for the output copied back because it failed. Everything is compared in float64 (integers exactly). The gate fills outputs with a poison value
(NaN for floats) before the launch, so NaN in ``out`` where the reference has none marks an element
the kernel never wrote. Where an output fails, :func:`porter.gate.localize.localize` says where and
how it is wrong.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from porter.gate.elementwise import as_float64, chunks, index_text, number_text
from porter.gate.localize import holds, localize, resolve_tile, same
from porter.gate.summary import OutputSummary, reference_warnings, summarize
from porter.gate.verdict import BadElement, IndexTuple, Localization, OutputCheck


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
    if out_arr.shape != ref_arr.shape:
        warnings = reference_warnings(np, ref_arr, atol, rtol)
        return _shape_mismatch(name, out_arr, ref_arr, atol, rtol, tile_shape, guessed, warnings)

    exact = _is_int(out_arr.dtype) and _is_int(ref_arr.dtype) and atol == 0 and rtol == 0
    bad = np.empty(out_arr.size, dtype=bool)
    poison = np.empty(out_arr.size, dtype=bool)

    def keep(sl: slice, chunk_bad: np.ndarray, chunk_poison: np.ndarray | None) -> None:
        bad[sl] = chunk_bad
        poison[sl] = False if chunk_poison is None else chunk_poison

    summary = summarize(np, out_arr.reshape(-1), ref_arr.reshape(-1), atol=atol, rtol=rtol, limit=limit, exact=exact,
                        shape=tuple(out_arr.shape), dtype=str(out_arr.dtype), masks=keep)
    check = _from_summary(name, summary)
    if summary.passed:
        return _summarised(check)
    first_bad = tuple(_bad_element(out_arr, ref_arr, i) for i in _first_true(bad, max_examples))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        localization = localize(out_arr, ref_arr, bad.reshape(out_arr.shape), poison.reshape(out_arr.shape),
                                summary.mismatches, atol, rtol, tile_shape, guessed, max_examples)
    return _summarised(replace(check, first_bad=first_bad, localization=localization))


def passing_check(name: str, summary: OutputSummary) -> OutputCheck:
    """The check :func:`compare` gives for an output that passes, from its summary alone (made on
    the GPU where the worker judged it there): a passing output has no wrong element to show."""
    if not summary.passed:
        raise ValueError(f"{name}: a failing output is judged from its arrays, not from its summary")
    return _summarised(_from_summary(name, summary))


def _from_summary(name: str, s: OutputSummary) -> OutputCheck:
    return OutputCheck(
        name=name, passed=s.passed, shape=s.shape, dtype=s.dtype, atol=s.atol, rtol=s.rtol,
        max_abs_err=s.max_abs_err, max_rel_err=s.max_rel_err, rel_l2=s.rel_l2, mismatches=s.mismatches,
        total=s.total, nan_count=s.nan_count, inf_count=s.inf_count, ref_nan_count=s.ref_nan_count,
        warnings=s.warnings, unjudged=s.unjudged,
    )


def _summarised(check: OutputCheck) -> OutputCheck:
    """The check with its one-text summary (figures, first bad indices, localization)."""
    return replace(check, summary=format_comparison(check))


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
