"""Memory instructions against the PTX ISA: vector loads and stores, ld.global.nc, byte loads and
volatile stores; cp.async with src-size below cp-size (the rest of the 16 bytes zero-filled);
ldmatrix .x1/.x2/.x4 (.trans) and stmatrix .x4.trans with the ISA's fragment layout (thread t
holds row t / 4, columns 2 (t mod 4) and the next, of each 8x8 matrix, the lower column in the
low half)."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 64


def _vectors_args(rng: np.random.Generator) -> list[Any]:
    x = rng.standard_normal((N, 4)).astype(np.float32)
    y = rng.integers(0, 1 << 32, (N, 2), dtype=np.uint64).astype(np.uint32)
    z = rng.integers(0, 256, 4 * N).astype(np.uint8)
    return [x, y, z, np.zeros((N, 4), np.float32), np.zeros((N, 2), np.uint32), np.zeros(N, np.uint32)]


def _vectors_expect(args: list[Any]) -> dict[int, np.ndarray]:
    z = args[2].reshape(N, 4).astype(np.uint64)
    return {3: args[0][:, ::-1], 4: args[1][:, ::-1],
            5: ((z[:, 0] << 24) | (z[:, 1] << 16) | (z[:, 2] << 8) | z[:, 3]).astype(np.uint32)}


VALID = 150  # words of the source the copies may read; the rest of each 16-byte chunk is zero


def _zfill_args(rng: np.random.Generator) -> list[Any]:
    return [rng.integers(1, 1 << 32, 4 * N, dtype=np.uint64).astype(np.uint32), np.zeros(4 * N, np.uint32),
            np.int32(VALID)]


def _zfill_expect(args: list[Any]) -> dict[int, np.ndarray]:
    src = args[0]
    return {1: np.where(np.arange(4 * N) < VALID, src, 0).astype(np.uint32)}


def _pair(m: np.ndarray, t: int) -> int:
    """Thread t's 32-bit register of one 8x8 matrix of 16-bit elements (not transposed)."""
    r, c = t // 4, 2 * (t % 4)
    return int(m[r, c]) | int(m[r, c + 1]) << 16


def _matrices_args(rng: np.random.Generator) -> list[Any]:
    return [rng.integers(0, 1 << 16, 256).astype(np.uint16), np.zeros(8 * 32, np.uint32)]


def _matrices_expect(args: list[Any]) -> dict[int, np.ndarray]:
    mats = args[0].reshape(4, 8, 8)
    out = np.zeros((32, 8), np.uint32)
    for t in range(32):
        out[t, :4] = [_pair(mats[j], t) for j in range(4)]
        out[t, 4:6] = [_pair(mats[j].T, t) for j in range(2)]
        out[t, 6] = _pair(mats[0], t)
        j, r = t // 8, t % 8
        back = mats[j].T  # stmatrix .trans of fragments loaded plainly: each matrix transposed
        out[t, 7] = int(back[r, 0]) | int(back[r, 1]) << 16
    return {1: out.reshape(-1)}


CASES = [
    CorpusCase("vectors", 1, N, _vectors_args, (3, 4, 5), _vectors_expect),
    CorpusCase("zfill", 1, N, _zfill_args, (1,), _zfill_expect),
    CorpusCase("matrices", 1, 32, _matrices_args, (1,), _matrices_expect),
]
