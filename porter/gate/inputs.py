"""Fresh random inputs for one case of the sweep, and the random initial states around them.

The same (spec, sizes, seed, value case) always gives the same arrays, on any machine: the worker
generates them for the GPU, and ``porter record`` / a later ``--golden`` check regenerate them
from the seed instead of storing them. Each buffer draws from its own stream keyed on the seed,
the param's index, the size set and the value case, so inputs at one size are no prefix of the
inputs at another (a kernel cannot recognise porter's inputs by their first values), and adding
a param does not change the others. Scalars and ``[values]`` declared with a ``range`` are drawn
the same way; derived inputs are computed from the drawn ones by the spec's derive functions.
Never zeros: zeros hide unwritten outputs.

Seeds come fresh from the operating system for every check (:func:`fresh_seed`) unless the user
fixes one (``--seed``), and are recorded in the Verdict, so a candidate cannot be tuned to them.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np

from porter.errors import InputError
from porter.gate.dtypes import DType
from porter.gate.spec import ParamSpec, Spec

# normal() draws are clipped to this many standard deviations, matching the spec's range check.
_NORMAL_CLIP = 6.0
# Stream tags: the inputs, the outputs' random initial contents, and the guard bands' pattern.
INPUTS, INITIAL, GUARDS = 1, 2, 3


def fresh_seed() -> int:
    """A seed no candidate can predict (48 bits: short enough to type back with ``--seed``)."""
    return secrets.randbits(48)


def stream(seed: int, tag: int, sizes: Mapping[str, int], *keys: int | str) -> np.random.Generator:
    """A random stream for one purpose at one size set: seed, tag, the sizes and any further keys."""
    text = repr((tag, sorted(sizes.items()), keys)).encode()
    digest = int.from_bytes(hashlib.sha256(text).digest()[:8], "little")
    return np.random.default_rng([seed, digest])


def make_args(spec: Spec, sizes: dict[str, int], seed: int, values: str = "") -> dict[str, Any]:
    """Every input buffer (numpy, the param's dtype and shape), every scalar and every ``[values]``
    entry, by name; ``values`` names a value case of the spec ("" for the default fills). Float
    scalars and values are numpy scalars of their dtype (``np.float32``): what the kernel gets.
    Derived inputs are computed last, from all the others."""
    drawn = draw_values(spec, sizes, seed, values)
    symbols: dict[str, int | float] = {**sizes, **{v.name: (float if v.dtype.is_float else int)(drawn[v.name])
                                                    for v in spec.values}}
    args: dict[str, Any] = dict(drawn)
    for index, p in enumerate(spec.params):
        if p.kind == "scalar":
            args[p.name] = _scalar(spec, p, symbols, stream(seed, INPUTS, sizes, index, values))
        elif p.is_input and p.derive is None:
            assert p.dtype is not None
            rng = stream(seed, INPUTS, sizes, index, values)
            shape = spec.shape(p, sizes)
            fill = spec.fill_of(p, values)
            a, b = spec.fill_bounds(p, symbols, values=values)
            # Floats of at most 4 bytes are drawn in float32: the same values to their precision, and
            # 20x faster at GEMM sizes than drawing float64 and converting (bench_gate's make_args).
            draw = np.float32 if p.dtype.is_float and p.dtype.numpy.itemsize <= 4 else np.float64
            if fill.kind == "randint":
                drawn_array = rng.integers(int(a), int(b), size=shape, dtype=np.int64)
            elif fill.kind == "normal":
                drawn_array = rng.standard_normal(shape, dtype=draw)
                np.clip(drawn_array, -_NORMAL_CLIP, _NORMAL_CLIP, out=drawn_array)
                drawn_array *= draw(b)
                drawn_array += draw(a)
            else:
                drawn_array = rng.random(shape, dtype=draw)
                drawn_array *= draw(b - a)
                drawn_array += draw(a)
                np.minimum(drawn_array, draw(b), out=drawn_array)
            args[p.name] = drawn_array.astype(p.dtype.numpy)
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
        drawn[v.name] = typed(v.dtype, number)
    return drawn


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


def _scalar(spec: Spec, p: ParamSpec, symbols: Mapping[str, int | float], rng: np.random.Generator) -> Any:
    """A scalar param's value: an int for an integer dtype, a numpy scalar of a float dtype (the
    value the kernel gets, so that the reference computes with the same number)."""
    assert p.dtype is not None
    if p.range is None:
        number = spec.scalar_value(p, symbols)
    else:
        lo, hi = spec.scalar_range(p, symbols)
        if not p.dtype.is_float:
            return int(rng.integers(int(lo), int(hi), endpoint=True))
        number = rng.uniform(lo, hi)
    return typed(p.dtype, number) if p.dtype.is_float else number
