"""Extended precision and byte-level instructions (PTX ISA 9.7.1, 9.7.2, 9.7.9): carry chains
against Python's unbounded integers (a sum or difference of 128-bit numbers word by word, a
64 x 64 -> 128-bit product, the carry flag surviving an instruction without .cc), prmt's modes
from the ISA's selection tables, bmsk and szext from their semantics (the .clamp and .wrap
rules for positions and widths of 32 and more), fns, the 24-bit multiplies (bits 47..16 of the
48-bit product), the high halves with .sat, 16-bit widening multiplies and cvt.pack.sat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 96
M32 = (1 << 32) - 1
EDGES = [0, M32, 0x80000000, 0x7FFFFFFF, 1, 0xFFFF, 0x00800000, 0xFF7FFFFF]


def _words(rng: np.random.Generator, n: int, shift: int) -> np.ndarray:
    w = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    w[: len(EDGES)] = np.roll(EDGES, shift)
    return w


def _s32(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


def _s(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _split(v: int, n: int) -> list[int]:
    return [(v >> (32 * k)) & M32 for k in range(n)]


# -- carry chains ----------------------------------------------------------------------------------

def _carries_args(rng: np.random.Generator) -> list[Any]:
    a = rng.integers(0, 1 << 32, (N, 4), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, (N, 4), dtype=np.uint64).astype(np.uint32)
    a[0], b[0] = M32, [1, 0, 0, 0]  # a carry through every word
    a[1], b[1] = 0, [1, 0, 0, 0]  # a borrow through every word
    a[2], b[2] = M32, M32  # the largest product
    a[3], b[3] = [0x80000000] * 4, [0x80000000] * 4
    a[4], b[4] = a[5], a[5]  # equal: no borrow
    return [a, b, np.zeros(24 * N, np.uint32)]


def _carries_row(aw: list[int], bw: list[int]) -> list[int]:
    a = sum(w << (32 * k) for k, w in enumerate(aw))
    b = sum(w << (32 * k) for k, w in enumerate(bw))
    total, diff = a + b, a - b
    product = (aw[0] | aw[1] << 32) * (bw[0] | bw[1] << 32)
    high = (_s32(aw[0]) * _s32(bw[0])) >> 32  # mad.hi.s32: bits 63..32 of the signed product
    signed_sum = (high & M32) + aw[1]
    low_diff = aw[2] - bw[2]
    linked = aw[0] + bw[0]
    return [*_split(total, 4), total >> 128, *_split(diff, 4), M32 if diff < 0 else 0, *_split(product, 4),
            *_split(total, 4), total >> 128, signed_sum & M32, signed_sum >> 32, low_diff & M32,
            (aw[3] - bw[3] - (low_diff < 0)) & M32, ((linked & M32) + 1 + (linked >> 32)) & M32]


def _carries_expect(args: list[Any]) -> dict[int, np.ndarray]:
    a, b = args[0], args[1]
    rows = [_carries_row([int(w) for w in a[i]], [int(w) for w in b[i]]) for i in range(N)]
    return {2: np.array(rows, np.uint32).reshape(-1)}


# -- prmt, bmsk, szext --------------------------------------------------------------------------------

# d.b3, d.b2, d.b1, d.b0 for c[1:0] = 0, 1, 2, 3, as the ISA's table lists them
PRMT_TABLE = {
    "f4e": ["3210", "4321", "5432", "6543"],
    "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"],
    "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"],
    "rc16": ["1010", "3232", "1010", "3232"],
}


def _prmt(a: int, b: int, c: int, mode: str) -> int:
    pool = (b << 32 | a).to_bytes(8, "little")
    if mode:
        row = PRMT_TABLE[mode][c & 3]
        return int.from_bytes(bytes(pool[int(row[3 - k])] for k in range(4)), "little")
    out = []
    for k in range(4):
        sel = (c >> (4 * k)) & 0xF
        byte = pool[sel & 7]
        out.append(0xFF if sel & 8 and byte & 0x80 else 0 if sel & 8 else byte)
    return int.from_bytes(bytes(out), "little")


def _bmsk(a: int, b: int, clamp: bool) -> int:
    """PTX ISA bmsk semantics, step by step."""
    a1, b1 = a & 0x1F, b & 0x1F
    mask0 = (M32 << a1) & M32
    total = a1 + b1
    mask1 = (M32 << total) & M32 if total < 32 else 0
    overflow = total >= 32
    if clamp:
        if a >= 32:
            overflow, mask0 = True, 0
        if b >= 32:
            overflow = True
    if overflow:
        mask1 = 0
    elif b1 == 0:
        mask1 = M32
    return mask0 & ~mask1 & M32


def _szext(a: int, b: int, clamp: bool, signed: bool) -> int:
    """PTX ISA szext semantics, step by step."""
    b1 = b & 0x1F
    too_large = b >= 32 and clamp
    mask = 0 if too_large else (M32 << b1) & M32
    sign = not (b1 == 0 or too_large or not signed) and (a >> ((b1 - 1) & 0x1F)) & 1
    return (a & ~mask & M32) | (mask if sign else 0)


def _fns(mask: int, base: int, offset: int) -> int:
    """PTX ISA fns semantics, step by step."""
    if offset == 0:
        return base if mask >> base & 1 else M32
    pos, count, step = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if mask >> pos & 1:
            if count == 0:
                return pos
            count -= 1
        pos += step
    return M32


def _bits_args(rng: np.random.Generator) -> list[Any]:
    z = _words(rng, N, 2)
    z[8:48] = np.arange(40) | (np.arange(40)[::-1] << 8)  # every c[1:0], positions and widths 0..39
    z[48:56] = [0, 32, 31 << 8, 32 << 8, 33, 1 << 8 | 31, 63 | 63 << 8, 0x8888]
    return [_words(rng, N, 0), _words(rng, N, 1), z, np.zeros(15 * N, np.uint32)]


def _bits_row(a: int, b: int, c: int) -> list[int]:
    p, q = c & 63, (c >> 8) & 63
    return [*(_prmt(a, b, c, m) for m in (*PRMT_TABLE, "")), _bmsk(p, q, True), _bmsk(p, q, False),
            _szext(a, q, True, True), _szext(a, q, False, True), _szext(a, q, True, False),
            _szext(a, q, False, False), _fns(a, c & 31, ((c >> 16) & 7) - 3),
            _fns(b, (c >> 5) & 31, ((c >> 24) & 63) - 32)]


# -- multiplies, cvt.pack.sat ---------------------------------------------------------------------------

def _clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


def _pack(a: int, b: int, c: int, bits: int, signed: bool) -> int:
    """cvt.pack.sat: b in the low field, a above it, both saturated to the type; c's low bits
    fill the rest of the word (16-bit types fill it all)."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    field = (1 << bits) - 1
    packed = (_clamp(_s32(b), lo, hi) & field) | (_clamp(_s32(a), lo, hi) & field) << bits
    return packed if bits == 16 else (packed | c << (2 * bits)) & M32


