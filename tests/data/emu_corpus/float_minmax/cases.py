"""min/max on f32 (PTX ISA 9.7.3.11-12): +0 above -0; a NaN operand gives the other one, or with
``.NaN`` the result is NaN; ``.abs`` compares magnitudes and ``.xorsign`` gives a non-NaN result
the XOR of a's and b's signs; ``.ftz`` flushes subnormal operands; the three-input forms (sm_100)
reduce all three."""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 64
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 1.0, -1.0, 3.0e38, -2.5, 2.5]


def _args(rng: np.random.Generator) -> list[Any]:
    x = rng.normal(0, 3, 3 * N).astype(np.float32)
    pool = np.array(EDGES, np.float32)
    pick = rng.random(3 * N) < 0.4
    x[pick] = rng.choice(pool, int(pick.sum()))
    x[N : N + 12] = x[:12]  # equal pairs
    x[N + 12 : N + 20] = -x[12:20]  # opposite signs, +0/-0
    return [x, np.zeros(8 * N, np.float32), np.int32(N)]


def _pick(a: np.ndarray, b: np.ndarray, larger: bool, nan: bool) -> np.ndarray:
    """PTX min/max of two: +0 above -0; one NaN: the other operand (``nan``: NaN)."""
    take_a = (a > b) if larger else (a < b)
    tie = a == b
    take_a = take_a | (tie & (~np.signbit(a) if larger else np.signbit(a)))
    r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(take_a, a, b)))
    return np.where((np.isnan(a) & np.isnan(b)) | (nan & (np.isnan(a) | np.isnan(b))), np.nan, r)


def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(0.0, x), x)


def _xorsign(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(r), r, np.where(np.signbit(a) ^ np.signbit(b), -np.abs(r), np.abs(r)))


def _expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].astype(np.float64)
    a, b, c = x[:N], x[N : 2 * N], x[2 * N :]
    with np.errstate(invalid="ignore"):
        cols = [
            _pick(a, b, False, False), _pick(a, b, True, True),
            _xorsign(_pick(np.abs(a), np.abs(b), False, False), a, b),
            _xorsign(_pick(np.abs(a), np.abs(b), True, True), a, b),
            _pick(_flush(a), _flush(b), False, False),
            reduce(lambda p, q: _pick(p, q, True, False), (a, b, c)),
            reduce(lambda p, q: _pick(p, q, False, True), (a, b, c)),
            reduce(lambda p, q: _pick(p, q, True, False), (np.abs(a), np.abs(b), np.abs(c))),
        ]
    return {1: np.stack(cols, axis=1).astype(np.float32).reshape(-1)}


CASES = [CorpusCase("minmax", 1, N, _args, (1,), _expect, arch="sm_100a")]
