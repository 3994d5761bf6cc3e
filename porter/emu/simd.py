"""Integer SIMD within a register: the video instructions ``vadd2 ... vset4`` (PTX ISA 9.7.18.2),
``dp4a``/``dp2a``, ``sad``, the 16-bit pair forms of add/min/max (with ``.relu``) and
``cvt.pack.sat``.

A register is a row of lanes (two half-words or four bytes, lane 0 lowest). Every instruction
here widens its lanes to int64, computes there, and packs the low bits of each lane back, so
wrap-around, saturation and sign extension all read as the ISA writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from porter.emu import ptxtypes
from porter.emu.context import Context, Exec, Reader, builder, type_suffix
from porter.emu.decode import Op, Operand, Reg
from porter.emu.state import Cta

Ints = np.ndarray  # int64 lanes, shape (threads, lanes)


def lanes(v: np.ndarray, n: int, signed: bool) -> Ints:
    """The ``n`` lanes of 32-bit values, zero- or sign-extended to int64, lane 0 first."""
    bits = 32 // n
    u = np.asarray(v).astype(np.uint32).astype(np.int64)
    out = np.stack([(u >> (bits * k)) & ((1 << bits) - 1) for k in range(n)], axis=-1)
    if signed:
        out = np.where(out >= 1 << (bits - 1), out - (1 << bits), out)
    return out


def packed(lanes_: Ints) -> np.ndarray:
    """32-bit values from lanes (each truncated to its width)."""
    n = lanes_.shape[-1]
    bits = 32 // n
    out = np.zeros(lanes_.shape[:-1], np.int64)
    for k in range(n):
        out |= (lanes_[..., k] & ((1 << bits) - 1)) << (bits * k)
    return out.astype(np.uint32)


def _read32(ctx: Context, operand: Operand) -> Reader:
    r = ctx.read(operand, "b32")
    return lambda cta, idx: np.broadcast_to(np.asarray(r(cta, idx)), idx.shape)


# ----------------------------------------------------------------------------- video SIMD

_SELECTOR = re.compile(r"(.+)\.([hb])(\d+)$")
_VIDEO_CMP: dict[str, Callable[[Ints, Ints], Ints]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}


def _setter(cmp: Callable[[Ints, Ints], np.ndarray]) -> Callable[[Ints, Ints], Ints]:
    return lambda a, b: cmp(a, b).astype(np.int64)


def _avrg(a: Ints, b: Ints) -> Ints:
    s = a + b
    return np.where(s >= 0, (s + 1) >> 1, s >> 1)


_VIDEO_OPS: dict[str, Callable[[Ints, Ints], Ints]] = {
    "vadd": np.add, "vsub": np.subtract, "vavrg": _avrg, "vabsdiff": lambda a, b: np.abs(a - b),
    "vmin": np.minimum, "vmax": np.maximum,
}


def _selected(operand: Operand) -> tuple[Operand, list[int] | None]:
    """``%r1.h10`` / ``%r2.b7654`` -> the register and the digits, lane 0's first (the suffix
    names the highest lane first)."""
    if isinstance(operand, Reg):
        m = _SELECTOR.match(operand.name)
        if m:
            return Reg(m.group(1)), [int(c) for c in reversed(m.group(3))]
    return operand, None


@builder(*(f"{base}{n}" for base in (*_VIDEO_OPS, "vset") for n in (2, 4)))
def _video(op: Op, ctx: Context) -> Exec:
    """``vop{2,4}.dtype.atype.btype{.sat|.add} d{.mask}, a{.asel}, b{.bsel}, c`` and
    ``vset{2,4}.atype.btype.cmp{.add}``: lanes picked from the pool {b, a} by the selectors,
    combined, optionally saturated to the lane's range; then either merged with c's lanes (lanes
    outside the mask come from c) or, with ``.add``, the masked lanes summed onto c."""
    base, n = op.parts[0][:-1], int(op.parts[0][-1])
    types = [p for p in op.parts[1:] if p in ("u32", "s32")]
    signs = [t == "s32" for t in types]
    if base == "vset":
        fn = _setter(_VIDEO_CMP[next(p for p in op.parts if p in _VIDEO_CMP)])
        d_signed, a_signed, b_signed = False, *signs
    else:
        fn = _VIDEO_OPS[base]
        d_signed, a_signed, b_signed = signs
    accumulate, sat = "add" in op.parts, "sat" in op.parts
    dest, mask_digits = _selected(op.operands[0])
    a_op, a_sel = _selected(op.operands[1])
    b_op, b_sel = _selected(op.operands[2])
    a_sel = a_sel or list(range(n))  # .h10 / .b3210
    b_sel = b_sel or list(range(n, 2 * n))  # .h32 / .b7654
    mask = np.isin(np.arange(n), mask_digits if mask_digits is not None else range(n))
    bits = 32 // n
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if d_signed else (0, (1 << bits) - 1)
    d = ctx.write(dest, "b32")
    a, b, c = _read32(ctx, a_op), _read32(ctx, b_op), _read32(ctx, op.operands[3])

    def pool(av: np.ndarray, bv: np.ndarray, signed: bool) -> Ints:
        return np.concatenate([lanes(av, n, signed), lanes(bv, n, signed)], axis=-1)

    def run(cta: Cta, idx: np.ndarray) -> None:
        av, bv, cv = a(cta, idx), b(cta, idx), c(cta, idx)
        t = fn(pool(av, bv, a_signed)[:, a_sel], pool(av, bv, b_signed)[:, b_sel])
        if sat:
            t = np.clip(t, lo, hi)
        if accumulate:
            d(cta, idx, (cv.astype(np.int64) + (t * mask).sum(axis=1)).astype(np.uint32))
        else:
            d(cta, idx, packed(np.where(mask, t, lanes(cv, n, False))))

    return run


# ----------------------------------------------------------------------------- dot products, sad


@builder("dp4a", "dp2a")
def _dot(op: Op, ctx: Context) -> Exec:
    """``dp4a.atype.btype d, a, b, c``: c + the four byte products; ``dp2a.{lo,hi}``: c + a's two
    half-words times b's low (``.lo``) or high (``.hi``) two bytes. Wraps at 32 bits."""
    a_signed, b_signed = (t == "s32" for t in op.parts[-2:])
    four = op.parts[0] == "dp4a"
    first = 2 if op.parts[1] == "hi" else 0
    d = ctx.write(op.operands[0], "b32")
    a, b, c = (_read32(ctx, o) for o in op.operands[1:4])

    def run(cta: Cta, idx: np.ndarray) -> None:
        vb = lanes(b(cta, idx), 4, b_signed)
        va = lanes(a(cta, idx), 4 if four else 2, a_signed)
        products = va * (vb if four else vb[:, first : first + 2])
        d(cta, idx, (c(cta, idx).astype(np.int64) + products.sum(axis=1)).astype(np.uint32))

    return run


