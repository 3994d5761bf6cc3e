"""Conversions: cvt between integer and floating-point types (rounding, saturation, packing) and cvta.

Float to integer rounds by the ``.rni/.rzi/.rmi/.rpi`` modifier and saturates to the range (NaN
to 0); integer or wider float to float rounds by ``.rn/.rz/.rm/.rp``; ``cvt.rn.bf16x2.f32 d, a, b``
and ``f16x2`` put ``a`` in the upper half, as do the narrow pairs (``e4m3x2`` ... ``ue8m0x2``,
:mod:`porter.emu.minifloat`): ``cvt.rn.satfinite.e4m3x2.f32 d, a, b`` puts ``a`` in bits 15..8,
and unpacking to ``f16x2`` keeps the upper element upper. ``cvta`` moves shared addresses in and out of the
generic window (:mod:`porter.emu.memory`); for the other spaces the address is the same.
"""

from __future__ import annotations

import numpy as np

from porter.emu import half_alu, minifloat, ptxtypes
from porter.emu.alu import ROUNDING, arr, ftz_of, unary
from porter.emu.context import Context, Exec, builder, type_suffix, types_of
from porter.emu.decode import Op
from porter.emu.fp import round_f32, saturate
from porter.emu.memory import SHARED_WINDOW
from porter.emu.state import Cta

_IRND = ("rni", "rzi", "rmi", "rpi")


def _round_int(x: np.ndarray, mode: str) -> np.ndarray:
    return {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](x)


def _to_int(x: np.ndarray, t: str, mode: str) -> np.ndarray:
    """Float to integer (PTX cvt): rounded by ``mode`` and saturated to the range (infinities
    included); a NaN becomes 0, or the bit pattern 1 << (width - 1) when the source is .f64 or the
    destination 64 bits wide. The bounds are compared as the powers of two they are (2^63 - 1 is
    no float64) and the result built in 64-bit words."""
    w = ptxtypes.width(t)
    signed = t[0] == "s"
    top, bottom = (2.0 ** (w - 1), -(2.0 ** (w - 1))) if signed else (2.0**w, 0.0)
    with np.errstate(invalid="ignore"):
        r = _round_int(x.astype(np.float64), mode if mode in _IRND else "rzi")
        nan = np.isnan(r)
        over, under = r >= top, r < bottom
    inside = np.where(nan | over | under, 0.0, r)  # integers in [bottom, top): exact in 64-bit words
    if signed:
        words = inside.astype(np.int64).view(np.uint64)
    else:
        high = inside >= 2.0**63
        words = np.where(high, (inside - 2.0**63 * high).astype(np.uint64) + np.uint64(2**63) * high,
                         inside.astype(np.uint64))
    hi, lo = (int(top) - 1) % 2**64, int(bottom) % 2**64
    nan_word = 1 << (w - 1) if x.dtype == np.float64 or w == 64 else 0
    words = np.where(over, np.uint64(hi), np.where(under, np.uint64(lo), np.where(nan, np.uint64(nan_word), words)))
    return (words & np.uint64(2**w - 1)).astype(ptxtypes.UNSIGNED[w]).view(ptxtypes.dtype(t))


def _src_float(raw: np.ndarray, at: str) -> np.ndarray:
    if at == "bf16":
        return ptxtypes.bf16_to_f32(raw)
    return raw.astype(np.float32) if at == "f16" else raw


