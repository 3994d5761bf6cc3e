"""Integer, floating-point, bit and comparison instructions (conversions are in convert.py).

Integer arithmetic wraps as PTX does (NumPy arrays wrap silently); shifts clamp their amount;
float32 add/sub/mul/fma/div honour the rounding modifier (:mod:`porter.emu.fp`) and ``.ftz``,
and write a NaN result as the GPU's canonical NaN 0x7FFFFFFF (as do sqrt, rcp, the other
``.approx`` functions and min/max);
the ``.approx`` functions (ex2, lg2, rcp, rsqrt, sqrt, sin, cos, tanh) are computed in float64
and rounded once, which lies inside every documented ``.approx`` error bound (the GPU's results
differ from them within that bound, not bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from porter.emu import half_alu, ptxtypes
from porter.emu.carry import product_halves
from porter.emu.context import Context, Exec, bool_op, builder, pred_pair_writers, type_suffix, types_of
from porter.emu.decode import Op
from porter.emu.fp import add_f32, canonical_nan, fma_f32, ftz, mul_f32, round_f32, saturate
from porter.emu.fp64 import directed_f64, fma_f64
from porter.emu.state import Cta

ROUNDING = ("rn", "rz", "rm", "rp")


def _mode(op: Op) -> str:
    return next((p for p in op.parts if p in ROUNDING), "rn")


def ftz_of(op: Op) -> Callable[[np.ndarray], np.ndarray]:
    return ftz if "ftz" in op.parts else (lambda x: x)


def arr(x: object, n: int, dtype: np.dtype) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype != dtype:
        a = a.astype(dtype)
    return np.broadcast_to(a, (n,)) if a.ndim == 0 else a


def unary(op: Op, ctx: Context, fn: Callable[[np.ndarray], np.ndarray], t: str | None = None) -> Exec:
    t = t or type_suffix(op)
    d = ctx.write(op.operands[0], t)
    a = ctx.read(op.operands[1], t)

    def run(cta: Cta, idx: np.ndarray) -> None:
        d(cta, idx, fn(arr(a(cta, idx), idx.size, ptxtypes.dtype(t))))

    return run


def _binary(op: Op, ctx: Context, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], t: str | None = None,
            bt: str | None = None, dt: str | None = None) -> Exec:
    t = t or type_suffix(op)
    d = ctx.write(op.operands[0], dt or t)
    a = ctx.read(op.operands[1], t)
    b = ctx.read(op.operands[2], bt or t)
    da, db = ptxtypes.dtype(t), ptxtypes.dtype(bt or t)

    def run(cta: Cta, idx: np.ndarray) -> None:
        d(cta, idx, fn(arr(a(cta, idx), idx.size, da), arr(b(cta, idx), idx.size, db)))

    return run


def _ternary(op: Op, ctx: Context, fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
             ts: tuple[str, str, str], dt: str) -> Exec:
    d = ctx.write(op.operands[0], dt)
    rs = [ctx.read(o, t) for o, t in zip(op.operands[1:4], ts, strict=True)]
    dts = [ptxtypes.dtype(t) for t in ts]

    def run(cta: Cta, idx: np.ndarray) -> None:
        a, b, c = (arr(r(cta, idx), idx.size, dt_) for r, dt_ in zip(rs, dts, strict=True))
        d(cta, idx, fn(a, b, c))

    return run


def _wide(t: str) -> str:
    return t[0] + str(2 * ptxtypes.width(t))


def _hi(a: np.ndarray, b: np.ndarray, t: str) -> np.ndarray:
    w = ptxtypes.width(t)
    if w < 32:
        wide = ptxtypes.dtype(_wide(t))
        return ((a.astype(wide) * b.astype(wide)) >> w).astype(a.dtype)
    return product_halves(a, b, t[0] == "s")[1].view(a.dtype)


def _float_binary(op: Op, ctx: Context, kind: str) -> Exec:
    t = type_suffix(op)
    mode, fz = _mode(op), ftz_of(op)
    sat = "sat" in op.parts
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    if t == "f32":
        if kind == "add":
            fn = lambda a, b: add_f32(fz(a), fz(b), mode)  # noqa: E731
        elif kind == "sub":
            fn = lambda a, b: add_f32(fz(a), -fz(b), mode)  # noqa: E731
        else:
            fn = lambda a, b: mul_f32(fz(a), fz(b), mode)  # noqa: E731
    elif t == "f64" and mode != "rn":
        fn = lambda a, b: directed_f64(kind, mode, a, b)  # noqa: E731
    elif t == "f64":
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[kind]
    elif t in half_alu.TYPES:
        return half_alu.arithmetic(op, ctx)
    else:
        raise ValueError(t)

    def out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = canonical_nan(fz(fn(a, b)))
        return saturate(r) if sat else r

    return _binary(op, ctx, out, t)


@builder("add", "sub")
def _addsub(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if t[0] in "fb" and t not in ("b32", "b64", "b16"):
        return _float_binary(op, ctx, op.parts[0])
    if "sat" in op.parts and t == "s32":
        sign = 1 if op.parts[0] == "add" else -1
        return _binary(op, ctx, lambda a, b: ptxtypes.saturate_s32(a.astype(np.int64) + sign * b.astype(np.int64)))
    return _binary(op, ctx, np.add if op.parts[0] == "add" else np.subtract)


@builder("mul")
def _mul(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if t[0] == "f" or t.startswith("bf"):
        return _float_binary(op, ctx, "mul")
    if "wide" in op.parts:
        wt = _wide(t)
        wd = ptxtypes.dtype(wt)
        return _binary(op, ctx, lambda a, b: a.astype(wd) * b.astype(wd), t, dt=wt)
    if "hi" in op.parts:
        return _binary(op, ctx, lambda a, b: _hi(a, b, t))
    return _binary(op, ctx, np.multiply)


@builder("mul24", "mad24")
def _mul24(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)

    def lo24(x: np.ndarray) -> np.ndarray:
        if t[0] == "s":
            return ((x.astype(np.int64) << 40) >> 40)
        return x.astype(np.int64) & 0xFFFFFF

    def prod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        p = lo24(a) * lo24(b)
        return ((p >> 16) if "hi" in op.parts else p).astype(np.int64).astype(ptxtypes.UNSIGNED[32]).view(a.dtype)

    if op.parts[0] == "mul24":
        return _binary(op, ctx, prod)
    if "sat" in op.parts:  # mad24.hi.sat.s32
        return _ternary(op, ctx, lambda a, b, c: ptxtypes.saturate_s32(prod(a, b).astype(np.int64) + c), (t, t, t), t)
    return _ternary(op, ctx, lambda a, b, c: prod(a, b) + c, (t, t, t), t)


@builder("mad")
def _mad(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if t[0] == "f":
        return _fma(op, ctx)
    if "wide" in op.parts:
        wt = _wide(t)
        wd = ptxtypes.dtype(wt)
        return _ternary(op, ctx, lambda a, b, c: a.astype(wd) * b.astype(wd) + c, (t, t, wt), wt)
    if "hi" in op.parts and "sat" in op.parts:  # mad.hi.sat.s32
        return _ternary(op, ctx, lambda a, b, c: ptxtypes.saturate_s32(_hi(a, b, t).astype(np.int64) + c), (t, t, t), t)
    if "hi" in op.parts:
        return _ternary(op, ctx, lambda a, b, c: _hi(a, b, t) + c, (t, t, t), t)
    return _ternary(op, ctx, lambda a, b, c: a * b + c, (t, t, t), t)


@builder("fma")
def _fma(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    mode, fz = _mode(op), ftz_of(op)
    sat = "sat" in op.parts
    if t in half_alu.TYPES:
        return half_alu.arithmetic(op, ctx)
    if t == "f64":
        f64 = fma_f64 if mode == "rn" else (lambda a, b, c: directed_f64("fma", mode, a, b, c))
        return _ternary(op, ctx, f64, (t, t, t), t)

    def f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        r = canonical_nan(fz(fma_f32(fz(a), fz(b), fz(c), mode)))
        return saturate(r) if sat else r

    return _ternary(op, ctx, f32, (t, t, t), t)


@builder("div")
def _div(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if t == "f32":
        mode, fz = _mode(op), ftz_of(op)

        def fdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                q = fz(a).astype(np.float64) / fz(b).astype(np.float64)
            return canonical_nan(fz(round_f32(q, 0.0, mode) if mode != "rn" else q.astype(np.float32)))

        return _binary(op, ctx, fdiv)
    if t == "f64":
        mode = _mode(op)
        return _binary(op, ctx, lambda a, b: np.divide(a, b) if mode == "rn" else directed_f64("div", mode, a, b))

    def idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        zero = b == 0
        safe = np.where(zero, 1, b).astype(a.dtype)
        if t[0] == "s":  # magnitudes as unsigned words (|MININT| is no int64), the sign put back
            wa, wb = a.astype(np.int64), safe.astype(np.int64)
            ma = np.where(wa < 0, ~wa.view(np.uint64) + np.uint64(1), wa.view(np.uint64))
            mb = np.where(wb < 0, ~wb.view(np.uint64) + np.uint64(1), wb.view(np.uint64))
            mq = ma // mb
            q = np.where((wa < 0) != (wb < 0), ~mq + np.uint64(1), mq).view(np.int64).astype(a.dtype)
        else:
            q = a // safe
        return np.where(zero, np.array(-1).astype(a.dtype) if t[0] == "s" else ~np.zeros_like(a), q).astype(a.dtype)

    return _binary(op, ctx, idiv)


@builder("rem")
def _rem(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)

    def irem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        safe = np.where(b == 0, 1, b).astype(a.dtype)
        r = np.fmod(a.astype(np.int64), safe.astype(np.int64)).astype(a.dtype) if t[0] == "s" else a % safe
        return np.where(b == 0, a, r).astype(a.dtype)

    return _binary(op, ctx, irem)


@builder("abs", "neg")
def _absneg(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    fz = ftz_of(op)
    if t in half_alu.TYPES:
        return half_alu.absneg(op, ctx)
    if op.parts[0] == "neg":
        return unary(op, ctx, lambda a: fz(np.negative(a)) if t[0] == "f" else np.negative(a))
    return unary(op, ctx, lambda a: fz(np.abs(a)))


def _fminmax(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], nan: bool, fz: Callable) -> Callable:
    def out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = fz(a), fz(b)
        r = fn(a, b)
        zero = (a == 0) & (b == 0)
        if np.any(zero):  # -0 < +0
            neg = np.signbit(a) | np.signbit(b) if fn is np.fmin else np.signbit(a) & np.signbit(b)
            r = np.where(zero, np.where(neg, -np.abs(r), np.abs(r)), r)
        if nan:
            r = np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), r)
        return canonical_nan(r.astype(a.dtype))

    return out


@builder("min", "max")
def _minmax(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if t in half_alu.TYPES:
        return half_alu.minmax(op, ctx)
    if t[0] == "f":
        return _float_minmax(op, ctx, t)
    return _binary(op, ctx, np.minimum if op.parts[0] == "min" else np.maximum)


def _float_minmax(op: Op, ctx: Context, t: str) -> Exec:
    """``min/max{.ftz}{.NaN}{.xorsign.abs}.f32 d, a, b`` and (sm_100) ``{.abs} d, a, b, c``:
    ``.abs`` compares magnitudes, ``.xorsign`` gives a non-NaN result the XOR of a's and b's signs."""
    pick = _fminmax(np.fmin if op.parts[0] == "min" else np.fmax, "NaN" in op.parts, ftz_of(op))
    absolute, xorsign = "abs" in op.parts, "xorsign" in op.parts

    def fn(*xs: np.ndarray) -> np.ndarray:
        ins = [np.abs(x) if absolute else x for x in xs]
        r = pick(ins[0], ins[1])
        if len(ins) == 3:
            r = pick(r, ins[2])
        if xorsign:
            negative = np.signbit(xs[0]) ^ np.signbit(xs[1])
            r = np.where(np.isnan(r), r, np.where(negative, -np.abs(r), np.abs(r))).astype(r.dtype)
        return r

    if len(op.operands) == 4:
        return _ternary(op, ctx, fn, (t, t, t), t)
    return _binary(op, ctx, fn)


@builder("and", "or", "xor")
def _logic(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op.parts[0]]
    return _binary(op, ctx, fn, t)


@builder("not", "cnot")
def _not(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    if op.parts[0] == "cnot":
        return unary(op, ctx, lambda a: (a == 0).astype(a.dtype))
    return unary(op, ctx, np.logical_not if t == "pred" else np.invert)


@builder("lop3")
def _lop3(op: Op, ctx: Context) -> Exec:
    d = ctx.write(op.operands[0], "b32")
    rs = [ctx.read(o, "b32") for o in op.operands[1:5]]

    def run(cta: Cta, idx: np.ndarray) -> None:
        a, b, c = (arr(r(cta, idx), idx.size, np.dtype(np.uint32)) for r in rs[:3])
        lut = int(np.asarray(rs[3](cta, idx)).reshape(-1)[0])
        out = np.zeros(idx.size, np.uint32)
        for i in range(8):
            if lut >> i & 1:
                term = (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
                out |= term
        d(cta, idx, out)

    return run


def _shift_amount(b: np.ndarray, w: int) -> np.ndarray:
    return np.minimum(b.astype(np.uint64), np.uint64(w))


@builder("shl", "shr")
def _shift(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    w = ptxtypes.width(t)
    u = ptxtypes.UNSIGNED[w]
    wide = np.dtype(np.uint64) if w < 64 else None

    def shl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = _shift_amount(b, w)
        if wide is not None:
            return (a.view(u).astype(np.uint64) << n).astype(u).view(a.dtype)
        return np.where(n >= 64, np.uint64(0), a.view(u) << np.minimum(n, np.uint64(63))).view(a.dtype)

    def shr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = _shift_amount(b, w)
        if t[0] == "s":
            return (a.astype(np.int64) >> np.minimum(n, np.uint64(63)).astype(np.int64)).astype(a.dtype)
        if wide is not None:
            return (a.view(u).astype(np.uint64) >> n).astype(u).view(a.dtype)
        return np.where(n >= 64, np.uint64(0), a.view(u) >> np.minimum(n, np.uint64(63))).view(a.dtype)

    return _binary(op, ctx, shl if op.parts[0] == "shl" else shr, t, bt="u32")


@builder("shf")
def _shf(op: Op, ctx: Context) -> Exec:
    left, clamp = "l" in op.parts, "clamp" in op.parts

    def fn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        n = np.minimum(c, 32) if clamp else c & 31
        n = n.astype(np.uint64)
        pair = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
        if left:
            return ((pair << n) >> np.uint64(32)).astype(np.uint32)
        return ((pair >> n) & np.uint64(0xFFFFFFFF)).astype(np.uint32)

    return _ternary(op, ctx, fn, ("b32", "b32", "u32"), "b32")


@builder("bfe")
def _bfe(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    w = ptxtypes.width(t)

    def fn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        # The ISA's definition: bit i of d is a[pos + i] while i < len and pos + i <= msb, else the
        # sign bit (a[msb] if the field reaches past it, else a[pos + len - 1]) or 0; len 0 gives 0.
        one, full = np.uint64(1), np.uint64(2**w - 1 if w < 64 else 2**64 - 1)
        pos = b.astype(np.int64) & 0xFF
        ln = c.astype(np.int64) & 0xFF
        x = a.view(ptxtypes.UNSIGNED[w]).astype(np.uint64)
        taken = np.clip(np.minimum(ln, w - pos), 0, w).astype(np.uint64)
        mask = np.where(taken >= 64, full, (one << np.minimum(taken, 63)) - one) & full
        field = np.where(pos >= w, np.uint64(0), x >> np.minimum(pos, w - 1).astype(np.uint64)) & mask
        if t[0] == "s":
            top = np.minimum(pos + ln - 1, w - 1).clip(0).astype(np.uint64)
            sign = ((x >> top) & one) == one
            field = np.where(sign, field | (~mask & full), field)
        return np.where(ln == 0, np.uint64(0), field).astype(ptxtypes.UNSIGNED[w]).view(a.dtype)

    return _ternary(op, ctx, fn, (t, "u32", "u32"), t)


@builder("bfi")
def _bfi(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    w = ptxtypes.width(t)
    d = ctx.write(op.operands[0], t)
    rs = [ctx.read(o, tt) for o, tt in zip(op.operands[1:5], (t, t, "u32", "u32"), strict=True)]

    def run(cta: Cta, idx: np.ndarray) -> None:
        a, b, c, e = (arr(r(cta, idx), idx.size, np.dtype(np.uint64)) for r in rs)
        pos = np.minimum(c & np.uint64(0xFF), np.uint64(w))
        ln = np.minimum(e & np.uint64(0xFF), np.uint64(w))
        mask = ((np.uint64(1) << ln) - np.uint64(1)) << pos
        mask = np.where(ln >= 64, ~np.uint64(0) << pos, mask)
        out = (b & ~mask) | ((a << pos) & mask)
        d(cta, idx, out.astype(ptxtypes.UNSIGNED[w]))

    return run


@builder("popc", "clz", "brev", "bfind")
def _bits(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    w = ptxtypes.width(t)
    name = op.parts[0]

    def fn(a: np.ndarray) -> np.ndarray:
        u = a.view(ptxtypes.UNSIGNED[w]).astype(np.uint64)
        if name == "brev":
            out = np.zeros_like(u)
            for i in range(w):
                out |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(w - 1 - i)
            return out.astype(ptxtypes.UNSIGNED[w])
        bits = np.array([[(int(x) >> i) & 1 for i in range(w)] for x in u.tolist()], np.uint8).reshape(-1, w)
        if name == "popc":
            return bits.sum(axis=1).astype(np.uint32)
        high = np.where(bits.any(axis=1), w - 1 - np.argmax(bits[:, ::-1], axis=1), -1)
        if name == "clz":
            return np.where(high < 0, w, w - 1 - high).astype(np.uint32)
        if t[0] == "s":  # bfind.s: the highest bit that differs from the sign bit
            s = a.astype(np.int64)
            flipped = np.where(s < 0, ~s, s).astype(np.uint64)
            high = _bits_high(flipped, w).astype(np.int64)
            high = np.where(high == 0xFFFFFFFF, -1, high)
        if "shiftamt" in op.parts:  # the left shift that brings that bit to the top
            high = np.where(high < 0, -1, w - 1 - high)
        return np.where(high < 0, 0xFFFFFFFF, high).astype(np.uint32)

    return _unary_to(op, ctx, fn, t, "b32" if name != "brev" else t)


def _bits_high(u: np.ndarray, w: int) -> np.ndarray:
    out = np.full(u.shape, 0xFFFFFFFF, np.uint32)
    for i in range(w):
        out = np.where((u >> np.uint64(i)) & np.uint64(1), np.uint32(i), out)
    return out


def _unary_to(op: Op, ctx: Context, fn: Callable[[np.ndarray], np.ndarray], t: str, dt: str) -> Exec:
    d = ctx.write(op.operands[0], dt)
    a = ctx.read(op.operands[1], t)

    def run(cta: Cta, idx: np.ndarray) -> None:
        d(cta, idx, fn(arr(a(cta, idx), idx.size, ptxtypes.dtype(t))))

    return run


# prmt's modes: for c[1:0] = 0..3, the source byte (of {b, a}) of d's bytes 0..3 (PTX ISA, prmt)
_PRMT_MODES = {
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


@builder("prmt")
def _prmt(op: Op, ctx: Context) -> Exec:
    """Bytes of {b, a} picked by c: four 4-bit selectors (bit 3 replicating the byte's sign), or
    with a mode one of its four fixed patterns chosen by c[1:0]."""
    mode = next((p for p in op.parts[2:] if p in _PRMT_MODES), "")
    table = np.array(_PRMT_MODES[mode], np.uint64) if mode else None

    def fn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        src = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
        c = c.astype(np.uint32)
        out = np.zeros(a.shape, np.uint32)
        for i in range(4):
            if table is not None:
                sel = table[(c & np.uint32(3)).astype(np.intp), i]
                byte = (src >> (sel * np.uint64(8))) & np.uint64(0xFF)
            else:
                nibble = (c >> np.uint32(4 * i)) & np.uint32(0xF)
                byte = (src >> ((nibble & 7).astype(np.uint64) * np.uint64(8))) & np.uint64(0xFF)
                sign = (byte >> np.uint64(7)) & np.uint64(1)
                byte = np.where(nibble & 8, sign * np.uint64(0xFF), byte)
            out |= byte.astype(np.uint32) << np.uint32(8 * i)
        return out

    return _ternary(op, ctx, fn, ("b32", "b32", "b32"), "b32")


@builder("fns")
def _fns(op: Op, ctx: Context) -> Exec:
    """``fns.b32 d, mask, base, offset``: the position of the offset-th set bit of mask counted
    from bit base upward (offset > 0) or downward (offset < 0); offset 0 asks whether bit base
    itself is set; 0xffffffff where there is none."""

    def fn(mask: np.ndarray, base: np.ndarray, offset: np.ndarray) -> np.ndarray:
        pos = np.arange(32)
        bits = ((mask.astype(np.uint64)[:, None] >> pos.astype(np.uint64)) & np.uint64(1)).astype(bool)
        b, off = base.astype(np.int64)[:, None], offset.astype(np.int64)
        up = bits & (pos >= b)
        down = bits & (pos <= b)
        count_up = np.cumsum(up, axis=1)  # set bits in [base, p]
        count_down = np.cumsum(down[:, ::-1], axis=1)[:, ::-1]  # set bits in [p, base]
        hit = np.where(off[:, None] > 0, up & (count_up == off[:, None]),
                       np.where(off[:, None] < 0, down & (count_down == -off[:, None]), bits & (pos == b)))
        return np.where(hit.any(axis=1), np.argmax(hit, axis=1), -1).astype(np.int64).astype(np.uint32)

    return _ternary(op, ctx, fn, ("b32", "u32", "s32"), "b32")


@builder("bmsk")
def _bmsk(op: Op, ctx: Context) -> Exec:
    """``bmsk.{clamp,wrap}.b32 d, a, b``: b ones from bit a (PTX ISA semantics: 0 where a >= 32
    under .clamp; the width wraps mod 32 under .wrap and saturates at 32 under .clamp)."""
    clamp = "clamp" in op.parts

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        a1, b1 = a64 & 31, b64 & 31
        ones = np.int64(0xFFFFFFFF)
        mask0 = (ones << a1) & ones
        top = a1 + b1
        mask1 = (ones << np.minimum(top, 63)) & ones
        overflow = top >= 32
        if clamp:
            mask0 = np.where(a64 >= 32, 0, mask0)
            overflow |= (a64 >= 32) | (b64 >= 32)
        mask1 = np.where(overflow, 0, np.where(b1 == 0, ones, mask1))
        return (mask0 & ~mask1 & ones).astype(np.uint32)

    return _binary(op, ctx, fn, "b32", bt="u32")


@builder("szext")
def _szext(op: Op, ctx: Context) -> Exec:
    """``szext.{clamp,wrap}.{u32,s32} d, a, b``: a's low b bits, sign- (.s32) or zero-extended;
    b = 0 gives 0; b >= 32 gives a (.clamp) or uses b mod 32 (.wrap)."""
    clamp, signed = "clamp" in op.parts, type_suffix(op) == "s32"

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ua, b64 = a.view(np.uint32).astype(np.int64), b.astype(np.int64)
        b1 = b64 & 31
        too_large = (b64 >= 32) & clamp
        ones = np.int64(0xFFFFFFFF)
        mask = np.where(too_large, 0, (ones << b1) & ones)
        sign = ((ua >> ((b1 - 1) & 31)) & 1).astype(bool) & (b1 != 0) & ~too_large & signed
        return ((ua & ~mask & ones) | np.where(sign, mask, 0)).astype(np.uint32).view(a.dtype)

    return _binary(op, ctx, fn, type_suffix(op), bt="u32")


_CMP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _compare(cmp: str, t: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if t[0] != "f":
        if cmp in ("lo", "ls", "hi", "hs") and t[0] == "s":
            return lambda a, b: _CMP[cmp](a.view(ptxtypes.UNSIGNED[a.dtype.itemsize * 8]),
                                          b.view(ptxtypes.UNSIGNED[b.dtype.itemsize * 8]))
        return _CMP[cmp]
    if cmp == "num":
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if cmp == "nan":
        return lambda a, b: np.isnan(a) | np.isnan(b)
    if cmp.endswith("u") and cmp[:-1] in _CMP:
        base = _CMP[cmp[:-1]]
        return lambda a, b: base(a, b) | np.isnan(a) | np.isnan(b)
    base = _CMP[cmp]
    if cmp == "ne":
        return lambda a, b: (a != b) & ~(np.isnan(a) | np.isnan(b))
    return base


@builder("setp", "set")
def _setp(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    cmp = op.parts[1]
    if t in half_alu.TYPES:
        return half_alu.compare(op, ctx, _compare(cmp, "f64"))
    fz = ftz_of(op)
    fn = _compare(cmp, t)
    a = ctx.read(op.operands[1], t)
    b = ctx.read(op.operands[2], t)
    combine, c = bool_op(op, ctx) or (None, None)
    dt = ptxtypes.dtype(t)
    if op.parts[0] == "set":
        out_t = types_of(op)[0]
        d = ctx.write(op.operands[0], out_t)
        true = half_alu.set_true(out_t)

        def run_set(cta: Cta, idx: np.ndarray) -> None:
            with np.errstate(invalid="ignore"):
                r = fn(fz(arr(a(cta, idx), idx.size, dt)), fz(arr(b(cta, idx), idx.size, dt)))
            if combine is not None and c is not None:
                r = combine(r, c(cta, idx))
            d(cta, idx, np.where(r, true, true.dtype.type(0)))

        return run_set
    p, q = pred_pair_writers(ctx, op.operands[0])

    def run(cta: Cta, idx: np.ndarray) -> None:
        with np.errstate(invalid="ignore"):
            r = fn(fz(arr(a(cta, idx), idx.size, dt)), fz(arr(b(cta, idx), idx.size, dt)))
        r = np.broadcast_to(r, (idx.size,))
        if combine is not None and c is not None:
            cv = c(cta, idx)
            p(cta, idx, combine(r, cv))
            if q is not None:
                q(cta, idx, combine(~r, cv))
            return
        p(cta, idx, r)
        if q is not None:
            q(cta, idx, ~r)

    return run


@builder("selp", "slct")
def _selp(op: Op, ctx: Context) -> Exec:
    ts = types_of(op)
    t = ts[0]
    d = ctx.write(op.operands[0], t)
    a = ctx.read(op.operands[1], t)
    b = ctx.read(op.operands[2], t)
    dt = ptxtypes.dtype(t)
    if op.parts[0] == "slct":
        ct = ts[1]
        c = ctx.read(op.operands[3], ct)
        fz = ftz_of(op)

        def run_slct(cta: Cta, idx: np.ndarray) -> None:
            cv = arr(c(cta, idx), idx.size, ptxtypes.dtype(ct))
            d(cta, idx, np.where(fz(cv) >= 0, arr(a(cta, idx), idx.size, dt), arr(b(cta, idx), idx.size, dt)))

        return run_slct
    c = ctx.read(op.operands[3], "pred")

    def run(cta: Cta, idx: np.ndarray) -> None:
        d(cta, idx, np.where(c(cta, idx), arr(a(cta, idx), idx.size, dt), arr(b(cta, idx), idx.size, dt)))

    return run


@builder("mov")
def _mov(op: Op, ctx: Context) -> Exec:
    from porter.emu.decode import Vec

    t = type_suffix(op)
    dst, src = op.operands[0], op.operands[1]
    if isinstance(dst, Vec) or isinstance(src, Vec):
        return _pack_unpack(op, ctx, t)
    return unary(op, ctx, lambda a: a, t)


def _pack_unpack(op: Op, ctx: Context, t: str) -> Exec:
    """``mov.b64 {lo, hi}, x`` and ``mov.b64 x, {lo, hi}``: element 0 is the low part."""
    from porter.emu.decode import Vec

    dst, src = op.operands[0], op.operands[1]
    w = ptxtypes.width(t)
    if isinstance(src, Vec):
        n = len(src.items)
        pw = w // n
        rs = [ctx.read(o, f"b{pw}") for o in src.items]
        d = ctx.write(dst, t)

        def pack(cta: Cta, idx: np.ndarray) -> None:
            out = np.zeros(idx.size, np.uint64)
            for i, r in enumerate(rs):
                out |= arr(r(cta, idx), idx.size, ptxtypes.UNSIGNED[pw]).astype(np.uint64) << np.uint64(i * pw)
            d(cta, idx, out.astype(ptxtypes.UNSIGNED[w]))

        return pack
    assert isinstance(dst, Vec)
    n = len(dst.items)
    pw = w // n
    ws = [ctx.write(o, f"b{pw}") for o in dst.items]
    a = ctx.read(src, t)

    def unpack(cta: Cta, idx: np.ndarray) -> None:
        v = arr(a(cta, idx), idx.size, ptxtypes.UNSIGNED[w]).astype(np.uint64)
        for i, wr in enumerate(ws):
            wr(cta, idx, ((v >> np.uint64(i * pw)) & np.uint64((1 << pw) - 1)).astype(ptxtypes.UNSIGNED[pw]))

    return unpack


_APPROX: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ex2": np.exp2, "lg2": np.log2, "rcp": lambda x: 1.0 / x, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
}


@builder("ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos", "tanh")
def _special_fn(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    fn = _APPROX[op.parts[0]]
    fz = ftz_of(op)
    mode = _mode(op)
    if t in half_alu.TYPES:
        if op.parts[0] not in ("ex2", "tanh"):
            raise ValueError(f"{op.parts[0]}.{t}")
        return half_alu.approx(op, ctx, fn)

    def run(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = fn(fz(a).astype(np.float64))
            if t == "f64":
                return r
            if "approx" in op.parts or mode == "rn":
                return canonical_nan(fz(r.astype(np.float32)))
            return canonical_nan(fz(round_f32(r, 0.0, mode)))

    return unary(op, ctx, run, t)


@builder("copysign")
def _copysign(op: Op, ctx: Context) -> Exec:
    return _binary(op, ctx, lambda a, b: np.copysign(b, a))


@builder("testp")
def _testp(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    what = op.parts[1]
    tiny = np.finfo(ptxtypes.dtype(t)).tiny
    tests: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x), "notanumber": np.isnan,
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= tiny),
        "subnormal": lambda x: (np.abs(x) < tiny) & (x != 0),
    }
    d = ctx.write(op.operands[0], "pred")
    a = ctx.read(op.operands[1], t)
    return lambda cta, idx: d(cta, idx, tests[what](arr(a(cta, idx), idx.size, ptxtypes.dtype(t))))
