"""Small whole programs (block scan, padded transpose, shared-memory histogram, tiled SGEMM)
against NumPy: compositions of shuffles, barriers, shared memory and atomics with ragged edges.
The SGEMM's values are small integers, so every order of summation gives the same float32."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

SCAN_N, SCAN_BLOCK = 300, 128
ROWS, COLS = 37, 21
HIST_N = 3000
M, N, K = 33, 20, 40


def _scan_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].astype(np.int64)
    out = np.zeros(SCAN_N, np.int64)
    for start in range(0, SCAN_N, SCAN_BLOCK):  # each block scans its own slice
        out[start:start + SCAN_BLOCK] = np.cumsum(x[start:start + SCAN_BLOCK])
    return {1: out.astype(np.int32)}


def _hist_expect(args: list[Any]) -> dict[int, np.ndarray]:
    return {1: np.bincount(args[0], minlength=256).astype(np.uint32)}


def _sgemm_args(rng: np.random.Generator) -> list[Any]:
    a = rng.integers(-8, 9, (M, K)).astype(np.float32)
    b = rng.integers(-8, 9, (K, N)).astype(np.float32)
    return [a, b, np.zeros((M, N), np.float32), np.int32(M), np.int32(N), np.int32(K)]


CASES = [
    CorpusCase("scan", -(-SCAN_N // SCAN_BLOCK), SCAN_BLOCK,
               lambda rng: [rng.integers(-1000, 1000, SCAN_N).astype(np.int32), np.zeros(SCAN_N, np.int32),
                            np.int32(SCAN_N)], (1,), _scan_expect),
    CorpusCase("transpose", (2, 3), (16, 16),
               lambda rng: [rng.standard_normal((ROWS, COLS)).astype(np.float32), np.zeros((COLS, ROWS), np.float32),
                            np.int32(ROWS), np.int32(COLS)], (1,), lambda args: {1: args[0].T}),
    CorpusCase("histogram", 3, 96,
               lambda rng: [rng.integers(0, 256, HIST_N).astype(np.uint8), np.zeros(256, np.uint32),
                            np.int32(HIST_N)], (1,), _hist_expect),
    CorpusCase("sgemm", (2, 3), (16, 16), _sgemm_args, (2,), lambda args: {2: (args[0] @ args[1]).astype(np.float32)}),
]
