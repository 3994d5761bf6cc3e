"""Fresh random inputs for one case of the sweep, and the random initial states around them.

The same (spec, sizes, seed, value case) always gives the same arrays, on any machine: the worker
generates them for the GPU, and ``porter record`` / a later ``--golden`` check regenerate them
from the seed instead of storing them. Each buffer draws from its own stream keyed on the seed,
the param's index, the size set and the value case, so inputs at one size are no prefix of the
inputs at another (a kernel cannot recognise porter's inputs by their first values), and adding
a param does not change the others. Scalars declared with a ``range`` are drawn the same way.
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
    """Every input buffer (numpy, the param's dtype and shape) and every scalar, by param name;
    ``values`` names a value case of the spec ("" for the default fills)."""
    args: dict[str, Any] = {}
    for index, p in enumerate(spec.params):
        if p.kind == "scalar":
            args[p.name] = _scalar(spec, p, sizes, stream(seed, INPUTS, sizes, index, values))
        elif p.is_input:
            assert p.dtype is not None
            rng = stream(seed, INPUTS, sizes, index, values)
            shape = spec.shape(p, sizes)
            fill = spec.fill_of(p, values)
            a, b = spec.fill_bounds(p, sizes, values=values)
            if fill.kind == "randint":
                drawn = rng.integers(int(a), int(b), size=shape, dtype=np.int64)
            elif fill.kind == "normal":
                drawn = np.clip(rng.standard_normal(shape), -_NORMAL_CLIP, _NORMAL_CLIP) * b + a
            else:
                drawn = rng.uniform(a, b, size=shape)
            args[p.name] = drawn.astype(p.dtype.numpy)
    return args


def _scalar(spec: Spec, p: ParamSpec, sizes: dict[str, int], rng: np.random.Generator) -> int | float:
    if p.range is None:
        return spec.scalar_value(p, sizes)
    assert p.dtype is not None
    lo, hi = spec.scalar_range(p, sizes)
    if not p.dtype.is_float:
        return int(rng.integers(int(lo), int(hi), endpoint=True))
    # The value the kernel gets is the dtype's rounding of the draw: hand the reference the same.
    return float(np.asarray(rng.uniform(lo, hi)).astype(p.dtype.numpy).astype(np.float64))