@builder("cvt")
def _cvt(op: Op, ctx: Context) -> Exec:
    if op.parts[-1] in _NARROW or op.parts[-2] in _NARROW:
        return _cvt_narrow(op, ctx, op.parts[-2], op.parts[-1])
    ts = types_of(op)
    dt_, at = ts[0], ts[1]
    sat = "sat" in op.parts
    fz = ftz_of(op)
    irnd = next((p for p in op.parts if p in _IRND), "")
    frnd = next((p for p in op.parts if p in ROUNDING), "rn")
    relu, satfinite = "relu" in op.parts, "satfinite" in op.parts
    if dt_ in ("bf16x2", "f16x2"):
        return _cvt_pair(op, ctx, dt_, frnd, relu, sat, satfinite)
    d = ctx.write(op.operands[0], dt_)
    a = ctx.read(op.operands[1], at)
    dk, ak = ptxtypes.kind(dt_), ptxtypes.kind(at)
    a_float = ak in ("f", "bf")
    d_float = dk in ("f", "bf")

    def run(cta: Cta, idx: np.ndarray) -> None:
        x = arr(a(cta, idx), idx.size, ptxtypes.dtype(at))
        if a_float:
            x = _src_float(x, at)
            if at == "f32":
                x = fz(x)
        if d_float:
            if not a_float:
                if dt_ == "f32":
                    xs = x.astype(np.float64)
                    r = xs.astype(np.float32) if frnd == "rn" else round_f32(xs, x.astype(np.float64) - xs, frnd)
                    if ptxtypes.width(at) == 64:  # int64 -> f64 loses bits; round from the exact int
                        r = _int64_to_f32(x, frnd)
                elif dt_ in ("f16", "bf16") and ptxtypes.width(at) == 64:
                    r = _int64_to_f64_odd(x)  # rounded to odd: one later rounding to 16 bits is exact
                else:  # f64 (rounded once, to nearest), f16, bf16: from the exact value
                    r = x.astype(np.float64)
            else:
                r = x
                if irnd:
                    r = _round_int(r.astype(np.float64), irnd).astype(r.dtype)
            with np.errstate(all="ignore"):
                if dt_ == "f32":
                    if a_float and at == "f64":
                        r = r.astype(np.float32) if frnd == "rn" else round_f32(r, 0.0, frnd)
                    r = fz(np.asarray(r, np.float32))
                    if sat:
                        r = saturate(r)
                    d(cta, idx, r)
                elif dt_ == "f64":
                    d(cta, idx, np.asarray(r, np.float64))
                elif dt_ == "f16":
                    d(cta, idx, _to_half(r, "f16", frnd, relu, sat, satfinite).view(np.float16))
                else:  # bf16
                    d(cta, idx, _to_half(r, "bf16", frnd, relu, sat, satfinite))
            return
        if a_float:
            d(cta, idx, _to_int(x, dt_, irnd or "rzi"))
            return
        if sat:
            w = ptxtypes.width(dt_)
            lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if dk == "s" else (0, 2**w - 1)
            d(cta, idx, np.clip(x.astype(np.int64) if x.dtype != np.uint64 else x, lo, hi).astype(ptxtypes.dtype(dt_)))
            return
        # integer -> integer: sign- or zero-extend from the source type, then truncate.
        d(cta, idx, x.astype(ptxtypes.dtype(dt_)))

    return run


def _int64_to_f32(x: np.ndarray, mode: str) -> np.ndarray:
    big = x.astype(np.float64)
    back = np.array([int(v) for v in x.tolist()], dtype=object) - np.array(
        [int(v) for v in big.astype(object).tolist()], dtype=object)
    err = np.array([float(v) for v in back], np.float64)
    return round_f32(big, err, mode)


def _int64_to_f64_odd(x: np.ndarray) -> np.ndarray:
    """64-bit integers as float64 rounded to odd (an inexact value goes to whichever neighbour has
    an odd significand): with 53 bits against the 8 or 11 of bf16 and f16, rounding that once more,
    in any mode, gives what rounding the integer itself would (Boldo and Melquiond)."""
    near = x.astype(np.float64)
    err = np.array([int(v) - int(f) for v, f in zip(x.tolist(), near.tolist(), strict=True)], dtype=object)
    inexact = np.array([e != 0 for e in err], bool)
    if not inexact.any():
        return near
    toward = np.where(np.array([e > 0 for e in err], bool), np.inf, -np.inf)
    other = np.nextafter(near, toward)
    odd = (near.view(np.int64) & 1) == 1
    return np.where(inexact & ~odd, other, near)


