"""Warp and warpgroup matrix instructions: mma.sync and wgmma (with shared-memory descriptors).

Products of f16/bf16 (and tf32) inputs are exact in float64; each output element is the
float64 sum of its products and the accumulator, rounded once to float32. PTX leaves the
accumulation order and intermediate rounding of the tensor cores unspecified, so the GPU may
differ from this in the last bits; the calibration (tools/emu_calibrate.py) measures by how much.

Fragments (PTX ISA "Matrix fragments for mma.m16n8k16"; async-tensor-core reference §2.4 for
wgmma): with lane l, g = l / 4 and t = l % 4, A register r of m16n8k16 holds row g + 8(r % 2),
columns 2t + 8(r / 2) and the next; B register r holds rows 2t + 8r and the next of column g;
accumulator element i sits at row g + 8(i / 2), column 2t + i % 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from porter.emu import ptxtypes, smemdesc
from porter.emu.context import Context, Exec, builder, trap, types_of
from porter.emu.decode import Imm, Op, Vec
from porter.emu.diagnostics import Diagnostic
from porter.emu.memory import SHARED_START
from porter.emu.state import Cta


def to_float(bits: np.ndarray, t: str) -> np.ndarray:
    """16-bit (or tf32/f32) element bits as float64."""
    if t == "bf16":
        return ptxtypes.bf16_to_f32(bits.astype(np.uint16)).astype(np.float64)
    if t == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    raise ValueError(f"element type {t}")


def halves(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = words.astype(np.uint32)
    return w & np.uint32(0xFFFF), w >> np.uint32(16)


def _lane_maps() -> dict[str, np.ndarray]:
    lane = np.arange(32)
    return {"g": lane // 4, "t": lane % 4}


_L = _lane_maps()


def _warps_of(cta: Cta, op: Op, idx: np.ndarray) -> np.ndarray:
    if idx.size % 32 or not (idx.reshape(-1, 32) % 32 == np.arange(32)).all():
        raise trap(cta, op, "not-converged", f"`{op.text}` needs whole warps; run by {idx.size} threads")
    return idx.reshape(-1, 32)


@builder("mma")
def _mma(op: Op, ctx: Context) -> Exec:
    shape = next(p for p in op.parts if p.startswith("m") and "n" in p and "k" in p)
    m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    ts = types_of(op)
    dt, at, bt, ct = ts if len(ts) == 4 else (ts[0], ts[1], ts[1], ts[0])
    if (m, n) != (16, 8) or k not in (8, 16) or at not in ("f16", "bf16") or "row" not in op.parts:
        raise ValueError(f"mma.sync {shape} {at}")
    d_ops, a_ops, b_ops, c_ops = (o.items if isinstance(o, Vec) else (o,) for o in op.operands[:4])
    d_t = "f32" if dt == "f32" else "b32"
    dw = [ctx.write(o, d_t) for o in d_ops]
    ar = [ctx.read(o, "b32") for o in a_ops]
    br = [ctx.read(o, "b32") for o in b_ops]
    cr = [ctx.read(o, "f32" if ct == "f32" else "b32") for o in c_ops]
    g, t = _L["g"], _L["t"]

    def run(cta: Cta, idx: np.ndarray) -> None:
        warps = _warps_of(cta, op, idx)
        nw = warps.shape[0]
        a = np.zeros((nw, 16, k))
        b = np.zeros((nw, k, 8))
        c = np.zeros((nw, 16, 8))
        for r, read in enumerate(ar):
            lo, hi = halves(np.asarray(read(cta, idx)).reshape(nw, 32))
            row = g + 8 * (r % 2)
            col = 2 * t + 8 * (r // 2)
            a[:, row, col] = to_float(lo, at)
            a[:, row, col + 1] = to_float(hi, at)
        for r, read in enumerate(br):
            lo, hi = halves(np.asarray(read(cta, idx)).reshape(nw, 32))
            b[:, 2 * t + 8 * r, g] = to_float(lo, bt)
            b[:, 2 * t + 8 * r + 1, g] = to_float(hi, bt)
        if ct == "f32":
            for i, read in enumerate(cr):
                c[:, g + 8 * (i // 2), 2 * t + i % 2] = np.asarray(read(cta, idx)).reshape(nw, 32)
        else:
            for r, read in enumerate(cr):
                lo, hi = halves(np.asarray(read(cta, idx)).reshape(nw, 32))
                c[:, g + 8 * r, 2 * t] = to_float(lo, ct)
                c[:, g + 8 * r, 2 * t + 1] = to_float(hi, ct)
        dmat = a @ b + c
        if dt == "f32":
            for i, write in enumerate(dw):
                write(cta, idx, dmat[:, g + 8 * (i // 2), 2 * t + i % 2].astype(np.float32).reshape(-1))
        else:
            for r, write in enumerate(dw):
                lo = ptxtypes.f32_to_f16(dmat[:, g + 8 * r, 2 * t].astype(np.float32)).astype(np.uint32)
                hi = ptxtypes.f32_to_f16(dmat[:, g + 8 * r, 2 * t + 1].astype(np.float32)).astype(np.uint32)
                write(cta, idx, (lo | (hi << np.uint32(16))).reshape(-1))

    return run


def smem_elements(cta: Cta, op: Op, addrs: np.ndarray, elem: int) -> np.ndarray:
    """Elements of ``elem`` bytes at shared offsets ``addrs`` (any shape) of the CTA, as raw bits."""
    flat = addrs.reshape(-1)
    if flat.size and (int(flat.min()) < SHARED_START or int(flat.max()) + elem > cta.smem.size):
        raise trap(cta, op, "descriptor", f"the descriptor's operand reaches shared offset "
                   f"0x{int(flat.max()):x}, outside the CTA's {cta.smem.size} bytes")
    cta.check_written(cta, flat, elem, op.line)
    cols = flat[:, None] + np.arange(elem)
    raw = np.ascontiguousarray(cta.smem[cols]).view(ptxtypes.UNSIGNED[8 * elem]).reshape(addrs.shape)
    return raw


def descriptor(cta: Cta, op: Op, value: int, arch: str) -> smemdesc.SmemDesc:
    try:
        return smemdesc.decode(value, arch)
    except smemdesc.DescriptorError as err:
        raise trap(cta, op, "descriptor", f"descriptor 0x{value:016x}: {err}") from None


def operand(cta: Cta, op: Op, value: int, arch: str, mn: int, k: int, etype: str, mn_major: bool) -> np.ndarray:
    """An MN x K operand (float64) read from shared memory through a descriptor."""
    elem = 4 if etype in ("tf32", "f32") else 2 if etype in ("f16", "bf16") else 1
    d = descriptor(cta, op, value, arch)
    try:
        addrs = smemdesc.operand_addresses(d, mn, k, elem, mn_major)
    except smemdesc.DescriptorError as err:
        raise trap(cta, op, "descriptor", f"descriptor 0x{value:016x}: {err}") from None
    values = to_float(smem_elements(cta, op, addrs, elem), etype)
    tags = cta.smem_swizzle[addrs.reshape(-1)]
    other = tags[(tags >= 0) & (tags != d.span)]
    if other.size and cta.launch.findings.once_per_line("descriptor", op.line):
        cta.launch.findings.add(Diagnostic(
            "descriptor", op.line, f"descriptor 0x{value:016x} reads its operand with "
            f"{_swizzle_name(d.span)}, but a TMA load wrote those bytes with {_swizzle_name(int(other[0]))}",
            cta.ctaid, False, {"descriptor": value}))
    return values


def _swizzle_name(span: int) -> str:
    return f"the {span}B swizzle" if span else "no swizzle"


def _uniform(cta: Cta, op: Op, values: np.ndarray, what: str) -> int:
    v = np.asarray(values).reshape(-1)
    if v.size and not (v == v[0]).all():
        raise trap(cta, op, "descriptor", f"{what} differs between the threads of a warpgroup")
    return int(v[0])


@dataclass
class WarpgroupAsync:
    """A warpgroup's wgmma operations not yet complete: the uncommitted ones, then the groups.

    Under the min-PC schedule a wgmma completes when issued; under the others it completes when a
    ``wgmma.wait_group`` covers its group, so a kernel that reads its accumulators (or overwrites
    its shared-memory operands) before waiting sees what the hardware may show it.
    """

    uncommitted: list[Callable[[], None]] = field(default_factory=list)
    groups: list[list[Callable[[], None]]] = field(default_factory=list)


def warpgroup_async(cta: Cta, warpgroup: int) -> WarpgroupAsync:
    return cta.ext.setdefault("wgmma", {}).setdefault(warpgroup, WarpgroupAsync())


def _wgmma_sync(op: Op) -> Exec:
    """wgmma.fence (nothing to do), commit_group and wait_group N."""
    what = op.parts[1]
    keep = op.operands[0].value if what == "wait_group" and isinstance(op.operands[0], Imm) else 0

    def run(cta: Cta, idx: np.ndarray) -> None:
        for wg in np.unique(idx // 128):
            state = warpgroup_async(cta, int(wg))
            if what == "commit_group":
                state.groups.append(state.uncommitted)
                state.uncommitted = []
            elif what == "wait_group":
                while len(state.groups) > keep:
                    for complete in state.groups.pop(0):
                        complete()

    return run


@builder("wgmma")
def _wgmma(op: Op, ctx: Context) -> Exec:
    if op.parts[1] in ("fence", "commit_group", "wait_group"):
        return _wgmma_sync(op)
    if op.parts[1] != "mma_async" or "sp" in op.parts:
        raise ValueError(f"wgmma.{op.parts[1]}")
    shape = next(p for p in op.parts if p.startswith("m64n"))
    n = int(shape[4:].split("k")[0])
    k = int(shape.split("k")[1])
    ts = types_of(op)
    dt, at, bt = ts[0], ts[1], ts[2]
    if dt != "f32" or at not in ("f16", "bf16", "tf32"):
        raise ValueError(f"wgmma {dt} <- {at}")
    ops = op.operands
    acc = ops[0].items if isinstance(ops[0], Vec) else (ops[0],)
    if len(acc) != n // 2:
        raise ValueError(f"{len(acc)} accumulator registers for N = {n}")
    reg_a = isinstance(ops[1], Vec)
    acc_r = [ctx.read(o, "f32") for o in acc]
    acc_w = [ctx.write(o, "f32") for o in acc]
    a_regs = [ctx.read(o, "b32") for o in ops[1].items] if isinstance(ops[1], Vec) else []
    a_desc = None if reg_a else ctx.read(ops[1], "b64")
    b_desc = ctx.read(ops[2], "b64")
    scale_d = ctx.read(ops[3], "pred")
    imms = [o.value if hasattr(o, "value") else 1 for o in ops[4:]]
    neg_a, neg_b = imms[0] == -1, imms[1] == -1
    trans_a = bool(imms[2]) if not reg_a and len(imms) > 2 else False
    trans_b = bool(imms[-1]) if len(imms) > (2 if reg_a else 3) else False
    tid = np.arange(128)
    w, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    rows = [16 * w + g + 8 * ((i >> 1) & 1) for i in range(n // 2)]
    cols = [8 * (i >> 2) + 2 * t + (i & 1) for i in range(n // 2)]

    def run(cta: Cta, idx: np.ndarray) -> None:
        if idx.size % 128 or not (idx.reshape(-1, 128) % 128 == tid).all():
            raise trap(cta, op, "not-converged", f"wgmma needs whole warpgroups; run by {idx.size} threads")
        for wg in idx.reshape(-1, 128):
            # Operand registers and descriptors are taken at issue; shared memory is read and the
            # accumulators read and written when the wgmma completes (see WarpgroupAsync).
            a_vals = [np.asarray(read(cta, wg)).copy() for read in a_regs]
            a_value = None if a_desc is None else _uniform(cta, op, a_desc(cta, wg), "the A descriptor")
            b_value = _uniform(cta, op, b_desc(cta, wg), "the B descriptor")
            accumulate = bool(np.asarray(scale_d(cta, wg)).reshape(-1)[0])

            def complete(wg: np.ndarray = wg, a_vals: list[np.ndarray] = a_vals, a_value: int | None = a_value,
                         b_value: int = b_value, accumulate: bool = accumulate) -> None:
                if a_value is None:
                    a = np.zeros((64, k))
                    for r, vals in enumerate(a_vals):
                        lo, hi = halves(vals)
                        row = 16 * w + g + 8 * (r % 2)
                        col = 2 * t + 8 * (r // 2)
                        a[row, col] = to_float(lo, at)
                        a[row, col + 1] = to_float(hi, at)
                else:
                    a = operand(cta, op, a_value, "sm_90", 64, k, at, trans_a)
                b = operand(cta, op, b_value, "sm_90", n, k, bt, trans_b)
                if neg_a:
                    a = -a
                if neg_b:
                    b = -b
                prod = a @ b.T
                for i in range(n // 2):
                    val = prod[rows[i], cols[i]]
                    if accumulate:
                        val = val + np.asarray(acc_r[i](cta, wg), np.float64)
                    acc_w[i](cta, wg, val.astype(np.float32))

            if cta.launch.deferred:
                warpgroup_async(cta, int(wg[0]) // 128).uncommitted.append(complete)
            else:
                complete()

    return run
