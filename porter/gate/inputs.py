"""Fresh random inputs for one case of the sweep, and the random initial states around them.

The same (spec, sizes, seed, value case) always gives the same arrays, on any machine: the worker
generates them for the GPU, and ``porter record`` / a later ``--golden`` check regenerate them
from the seed instead of storing them (a golden folder records :data:`INPUTS_VERSION`). Each
buffer draws from its own streams keyed on the seed, the param's index, the size set and the
value case, one stream per block of :data:`BLOCK` elements (drawn on every core), so inputs at
one size are no prefix of the inputs at another (a kernel cannot recognise porter's inputs by
their first values), and adding a param does not change the others. Scalars and ``[values]``
declared with a ``range`` are drawn the same way; derived inputs are computed from the drawn ones
by the spec's derive functions. Never zeros: zeros hide unwritten outputs.

A float input is a mixture that covers its declared domain (``domain``, ``finite``) in every case,
at every size: the fill, drawn in float64 so that every mantissa bit of the dtype varies (no
lattice a kernel could recognise), and in a few sparse elements (:func:`mixture_count`) magnitudes
log-uniform across the dtype's range (up to :data:`MAGNITUDE_TOP`) and the special values (+-0, subnormals, +-inf, NaN) the
domain holds. porter's own value case (``wide``) widens each fill or shifts it (at random, inside
the widened range), and perturbs the fixed float constants (:meth:`Spec.perturbed`).

Seeds come fresh from the operating system for every check (:func:`fresh_seed`) unless the user
fixes one (``--seed``), and are recorded in the Verdict, so a candidate cannot be tuned to them.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from porter.errors import InputError
from porter.gate.dtypes import DType
from porter.gate.spec import PERTURB, WIDE, Domain, ParamSpec, Spec

if TYPE_CHECKING:
    import numpy.typing as npt

# normal() draws are clipped to this many standard deviations, matching the spec's range check.
_NORMAL_CLIP = 6.0
# Stream tags: the inputs, the outputs' random initial contents, and the guard bands' pattern.
INPUTS, INITIAL, GUARDS = 1, 2, 3
MIX_MAX = 8  # at most this many elements of a float input come from beyond the fill, in each case
MIX_SPACING = 64  # ... and at most one per this many elements (a tiny buffer stays the fill's)
BLOCK = 1 << 20  # elements of a buffer drawn from one stream (see _blocks)
# How inputs follow from a seed: golden folders record it (a folder recorded under another
# version holds outputs of other inputs). 2: buffers drawn in blocks of BLOCK, each its own stream.
INPUTS_VERSION = 2
# The mixture's magnitudes reach the dtype's largest finite value or 2^56, whichever is less: the
# product of two stays 2^16 below float32's overflow (the accumulator of nearly every kernel). Past
# that, whether an intermediate overflows depends on the order of the operations, which no
# reference fixes (an honest x * (x . w) overflows in float32 where float64 does not).
MAGNITUDE_TOP = 2.0**56


def fresh_seed() -> int:
    """A seed no candidate can predict (48 bits: short enough to type back with ``--seed``)."""
    return secrets.randbits(48)


def stream(seed: int, tag: int, sizes: Mapping[str, int], *keys: int | str) -> np.random.Generator:
    """A random stream for one purpose at one size set: seed, tag, the sizes and any further keys."""
    text = repr((tag, sorted(sizes.items()), keys)).encode()
    digest = int.from_bytes(hashlib.sha256(text).digest()[:8], "little")
    return np.random.default_rng([seed, digest])


def make_args(spec: Spec, sizes: dict[str, int], seed: int, values: str = "", *,
              empty: Callable[[int, Any], np.ndarray] = np.empty) -> dict[str, Any]:
    """Every input buffer (numpy, the param's dtype and shape), every scalar and every ``[values]``
    entry, by name; ``values`` names a value case of the spec ("" for the default fills). Float
    scalars and values are numpy scalars of their dtype (``np.float32``): what the kernel gets.
    Derived inputs are computed last, from all the others. ``empty(count, dtype)`` makes the
    drawn buffers' flat arrays (the worker's are page-locked: ``porter.gate.runner.pinned``)."""
    drawn = draw_values(spec, sizes, seed, values)
    symbols: dict[str, int | float] = {**sizes, **{v.name: (float if v.dtype.is_float else int)(drawn[v.name])
                                                    for v in spec.values}}
    args: dict[str, Any] = dict(drawn)
    for index, p in enumerate(spec.params):
        if p.kind == "scalar":
            args[p.name] = _scalar(spec, p, symbols, stream(seed, INPUTS, sizes, index, values), sizes, seed, values)
        elif p.is_input and p.derive is None:
            assert p.dtype is not None
            rng = stream(seed, INPUTS, sizes, index, values)
            shape = spec.shape(p, sizes)
            fill = spec.fill_of(p, values)
            a, b = spec.fill_bounds(p, symbols, values=values)
            blocks = partial(_blocks, keys=(index, values), seed=seed, sizes=sizes)
            if fill.kind == "randint":
                args[p.name] = _integers(int(a), int(b), shape, p.dtype, blocks, empty)
                continue
            if values == WIDE and fill.kind == "uniform":
                a, b = _shifted(rng, spec.fill_bounds(p, symbols), (a, b))
            drawn_array = _fill(fill.kind, float(a), float(b), shape, p.dtype, p.domain, blocks, empty)
            floats = [q.name for q in spec.inputs if q.derive is None and q.dtype is not None and q.dtype.is_float]
            _mix(rng, drawn_array.reshape(-1), p.dtype, p.domain, floats.index(p.name), len(floats))
            args[p.name] = drawn_array
    args.update(derived_inputs(spec, args, sizes))
    return args


def draw_values(spec: Spec, sizes: Mapping[str, int], seed: int, values: str = "") -> dict[str, Any]:
    """The ``[values]`` of one case as numpy scalars of their dtypes: fixed ones as written
    (rounded to the dtype), ranged ones drawn from their own streams."""
    drawn = {}
    for v in spec.values:
        number = spec.value_number(v, sizes)
        if isinstance(number, tuple):
            rng = stream(seed, INPUTS, sizes, "value", v.name, values)
            lo, hi = number
            number = (rng.uniform(lo, hi) if v.dtype.is_float
                      else int(rng.integers(int(lo), int(hi), endpoint=True)))
        elif values == WIDE and v.name in spec.perturbed():
            number *= perturbation(stream(seed, INPUTS, sizes, "perturb", v.name))
        drawn[v.name] = typed(v.dtype, number)
    return drawn


def perturbation(rng: np.random.Generator) -> float:
    """A factor log-uniform in [1/PERTURB, PERTURB]: a fixed constant moved so that a kernel that
    folded it in is wrong, and by little enough that the reference's tolerance still fits."""
    return float(np.exp(rng.uniform(-np.log(PERTURB), np.log(PERTURB))))


