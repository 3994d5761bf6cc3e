"""Floating-point rounding the way PTX specifies it, on top of NumPy's round-to-nearest.

float32 results with a directed rounding mode (``.rz``, ``.rm``, ``.rp``) or from a fused
multiply-add are formed from an exact (or exactly known) float64 value ``s`` plus its error
``e`` (``s + e`` is the exact result), then rounded once to float32 with the mode. ``.ftz``
flushes float32 subnormal inputs and results to zero of the same sign.
"""

from __future__ import annotations

import numpy as np

_TINY = np.float32(np.finfo(np.float32).tiny)


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


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str = "rn") -> np.ndarray:
    """a * b + c rounded once (the product of two float32 is exact in float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    s, e = two_sum(p, np.asarray(c, np.float64))
    return round_f32(s, e, mode)


def add_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    if mode == "rn":
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(a, np.float32) + np.asarray(b, np.float32)
    s, e = two_sum(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return round_f32(s, e, mode)


def mul_f32(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if mode == "rn":
            return np.asarray(a, np.float32) * np.asarray(b, np.float32)
        return round_f32(np.asarray(a, np.float64) * np.asarray(b, np.float64), 0.0, mode)


def saturate(x: np.ndarray) -> np.ndarray:
    """``.sat`` on a float result: clamped to [0.0, 1.0], a NaN to +0.0 (PTX ISA, add/mul/fma/cvt)."""
    x = np.asarray(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)
