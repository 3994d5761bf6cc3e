"""The f32 .approx functions against the exact value rounded once, within the bound the PTX ISA
documents for each (9.7.3.15 to 9.7.3.22), as ulps of the result:

- ex2: 2 ulps from the correctly rounded result;
- sqrt: relative error 2^-23, rsqrt 2^-22.9 (at most 2.2 ulps): 3 ulps;
- lg2: relative 2^-22 for inputs outside (0.5, 2) (at most 4 ulps): 5 ulps; inside, the bound is
  absolute (2^-22), which no ulp count covers near lg2's zero: those inputs are not drawn;
- tanh: relative 2^-11: 2^13 + 1 ulps;
- sin, cos: absolute 2^-20.5 on [-2 pi, 2 pi]: 12 ulps where the result is at least 0.5 in
  magnitude (an ulp there is 2^-24), the only inputs drawn for them.

The model is NumPy's float64 function rounded to float32: within one float32 ulp of the correctly
rounded value (at a near-tie), which each count allows for with one ulp more. The corner cases of
the ISA's tables (zeros, infinities, NaN) are exact."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 256
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0 ** -140], np.float32)


def _args(x: np.ndarray) -> list[Any]:
    return [x.astype(np.float32), *(np.zeros(N, np.float32) for _ in range(7)), np.int32(N)]


def _model(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].astype(np.float64)
    m = np.abs(x)
    with np.errstate(all="ignore"):  # ex2 past 128 and rsqrt of 0 are infinite, as the ISA's tables say
        values = [np.exp2(x), np.sqrt(m), 1 / np.sqrt(m), np.log2(m), np.tanh(x), np.sin(x), np.cos(x)]
        return {k: v.astype(np.float32) for k, v in enumerate(values, start=1)}


def _wide(rng: np.random.Generator) -> list[Any]:
    x = rng.uniform(-130, 128, N)
    x[: EDGES.size] = EDGES
    return _args(x)


def _magnitudes(rng: np.random.Generator) -> list[Any]:
    x = np.exp2(rng.uniform(-140, 127, N)) * rng.choice([-1, 1], N)
    x[: EDGES.size] = EDGES
    return _args(x)


def _log_inputs(rng: np.random.Generator) -> list[Any]:
    x = np.exp2(rng.uniform(1, 120, N)) * rng.choice([-1, 1], N)  # |x| >= 2
    x[N // 2:] = np.exp2(rng.uniform(-140, -1, N - N // 2))  # |x| <= 0.5
    x[:5] = EDGES[:5]
    return _args(x)


def _trig_inputs(column: int) -> Any:
    fn = np.sin if column == 6 else np.cos

    def make(rng: np.random.Generator) -> list[Any]:
        x = rng.uniform(-2 * np.pi, 2 * np.pi, 4 * N)
        x = x[np.abs(fn(x.astype(np.float32).astype(np.float64))) >= 0.5][:N]
        return _args(x)

    return make


CASES = [
    CorpusCase("approx", 2, 128, _wide, (1,), _model, ulps=3),
    CorpusCase("approx", 2, 128, _magnitudes, (2, 3), _model, ulps=3),
    CorpusCase("approx", 2, 128, _log_inputs, (4,), _model, ulps=5),
    CorpusCase("approx", 2, 128, _wide, (5,), _model, ulps=2**13 + 1),
    CorpusCase("approx", 2, 128, _trig_inputs(6), (6,), _model, ulps=12),
    CorpusCase("approx", 2, 128, _trig_inputs(7), (7,), _model, ulps=12),
]
