"""Extended-precision integer arithmetic (PTX ISA 9.7.2): ``add.cc``, ``addc``, ``sub.cc``,
``subc``, ``mad.cc``, ``madc`` and the condition code's carry flag they pass along.

``CC.CF`` is one bit per thread, kept as a predicate register the program cannot name. An
instruction with ``.cc`` (and ``add.cc``/``sub.cc``/``mad.cc`` always) writes it: the carry out of
the unsigned addition, or for subtraction the borrow (the flag is set when ``a < b + CF``), the
same for the signed and the unsigned types. ``addc``/``subc``/``madc`` read it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from porter.emu import ptxtypes
from porter.emu.context import Context, Exec, builder, type_suffix
from porter.emu.decode import Op, Reg
from porter.emu.state import Cta

CARRY = Reg("%cc.cf")  # not a PTX identifier: no program register can share it
_LOW32 = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def product_halves(a: np.ndarray, b: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """The low and high halves (each as wide as ``a``, unsigned) of the exact product ``a * b``
    of two 32- or 64-bit integer arrays, read as signed or unsigned."""
    w = a.dtype.itemsize * 8
    u = ptxtypes.UNSIGNED[w]
    if w == 32:
        wide = a.astype(np.int64) * b.astype(np.int64) if signed else a.astype(np.uint64) * b.astype(np.uint64)
        p = wide.view(np.uint64)
        return (p & _LOW32).astype(u), (p >> _32).astype(u)
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    a0, a1, b0, b1 = ua & _LOW32, ua >> _32, ub & _LOW32, ub >> _32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _32) + (p01 & _LOW32) + (p10 & _LOW32)
    lo = (p00 & _LOW32) | (mid << _32)
    hi = p11 + (p01 >> _32) + (p10 >> _32) + (mid >> _32)
    if signed:  # two's complement: subtract b * 2^64 where a < 0 and a * 2^64 where b < 0
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return lo, hi


def _add_carry(x: np.ndarray, y: np.ndarray, cf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x + y + cf (unsigned, wrapping) and the carry out."""
    s = x + y
    t = s + cf.astype(x.dtype)
    return t, (s < x) | (t < s)


def _sub_borrow(x: np.ndarray, y: np.ndarray, cf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x - (y + cf) (unsigned, wrapping) and the borrow out."""
    return x - y - cf.astype(x.dtype), (x < y) | ((x == y) & cf)


CarryFn = Callable[[list[np.ndarray], np.ndarray, np.dtype], tuple[np.ndarray, np.ndarray]]


def _carry_op(op: Op, ctx: Context, n_in: int, fn: CarryFn) -> Exec:
    """An instruction computing (result, carry out) by ``fn(sources, carry in, unsigned dtype)``;
    only ``addc``/``subc``/``madc`` read the flag, only ``.cc`` forms write it."""
    t = type_suffix(op)
    u = ptxtypes.UNSIGNED[ptxtypes.width(t)]
    d = ctx.write(op.operands[0], t)
    rs = [ctx.read(o, t) for o in op.operands[1 : 1 + n_in]]
    reads = op.parts[0] in ("addc", "subc", "madc")
    writes = "cc" in op.parts
    cf_in = ctx.read(CARRY, "pred")
    cf_out = ctx.write(CARRY, "pred")

    def run(cta: Cta, idx: np.ndarray) -> None:
        vals = [np.broadcast_to(np.asarray(r(cta, idx), ptxtypes.dtype(t)), idx.shape) for r in rs]
        cf = cf_in(cta, idx) if reads else np.zeros(idx.size, bool)
        out, carry = fn(vals, cf, u)
        d(cta, idx, out.view(ptxtypes.dtype(t)))
        if writes:
            cf_out(cta, idx, carry)

    return run


@builder("add.cc", "addc")
def _add(op: Op, ctx: Context) -> Exec:
    return _carry_op(op, ctx, 2, lambda v, cf, u: _add_carry(v[0].view(u), v[1].view(u), cf))


@builder("sub.cc", "subc")
def _sub(op: Op, ctx: Context) -> Exec:
    return _carry_op(op, ctx, 2, lambda v, cf, u: _sub_borrow(v[0].view(u), v[1].view(u), cf))


@builder("mad.lo.cc", "mad.hi.cc", "madc")
def _mad(op: Op, ctx: Context) -> Exec:
    """The low or high half of a * b, plus c and the carry in (``madc``)."""
    high = "hi" in op.parts
    signed = type_suffix(op)[0] == "s"

    def fn(v: list[np.ndarray], cf: np.ndarray, u: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = product_halves(v[0], v[1], signed)
        return _add_carry(hi if high else lo, v[2].view(u), cf)

    return _carry_op(op, ctx, 3, fn)
