"""Warp intrinsics against the CUDA Programming Guide's definitions (warp shuffle functions with
``width``, warp vote, match and reduce functions) and the PTX ISA's (shfl.sync, vote.sync,
match.sync, redux.sync), over two warps."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

THREADS = 64


def _values(rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-100, 101, THREADS).astype(np.int32)
    x[32 + 7] = 5000  # the second warp does not match all on x / 1000
    x[:4] = [-(1 << 31) + 5, (1 << 31) - 7, 0, -1]  # redux.add wraps; min and max meet the extremes
    return x


def _shuffle(v: np.ndarray, lane: int, mode: str, b: int, width: int) -> int:
    """The value a lane receives (CUDA's __shfl*_sync with ``width``: the warp in segments)."""
    base = lane & ~(width - 1)
    if mode == "idx":
        src = base + b % width
    elif mode == "up":
        src = lane - b if lane - base >= b else lane
    elif mode == "down":
        src = lane + b if lane - base + b < width else lane
    else:
        src = lane ^ b
        src = src if src < base + width else lane
    return int(v[src])


def _shuffles_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0]
    out = np.zeros((THREADS, 8), np.int32)
    for t in range(THREADS):
        w, lane = x[t // 32 * 32: t // 32 * 32 + 32], t % 32
        out[t] = [_shuffle(w, lane, "idx", (lane * 7 + 3) & 31, 32), _shuffle(w, lane, "up", 3, 32),
                  _shuffle(w, lane, "down", 5, 32), _shuffle(w, lane, "xor", 6, 32),
                  _shuffle(w, lane, "idx", lane + 2, 8), _shuffle(w, lane, "up", 2, 16),
                  _shuffle(w, lane, "down", 3, 8), _shuffle(w, lane, "xor", 9, 16)]
    return {1: out.reshape(-1)}


def _mask(bits: np.ndarray) -> int:
    return int(sum(1 << i for i, b in enumerate(bits) if b))


def _votes_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].astype(np.int64)
    out = np.zeros((THREADS, 8), np.uint32)
    for t in range(THREADS):
        w, v = x[t // 32 * 32: t // 32 * 32 + 32], int(x[t])
        thousands = np.trunc(w / 1000).astype(np.int64)  # C's division truncates toward zero
        same = bool((thousands == thousands[0]).all())
        branch = (w & 2) != 0
        out[t, :6] = [int((w > 40).any()), int((w > -100).all()), _mask(w & 1), _mask((w & 3) == (v & 3)),
                      0xFFFFFFFF if same else 0, int(same)]
        out[t, 6:] = [_mask(branch), _mask(branch & ((w & 4) != 0))] if v & 2 else [0, 1]
    return {1: out.reshape(-1)}


def _reduxes_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0]
    out = np.zeros((THREADS, 6), np.uint32)
    for warp in range(THREADS // 32):
        w = x[32 * warp: 32 * warp + 32]
        u = w.view(np.uint32).astype(np.uint64)
        row = [int(u.sum()) & 0xFFFFFFFF, int(w.min()) & 0xFFFFFFFF, int(w.max()) & 0xFFFFFFFF,
               int(np.bitwise_and.reduce(u | 0x10)), int(np.bitwise_or.reduce(u & 0xF0F0)),
               int(np.bitwise_xor.reduce(u))]
        out[32 * warp: 32 * warp + 32] = row
    return {1: out.reshape(-1)}


CASES = [
    CorpusCase("shuffles", 1, THREADS, lambda rng: [_values(rng), np.zeros(8 * THREADS, np.int32)], (1,),
               _shuffles_expect),
    CorpusCase("votes", 1, THREADS, lambda rng: [_values(rng), np.zeros(8 * THREADS, np.uint32)], (1,),
               _votes_expect),
    CorpusCase("reduxes", 1, THREADS, lambda rng: [_values(rng), np.zeros(6 * THREADS, np.uint32)], (1,),
               _reduxes_expect),
]