def mixture_count(size: int) -> int:
    """How many elements of a float input of ``size`` elements come from beyond its fill."""
    return min(MIX_MAX, size // MIX_SPACING)


def specials(dtype: DType, domain: Domain) -> np.ndarray:
    """The special values of ``dtype`` inside ``domain``, as the dtype holds them: +-0, a subnormal
    near the normals and the smallest one, +-inf and NaN (those the dtype has: e4m3 has no
    infinity, and NaN is left out only by ``finite``)."""
    info = _finfo(dtype)
    candidates = [0.0, -0.0, float(info.tiny) / 8, -float(info.tiny) / 8, float(info.smallest_subnormal),
                  -float(info.smallest_subnormal), np.inf, -np.inf, np.nan]
    kept = np.asarray([x for x in candidates if _in_domain(x, domain)], dtype=np.float64)
    typed_values = kept.astype(dtype.numpy)
    same_nan: npt.NDArray[np.bool_] = np.isnan(typed_values.astype(np.float64)) == np.isnan(kept)
    return typed_values[same_nan]


def _in_domain(x: float, domain: Domain) -> bool:
    if not np.isfinite(x):
        return not domain.finite and (np.isnan(x) or domain.lo <= x <= domain.hi)
    if x == 0:
        return not domain.positive and domain.lo <= 0 <= domain.hi and (domain.lo < 0 or not np.signbit(x))
    return domain.lo <= x <= domain.hi and not (domain.positive and x <= 0)


def _finfo(dtype: DType) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(dtype.numpy)


def _blocks(size: int, draw: Callable[[int, np.random.Generator], None], keys: tuple[int | str, ...], seed: int,
            sizes: Mapping[str, int]) -> None:
    """Call ``draw(start, rng)`` for every block of :data:`BLOCK` elements of a buffer of ``size``,
    each block with a stream of its own (the buffer's ``keys`` and the block's index), on every core
    when there are several blocks: the values depend on the seed alone, never on the thread count,
    and the cores share a large draw (the GEMM's three 4096^2 inputs, warm: 0.22 s on one core of this
    2-core machine, 0.12 s on both)."""
    starts = range(0, size, BLOCK)

    def one(start: int) -> None:
        draw(start, stream(seed, INPUTS, sizes, *keys, "block", start // BLOCK))

    if len(starts) <= 1:
        for start in starts:
            one(start)
        return
    list(_drawers().map(one, starts))  # re-raises a block's error here


@lru_cache(maxsize=1)
def _drawers() -> ThreadPoolExecutor:
    """The threads that draw blocks (NumPy's generators and casts release the GIL)."""
    return ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1)), thread_name_prefix="porter-draw")


