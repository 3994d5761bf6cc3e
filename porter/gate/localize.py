"""Localize a failed comparison: turn the mismatch mask into short sentences an agent can act on.

:func:`localize` says which tiles (thread blocks) are wrong, whether only the ragged edge is,
whether the values are off by a scale, an offset, a transpose or a shift. Each pattern is tried on
a small sample first and confirmed on the whole array only if the sample agrees, so a failing
64M-element output costs a few vectorised passes, not one per hypothesis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from porter.gate.elementwise import CHUNK, TINY, as_float64, chunks, index_text, judge, number_text
from porter.gate.verdict import IndexTuple, Localization

_SAMPLE = 4096  # elements a pattern is screened on before it is checked everywhere
_MIN_EVIDENCE = 4  # written wrong elements needed before a pattern may explain "every element"
_MAX_SHIFT = 4  # shifts of 1..4 along an axis are tried
_GUESS_TILE_1D = 256
_GUESS_TILE_2D = (64, 64)


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


def resolve_tile(shape: IndexTuple, tile: tuple[int, ...] | None) -> tuple[IndexTuple, bool]:
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


def localize(
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
            f"out is constant {number_text(constant)} while the reference varies ({number_text(r_lo)}..{number_text(r_hi)}): "
            "one value is written everywhere (a zero stride, a broadcast, or a result never accumulated)"
        )
    else:
        constant = None
        explanation = _scale_or_offset(o, r, atol, rtol)
    if explanation is None and o.ndim == 2 and o.shape[0] == o.shape[1] and holds(o, r.T, atol, rtol, same):
        explanation = (
            "out ≈ ref.T: rows and columns are swapped (a row-/column-major mix-up or swapped strides)"
        )
    if explanation is None:
        explanation = _shift(o, r, written_bad, atol, rtol, axes)
    if explanation:
        found.append(explanation)
    if constant != 0:
        wb, of = written_bad.reshape(-1), o.reshape(-1)
        n_zero = sum(int(np.count_nonzero(wb[sl] & (as_float64(of[sl]) == 0))) for sl in chunks(of.size))
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
    for sl in chunks(flat.size):
        chunk = as_float64(flat[sl])
        lo = min(lo, float(np.fmin.reduce(chunk, initial=math.inf)))
        hi = max(hi, float(np.fmax.reduce(chunk, initial=-math.inf)))
    return lo, hi


def _scale_or_offset(o: np.ndarray, r: np.ndarray, atol: float, rtol: float) -> str | None:
    """out ≈ c·ref or out ≈ ref + c everywhere, with c estimated as a median over a sample."""
    idx = _sample(o.shape)
    os, rs = as_float64(o[idx]), as_float64(r[idx])
    usable = np.isfinite(os) & np.isfinite(rs)
    significant = usable & (np.abs(rs) > max(atol, TINY))
    if np.count_nonzero(significant) >= _MIN_EVIDENCE:
        factor = float(np.median(os[significant] / rs[significant]))
        if math.isfinite(factor) and factor not in (0.0, 1.0) and holds(o, r, atol, rtol, _times(factor)):
            return f"out ≈ {_factor(factor)} × ref everywhere: {_scale_hint(factor)}"
    if np.count_nonzero(usable) >= _MIN_EVIDENCE:
        offset = float(np.median(os[usable] - rs[usable]))
        if offset != 0 and holds(o, r, atol, rtol, _plus(offset)):
            return (
                f"out ≈ ref {'+' if offset > 0 else '-'} {number_text(abs(offset))} everywhere: a constant offset "
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
                if holds(o[o_sl], r[r_sl], atol, rtol, same) and written_bad[o_sl].any():
                    return (
                        f"out {ax.one} i holds reference {ax.one} i{-step:+d} ({ax.many} shifted by {step:+d}): "
                        f"an off-by-{k} in the {ax.one} index or pointer"
                    )
    return None


def holds(
    o: np.ndarray, target: np.ndarray, atol: float, rtol: float, transform: Callable[[np.ndarray], np.ndarray]
) -> bool:
    """Whether every written element of o (not NaN) passes against transform(target).

    Screened on an evenly spaced sample first: a sample that fails settles it cheaply, and only a
    sample that passes is confirmed on the whole array, a block of leading-axis slices at a time.
    """
    idx = _sample(o.shape)
    if not _all_pass(as_float64(o[idx]), transform(as_float64(target[idx])), atol, rtol):
        return False
    step = max(1, CHUNK // max(1, math.prod(o.shape[1:])))
    return all(
        _all_pass(as_float64(o[i : i + step]), transform(as_float64(target[i : i + step])), atol, rtol)
        for i in range(0, o.shape[0], step)
    )


def _all_pass(o: np.ndarray, target: np.ndarray, atol: float, rtol: float) -> bool:
    ok = judge(np, o, target, atol, rtol)[0]
    ok |= np.isnan(o)
    return bool(ok.all())


def same(x: np.ndarray) -> np.ndarray:
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
            f"only the first tile {index_text(bad_tiles[0])} is bad: block 0 takes another path, "
            "or another block writes over it"
        )
    else:
        ragged = _ragged_edge(grid_shape, coords, shape, tile, axes)
        if ragged:
            patterns.append(ragged)
    listed = ", ".join(index_text(t) for t in bad_tiles) + (", ..." if n_bad > len(bad_tiles) else "")
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
    return np.asarray(mask.any(axis=others)) if others else mask


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


def _region(lo: IndexTuple, hi: IndexTuple, axes: tuple[_Axis, ...]) -> str:
    if not lo:
        return "the only element"
    if len(lo) > 2:
        return f"{index_text(lo)}" if lo == hi else f"the box {index_text(lo)}..{index_text(hi)}"
    return ", ".join(
        f"{ax.one} {a}" if a == b else f"{ax.many} {a}..{b}" for ax, a, b in zip(axes, lo, hi, strict=True)
    )


def _run(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}..{b}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _factor(x: float) -> str:
    return f"{x:.3f}" if 1e-3 <= abs(x) < 1e4 else f"{x:.4g}"
