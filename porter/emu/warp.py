"""Warp-collective instructions: shfl, vote, match, redux, elect, ldmatrix, stmatrix.

They run warp by warp over the threads of the executing group that lie in that warp. A thread
that takes part must be in the group; a ``shfl`` may read a lane outside it (the PTX result is
then undefined), in which case the emulator takes that lane's register as it stands and reports
a ``not-converged`` finding once per line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from porter.emu import ptxtypes
from porter.emu.access import load, store
from porter.emu.context import Context, Exec, Writer, builder, trap, type_suffix
from porter.emu.decode import Op, Operand, PredPair, Vec
from porter.emu.diagnostics import Diagnostic
from porter.emu.state import Cta


def _warps(idx: np.ndarray) -> list[np.ndarray]:
    w = idx // 32
    if w.size and w[0] == w[-1]:
        return [idx]
    return [idx[w == k] for k in np.unique(w)]


def check_aligned(cta: Cta, op: Op, idx: np.ndarray) -> None:
    """A ``.aligned`` warp instruction run by part of a live warp: a finding (once per line)."""
    for lanes in _warps(idx):
        w = int(lanes[0]) // 32
        live = ~cta.exited[32 * w : 32 * w + 32]
        expected = int(live.sum())
        if lanes.size < expected and cta.launch.findings.once_per_line("not-converged", op.line):
            cta.launch.findings.add(Diagnostic(
                "not-converged", op.line, f"`{op.text}` is .aligned but only {lanes.size} of the {expected} live "
                f"threads of warp {w} run it together", cta.ctaid, False))


def _dest(ctx: Context, operand: Operand, t: str) -> tuple[Writer, Writer | None]:
    """``d`` or ``d|p``: the value's writer and the optional predicate's."""
    if isinstance(operand, PredPair):
        return ctx.write(operand.first, t), ctx.write(operand.second, "pred")
    return ctx.write(operand, t), None


@builder("shfl")
def _shfl(op: Op, ctx: Context) -> Exec:
    mode = op.parts[2] if op.parts[1] == "sync" else op.parts[1]
    t = type_suffix(op)
    d, p = _dest(ctx, op.operands[0], t)
    a = ctx.read(op.operands[1], t)
    b = ctx.read(op.operands[2], "u32")
    c = ctx.read(op.operands[3], "u32")

    def run(cta: Cta, idx: np.ndarray) -> None:
        lane = (idx % 32).astype(np.int64)
        bv = np.broadcast_to(np.asarray(b(cta, idx)), idx.shape).astype(np.int64) & 0x1F  # b[4:0]
        cv = np.broadcast_to(np.asarray(c(cta, idx)), idx.shape).astype(np.int64)
        seg = (cv >> 8) & 0x1F
        clamp = cv & 0x1F
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = min_lane | (bv & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = idx - lane + j
        if not np.isin(src, idx).all() and cta.launch.findings.once_per_line("not-converged", op.line):
            cta.launch.findings.add(Diagnostic("not-converged", op.line, "shfl reads a lane that is not executing it",
                                               cta.ctaid, False))
        d(cta, idx, np.broadcast_to(np.asarray(a(cta, src)), idx.shape))
        if p is not None:
            p(cta, idx, ok)

    return run


@builder("vote")
def _vote(op: Op, ctx: Context) -> Exec:
    mode = op.parts[2] if op.parts[1] == "sync" else op.parts[1]
    ballot = mode == "ballot"
    d = ctx.write(op.operands[0], "b32" if ballot else "pred")
    a = ctx.read(op.operands[1], "pred")

    def run(cta: Cta, idx: np.ndarray) -> None:
        vals = np.broadcast_to(a(cta, idx), idx.shape)
        out = np.zeros(idx.size, np.uint32 if ballot else bool)
        start = 0
        for lanes in _warps(idx):
            k = slice(start, start + lanes.size)
            v = vals[k]
            if ballot:
                out[k] = np.uint32(int(np.sum(np.left_shift(1, lanes % 32)[v])) & 0xFFFFFFFF)
            elif mode == "all":
                out[k] = v.all()
            elif mode == "any":
                out[k] = v.any()
            else:
                out[k] = v.all() or not v.any()
            start += lanes.size
        d(cta, idx, out)

    return run


@builder("redux")
def _redux(op: Op, ctx: Context) -> Exec:
    kind = op.parts[2]
    t = type_suffix(op)
    d = ctx.write(op.operands[0], t)
    a = ctx.read(op.operands[1], t)
    fns: dict[str, Callable[[np.ndarray], Any]] = {"add": np.sum, "min": np.min, "max": np.max, "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce,
           "xor": np.bitwise_xor.reduce}
    fn = fns[kind]

    def run(cta: Cta, idx: np.ndarray) -> None:
        vals = np.broadcast_to(np.asarray(a(cta, idx)), idx.shape)
        out = np.empty(idx.size, ptxtypes.dtype(t))
        start = 0
        for lanes in _warps(idx):
            k = slice(start, start + lanes.size)
            out[k] = np.asarray(fn(vals[k])).astype(out.dtype)
            start += lanes.size
        d(cta, idx, out)

    return run


@builder("match")
def _match(op: Op, ctx: Context) -> Exec:
    mode = op.parts[1]  # match.{any,all}.sync.type
    t = type_suffix(op)
    d, p = _dest(ctx, op.operands[0], "b32")
    a = ctx.read(op.operands[1], t)

    def run(cta: Cta, idx: np.ndarray) -> None:
        vals = np.broadcast_to(np.asarray(a(cta, idx)), idx.shape)
        out = np.zeros(idx.size, np.uint32)
        pred = np.zeros(idx.size, bool)
        start = 0
        for lanes in _warps(idx):
            k = slice(start, start + lanes.size)
            v = vals[k]
            bits = np.left_shift(1, (lanes % 32).astype(np.int64))
            if mode == "any":
                for i in range(lanes.size):
                    out[start + i] = int(bits[v == v[i]].sum())
            else:
                same = bool((v == v[0]).all())
                out[k] = int(bits.sum()) if same else 0
                pred[k] = same
            start += lanes.size
        d(cta, idx, out)
        if p is not None:
            p(cta, idx, pred)

    return run


@builder("elect")
def _elect(op: Op, ctx: Context) -> Exec:
    d, p = _dest(ctx, op.operands[0], "b32")
    mask = ctx.read(op.operands[1], "b32")

    def run(cta: Cta, idx: np.ndarray) -> None:
        m = np.broadcast_to(np.asarray(mask(cta, idx)), idx.shape).astype(np.int64)
        leader = np.zeros(idx.size, np.uint32)
        is_leader = np.zeros(idx.size, bool)
        start = 0
        for lanes in _warps(idx):
            k = slice(start, start + lanes.size)
            ln = lanes % 32
            member = ((m[k] >> ln) & 1).astype(bool)
            if member.any():
                chosen = int(ln[member].min())
                leader[k] = chosen
                is_leader[k] = ln == chosen
            start += lanes.size
        d(cta, idx, leader)
        if p is not None:
            p(cta, idx, is_leader)

    return run


@builder("activemask")
def _activemask(op: Op, ctx: Context) -> Exec:
    d = ctx.write(op.operands[0], "b32")

    def run(cta: Cta, idx: np.ndarray) -> None:
        out = np.zeros(idx.size, np.uint32)
        start = 0
        for lanes in _warps(idx):
            out[start : start + lanes.size] = np.uint32(int(np.left_shift(1, lanes % 32).sum()) & 0xFFFFFFFF)
            start += lanes.size
        d(cta, idx, out)

    return run


def _matrix_count(op: Op) -> int:
    return next((int(p[1:]) for p in op.parts if p in ("x1", "x2", "x4")), 1)


@builder("ldmatrix", "stmatrix")
def _ldmatrix(op: Op, ctx: Context) -> Exec:
    """m8n8 .b16 matrices: lanes 8i..8i+7 give the row addresses of matrix i; lane t holds row t/4,
    columns 2(t%4) and 2(t%4)+1 of each matrix (low half first), of its transpose with ``.trans``."""
    if "m8n8" not in op.parts or "b16" not in op.parts:
        raise ValueError("only m8n8 .b16 ldmatrix/stmatrix")
    count = _matrix_count(op)
    trans = "trans" in op.parts
    is_load = op.parts[0] == "ldmatrix"
    regs_op = op.operands[0] if is_load else op.operands[1]
    regs = regs_op.items if isinstance(regs_op, Vec) else (regs_op,)
    addr = ctx.address(op.operands[1] if is_load else op.operands[0], "shared")
    if is_load:
        writers = [ctx.write(r, "b32") for r in regs]
    else:
        readers = [ctx.read(r, "b32") for r in regs]
    space = next((p for p in op.parts if p.startswith("shared")), "shared")

    def run(cta: Cta, idx: np.ndarray) -> None:
        check_aligned(cta, op, idx)
        for lanes in _warps(idx):
            if lanes.size != 32:
                raise trap(cta, op, "not-converged", f"{op.parts[0]} needs the whole warp, got {lanes.size} threads")
            rows_addr = addr(cta, lanes[: 8 * count])
            lane = np.arange(32)
            r, c = lane // 4, 2 * (lane % 4)
            if is_load:
                data = load(cta, space, rows_addr, 16, lanes[: 8 * count], op.line)
                mats = np.ascontiguousarray(data).view(np.uint16).reshape(count, 8, 8)
                for i in range(count):
                    m = mats[i].T if trans else mats[i]
                    val = m[r, c].astype(np.uint32) | (m[r, c + 1].astype(np.uint32) << 16)
                    writers[i](cta, lanes, val)
            else:
                mats = np.zeros((count, 8, 8), np.uint16)
                for i in range(count):
                    v = np.asarray(readers[i](cta, lanes)).astype(np.uint32)
                    m = np.zeros((8, 8), np.uint16)
                    m[r, c] = v & 0xFFFF
                    m[r, c + 1] = v >> 16
                    mats[i] = m.T if trans else m
                store(cta, space, rows_addr, mats.reshape(count * 8, 8).view(np.uint8).reshape(count * 8, 16),
                      lanes[: 8 * count], op.line)

    return run