def _fill(kind: str, a: float, b: float, shape: tuple[int, ...], dtype: DType, domain: Domain,
          blocks: Callable[[int, Callable[[int, np.random.Generator], None]], None],
          empty: Callable[[int, Any], np.ndarray] = np.empty) -> np.ndarray:
    """A float fill, drawn in float64 a block at a time and rounded to the dtype (by way of
    float32 for the narrow ones, which NumPy converts fast): every mantissa bit varies, and the
    values stay inside the domain."""
    wide = np.float64 if dtype.numpy.itemsize > 4 else np.float32
    out = empty(int(np.prod(shape)), dtype.numpy)
    lo, hi = max(domain.lo, -float(dtype.max_finite)), min(domain.hi, float(dtype.max_finite))

    def draw(start: int, rng: np.random.Generator) -> None:
        part = np.empty(min(BLOCK, out.size - start))
        if kind == "normal":
            rng.standard_normal(out=part)
            np.clip(part, -_NORMAL_CLIP, _NORMAL_CLIP, out=part)
        else:
            rng.random(out=part)
        part *= b if kind == "normal" else b - a
        part += a
        np.clip(part, lo, hi, out=part)
        out[start:start + part.size] = part.astype(wide, copy=False).astype(dtype.numpy, copy=False)

    blocks(out.size, draw)
    return out.reshape(shape)


def _integers(a: int, b: int, shape: tuple[int, ...], dtype: DType,
              blocks: Callable[[int, Callable[[int, np.random.Generator], None]], None],
              empty: Callable[[int, Any], np.ndarray] = np.empty) -> np.ndarray:
    """A ``randint(a, b)`` fill (b excluded), a block at a time."""
    out = empty(int(np.prod(shape)), dtype.numpy)

    def draw(start: int, rng: np.random.Generator) -> None:
        out[start:start + BLOCK] = rng.integers(a, b, size=min(BLOCK, out.size - start), dtype=np.int64)

    blocks(out.size, draw)
    return out.reshape(shape)


def _shifted(rng: np.random.Generator, base: tuple[float, float], envelope: tuple[float, float]) -> tuple[float, float]:
    """Porter's value case for a uniform fill: the widened range itself, or (as often) a window of
    the fill's own width shifted inside it, multiplicatively for a fill of positive numbers."""
    (a, b), (lo, hi) = base, envelope
    if rng.random() < 0.5 or not lo <= a < b <= hi:
        return lo, hi
    if a > 0:
        g = float(np.exp(rng.uniform(np.log(lo / a), np.log(hi / b))))
        return a * g, b * g
    start = float(rng.uniform(lo, hi - (b - a)))
    return start, start + (b - a)


