"""Bit intrinsics: byte permute, funnel shifts, bit reverse, leading zeros, first set bit,
population count, high half of a product, 24-bit multiply (PTX ISA: prmt, shf, brev, clz, bfind,
popc, mul.hi, mul24)."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 96


def _args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0, 0xFFFFFFFF, 1, 0x80000000]
    y[:4] = [0, 1, 0xFFFFFFFF, 0x80000000]
    return [x, y, np.zeros(8 * N, np.uint32), np.int32(N)]


def _perm(a: int, b: int, sel: int) -> int:
    """prmt.b32 default mode: each result byte picks one of the eight bytes of {b, a}."""
    pool = (b << 32 | a).to_bytes(8, "little")
    return int.from_bytes(bytes(pool[(sel >> (4 * k)) & 7] for k in range(4)), "little")


def _expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y = args[0], args[1]
    out = np.zeros((N, 8), np.uint32)
    for i in range(N):
        a, b = int(x[i]), int(y[i])
        s = i & 31
        pair = b << 32 | a
        out[i, 0] = _perm(a, b, 0x5140)
        out[i, 1] = _perm(a, b, (b >> 3) & 0x7777)
        out[i, 2] = (pair << s >> 32) & 0xFFFFFFFF  # shf.l.wrap: the shift taken mod 32
        out[i, 3] = (pair >> min(i, 32)) & 0xFFFFFFFF  # shf.r.clamp: the shift clamped to 32
        out[i, 4] = int(f"{a:032b}"[::-1], 2)
        clz = 32 - b.bit_length()
        ffs = (a & -a).bit_length()
        out[i, 5] = clz + 64 * ffs
        out[i, 6] = (bin(b).count("1") + 64 * ((a * b) >> 32)) & 0xFFFFFFFF
        out[i, 7] = ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & 0xFFFFFFFF
    return {2: out.reshape(-1)}


CASES = [CorpusCase("bits", 1, N, _args, (2,), _expect)]
