"""Barrier reductions (PTX ISA: bar/barrier ``.red``): the predicates of the threads taking part in
one completion of a barrier, reduced by population count (``.popc``), all-true (``.and``) or
any-true (``.or``), delivered to each of them; exited threads take no part; a named barrier with
a thread count reduces only over the warps that arrive at it."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase


def _votes_args(n: int, live: int) -> Any:
    def make(rng: np.random.Generator) -> list[Any]:
        x = rng.integers(-3, 4, n).astype(np.int32)
        x[:4] = [0, -2147483648, 2147483647, -1]
        return [x, np.zeros(3 * n, np.uint32), np.int32(live)]

    return make


def _votes_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, out, live = args[0], args[1], int(args[2])
    v = x[:live]
    want = out.reshape(-1, 3).copy()
    want[:live] = [int((v > 0).sum()), int((v != 0).all()), int((v < 0).any())]
    return {1: want.reshape(-1)}


def _all_nonzero(rng: np.random.Generator) -> list[Any]:
    """Every value non-zero and none negative: .and true, .or false."""
    return [rng.integers(1, 100, 64).astype(np.int32), np.zeros(3 * 64, np.uint32), np.int32(64)]


def _bit_counts_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(0, 1 << 32, 96, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 0xFFFFFFFF, 0x80000001]
    return [x, np.zeros(96, np.uint32)]


def _bit_counts_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0]
    acc = 0
    for k in range(8):
        acc = acc * 16 + int(((x >> k) & 1).sum())
    return {1: np.full(x.size, acc & 0xFFFFFFFF, np.uint32)}


def _named_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(-1, 2, 128).astype(np.int32)
    x[64:96] = 1  # the second pair of warps: !p false in warp 2, so its .and is false
    return [x, np.zeros(3 * 128, np.uint32)]


def _named_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0]
    want = np.zeros((128, 3), np.uint32)
    first = x[:64] > 0
    second = ~(x[64:] > 0)
    for rows, p in ((slice(0, 64), first), (slice(64, 128), second)):
        want[rows] = [int(p.sum()), int(p.any()), int(p.all())]
    return {1: want.reshape(-1)}


CASES = [
    CorpusCase("votes", 1, 96, _votes_args(96, 96), (1,), _votes_expect),
    CorpusCase("votes", 1, 80, _votes_args(80, 80), (1,), _votes_expect),  # a partial last warp
    CorpusCase("votes", 1, 128, _votes_args(128, 64), (1,), _votes_expect),  # warps 2-3 exit first
    CorpusCase("votes", 1, 64, _all_nonzero, (1,), _votes_expect),
    CorpusCase("bit_counts", 1, 96, _bit_counts_args, (1,), _bit_counts_expect),
    CorpusCase("named", 1, 128, _named_args, (1,), _named_expect),
]
