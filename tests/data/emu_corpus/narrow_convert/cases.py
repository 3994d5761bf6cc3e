"""The sm_100a conversions (PTX ISA cvt): fp6 (.e2m3x2, .e3m2x2) and fp4 (.e2m1x2) pairs with
.satfinite and .relu, both ways; .ue8m0x2 with .rz/.rp from .f32 and .bf16x2 and back to .bf16x2;
.tf32 with .satfinite under .rn and .rz.

fp6/fp4 model: ml_dtypes' round-to-nearest-even on the value clamped to MAX_NORM (these formats
have no infinity or NaN, so NaN inputs, whose result PTX does not name, are left out). ue8m0
model: the power of two at or below (rz) or at or above (rp) the value, 2^-127 .. 2^127; past
2^127 MAX_NORM with .satfinite, else NaN (0xFF, the format has no infinity); NaN to NaN. Widening
gives the exact value; a NaN bf16 is the canonical 0x7FFF.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

E2M3, E3M2, E2M1 = ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn, ml_dtypes.float4_e2m1fn
N = 128


def _mini_edges() -> list[float]:
    e = [0.0, -0.0, np.inf, -np.inf, 1e-45, 1e30, -1e30, 7.5, 7.75, 8.0, 28.0, 30.0, 32.0, 6.0, 5.0, 7.0, -7.0]
    for fmt in (E2M3, E3M2, E2M1):  # ties between neighbouring codes, and just off them
        v = np.arange(1 << ml_dtypes.finfo(fmt).bits >> 1, dtype=np.uint8).view(fmt).astype(np.float64)
        mids = (v[:-1] + v[1:]) / 2
        e += list(mids) + list(np.nextafter(mids.astype(np.float32), np.float32(0)).astype(np.float64))
    return e


def _from_args(rng: np.random.Generator) -> list[Any]:
    edges = np.array(_mini_edges(), np.float32)
    x = np.concatenate([edges, rng.uniform(-40, 40, 2 * N - edges.size).astype(np.float32)])
    rng.shuffle(x)
    y = (2.0 ** rng.uniform(-135, 127.9, 2 * N)).astype(np.float32)
    y[:12] = [np.inf, np.nan, 2.0**127, 1.5 * 2.0**127, 2.0**-127, 2.0**-130, 1.0, 1.5, 3.0, 2.0**-126, 0.75, 1e-45]
    return [x, y, np.zeros(11 * N, np.uint16), np.int32(N)]


def _mini(x: np.ndarray, fmt: Any, relu: bool = False) -> np.ndarray:
    v = x.astype(np.float64)
    if relu:
        v = np.where(v > 0, v, 0.0)
    top = float(ml_dtypes.finfo(fmt).max)
    return np.clip(v, -top, top).astype(fmt).view(np.uint8).astype(np.uint16)


def _ue8m0(x: np.ndarray, up: bool, sat: bool) -> np.ndarray:
    v = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.ceil(np.log2(v)) if up else np.floor(np.log2(v))
    code = np.clip(e, -127, 128) + 127
    code = np.where(code > 254, 254 if sat else 255, code)
    return np.where(np.isnan(v), 255, code).astype(np.uint16)


def _from_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y = args[0].reshape(-1, 2), args[1].reshape(-1, 2)
    yb = y.astype(ml_dtypes.bfloat16).astype(np.float64)

    def pair(codes: np.ndarray, shift: int) -> np.ndarray:
        return (codes[:, 0] << shift) | codes[:, 1]

    rows = [pair(_mini(x, E2M3), 8), pair(_mini(x, E2M3, True), 8), pair(_mini(x, E3M2), 8),
            pair(_mini(x, E3M2, True), 8), pair(_mini(x, E2M1), 4), pair(_mini(x, E2M1, True), 4),
            pair(_ue8m0(y, False, False), 8), pair(_ue8m0(y, True, False), 8), pair(_ue8m0(y, False, True), 8),
            pair(_ue8m0(y, True, True), 8), pair(_ue8m0(yb, True, True), 8)]
    return {2: np.stack(rows, axis=1).reshape(-1)}


def _to_args(rng: np.random.Generator) -> list[Any]:
    lo = np.arange(N, dtype=np.uint16) % 64
    c6 = lo | (rng.permutation(N).astype(np.uint16) % 64) << 8
    c8 = np.arange(N, dtype=np.uint16) * 2 | rng.permutation(256)[:N].astype(np.uint16) << 8
    c8[0] = 0xFF01  # ue8m0 NaN
    return [c6, c8, np.zeros(7 * N, np.uint32), np.int32(N)]


def _to_expect(args: list[Any]) -> dict[int, np.ndarray]:
    c6, c8 = args[0], args[1]

    def f16(v: np.ndarray, relu: bool = False) -> np.ndarray:
        v = np.where(v > 0, v, 0.0) if relu else v
        return v.astype(np.float16).view(np.uint16).astype(np.uint32)

    def halves(lo: np.ndarray, hi: np.ndarray, relu: bool = False) -> np.ndarray:
        return f16(lo, relu) | f16(hi, relu) << 16

    def fp6(fmt: Any, relu: bool) -> np.ndarray:
        lo, hi = ((c6 >> s & 0x3F).astype(np.uint8).view(fmt).astype(np.float64) for s in (0, 8))
        return halves(lo, hi, relu)

    nib = [(c8 >> s & 0xF).astype(np.uint8).view(E2M1).astype(np.float64) for s in (0, 4)]
    ue = [(c8 >> s & 0xFF).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32) for s in (0, 8)]
    bf = [np.where(np.isnan(v), np.uint16(0x7FFF), v.astype(ml_dtypes.bfloat16).view(np.uint16)).astype(np.uint32)
          for v in ue]
    rows = [fp6(E2M3, False), fp6(E2M3, True), fp6(E3M2, False), fp6(E3M2, True), halves(*nib),
            halves(*nib, relu=True), bf[0] | bf[1] << 16]
    return {2: np.stack(rows, axis=1).reshape(-1)}


def _tf32_args(rng: np.random.Generator) -> list[Any]:
    bits = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0x7F7FF000, 0xFF7FF000, 0x7F800000, 0xFF800000, 0x7F7FEFFF, 0x3F801000, 0xBF803000, 0x00001000]
    bits[8:40] = (bits[8:40] & np.uint32(0xFFFFE000)) | np.uint32(0x1000)  # ties at tf32's spacing
    return [bits.view(np.float32), np.zeros(4 * N, np.float32), np.int32(N)]


def _tf32_expect(args: list[Any]) -> dict[int, np.ndarray]:
    """tf32 by integer arithmetic on the bits: the ISA's rounding of the 13 bits dropped."""
    b = args[0].view(np.uint32).astype(np.int64)
    sign, mag = b & 0x80000000, b & 0x7FFFFFFF
    nan = mag > 0x7F800000

    def tf32(rounded: np.ndarray, relu: bool) -> np.ndarray:
        out = sign | np.minimum(rounded & 0x7FFFE000, 0x7F7FE000)
        if relu:
            out = np.where(sign != 0, 0, out)
        return np.where(nan, 0x7FFFFFFF, out).astype(np.uint32).view(np.float32)

    rn = mag + 0xFFF + ((mag >> 13) & 1)
    rows = [tf32(rn, False), tf32(rn, True), tf32(mag, False), tf32(mag, True)]
    return {1: np.stack(rows, axis=1).reshape(-1)}


CASES = [
    CorpusCase("narrow_from_f32", 2, 64, _from_args, (2,), _from_expect, arch="sm_100a"),
    CorpusCase("narrow_to_half", 2, 64, _to_args, (2,), _to_expect, arch="sm_100a"),
    CorpusCase("tf32_satfinite", 1, N, _tf32_args, (1,), _tf32_expect, arch="sm_100a"),
]