# f16 and bf16: the bits of infinity and of the largest finite value
_HALF_LIMITS = {"f16": (np.uint16(0x7C00), np.uint16(0x7BFF)), "bf16": (np.uint16(0x7F80), np.uint16(0x7F7F))}


def _to_half(x: np.ndarray, t: str, mode: str, relu: bool, sat: bool, satfinite: bool) -> np.ndarray:
    """Values (float32, or float64 from f64 and integer sources) as f16 or bf16 bits under cvt's
    modifiers: ``.relu`` (a negative to 0, NaN kept), ``.sat`` (into [0, 1], NaN to +0), rounded
    once by ``mode``, then ``.satfinite`` (a result past the largest finite value, from an infinite
    input too, is that value with its sign; NaN stays NaN).

    A float64 is not first rounded to nearest float32, which could land it on a 16-bit tie (or
    round it up past the value ``.rz`` keeps): ``.rn`` goes through :meth:`half_alu.Format.rounded`
    (round to odd), a directed mode rounds to float32 in its own direction first, which twice
    rounds as once."""
    x = np.asarray(x)
    if x.dtype != np.float64:
        x = x.astype(np.float32)
    if relu:
        x = np.where(np.isnan(x), x, np.maximum(x, 0)).astype(x.dtype)
    if sat:
        x = saturate(x)
    if x.dtype == np.float64 and mode == "rn":
        bits = half_alu.Format(t == "bf16", False).rounded(x)
    else:
        if x.dtype == np.float64:
            x = round_f32(x, 0.0, mode)
        bits = (ptxtypes.f32_to_bf16 if t == "bf16" else ptxtypes.f32_to_f16)(x, mode)
    bits = bits.astype(np.uint16)
    if satfinite:
        inf, top = _HALF_LIMITS[t]
        bits = np.where((bits & np.uint16(0x7FFF)) == inf, (bits & np.uint16(0x8000)) | top, bits)
    return bits.astype(np.uint16)


def _cvt_pair(op: Op, ctx: Context, dt_: str, mode: str, relu: bool, sat: bool, satfinite: bool) -> Exec:
    """``cvt.rn.bf16x2.f32 d, a, b``: a converted into the upper half, b into the lower."""
    d = ctx.write(op.operands[0], "b32")
    a = ctx.read(op.operands[1], "f32")
    b = ctx.read(op.operands[2], "f32")
    t = dt_[:-2]

    def half(x: np.ndarray) -> np.ndarray:
        return _to_half(x, t, mode, relu, sat, satfinite).astype(np.uint32)

    def run(cta: Cta, idx: np.ndarray) -> None:
        hi = half(arr(a(cta, idx), idx.size, np.dtype(np.float32)))
        lo = half(arr(b(cta, idx), idx.size, np.dtype(np.float32)))
        d(cta, idx, (hi << np.uint32(16)) | lo)

    return run


_NARROW = frozenset(("tf32", "e4m3x2", "e5m2x2", "e2m3x2", "e3m2x2", "e2m1x2", "ue8m0x2"))
# destination -> (source types, rounding modes) the ISA's syntax allows
_TO_NARROW = {"e4m3x2": (("f32", "f16x2"), ("rn",)), "e5m2x2": (("f32", "f16x2"), ("rn",)),
              "e2m3x2": (("f32",), ("rn",)), "e3m2x2": (("f32",), ("rn",)), "e2m1x2": (("f32",), ("rn",)),
              "ue8m0x2": (("f32", "bf16x2"), ("rz", "rp"))}


