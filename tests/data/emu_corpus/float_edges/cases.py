"""Float conversions and arithmetic at their edges, against the PTX ISA's definitions: cvt
(rounding modifiers; float-to-integer conversions clamp to the destination's range, and a NaN
becomes 0, or 1 << (bits - 1) when the source is .f64 or the destination 64 bits wide; .sat on a
float destination clamps to [0, 1] with NaN to +0), div/sqrt/rcp .rn (IEEE 754, correctly
rounded) and with directed modes, min/max (a NaN operand yields the other; .NaN yields NaN),
fma (one rounding), setp's unordered and numeric compares. Exact values are worked out with
Python's Fraction and rounded once. min and max are not given a +0/-0 pair, which the ISA's text
leaves open.

``arith`` stores the f32 results' bits, so two details count that IEEE 754 or the GPU fix and
NumPy does not follow (an H100, 2026-12-05: 75 of 896 words differed from NumPy's way, the 73
NaNs and the two x + (-x) under ``.rm``; the first five, NaNs, recorded): an exact zero sum under
``.rm`` is -0 unless both addends are +0 (IEEE 754 6.3), and a NaN result is the GPU's canonical
NaN 0x7FFFFFFF (NumPy writes 0x7FC00000, and 0xFFC00000 for the square root of a negative).
Conversions keep a NaN's payload: ``cvt.f32.f64`` of NumPy's NaN gave 0x7FC00000 on the GPU
(``to_float``, bit for bit)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from emu_corpus import CorpusCase

F32 = np.float32
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.5, -0.5, 255.5, 256.7, 65535.5, -32768.6, 3e9, -3e9, 1e20,
         -1e20, 2.0 ** -149, -(2.0 ** -140), 2.0 ** -126, 3.4028234663852886e38, math.inf, -math.inf, math.nan,
         1e-30, 7.0, -7.0, 16777217.0, 2147483520.0, 4294967040.0, 0.1]
N = 64


def _floats(rng: np.random.Generator, scale: float) -> np.ndarray:
    x = (rng.standard_normal(N) * scale).astype(F32)
    x[: len(EDGES)] = np.array(EDGES, np.float64).astype(F32)
    return x


def _to_int(value: float, mode: str, bits: int, signed: bool, nan_high: bool) -> int:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isnan(value):
        return (lo if signed else 1 << (bits - 1)) if nan_high else 0
    if math.isinf(value):
        return hi if value > 0 else lo
    q = Fraction(value)
    r = {"rni": round(q), "rzi": math.trunc(q), "rmi": math.floor(q), "rpi": math.ceil(q)}[mode]  # round(): ties to even
    return min(max(r, lo), hi)


def _to_int_args(rng: np.random.Generator) -> list[Any]:
    x = _floats(rng, 1000.0)
    return [x, x.astype(np.float64) * 1.0000001, np.zeros(12 * N, np.int32)]


def _to_int_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y = args[0], args[1]
    out = np.zeros((N, 12), np.int64)
    for i in range(N):
        a, b = float(x[i]), float(y[i])
        w = _to_int(a, "rzi", 64, True, True)
        out[i] = [_to_int(a, "rni", 32, True, False), _to_int(a, "rzi", 32, True, False),
                  _to_int(a, "rmi", 32, True, False), _to_int(a, "rpi", 32, True, False),
                  _to_int(a, "rni", 32, False, False), _to_int(b, "rzi", 32, True, True),
                  _to_int(b, "rni", 32, False, True), w & 0xFFFFFFFF, (w >> 32) & 0xFFFFFFFF,
                  _to_int(a, "rni", 16, True, False), _to_int(a, "rni", 8, False, False),
                  _to_int(a, "rni", 32, True, False)]
    return {2: (out & 0xFFFFFFFF).astype(np.uint32).view(np.int32).reshape(-1)}


def _round(q: Fraction, mode: str) -> np.float32:
    """The float32 that ``q`` (exact, at most the largest float32 in magnitude) rounds to under
    ``mode`` (rn, rz, rm, rp)."""
    c = F32(float(q))  # |q| is at most the largest float32 (see _directed)
    down = c if Fraction(float(c)) <= q else np.nextafter(c, F32(-np.inf))
    up = down if Fraction(float(down)) == q else np.nextafter(down, F32(np.inf))
    if mode == "rm":
        return down
    if mode == "rp":
        return up
    if mode == "rz":
        return down if q >= 0 else up
    dd, du = q - Fraction(float(down)), Fraction(float(up)) - q
    if dd != du:
        return down if dd < du else up
    return down if int(down.view(np.uint32)) % 2 == 0 else up


def _directed(q: Fraction, mode: str) -> np.float32:
    """As :func:`_round`, with overflow to infinity or the largest finite value as the mode says."""
    big = Fraction(float(np.finfo(F32).max))
    if abs(q) > big:
        if mode == "rn":  # to infinity from half an ulp past the largest value on
            toward_inf = abs(q) >= Fraction(2) ** 128 - Fraction(2) ** 103
        else:
            toward_inf = (mode == "rp" and q > 0) or (mode == "rm" and q < 0)
        return F32(math.copysign(math.inf if toward_inf else float(big), float(q)))
    return _round(q, mode)


def _to_float_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(-(1 << 31), 1 << 31, N, dtype=np.int64).astype(np.int32)
    x[:6] = [0, -1, (1 << 31) - 1, -(1 << 31), 16777217, 16777219]
    y = rng.integers(-(1 << 63), (1 << 63) - 1, N, dtype=np.int64)
    y[:3] = [(1 << 62) + 1, -(1 << 63), (1 << 24) + 1]
    z = _floats(rng, 1e10).astype(np.float64) * (1 + 2.0 ** -30)
    z[:4] = [1e39, -1e39, 2.0 ** -150, 1 + 2.0 ** -24]
    return [x, y, z, np.zeros(10 * N, np.float32)]


def _f64_to_f32(v: float, mode: str) -> np.float32:
    if math.isnan(v) or math.isinf(v):
        return F32(v)
    return _directed(Fraction(v), mode)


def _to_float_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y, z = args[0], args[1], args[2]
    out = np.zeros((N, 10), F32)
    for i in range(N):
        s, u, v = int(x[i]), int(x[i]) & 0xFFFFFFFF, float(z[i])
        sat = 0.0 if math.isnan(v) else min(max(v, 0.0), 1.0)
        out[i] = [_directed(Fraction(s), "rn"), _directed(Fraction(s), "rz"), _directed(Fraction(u), "rm"),
                  _directed(Fraction(u), "rp"), _directed(Fraction(int(y[i])), "rn"), _f64_to_f32(v, "rn"),
                  _f64_to_f32(v, "rz"), _f64_to_f32(v, "rm"), _f64_to_f32(v, "rp"), _f64_to_f32(sat, "rn")]
    return {3: out.reshape(-1)}


def _arith_args(rng: np.random.Generator) -> list[Any]:
    a = _floats(rng, 10.0)
    b = np.roll(_floats(rng, 3.0), 5)
    b[40:44] = [a[40], -a[41], np.nan, 0.0]
    return [a, b, np.zeros(14 * N, np.uint32)]


def _exact(f: Any) -> Fraction | None:
    return None if not np.isfinite(f) else Fraction(float(f))


def _ieee(a: np.float32, b: np.float32, op: str, mode: str) -> np.float32:
    """``a op b`` correctly rounded under ``mode``; the special cases as IEEE 754 gives them."""
    with np.errstate(all="ignore"):
        plain = {"add": a + b, "mul": a * b, "div": a / b}[op]
    qa, qb = _exact(a), _exact(b)
    if qa is None or qb is None or (not np.isfinite(plain) and mode == "rn"):
        return plain
    if op == "div" and qb == 0:
        return plain
    q = {"add": qa + qb, "mul": qa * qb, "div": qa / qb if qb else Fraction(0)}[op]
    if q == 0:  # the zero's sign, as IEEE 754 6.3 gives it: an exact zero sum is -0 under rm, unless
        if op == "add" and mode == "rm" and not (qa == 0 and qb == 0 and not np.signbit(a) and not np.signbit(b)):
            return F32(-0.0)  # both addends are +0
        return plain  # under rn (and for products and quotients, in every mode) NumPy's
    return _directed(q, mode)


def _sqrt(a: np.float32, mode: str) -> np.float32:
    q = _exact(a)
    if q is None or q <= 0:
        with np.errstate(invalid="ignore"):
            return np.sqrt(a)
    c = np.sqrt(np.float64(a)).astype(F32)  # within one ulp; then move to the mode's side
    while Fraction(float(c)) ** 2 > q:
        c = np.nextafter(c, F32(0))
    while Fraction(float(np.nextafter(c, F32(np.inf)))) ** 2 <= q:
        c = np.nextafter(c, F32(np.inf))
    # now c <= sqrt(q) < next(c)
    nxt = np.nextafter(c, F32(np.inf))
    if Fraction(float(c)) ** 2 == q or mode in ("rm", "rz"):
        return c
    if mode == "rp":
        return nxt
    mid = (Fraction(float(c)) + Fraction(float(nxt))) / 2
    return c if mid ** 2 > q else nxt  # no ties: a square root is never halfway


def _fmin(a: np.float32, b: np.float32, biggest: bool) -> np.float32:
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    return max(a, b) if biggest else min(a, b)


def _arith_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y = args[0], args[1]
    out = np.zeros((N, 14), np.uint32)
    for i in range(N):
        a, b = x[i], y[i]
        qa, qb = _exact(a), _exact(b)
        with np.errstate(all="ignore"):
            fma = (a * b + a if qa is None or qb is None else
                   (_directed(qa * qb + qa, "rn") if qa * qb + qa != 0 else F32(a * b + a)))
            s = _ieee(a, b, "add", "rn")
            sat = F32(0.0) if np.isnan(s) else F32(min(max(float(s), 0.0), 1.0))
            row = [_ieee(a, b, "div", "rn"), _sqrt(a, "rn"), _ieee(F32(1), b, "div", "rn"), _fmin(a, b, False),
                   _fmin(a, b, True), F32(np.nan) if np.isnan(a) or np.isnan(b) else min(a, b), fma,
                   _ieee(a, b, "mul", "rz"), _ieee(a, b, "add", "rm"), _ieee(a, b, "div", "rz"), _sqrt(b, "rp"), sat]
        out[i, :12] = np.where(np.isnan(row), np.uint32(0x7FFFFFFF), np.array(row, F32).view(np.uint32))
        unordered = bool(np.isnan(a) or np.isnan(b))
        out[i, 12] = int(unordered or a < b)
        out[i, 13] = int(not unordered)
    return {2: out.reshape(-1)}


CASES = [
    CorpusCase("to_int", 1, N, _to_int_args, (2,), _to_int_expect),
    CorpusCase("to_float", 1, N, _to_float_args, (3,), _to_float_expect),
    CorpusCase("arith", 1, N, _arith_args, (2,), _arith_expect),
]
