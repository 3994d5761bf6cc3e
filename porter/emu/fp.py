"""Floating-point rounding the way PTX specifies it, on top of NumPy's round-to-nearest.

float32 results with a directed rounding mode (``.rz``, ``.rm``, ``.rp``) or from a fused
multiply-add are formed from an exact (or exactly known) float64 value ``s`` plus its error
``e`` (``s + e`` is the exact result), then rounded once to float32 with the mode. ``.ftz``
flushes float32 subnormal inputs and results to zero of the same sign.

Two details NumPy gets otherwise than the GPU (an H100, 2026-12-05, tests/data/emu_corpus/float_edges):
a float32 arithmetic result that is NaN is the canonical NaN 0x7FFFFFFF (:func:`canonical_nan`; NumPy
gives 0x7FC00000, or 0xFFC00000 for the square root of a negative on x86), and an exact zero sum
under ``.rm`` is -0 unless both addends are +0 (IEEE 754 6.3; NumPy's sum, rounded to nearest,
is +0).
"""

from __future__ import annotations

import numpy as np

_TINY = np.float32(np.finfo(np.float32).tiny)
CANONICAL_NAN_F32 = np.uint32(0x7FFFFFFF).view(np.float32)


def canonical_nan(x: np.ndarray) -> np.ndarray:
    """float32 NaNs as the GPU's canonical NaN, 0x7FFFFFFF (other dtypes as they are): what the
    GPU's f32 add/sub/mul/fma/div/sqrt/rcp/min/max write for a NaN result, whatever the payload
    or sign of a NaN operand."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    nan = np.isnan(x)
    return np.where(nan, CANONICAL_NAN_F32, x).astype(np.float32) if np.any(nan) else x


def ftz(x: np.ndarray) -> np.ndarray:
    """float32 subnormals to signed zero."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    sub = (np.abs(x) < _TINY) & (x != 0)
    if np.any(sub):
        x = np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32)
    return x


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s, e with s = fl(a + b) and s + e = a + b exactly (float64, Knuth)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def round_f32(s: np.ndarray, e: np.ndarray | float, mode: str) -> np.ndarray:
    """The float32 rounding, with ``mode`` rn/rz/rm/rp, of the exact value s + e (s float64)."""
    s = np.asarray(s, np.float64)
    e = np.broadcast_to(np.asarray(e, np.float64), s.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        r = s.astype(np.float32)
        if mode == "rn":
            bits = s.view(np.uint64)
            tie = ((bits & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)) & (e != 0)
            if np.any(tie):
                nudged = np.nextafter(s, np.where(e > 0, np.inf, -np.inf))
                r = np.where(tie, nudged.astype(np.float32), r)
            return r
        # An overflow (finite s, infinite r) goes to the largest finite value where the mode
        # rounds toward zero from that side (IEEE 754 7.4): rz always, rm above, rp below.
        big = np.float32(np.finfo(np.float32).max)
        overflow = np.isinf(r) & np.isfinite(s)
        keep = {"rz": overflow, "rm": overflow & (s > 0), "rp": overflow & (s < 0)}.get(mode)
        if keep is None:
            raise ValueError(f"rounding mode {mode!r}")
        r = np.where(keep, np.copysign(big, s).astype(np.float32), r).astype(np.float32)
        diff = (r.astype(np.float64) - s) - e  # > 0: r above the exact value
        finite = np.isfinite(r) & np.isfinite(s) & ~overflow
        if mode == "rz":
            step = finite & (((r > 0) & (diff > 0)) | ((r < 0) & (diff < 0)))
            return np.where(step, np.nextafter(r, np.float32(0)), r).astype(np.float32)
        if mode == "rm":
            return np.where(finite & (diff > 0), np.nextafter(r, np.float32(-np.inf)), r).astype(np.float32)
        if mode == "rp":
            return np.where(finite & (diff < 0), np.nextafter(r, np.float32(np.inf)), r).astype(np.float32)
    raise ValueError(f"rounding mode {mode!r}")


def zero_sum_sign(r: np.ndarray, x: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """``r``, the float32 rounding of the float64 sum x + y, with the sign IEEE 754 (6.3) gives an
    exact zero sum: under ``.rm`` -0 unless both addends are +0 (x + (-x) = -0, +0 + -0 = -0);
    under the other modes the sign a sum rounded to nearest has, which ``r`` already has. (A
    float64 sum of two float64 values is zero only when the exact sum is.)"""
    if mode != "rm":
        return r
    with np.errstate(invalid="ignore"):
        zero = np.asarray(x + y == 0)
    if not np.any(zero):
        return r
    positive = (x == 0) & (y == 0) & ~np.signbit(x) & ~np.signbit(y)
    return np.where(zero, np.where(positive, np.float32(0), np.float32(-0.0)), r).astype(np.float32)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str = "rn") -> np.ndarray:
    """a * b + c rounded once (the product of two float32 is exact in float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c64 = np.asarray(c, np.float64)
    s, e = two_sum(p, c64)
    return zero_sum_sign(round_f32(s, e, mode), p, c64, mode)


def add_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    if mode == "rn":
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(a, np.float32) + np.asarray(b, np.float32)
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s, e = two_sum(x, y)
    return zero_sum_sign(round_f32(s, e, mode), x, y, mode)


def mul_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if mode == "rn":
            return np.asarray(a, np.float32) * np.asarray(b, np.float32)
        return round_f32(np.asarray(a, np.float64) * np.asarray(b, np.float64), 0.0, mode)


def saturate(x: np.ndarray) -> np.ndarray:
    """``.sat`` on a float result: clamped to [0.0, 1.0], a NaN to +0.0 (PTX ISA, add/mul/fma/cvt)."""
    x = np.asarray(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)