def _cvt_narrow(op: Op, ctx: Context, dt_: str, at: str) -> Exec:
    """Conversions to and from tf32 and the packed narrow formats (module docstring for the order)."""
    relu, satfinite = "relu" in op.parts, "satfinite" in op.parts
    mode = next((p for p in op.parts if p in ("rn", "rz", "rp", "rna")), "")
    if dt_ == "tf32" and at == "f32" and mode in ("rna", "rn", "rz"):
        return _cvt_tf32(op, ctx, mode, satfinite, relu)
    sources, modes = _TO_NARROW.get(dt_, ((), ()))
    if at in sources and mode in modes:
        return _cvt_to_narrow(op, ctx, minifloat.FORMATS[dt_[:-2]], at, mode, satfinite, relu)
    if at in _NARROW and at != "tf32" and dt_ in ("f16x2", "bf16x2") and (dt_ == "bf16x2") == (at == "ue8m0x2"):
        return _cvt_from_narrow(op, ctx, minifloat.FORMATS[at[:-2]], dt_, relu)
    raise ValueError(f"cvt {'.'.join(op.parts[1:])}")


def _cvt_tf32(op: Op, ctx: Context, mode: str, satfinite: bool, relu: bool) -> Exec:
    d = ctx.write(op.operands[0], "b32")
    a = ctx.read(op.operands[1], "f32")

    def run(cta: Cta, idx: np.ndarray) -> None:
        d(cta, idx, minifloat.tf32_round(arr(a(cta, idx), idx.size, np.dtype(np.float32)), mode, satfinite, relu))

    return run


def _cvt_to_narrow(op: Op, ctx: Context, fmt: minifloat.MiniFloat, at: str, mode: str, satfinite: bool,
                   relu: bool) -> Exec:
    """Two values to a pair of codes, the first (``a``, or the upper half of a packed source) upper."""
    shift = np.uint32(4 if fmt.bits == 4 else 8)
    d = ctx.write(op.operands[0], "b8" if fmt.bits == 4 else "b16")
    srcs = [ctx.read(o, "f32" if at == "f32" else "b32") for o in op.operands[1:3 if at == "f32" else 2]]

    def run(cta: Cta, idx: np.ndarray) -> None:
        if at == "f32":
            hi, lo = (arr(s(cta, idx), idx.size, np.dtype(np.float32)).astype(np.float64) for s in srcs)
        else:
            pair = half_alu.Format.of(at)
            low, high = pair.split(arr(srcs[0](cta, idx), idx.size, np.dtype(np.uint32)))
            hi, lo = pair.value(high), pair.value(low)
        codes = [fmt.encode(v, mode, satfinite, relu).astype(np.uint32) for v in (hi, lo)]
        d(cta, idx, (codes[0] << shift) | codes[1])

    return run


def _cvt_from_narrow(op: Op, ctx: Context, fmt: minifloat.MiniFloat, dt_: str, relu: bool) -> Exec:
    """A pair of codes to f16x2 (bf16x2 for ue8m0x2), exactly; NaN to the canonical 0x7FFF."""
    shift = np.uint32(4 if fmt.bits == 4 else 8)
    mask = np.uint32((1 << fmt.bits) - 1)
    d = ctx.write(op.operands[0], "b32")
    a = ctx.read(op.operands[1], "b8" if fmt.bits == 4 else "b16")

    def half(codes: np.ndarray) -> np.ndarray:
        v = fmt.decode(codes & mask)
        if relu:
            v = np.where(np.isnan(v) | (v > 0), v, 0.0)
        bits = ptxtypes.f32_to_bf16(v.astype(np.float32)) if dt_ == "bf16x2" else \
            v.astype(np.float16).view(np.uint16)
        return np.where(np.isnan(v), np.uint16(0x7FFF), bits).astype(np.uint32)

    def run(cta: Cta, idx: np.ndarray) -> None:
        x = arr(a(cta, idx), idx.size, np.dtype(np.uint32)).astype(np.uint32)
        d(cta, idx, (half(x >> shift) << np.uint32(16)) | half(x))

    return run


@builder("cvta")
def _cvta(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    to = "to" in op.parts
    shared = any(p.startswith("shared") for p in op.parts)
    window = np.uint64(SHARED_WINDOW if shared else 0)
    w = ptxtypes.width(t)

    def fn(a: np.ndarray) -> np.ndarray:
        u = a.astype(np.uint64)
        r = u - window if to else u + window
        return r.astype(ptxtypes.UNSIGNED[w])

    return unary(op, ctx, fn, t)
