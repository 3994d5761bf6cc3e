"""Integer arithmetic at its edges against the PTX ISA: div/rem (truncating; remainder with the
dividend's sign; by zero and MININT / -1 are unspecified, so never drawn), mul.wide, mul.hi,
mad.hi, shifts (amounts past the width clamp to it), bfe (sign-filled field; length 0 gives 0)
and bfi, abs/neg of MININT (itself), min/max, 16-bit multiply, add.sat."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 64
I32_MIN, I64_MIN = -(1 << 31), -(1 << 63)


def _args(rng: np.random.Generator) -> list[Any]:
    a = rng.integers(I32_MIN, 1 << 31, N, dtype=np.int64)
    b = rng.integers(I32_MIN, 1 << 31, N, dtype=np.int64)
    a[:8] = [I32_MIN, (1 << 31) - 1, -1, 0, 7, -7, I32_MIN, 100]
    b[:8] = [1, -1, 3, 5, -2, 2, 7, 7 | (40 << 8)]
    b[8:16] = rng.integers(-9, 10, 8)
    b[b == 0] = 3
    c = rng.integers(I64_MIN, (1 << 63) - 1, N, dtype=np.int64)
    d = rng.integers(I64_MIN, (1 << 63) - 1, N, dtype=np.int64)
    c[:4] = [I64_MIN, (1 << 63) - 1, -1, 12345]
    d[:4] = [3, -2, 1 << 40, -1]
    d[8:12] = [1, 2, -3, 1 << 62]
    d[d == 0] = 5
    return [a.astype(np.int32), b.astype(np.int32), c, d, np.zeros(24 * N, np.uint32)]


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _bits(value: int, width: int) -> list[int]:
    return [(value >> i) & 1 for i in range(width)]


def _bfe_s32(a: int, pos: int, length: int) -> int:
    if length == 0:
        return 0
    bits = _bits(a, 32)
    sbit = bits[31] if pos + length - 1 > 31 else bits[pos + length - 1]
    out = [bits[pos + i] if i < length and pos + i <= 31 else sbit for i in range(32)]
    return sum(b << i for i, b in enumerate(out))


def _bfi(a: int, b: int, pos: int, length: int) -> int:
    out = _bits(b, 32)
    src = _bits(a, 32)
    for i in range(length):
        if pos + i > 31:
            break
        out[pos + i] = src[i]
    return sum(x << i for i, x in enumerate(out))


def _expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y, p, q = (v.astype(object) for v in args[:4])
    m32, m64 = (1 << 32) - 1, (1 << 64) - 1
    out = np.zeros((N, 24), np.uint32)
    for i in range(N):
        a, b, c, d = int(x[i]), int(y[i]), int(p[i]), int(q[i])
        ua, ub, uc, ud = a & m32, b & m32, c & m64, d & m64
        div64 = _trunc_div(c, d) & m64
        rem64 = uc % ud
        wide = (a * b) & m64
        hi64 = (uc * ud) >> 64
        s = b & 127
        shl = (uc << min(s, 64)) & m64
        shr = (c >> min(s, 63)) & m64
        sat = min(max(a + b, I32_MIN), (1 << 31) - 1)
        out[i] = [_trunc_div(a, b) & m32, (a - b * _trunc_div(a, b)) & m32, (ua // ub) & m32, ua % ub,
                  div64 & m32, div64 >> 32, rem64 & m32, rem64 >> 32, wide & m32, wide >> 32, hi64 & m32, hi64 >> 32,
                  (((a * b) >> 32) + a) & m32, shl & m32, shl >> 32, shr & m32,
                  _bfe_s32(ua, b & 63, (b >> 8) & 63), _bfi(ua, ub, (a >> 4) & 63, (b >> 12) & 63),
                  abs(a) & m32 if a != I32_MIN else ua, (-a) & m32, min(ua, ub), (max(c, d) & m64) >> 32,
                  (((a & 0xFFFF) - ((a & 0x8000) << 1)) * ((b & 0xFFFF) - ((b & 0x8000) << 1))) & 0xFFFF, sat & m32]
    return {4: out.reshape(-1)}


CASES = [CorpusCase("ints", 1, N, _args, (4,), _expect)]
