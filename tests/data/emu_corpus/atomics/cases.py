"""Atomics on global and shared memory (PTX ISA: atom and red; the CUDA Programming Guide's
atomic functions for atomicInc/atomicDec's wrap-around). Every final value is independent of the
order the threads update it in, so the model folds the updates in thread order."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

CTAS, THREADS = 2, 64
N = CTAS * THREADS


def _atomics_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(-1000, 1001, N).astype(np.int32)
    x[:3] = [-(1 << 31), (1 << 31) - 1, -1]
    ints = np.zeros(8 + N, np.int32)
    ints[2], ints[4] = (1 << 31) - 1, -1
    uints = np.zeros(6, np.uint32)
    uints[0] = 0xFFFFFFFF
    return [x, ints, uints, np.zeros(1, np.float32), np.zeros(1, np.float64), np.zeros(2, np.uint64),
            np.zeros(2, np.float16), np.zeros(2, np.uint16)]


def _atomics_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].astype(np.int64)
    u = x & 0xFFFFFFFF

    def wrap(value: int) -> int:
        return (value + (1 << 31)) % (1 << 32) - (1 << 31)

    ints = np.zeros(8 + N, np.int32)
    ints[:8] = [wrap(int(x.sum())), wrap(-int(x.sum())), int(x.min()), int(x.max()),
                wrap(int(np.bitwise_and.reduce(x | 0x0F0F0F0F))), int(np.bitwise_or.reduce(x & 0x00F0F000)),
                wrap(int(np.bitwise_xor.reduce(x))), N]
    ints[8:] = 1
    inc = dec = 0
    for _ in range(N):
        inc = 0 if inc >= 37 else inc + 1
        dec = 41 if dec == 0 or dec > 41 else dec - 1
    uints = np.array([u.min(), u.max(), inc, dec, 7, 9], np.uint32)
    halves = np.array([0.25 * N, float((x & 7).sum())], np.float16)
    bhalves = np.array([float(N), float((x & 1).sum())], ml_dtypes.bfloat16).view(np.uint16)
    return {1: ints, 2: uints, 3: np.array([((x & 1023) * 0.25).sum()], np.float32),
            4: np.array([(x * 0.5).sum()], np.float64),
            5: np.array([int(u.sum()), int((u << 20).max())], np.uint64), 6: halves, 7: bhalves}


def _shared_args(rng: np.random.Generator) -> list[Any]:
    return [rng.integers(-5000, 5001, N).astype(np.int32), np.zeros(5 * CTAS, np.int32)]


def _shared_expect(args: list[Any]) -> dict[int, np.ndarray]:
    out = np.zeros((CTAS, 5), np.int32)
    for c in range(CTAS):
        v = args[0][c * THREADS: (c + 1) * THREADS].astype(np.int64)
        f = np.float32((v & 255).sum())
        out[c] = [v.sum(), max(0, v.max()), v.min(), -1, f.view(np.int32)]
    return {1: out.reshape(-1)}


CASES = [
    CorpusCase("atomics", CTAS, THREADS, _atomics_args, (1, 2, 3, 4, 5, 6, 7), _atomics_expect),
    CorpusCase("shared_atomics", CTAS, THREADS, _shared_args, (1,), _shared_expect),
]
