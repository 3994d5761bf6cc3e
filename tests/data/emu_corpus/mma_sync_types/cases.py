"""mma.sync shapes and types beyond f16/bf16 with f32 accumulators (PTX ISA "Warp-level matrix
multiply-accumulate": tf32, s8/u8 with and without .satfinite, e4m3/e5m2, f16 accumulators, f64).

The kernels load each warp's A (16 x K), B (K x 8, stored as Bt) and C (16 x 8) into fragments and
store D, so the model is the plain product D = A B + C of the loaded matrices: float sums exact in
float64 (products of tf32, fp8 and f16 inputs are exact, and so are their sums with an f16 or f32
C) rounded once to nearest in the accumulator type (an f16 sum past 65504 is infinity), integer
sums in int64 wrapped to s32, or clamped with .satfinite. f64 (m8n8k4) is a chain of fmas in k
order, d = fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))), each rounded to nearest: the
order an H100 uses (2026-12-05: every element; the float64 matmul plus C of before differed in 6
of 128).

The GPU's tensor cores do not round the float sums to nearest: they truncate, keeping a limited
number of bits (docs/emulator.md, "Calibration"). ``BOUNDS`` gives, per case whose sums are not
exact in the accumulator type, how far the GPU may be from the exact sum per element
(porter.emu.tensorcore.hardware_sum_bound); tools/emu_calibrate.py holds the GPU to it, and the
emulator to the model bit for bit. D is stored in its own type (f32, f16, f64 or s32 elements), so
differences are counted in that type's ulps.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

from porter.emu.tensorcore import HARDWARE_BITS, hardware_sum_bound

WARPS = 2
E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def _words(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint32).reshape(-1)


def _finite_codes(rng: np.random.Generator, fmt: Any, shape: tuple[int, ...]) -> np.ndarray:
    codes = rng.integers(0, 256, shape).astype(np.uint8)
    bad = ~np.isfinite(codes.view(fmt).astype(np.float64))
    codes[bad] = 0x38  # 1.0 in e4m3 (in e5m2: 0.5)
    return codes.view(fmt)


def _inputs(k: int, a_t: str, b_t: str, c_t: str, rng: np.random.Generator) -> list[np.ndarray]:
    """A (warps, 16, k), Bt (warps, 8, k), C (warps, 16, 8) of the element types."""
    def matrix(t: str, shape: tuple[int, ...]) -> np.ndarray:
        if t == "tf32":  # small dyadic values: tf32-exact, and their sums exact
            return (rng.integers(-64, 64, shape) * 2.0 ** rng.integers(-6, 3, shape)).astype(np.float32)
        if t == "f16":
            return (rng.integers(-32, 32, shape) / 8).astype(np.float16)
        if t in ("s8", "u8"):
            return rng.integers(-128, 128, shape).astype(np.int8) if t == "s8" else \
                rng.integers(0, 256, shape).astype(np.uint8)
        if t == "s32":  # near the ends of the range, so that sums overflow
            big = rng.integers(2**31 - 300000, 2**31, shape)
            return np.where(rng.random(shape) < 0.5, -big, big).astype(np.int32)
        if t == "f32":
            return rng.uniform(-8, 8, shape).astype(np.float32)
        return _finite_codes(rng, E4M3 if t == "e4m3" else E5M2, shape)

    return [matrix(a_t, (WARPS, 16, k)), matrix(b_t, (WARPS, 8, k)), matrix(c_t, (WARPS, 16, 8))]


D_TYPES: dict[str, Any] = {"f32": np.float32, "f16": np.float16, "s32": np.int32}
BOUNDS: dict[str, Callable[[list[Any]], dict[int, np.ndarray]]] = {}


def _case(entry: str, k: int, types: str, sat: bool = False) -> CorpusCase:
    d_t, a_t, b_t, c_t = types.split(".")

    def make(rng: np.random.Generator) -> list[Any]:
        a, bt, c = _inputs(k, a_t, b_t, c_t, rng)
        return [_words(a), _words(bt), _words(c), np.zeros(WARPS * 16 * 8, D_TYPES[d_t])]

    def matrices(args: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, bt, c = (_unwords(w, t) for w, t in zip(args[:3], (a_t, b_t, c_t), strict=True))
        return a.reshape(WARPS, 16, k), bt.reshape(WARPS, 8, k), c.reshape(WARPS, 16, 8)

    def expect(args: list[Any]) -> dict[int, np.ndarray]:
        a, bt, c = matrices(args)
        d = a @ bt.transpose(0, 2, 1) + c
        if d_t == "s32":
            d = np.clip(d, -(2**31), 2**31 - 1).astype(np.int32) if sat else d.astype(np.int32)
        else:
            with np.errstate(over="ignore"):  # an f16 sum past 65504 is infinity
                d = d.astype(D_TYPES[d_t])
        return {3: d.reshape(-1)}

    def bound(args: list[Any]) -> dict[int, np.ndarray]:
        a, bt, c = matrices(args)
        magnitude = np.abs(a) @ np.abs(bt).transpose(0, 2, 1) + np.abs(c)
        return {3: hardware_sum_bound(magnitude, k + 1, HARDWARE_BITS["mma.sync", d_t]).reshape(-1)}

    if d_t != "s32" and a_t != "f16":  # f16 inputs here make sums exact in f16
        BOUNDS[entry] = bound
    return CorpusCase(entry, 1, 32 * WARPS, make, (3,), expect, arch="sm_89" if "e" in a_t else "sm_80")


def _unwords(words: np.ndarray, t: str) -> np.ndarray:
    """Matrix elements as float64 (integers: int64)."""
    view: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "tf32": lambda w: w.view(np.float32).astype(np.float64),
        "f32": lambda w: w.view(np.float32).astype(np.float64),
        "f16": lambda w: w.view(np.float16).astype(np.float64),
        "s8": lambda w: w.view(np.int8).astype(np.int64),
        "u8": lambda w: w.view(np.uint8).astype(np.int64),
        "s32": lambda w: w.view(np.int32).astype(np.int64),
        "e4m3": lambda w: w.view(E4M3).astype(np.float64),
        "e5m2": lambda w: w.view(E5M2).astype(np.float64),
    }
    return view[t](words)


def _f64_make(rng: np.random.Generator) -> list[Any]:
    def dyadic(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-2**20, 2**20, shape) * 2.0 ** rng.integers(-30, 30, shape)

    return [dyadic((WARPS, 8, 4)).reshape(-1), dyadic((WARPS, 8, 4)).reshape(-1),
            dyadic((WARPS, 8, 8)).reshape(-1), np.zeros(WARPS * 64)]


def _f64_expect(args: list[Any]) -> dict[int, np.ndarray]:
    """fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))) per element, each fma rounded once
    (Python's rationals, whose conversion to float rounds to nearest even)."""
    a, bt, c = args[0].reshape(WARPS, 8, 4), args[1].reshape(WARPS, 8, 4), args[2].reshape(WARPS, 8, 8)
    d = np.zeros((WARPS, 8, 8))
    for w, i, j in np.ndindex(d.shape):
        acc = float(c[w, i, j])
        for kk in range(4):
            acc = float(Fraction(float(a[w, i, kk])) * Fraction(float(bt[w, j, kk])) + Fraction(acc))
        d[w, i, j] = acc
    return {3: d.reshape(-1)}


CASES = [
    _case("mma_tf32_k8", 8, "f32.tf32.tf32.f32"),
    _case("mma_tf32_k4", 4, "f32.tf32.tf32.f32"),
    _case("mma_s8_k16", 16, "s32.s8.s8.s32"),
    _case("mma_u8_k16_sat", 16, "s32.u8.u8.s32", sat=True),
    _case("mma_u8s8_k32", 32, "s32.u8.s8.s32"),
    _case("mma_s8_k32_sat", 32, "s32.s8.s8.s32", sat=True),
    _case("mma_e4m3_k32", 32, "f32.e4m3.e4m3.f32"),
    _case("mma_e5m2e4m3_k32", 32, "f32.e5m2.e4m3.f32"),
    _case("mma_e4m3_k32_f16", 32, "f16.e4m3.e4m3.f16"),
    _case("mma_f16_k8_f16", 8, "f16.f16.f16.f16"),
    _case("mma_f16_k16_f16", 16, "f16.f16.f16.f16"),
    CorpusCase("mma_f64", 1, 32 * WARPS, _f64_make, (3,), _f64_expect, arch="sm_80"),
]
