"""fp8 and tf32 conversions (PTX ISA cvt: .e4m3x2/.e5m2x2 with .satfinite and .relu from .f32
and .f16x2, back to .f16x2, and .tf32 with .rna/.rn/.rz and .relu).

The model of an fp8 conversion is ml_dtypes' round-to-nearest-even on the value clamped to the
format's largest finite value first (what .satfinite does: NaN stays NaN, anything beyond MAX_NORM,
infinities included, becomes MAX_NORM of its sign); .relu takes negatives to +0 first. The inputs
hold every format's edges: zeros, subnormals, ties at subnormal and normal spacings, the largest
finite value and what lies past it, infinities and NaN.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def _edges() -> np.ndarray:
    e = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-30, 0.1, -3.3, 1.0, 1.0625, 1.1875,
         1 + 2**-20, -1.0625, 240.0, 256.0, 272.0, 288.0, 448.0, -448.0, 464.0, -464.0, 465.0, 480.0, 500.0,
         1e6, -3e38, 57344.0, 61439.0, 61440.0, -61440.0, 65504.0, 65520.0, 1e5]
    for tiny in (2.0**-9, 2.0**-16):  # the smallest subnormal of e4m3, of e5m2
        e += [tiny, -tiny, tiny / 2, tiny * 0.75, tiny * 1.5, tiny * 2.5, tiny * 3, tiny * 7, tiny * 7.5, -tiny * 1.5]
    e += [2.0**-6, 2.0**-14, 2.0**-6 * 1.0625, 2.0**-14 * 1.125]
    return np.array(e, np.float32)


def _midpoints(rng: np.random.Generator, fmt: Any, count: int) -> np.ndarray:
    """Values halfway between neighbouring finite codes of ``fmt`` (ties), and just off them."""
    codes = rng.integers(0, 0x7E, count)
    lo = codes.astype(np.uint8).view(fmt).astype(np.float64)
    hi = (codes + 1).astype(np.uint8).view(fmt).astype(np.float64)
    mid = (lo + hi) / 2
    mid[::3] = np.nextafter(mid[::3].astype(np.float32), np.float32(np.inf))
    mid[1::3] *= -1
    return mid.astype(np.float32)


def _values(rng: np.random.Generator, count: int) -> np.ndarray:
    edges = _edges()
    rest = count - edges.size
    mids = np.concatenate([_midpoints(rng, E4M3, rest // 4), _midpoints(rng, E5M2, rest // 4)])
    spread = rng.standard_normal(rest - mids.size) * 2.0 ** rng.uniform(-20, 17, rest - mids.size)
    return np.concatenate([edges, mids, spread.astype(np.float32)])


N_PAIRS = 160


def _from_f32_args(rng: np.random.Generator) -> list[Any]:
    x = _values(rng, 2 * N_PAIRS)
    x[1::2] = np.roll(x[1::2], 7)  # each edge meets others in both halves
    return [x, np.zeros(5 * N_PAIRS, np.uint16).view(E4M3), np.zeros(5 * N_PAIRS, np.uint16).view(E5M2),
            np.int32(N_PAIRS)]


def _sat(x: np.ndarray, fmt: Any, relu: bool = False) -> np.ndarray:
    """cvt.rn.satfinite{.relu} to ``fmt`` (values exact in float64)."""
    x = x.astype(np.float64)
    if relu:
        x = np.where(np.isnan(x) | (x > 0), x, 0.0)
    top = float(ml_dtypes.finfo(fmt).max)
    return np.clip(x, -top, top).astype(fmt)


def _from_f32_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0].reshape(-1, 2)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).astype(np.float64)  # __float2half_rn
    out = {}
    for index, fmt in ((1, E4M3), (2, E5M2)):
        rows = [_sat(x, fmt), _sat(x, fmt, relu=True), _sat(x, fmt), _sat(h, fmt), _sat(h, fmt, relu=True)]
        # each pair is a little-endian u16: byte 0 (the lower) from the second source, byte 1 from the first
        out[index] = np.stack([r[:, ::-1] for r in rows], axis=1).reshape(-1)
    return out


N_CODES = 256


def _to_f16_args(rng: np.random.Generator) -> list[Any]:
    lo = np.arange(N_CODES, dtype=np.uint16)
    hi = rng.permutation(N_CODES).astype(np.uint16)
    return [lo | hi << 8, np.zeros(4 * N_CODES, np.uint32).view(np.float16), np.zeros(2 * N_CODES, np.float32),
            np.int32(N_CODES)]


def _to_f16_expect(args: list[Any]) -> dict[int, np.ndarray]:
    pairs = args[0].view(np.uint8).reshape(-1, 2)  # [lower, upper] per code pair

    def widen(fmt: Any, relu: bool) -> np.ndarray:
        v = pairs.view(fmt).astype(np.float16)
        return np.where(np.isnan(v) | (v > 0), v, np.float16(0)) if relu else v

    rows = [widen(E4M3, False), widen(E4M3, True), widen(E5M2, False), widen(E5M2, True)]
    wide = np.stack([pairs[:, 0].view(E4M3).astype(np.float32), pairs[:, 1].view(E5M2).astype(np.float32)], axis=1)
    return {1: np.stack(rows, axis=1).reshape(-1), 2: wide.reshape(-1)}


N_TF32 = 256


def _tf32_args(rng: np.random.Generator) -> list[Any]:
    x = _values(rng, N_TF32 - 24)
    bits = rng.integers(0, 1 << 32, 24, dtype=np.uint64).astype(np.uint32)
    bits[:8] = (bits[:8] & np.uint32(0xFFFFE000)) | np.uint32(0x1000)  # ties at tf32's spacing
    bits[8:12] = [0x7F7FF000, 0x7F7FEFFF, 0xFF7FF000, 0x00001000]  # ties that carry into infinity, a subnormal tie
    return [np.concatenate([x, bits.view(np.float32)]), np.zeros(6 * N_TF32, np.float32), np.int32(N_TF32)]


def _tf32(x: np.ndarray, mode: str, satfinite: bool = False, relu: bool = False) -> np.ndarray:
    """float32 to tf32 (10 mantissa bits) by the ISA's rounding, computed on float64 values."""
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bits
        v = x.astype(np.float64)
    if relu:
        v = np.where(np.isnan(v) | (v > 0), v, 0.0)
    mag = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.maximum(np.floor(np.log2(np.where(mag > 0, mag, 1.0))), -126)
        q = 2.0 ** (e - 10)
        n = mag / q
        n = {"rna": np.floor(n + 0.5), "rn": np.rint(n), "rz": np.floor(n)}[mode]
        r = np.copysign(n * q, v)
    top = (2 - 2.0**-10) * 2.0**127
    r = np.where(np.isfinite(v), np.where(np.abs(r) >= 2.0**128, np.copysign(np.inf, r), r), v)
    if satfinite:
        r = np.clip(r, -top, top)
    return np.where(np.isnan(v), np.nan, r).astype(np.float32)


def _tf32_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x = args[0]
    rows = [_tf32(x, "rna"), _tf32(x, "rna", satfinite=True), _tf32(x, "rn"), _tf32(x, "rn", relu=True),
            _tf32(x, "rz"), _tf32(x, "rz", relu=True)]
    return {1: np.stack(rows, axis=1).reshape(-1)}


CASES = [
    CorpusCase("fp8_from_f32", 2, 96, _from_f32_args, (1, 2), _from_f32_expect, arch="sm_89"),
    CorpusCase("fp8_to_f16", 2, 128, _to_f16_args, (1, 2), _to_f16_expect, arch="sm_89"),
    CorpusCase("tf32_from_f32", 1, N_TF32, _tf32_args, (1,), _tf32_expect, arch="sm_90"),
]
