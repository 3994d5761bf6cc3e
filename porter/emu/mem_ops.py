"""ld, st, atom, red, mapa, isspacep, prefetch: the plain memory instructions."""

from __future__ import annotations

import numpy as np

from porter.emu import half_alu, ptxtypes
from porter.emu.access import load, space_of, store
from porter.emu.context import Context, Exec, builder, type_suffix
from porter.emu.decode import Op
from porter.emu.fp import two_sum
from porter.emu.memory import RANK_SHIFT, SHARED_OFFSET_MASK, SHARED_WINDOW, WINDOWS
from porter.emu.state import Cta

_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "const", "param::entry",
           "param::func")


def space(op: Op, default: str = "generic") -> str:
    for p in op.parts[1:]:
        if p in _SPACES:
            return "param" if p.startswith("param") else p
    return default


def vec_count(op: Op) -> int:
    for p in op.parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1])
    return 1


def _bytes_of(values: np.ndarray, t: str) -> np.ndarray:
    w = max(ptxtypes.width(t), 8) // 8
    v = np.ascontiguousarray(values)
    return v.view(np.uint8).reshape(-1, w)


@builder("ld", "ldu")
def _ld(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    n = vec_count(op)
    sp = space(op)
    w = ptxtypes.width(t) // 8
    dests = ctx.vector(op.operands[0])
    writers = [ctx.write(d, t) for d in dests]
    addr = ctx.address(op.operands[1], sp)
    dt = ptxtypes.dtype(t)
    line = op.line
    if n != len(dests):
        raise ValueError("vector width does not match its registers")

    def run(cta: Cta, idx: np.ndarray) -> None:
        raw = load(cta, sp, addr(cta, idx), w * n, idx, line)
        vals = np.ascontiguousarray(raw).view(ptxtypes.UNSIGNED[8 * w]).view(dt).reshape(idx.size, n)
        for i, wr in enumerate(writers):
            wr(cta, idx, vals[:, i])

    return run


@builder("st")
def _st(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    n = vec_count(op)
    sp = space(op)
    w = ptxtypes.width(t) // 8
    srcs = ctx.vector(op.operands[1])
    readers = [ctx.read(s, t) for s in srcs]
    addr = ctx.address(op.operands[0], sp)
    u = ptxtypes.UNSIGNED[8 * w]
    line = op.line
    if n != len(srcs):
        raise ValueError("vector width does not match its registers")

    def run(cta: Cta, idx: np.ndarray) -> None:
        vals = np.empty((idx.size, n), u)
        for i, r in enumerate(readers):
            vals[:, i] = np.broadcast_to(np.asarray(r(cta, idx)), (idx.size,)).view(u)
        store(cta, sp, addr(cta, idx), vals.view(np.uint8).reshape(idx.size, w * n), idx, line)

    return run


def _atom_fn(name: str, t: str):
    k = ptxtypes.kind(t)
    if t in half_alu.TYPES and name in ("add", "min", "max"):
        return _half_fn(name, t)
    if name == "add":
        if t == "f32":
            return lambda a, b: (a.astype(np.float32) + b.astype(np.float32)).astype(np.float32)
        return lambda a, b: a + b
    if name == "min":
        return np.fmin if k == "f" else np.minimum
    if name == "max":
        return np.fmax if k == "f" else np.maximum
    if name in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    if name == "exch":
        return lambda a, b: b
    if name == "inc":
        return lambda a, b: np.where(a >= b, 0, a + 1).astype(a.dtype)
    if name == "dec":
        return lambda a, b: np.where((a == 0) | (a > b), b, a - 1).astype(a.dtype)
    raise ValueError(f"atom.{name}")


def _half_fn(name: str, t: str):
    """add (rounded once to nearest even, subnormals kept: ``.noftz``), min or max (as the min and
    max instructions: :func:`porter.emu.half_alu.extreme`), element by element over 16-bit floats
    and their pairs."""
    fmt = half_alu.Format.of(t)

    def one(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if name == "add":
            return fmt.rounded(*two_sum(fmt.value(x), fmt.value(y)))
        return half_alu.extreme(fmt, x, y, name == "max")

    def fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fmt.join([one(x, y) for x, y in zip(fmt.split(a), fmt.split(b), strict=True)])

    return fn


@builder("atom", "red")
def _atom(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    sp = space(op)
    name = next(p for p in op.parts[1:] if p in ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec"))
    has_dest = op.parts[0] == "atom"
    ops = op.operands
    d = ctx.write(ops[0], t) if has_dest else None
    first = 1 if has_dest else 0
    addr = ctx.address(ops[first], sp)
    b = ctx.read(ops[first + 1], t)
    c = ctx.read(ops[first + 2], t) if name == "cas" else None
    w = ptxtypes.width(t) // 8
    dt = ptxtypes.dtype(t)
    fn = None if name == "cas" else _atom_fn(name, t)
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> None:
        a = addr(cta, idx)
        bv = np.broadcast_to(np.asarray(b(cta, idx), dt), (idx.size,))
        cv = np.broadcast_to(np.asarray(c(cta, idx), dt), (idx.size,)) if c is not None else None
        olds = np.empty(idx.size, dt)
        # One thread at a time, in thread order: a defined order for threads that hit one address.
        for i in range(idx.size):
            one = idx[i : i + 1]
            old = np.ascontiguousarray(load(cta, sp, a[i : i + 1], w, one, line)).view(dt).reshape(-1)
            if name == "cas":
                assert cv is not None
                new = np.where(old == bv[i], cv[i], old).astype(dt)
            else:
                assert fn is not None
                with np.errstate(all="ignore"):
                    new = np.asarray(fn(old, bv[i : i + 1])).astype(dt)
            store(cta, sp, a[i : i + 1], _bytes_of(new, t), one, line)
            olds[i] = old[0]
        if d is not None:
            d(cta, idx, olds)

    return run


@builder("prefetch", "prefetchu", "applypriority", "discard", "createpolicy")
def _prefetch(op: Op, ctx: Context) -> Exec:
    if op.parts[0] == "createpolicy":
        d = ctx.write(op.operands[0], "b64")
        return lambda cta, idx: d(cta, idx, np.zeros(idx.size, np.uint64))
    return lambda cta, idx: None


@builder("mapa")
def _mapa(op: Op, ctx: Context) -> Exec:
    t = type_suffix(op)
    d = ctx.write(op.operands[0], t)
    a = ctx.read(op.operands[1], t)
    r = ctx.read(op.operands[2], "u32")
    generic = not any(p.startswith("shared") for p in op.parts)

    def run(cta: Cta, idx: np.ndarray) -> None:
        addr = np.broadcast_to(np.asarray(a(cta, idx)), (idx.size,)).astype(np.uint64)
        rank = np.broadcast_to(np.asarray(r(cta, idx)), (idx.size,)).astype(np.uint64)
        base = np.uint64(SHARED_WINDOW) if generic else np.uint64(0)
        off = (addr - base) & np.uint64(SHARED_OFFSET_MASK)
        d(cta, idx, (base + (rank << np.uint64(RANK_SHIFT)) + off).astype(ptxtypes.dtype(t)))

    return run


_WINDOW_NUMBERS = sorted(WINDOWS)


@builder("isspacep")
def _isspacep(op: Op, ctx: Context) -> Exec:
    which = op.parts[1]
    d = ctx.write(op.operands[0], "pred")
    a = ctx.read(op.operands[1], "u64")
    windows = {"shared": SHARED_WINDOW >> 40, "local": 0x09, "param": 0x0A, "const": 0x0B}

    def run(cta: Cta, idx: np.ndarray) -> None:
        win = space_of(np.broadcast_to(np.asarray(a(cta, idx)), (idx.size,)))
        if which == "global":
            d(cta, idx, ~np.isin(win, _WINDOW_NUMBERS))
        else:
            d(cta, idx, win == windows.get(which.split("::")[0], -1))

    return run
