"""PTX scalar types as NumPy dtypes, and the raw-bit conversions between them.

Registers hold raw bits (unsigned integers of the declared width, or bool for predicates); an
instruction views them as its own type. ``bf16`` has no NumPy dtype: it stays as its 16 bits,
and arithmetic on it goes through float32 (a bf16 is the top half of a float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

UNSIGNED: dict[int, np.dtype[Any]] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}
SIGNED: dict[int, np.dtype[Any]] = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32), 64: np.dtype(np.int64)}
FLOAT: dict[int, np.dtype[Any]] = {16: np.dtype(np.float16), 32: np.dtype(np.float32), 64: np.dtype(np.float64)}


# bits of one narrow float element as stored (fp6 in a byte with two zero bits on top)
_NARROW_BITS = {"e4m3": 8, "e5m2": 8, "e2m3": 8, "e3m2": 8, "e2m1": 4, "ue8m0": 8}


def width(t: str) -> int:
    """Bits of a type name without the dot: ``u32`` -> 32, ``f16x2`` -> 32, ``e4m3x2`` -> 16, ``pred`` -> 1."""
    if t == "pred":
        return 1
    if t[-2:] in ("x2", "x4"):
        return int(t[-1]) * width(t[:-2])
    if t in _NARROW_BITS:
        return _NARROW_BITS[t]
    return int("".join(c for c in t if c.isdigit()) or 32)


def kind(t: str) -> str:
    """'u', 's', 'b', 'f' (float incl. f16/f32/f64), 'bf' (bf16), 'x2' (packed pairs), 'pred'."""
    if t == "pred":
        return "pred"
    if t.endswith("x2"):
        return "x2"
    if t.startswith("bf16"):
        return "bf"
    if t.startswith("tf32"):
        return "b"
    return t[0]


def dtype(t: str) -> np.dtype:
    """The NumPy dtype an instruction of type ``t`` computes in (raw bits for bf16 and pairs)."""
    k, w = kind(t), width(t)
    if k == "pred":
        return np.dtype(bool)
    if k == "s":
        return SIGNED[w]
    if k == "f":
        return FLOAT[w]
    return UNSIGNED[w]


def storage(decl: str) -> np.dtype:
    """The storage dtype of a register declared with type ``decl`` (".b32" ...)."""
    t = decl.lstrip(".")
    if t == "pred":
        return np.dtype(bool)
    w = width(t)
    return UNSIGNED[max(16, w) if w <= 16 else w]


def as_type(raw: np.ndarray, t: str) -> np.ndarray:
    """Raw register bits viewed (after truncation or zero extension) as type ``t``."""
    if t == "pred":
        return raw.astype(bool, copy=False)
    w = width(t)
    if raw.dtype == bool or raw.dtype.itemsize * 8 != w:
        raw = raw.astype(UNSIGNED[w])
    return raw.view(dtype(t))


def to_storage(values: np.ndarray, t: str, store: np.dtype) -> np.ndarray:
    """Values of type ``t`` as raw bits of the register storage ``store`` (sign-extending signed types)."""
    if store.kind == "b":
        return np.asarray(values).astype(bool)
    v = np.asarray(values)
    want = dtype(t)
    if v.dtype != want:
        v = v.astype(want)
    if store.itemsize == want.itemsize:
        return v.view(store) if v.dtype != store else v
    if kind(t) == "s" and store.itemsize > want.itemsize:
        return v.astype(SIGNED[store.itemsize * 8]).view(store)
    return v.view(UNSIGNED[want.itemsize * 8]).astype(store)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """float32 -> bf16 bits with rounding ``mode`` (rn: to nearest even; rz: toward zero; rm, rp:
    down, up: the truncated magnitude, one step further from zero where the value is inexact and
    on the side the mode rounds away to)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    if mode in ("rz", "rm", "rp"):
        out = b >> np.uint32(16)
        inexact = (b & np.uint32(0xFFFF)) != 0
        negative = (b >> np.uint32(31)) == 1
        away = inexact & (negative if mode == "rm" else ~negative) if mode != "rz" else np.zeros_like(inexact)
        out = out + away.astype(np.uint32)
    else:
        lsb = (b >> np.uint32(16)) & np.uint32(1)
        out = (b + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    out = out.astype(np.uint16)
    if nan.any():
        out = np.where(nan, np.uint16(0x7FFF), out)
    return out


def f32_to_f16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """float32 -> float16 bits; NumPy rounds to nearest even, other modes adjust by one ulp."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16)
    if mode in ("rn", "rni"):
        return h.view(np.uint16)
    back = h.astype(np.float32)
    with np.errstate(invalid="ignore"):
        if mode == "rz":
            fix = np.abs(back) > np.abs(x)
            h = np.where(fix, np.nextafter(h, np.float16(0)), h)
        elif mode == "rm":
            h = np.where(back > x, np.nextafter(h, np.float16(-np.inf)), h)
        elif mode == "rp":
            h = np.where(back < x, np.nextafter(h, np.float16(np.inf)), h)
    return h.astype(np.float16).view(np.uint16)


def saturate_s32(x: np.ndarray) -> np.ndarray:
    """int64 values clamped to the s32 range (``.sat`` of integer add, mad.hi, mma's s32 accumulators)."""
    return np.clip(np.asarray(x, np.int64), -(2**31), 2**31 - 1).astype(np.int32)