@builder("sad")
def _sad(op: Op, ctx: Context) -> Exec:
    """``sad.type d, a, b, c``: c + (a < b ? b - a : a - b), compared as the type, the
    differences and the sum wrapping at its width."""
    t = type_suffix(op)
    u = ptxtypes.UNSIGNED[ptxtypes.width(t)]
    d = ctx.write(op.operands[0], t)
    rs = [ctx.read(o, t) for o in op.operands[1:4]]

    def run(cta: Cta, idx: np.ndarray) -> None:
        a, b, c = (np.broadcast_to(np.asarray(r(cta, idx), ptxtypes.dtype(t)), idx.shape) for r in rs)
        ua, ub = a.view(u), b.view(u)
        d(cta, idx, (c.view(u) + np.where(a < b, ub - ua, ua - ub)).view(a.dtype))

    return run


# ----------------------------------------------------------------------------- 16-bit pairs and .relu


@builder("add.u16x2", "add.s16x2", "min.u16x2", "min.s16x2", "max.u16x2", "max.s16x2", "min.relu", "max.relu")
def _pairs(op: Op, ctx: Context) -> Exec:
    """add/min/max on ``.u16x2``/``.s16x2`` (each half-word on its own; add wraps) and
    ``min/max.relu`` on ``.s16x2`` and ``.s32`` (a negative result becomes 0)."""
    pair = next((p for p in op.parts if p in ("u16x2", "s16x2")), None)
    if pair is None and type_suffix(op) != "s32":
        raise ValueError(f"{op.opcode}: .relu needs .s32 or .s16x2")
    n = 2 if pair else 1
    signed = pair != "u16x2"
    fn = {"add": np.add, "min": np.minimum, "max": np.maximum}[op.parts[0]]
    relu = "relu" in op.parts
    d = ctx.write(op.operands[0], "b32")
    a, b = _read32(ctx, op.operands[1]), _read32(ctx, op.operands[2])

    def run(cta: Cta, idx: np.ndarray) -> None:
        r = fn(lanes(a(cta, idx), n, signed), lanes(b(cta, idx), n, signed))
        d(cta, idx, packed(np.maximum(r, 0) if relu else r))

    return run


# ----------------------------------------------------------------------------- cvt.pack.sat

_PACK_TYPES = ("u2", "s2", "u4", "s4", "u8", "s8", "u16", "s16")


@builder("cvt.pack")
def _cvt_pack_sat(op: Op, ctx: Context) -> Exec:
    """``cvt.pack.sat.{u16,s16}.s32 d, a, b`` and ``cvt.pack.sat.{u2,s2,u4,s4,u8,s8}.s32.b32 d,
    a, b, c``: b saturated to the narrow type in d's low field, a in the field above, and the bits
    above those two from c's low bits (PTX ISA, cvt.pack)."""
    kind = next(p for p in op.parts if p in _PACK_TYPES)
    bits, signed = int(kind[1:]), kind[0] == "s"
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    field = (1 << bits) - 1
    d = ctx.write(op.operands[0], "b32")
    a, b = (ctx.read(o, "s32") for o in op.operands[1:3])
    c = _read32(ctx, op.operands[3]) if bits < 16 else None

    def run(cta: Cta, idx: np.ndarray) -> None:
        av, bv = (np.broadcast_to(np.asarray(r(cta, idx)), idx.shape).astype(np.int64) for r in (a, b))
        out = (np.clip(bv, lo, hi) & field) | ((np.clip(av, lo, hi) & field) << bits)
        if c is not None:
            out |= c(cta, idx).astype(np.int64) << (2 * bits)
        d(cta, idx, (out & 0xFFFFFFFF).astype(np.uint32))

    return run
