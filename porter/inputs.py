"""Fresh, deterministic random inputs for one case of the sweep.

The same (spec, sizes, seed) always gives the same arrays, on any machine: the worker generates
them for the GPU, and ``porter record`` / a later ``--golden`` check regenerate them from the
seed instead of storing them. Each buffer draws from its own stream (seed, param index), so
adding a param does not change the others. Never zeros: zeros hide unwritten outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from porter.spec import Spec

# normal() draws are clipped to this many standard deviations, matching the spec's range check.
_NORMAL_CLIP = 6.0


def make_args(spec: Spec, sizes: dict[str, int], seed: int) -> dict[str, Any]:
    """Every input buffer (numpy, the param's dtype and shape) and every scalar, by param name."""
    args: dict[str, Any] = {}
    for index, p in enumerate(spec.params):
        if p.kind == "scalar":
            args[p.name] = spec.scalar_value(p, sizes)
        elif p.is_input:
            assert p.dtype is not None and p.fill is not None
            rng = np.random.default_rng([seed, index])
            shape = spec.shape(p, sizes)
            a, b = spec.fill_bounds(p, sizes)
            if p.fill.kind == "randint":
                values = rng.integers(int(a), int(b), size=shape, dtype=np.int64)
            elif p.fill.kind == "normal":
                values = np.clip(rng.standard_normal(shape), -_NORMAL_CLIP, _NORMAL_CLIP) * b + a
            else:
                values = rng.uniform(a, b, size=shape)
            args[p.name] = values.astype(p.dtype.numpy)
    return args
