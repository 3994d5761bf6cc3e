"""The narrow float formats of cvt and the fp8/fp6/fp4 tensor-core kinds, and tf32 rounding.

Each format is decoded from its bits by its fields (sign, exponent, mantissa, bias; PTX ISA
"Alternate Floating Point Data Formats") and encoded from an exactly known float64 value with one
rounding, as PTX's cvt defines it:

- ``.rn`` rounds to nearest, ties to even; ``.rz`` toward zero; ``.rp`` up (ue8m0 only).
- ``.satfinite``: NaN stays NaN (formats without NaN: +MAX_NORM, an assumption: PTX names no
  result), and a result beyond MAX_NORM, infinity included, is MAX_NORM of the same sign. Without
  it, an overflow is infinity (e5m2) or NaN (e4m3, ue8m0).
- ``.relu``: a negative input (and -0) gives +0; NaN gives the format's NaN.
- NaN results are the positive NaN code (e4m3 and e5m2: 0x7F; ue8m0: 0xFF); PTX does not specify
  NaN payloads, so the GPU may set the sign bit.

ml_dtypes has these formats but turns an e4m3 overflow into NaN whatever the saturation and has
no ue8m0 rounding modes, so encoding is done here; tests use ml_dtypes as the independent model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class MiniFloat:
    """A narrow float format: ``ebits`` exponent and ``mbits`` mantissa bits, bias, specials."""

    name: str
    ebits: int
    mbits: int
    bias: int
    specials: str  # "ieee" (all-ones exponent: inf and NaN), "fn" (only all-ones is NaN), "none", "exp" (ue8m0)
    signed: bool = True

    @property
    def bits(self) -> int:
        return self.ebits + self.mbits + int(self.signed)

    @cached_property
    def values(self) -> np.ndarray:
        """float64 value of every code 0 .. 2^bits - 1."""
        code = np.arange(1 << self.bits, dtype=np.int64)
        man = code & ((1 << self.mbits) - 1)
        exp = (code >> self.mbits) & ((1 << self.ebits) - 1)
        top = (1 << self.ebits) - 1
        if self.specials == "exp":  # ue8m0: 2^(e - 127), no zero; all ones is NaN
            return np.where(exp == top, np.nan, np.ldexp(1.0, exp - self.bias))
        mag = np.where(exp == 0, np.ldexp(man.astype(np.float64), 1 - self.bias - self.mbits),
                       np.ldexp(1.0 + man / (1 << self.mbits), exp - self.bias))
        if self.specials == "ieee":
            mag = np.where(exp == top, np.where(man == 0, np.inf, np.nan), mag)
        elif self.specials == "fn":
            mag = np.where((exp == top) & (man == (1 << self.mbits) - 1), np.nan, mag)
        sign = (code >> (self.ebits + self.mbits)) & 1 if self.signed else np.zeros_like(code)
        return np.where(sign == 1, -mag, mag)

    @cached_property
    def _positive(self) -> np.ndarray:
        """The finite non-negative values in code order (ascending)."""
        half = self.values[: 1 << (self.ebits + self.mbits)]
        return half[np.isfinite(half)]

    @property
    def max_norm(self) -> float:
        return float(self._positive[-1])

    @property
    def nan_code(self) -> int:
        """The positive NaN with the largest payload (0x7F, 0xFF for ue8m0); -1 for formats without NaN."""
        codes = np.flatnonzero(np.isnan(self.values[: 1 << (self.ebits + self.mbits)]))
        return int(codes.max()) if codes.size else -1

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return self.values[np.asarray(codes).astype(np.int64) & ((1 << self.bits) - 1)]

    def encode(self, x: np.ndarray, mode: str = "rn", satfinite: bool = True, relu: bool = False) -> np.ndarray:
        """Codes (uint8) for the exact values ``x`` (float64), rounded once (module docstring)."""
        x = np.asarray(x, np.float64)
        nan = np.isnan(x)
        if relu:
            x = np.where(nan | (x > 0), x, 0.0)
        neg = np.signbit(x) & ~nan
        # An unsigned format has no negative values: they, like zero, go to its smallest code (an assumption).
        ax = np.where(nan | (neg & ~self.signed), 0.0, np.abs(x))
        emin = 1 - self.bias if self.specials != "exp" else -self.bias
        _, ex = np.frexp(ax)
        e = np.maximum(ex - 1, emin)
        q = np.ldexp(1.0, e - self.mbits)
        with np.errstate(invalid="ignore", over="ignore"):
            n = ax / q
            n = {"rn": np.rint, "rz": np.floor, "rp": np.ceil}[mode](n)
            r = n * q
        if self.specials == "exp":
            r = np.maximum(r, self._positive[0])  # no zero: the smallest power of two (an assumption)
        over = r > self.max_norm
        r = np.where(over, self.max_norm, r)
        code = np.searchsorted(self._positive, r).astype(np.int64)
        if self.signed:
            code |= neg.astype(np.int64) << (self.ebits + self.mbits)
        if not satfinite and self.specials == "ieee":
            sign = code & (1 << (self.ebits + self.mbits))
            code = np.where(over, sign | (((1 << self.ebits) - 1) << self.mbits), code)
        elif not satfinite and self.specials in ("fn", "exp"):
            code = np.where(over, self.nan_code, code)
        fallback = self.nan_code if self.nan_code >= 0 else int(np.searchsorted(self._positive, self.max_norm))
        return np.where(nan, fallback, code).astype(np.uint8)


FORMATS = {
    "e4m3": MiniFloat("e4m3", 4, 3, 7, "fn"),
    "e5m2": MiniFloat("e5m2", 5, 2, 15, "ieee"),
    "e2m3": MiniFloat("e2m3", 2, 3, 1, "none"),
    "e3m2": MiniFloat("e3m2", 3, 2, 3, "none"),
    "e2m1": MiniFloat("e2m1", 2, 1, 1, "none"),
    "ue8m0": MiniFloat("ue8m0", 8, 0, 127, "exp", signed=False),
}

_TF32_MAX = np.uint32(0x7F7FE000)


def tf32_round(x: np.ndarray, mode: str, satfinite: bool = False, relu: bool = False) -> np.ndarray:
    """float32 -> tf32 bits in a .b32 (10 mantissa bits kept, the low 13 zero).

    ``rna`` rounds to nearest with ties away from zero, ``rn`` ties to even, ``rz`` truncates;
    a carry out of the largest binade gives infinity, which ``.satfinite`` (like an infinite
    input) turns into MAX_NORM (0x7F7FE000) of the same sign. NaN gives 0x7FFFFFFF.
    """
    f = np.asarray(x, np.float32)
    if relu:
        f = np.where(np.isnan(f) | (f > 0), f, np.float32(0)).astype(np.float32)
    b = f.view(np.uint32)
    sign, mag = b & np.uint32(0x80000000), b & np.uint32(0x7FFFFFFF)
    if mode == "rna":
        mag = mag + np.uint32(0x1000)
    elif mode == "rn":
        mag = mag + np.uint32(0xFFF) + ((mag >> np.uint32(13)) & np.uint32(1))
    elif mode != "rz":
        raise ValueError(f"tf32 rounding .{mode}")
    nan = np.isnan(f)
    mag = np.where(nan, 0, mag) & np.uint32(0xFFFFE000)
    if satfinite:
        mag = np.minimum(mag, _TF32_MAX)
    return np.where(nan, np.uint32(0x7FFFFFFF), sign | mag).astype(np.uint32)