def _mix(rng: np.random.Generator, flat: np.ndarray, dtype: DType, domain: Domain, which: int, count: int) -> None:
    """Overwrite a few elements of a float input (:func:`mixture_count`) with a magnitude drawn
    log-uniformly across the dtype's normal range inside the domain, or a special value of it.
    Input ``which`` of ``count`` takes positions congruent to ``which`` modulo ``count``, so that
    inputs of one shape never have such values at the same element (an elementwise kernel's
    intermediate overflow, ``alpha * x`` beside a large ``y``, is no kernel's bug)."""
    slots = (flat.size - which + count - 1) // count
    k = mixture_count(slots)
    if not k:
        return
    positions = which + count * rng.integers(0, slots, size=k)
    special = specials(dtype, domain)
    tiny, largest = float(_finfo(dtype).tiny), min(float(dtype.max_finite), MAGNITUDE_TOP)
    for position in positions:
        magnitude = _magnitude(rng, tiny, largest, domain)
        if special.size and (magnitude is None or rng.random() < 0.5):
            flat[position] = special[rng.integers(special.size)]
        elif magnitude is not None:
            flat[position] = np.float64(magnitude).astype(dtype.numpy)


def _magnitude(rng: np.random.Generator, tiny: float, largest: float, domain: Domain) -> float | None:
    """A value of a sign the domain allows, its magnitude log-uniform between the dtype's smallest
    normal and largest finite value, clipped to the domain; None when the domain has no normals."""
    signs = [s for s in (1.0, -1.0) if (domain.hi >= tiny if s > 0 else domain.lo <= -tiny)]
    if not signs:
        return None
    sign = signs[int(rng.integers(len(signs)))]
    low = max(tiny, domain.lo if sign > 0 else -domain.hi)
    high = min(largest, domain.hi if sign > 0 else -domain.lo)
    if not low < high:
        return sign * high
    return sign * float(np.exp(rng.uniform(np.log(low), np.log(high))))


def typed(dtype: DType, number: int | float) -> Any:
    """``number`` as a numpy scalar of ``dtype`` (np.float32(x), a bfloat16, np.int32(n))."""
    return np.asarray(number).astype(dtype.numpy)[()]


def derived_inputs(spec: Spec, args: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
    """The derived inputs (``derive``), each function called once with copies of the other
    inputs, the scalars and the values; what it returns is checked against the param's shape and
    cast to its dtype, which must hold it (finite)."""
    from porter.gate.usercode import load_callable

    derived: dict[str, np.ndarray] = {}
    results: dict[tuple[str, str], Mapping[str, Any]] = {}
    for p in spec.params:
        if p.derive is None:
            continue
        assert p.dtype is not None
        key = (str(p.derive.path), p.derive.function)
        if key not in results:
            fn = load_callable(*key)
            given = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            result = fn(given, dict(sizes))
            if not isinstance(result, Mapping):
                raise InputError(f"{spec.source}: derive {p.derive} returned {type(result).__name__}, "
                                 "not a dict of input name to array")
            results[key] = result
        result = results[key]
        where = f"{spec.source}: derive {p.derive}"
        if p.name not in result:
            raise InputError(f"{where} returned no {p.name!r} (it returned: {', '.join(map(str, result)) or 'nothing'})")
        value = np.asarray(result[p.name])
        shape = spec.shape(p, sizes)
        if value.shape != shape:
            raise InputError(f"{where}: {p.name!r} has shape {value.shape}, the spec says {shape}")
        cast = value.astype(p.dtype.numpy)
        if p.dtype.is_float and not np.isfinite(cast.astype(np.float64)).all():
            raise InputError(f"{where}: {p.name!r} is not finite in {p.dtype} (or leaves its range)")
        derived[p.name] = cast
    return derived


def _scalar(spec: Spec, p: ParamSpec, symbols: Mapping[str, int | float], rng: np.random.Generator,
            sizes: Mapping[str, int], seed: int, values: str) -> Any:
    """A scalar param's value: an int for an integer dtype, a numpy scalar of a float dtype (the
    value the kernel gets, so that the reference computes with the same number)."""
    assert p.dtype is not None
    if p.range is None:
        number = spec.scalar_value(p, symbols)
        if values == WIDE and p.name in spec.perturbed():
            number *= perturbation(stream(seed, INPUTS, sizes, "perturb", p.name))
    else:
        lo, hi = spec.scalar_range(p, symbols)
        if not p.dtype.is_float:
            return int(rng.integers(int(lo), int(hi), endpoint=True))
        number = rng.uniform(lo, hi)
    return typed(p.dtype, number) if p.dtype.is_float else number