def _mul_row(a: int, b: int, c: int) -> list[int]:
    s24 = _s(a & 0xFFFFFF, 24) * _s(b & 0xFFFFFF, 24)
    u24 = (a & 0xFFFFFF) * (b & 0xFFFFFF)
    u, v = a << 32 | b, c << 32 | a
    uhi, shi = (u * v) >> 64, (_s(u, 64) * _s(v, 64)) >> 64
    shigh = (_s32(a) * _s32(b)) >> 32
    return [(u24 >> 16) & M32, (s24 >> 16) & M32, (s24 + c) & M32, ((u24 >> 16) + c) & M32,
            _clamp((s24 >> 16) + _s32(c), -(1 << 31), (1 << 31) - 1) & M32, (shigh + c) & M32,
            _clamp(shigh + _s32(c), -(1 << 31), (1 << 31) - 1) & M32, *_split(uhi, 2), *_split(shi & ((1 << 64) - 1), 2),
            (a & 0xFFFF) * (b & 0xFFFF), (_s(a & 0xFFFF, 16) * _s(b & 0xFFFF, 16)) & M32,
            (_s(a & 0xFFFF, 16) * _s(b & 0xFFFF, 16) + c) & M32,
            _pack(a, b, c, 16, True), _pack(a, b, c, 16, False), _pack(a, b, c, 8, False), _pack(a, b, c, 4, True)]


def _three(rng: np.random.Generator, words: int) -> list[Any]:
    return [_words(rng, N, 0), _words(rng, N, 3), _words(rng, N, 5), np.zeros(words * N, np.uint32)]


def _rows(row: Callable[[int, int, int], list[int]]) -> Callable[[list[Any]], dict[int, np.ndarray]]:
    def expect(args: list[Any]) -> dict[int, np.ndarray]:
        x, y, z = ([int(v) for v in a] for a in args[:3])
        return {3: np.array([row(*t) for t in zip(x, y, z, strict=True)], np.uint32).reshape(-1)}

    return expect


CASES = [
    CorpusCase("carries", 1, N, _carries_args, (2,), _carries_expect),
    CorpusCase("bits", 1, N, _bits_args, (3,), _rows(_bits_row)),
    CorpusCase("multiplies", 1, N, lambda rng: _three(rng, 18), (3,), _rows(_mul_row)),
]
