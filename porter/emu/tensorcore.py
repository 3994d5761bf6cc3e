"""Warp and warpgroup matrix instructions: mma.sync and wgmma (with shared-memory descriptors).

Products of f16/bf16/tf32/fp8 inputs are exact in float64; each output element is the float64
sum of its products and the accumulator, rounded once to the accumulator's type (f32, or f16
directly from float64). Integer MMAs (s8/u8) are exact in int64, then wrapped to s32 or, with
``.satfinite``, clamped. f64 MMAs (m8n8k4) are a chain of fmas rounded to nearest, in k order:
d = fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))), which is what an H100 computes (every
element of the corpus case bit for bit, 2026-12-05; a float64 matmul plus c differed in 6 of 128).
PTX leaves the accumulation order and intermediate rounding of the tensor cores unspecified, and
for the other float types the hardware does not round to nearest: it truncates, keeping 24
significant bits (mma.sync with f32 accumulators on an H100) or about 14 (wgmma with fp8
inputs), so the GPU differs from the exact sum by up to :func:`hardware_sum_bound`, which the
calibration (tools/emu_calibrate.py) holds it to.

Fragments (PTX ISA "Matrix fragments for mma.m16n8kK"; async-tensor-core reference §2.4 for
wgmma): with lane l, g = l / 4, t = l % 4 and p elements per 32-bit register (1 tf32, 2 16-bit,
4 8-bit), element j of A register r sits at row g + 8(r % 2), column p t + j + 4p (r / 2); of B
register r at row p t + j + 4p r, column g; 32-bit accumulator element i at row g + 8(i / 2),
column 2t + i % 2 (f16x2 register r: row g + 8r, columns 2t, 2t + 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from porter.emu import minifloat, ptxtypes, smemdesc
from porter.emu.context import Context, Exec, Reader, builder, trap
from porter.emu.decode import Imm, Op, Vec
from porter.emu.diagnostics import Diagnostic
from porter.emu.fp64 import fma_f64
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


def _lane_maps() -> dict[str, np.ndarray]:
    lane = np.arange(32)
    return {"g": lane // 4, "t": lane % 4}


_L = _lane_maps()


def _warps_of(cta: Cta, op: Op, idx: np.ndarray) -> np.ndarray:
    if idx.size % 32 or not (idx.reshape(-1, 32) % 32 == np.arange(32)).all():
        raise trap(cta, op, "not-converged", f"`{op.text}` needs whole warps; run by {idx.size} threads")
    return idx.reshape(-1, 32)


# bits of one element of an MMA operand as the registers (and shared memory) hold it
ELEM_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "f64": 64,
             "s32": 32, "e2m3": 8, "e3m2": 8}  # fp6 in a byte, bits [5:0] (as cvt's e2m3x2 writes it)
# mma.sync shapes (m, n, k) and the A/B types each takes (PTX ISA "Matrix shape")
_MMA_SHAPES = {(16, 8, 8): ("f16", "bf16", "tf32"), (16, 8, 16): ("f16", "bf16", "s8", "u8"),
               (16, 8, 4): ("tf32",), (16, 8, 32): ("s8", "u8", "e4m3", "e5m2"), (8, 8, 4): ("f64",)}


def mma_types(op: Op) -> list[str]:
    """The element types an MMA names, in order (d, a, b, c for mma.sync; d, a, b for wgmma)."""
    return [p for p in op.parts[1:] if p in ELEM_BITS]


def elements(words: np.ndarray, t: str) -> np.ndarray:
    """Registers (or shared-memory words) of ``t`` elements as float64 or int64 values, shape (..., per word).

    Element j of a 32-bit word sits in bits [j*w, (j+1)*w); f64 registers hold one element each."""
    w = ELEM_BITS[t]
    if w == 64:
        return words.astype(np.uint64).view(np.float64)[..., None]
    u = words.astype(np.uint32)[..., None] >> (np.arange(32 // w, dtype=np.uint32) * np.uint32(w))
    return to_value(u & np.uint32((1 << w) - 1 if w < 32 else 0xFFFFFFFF), t)


def to_value(bits: np.ndarray, t: str) -> np.ndarray:
    """Element bits as float64 (integer types: int64)."""
    if t in ("s8", "u8"):
        return bits.astype(np.uint8).view(np.int8 if t == "s8" else np.uint8).astype(np.int64)
    if t == "s32":
        return bits.astype(np.uint32).view(np.int32).astype(np.int64)
    if t in minifloat.FORMATS:
        return minifloat.FORMATS[t].decode(bits)  # fp6: the two bits above the element ignored
    return to_float(bits, t)


def _frag_a(m: int, k: int, per: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(row, col) per lane and element of each A register (PTX ISA "Matrix fragments for mma.m16n8kK"):
    register r holds row g + 8 (r % 2), columns per*t + j + 4 per (r / 2)."""
    g, t = _L["g"][:, None], _L["t"][:, None]
    j = np.arange(per)[None, :]
    if m == 8:  # m8n8k4 .f64
        return [(g + 0 * j, t + 0 * j)]
    return [(g + 8 * (r % 2) + 0 * j, per * t + j + 4 * per * (r // 2)) for r in range(m * k // (32 * per))]


def _frag_b(k: int, per: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(row, col) of each B register: rows per*t + j + 4 per r of column g."""
    g, t = _L["g"][:, None], _L["t"][:, None]
    j = np.arange(per)[None, :]
    return [(per * t + j + 4 * per * r, g + 0 * j) for r in range(k * 8 // (32 * per))]


def _frag_c(m: int, per: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(row, col) of each accumulator register: 32-bit element i at row g + 8 (i / 2), column
    2t + i % 2; f16x2 register r at row g + 8r, columns 2t and 2t + 1; f64 (m8n8k4) at row g."""
    g, t = _L["g"][:, None], _L["t"][:, None]
    if m == 8:
        return [(g, 2 * t + i) for i in range(2)]
    if per == 2:
        j = np.arange(2)[None, :]
        return [(g + 8 * r + 0 * j, 2 * t + j) for r in range(2)]
    return [(g + 8 * (i // 2), 2 * t + i % 2) for i in range(4)]


@builder("mma")
def _mma(op: Op, ctx: Context) -> Exec:
    """mma.sync: each warp's fragments gathered into matrices, D = A B + C formed exactly (floats:
    float64 sum of exact products, rounded once; f64: fmas in k order from C; integers: int64,
    then wrapped to s32 or, with .satfinite, clamped), and scattered back."""
    shape = next(p for p in op.parts if p.startswith("m") and "n" in p and "k" in p)
    m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    ts = mma_types(op)
    dt, at, bt, ct = ts if len(ts) == 4 else (ts[0], ts[1], ts[1], ts[0])
    if at not in _MMA_SHAPES.get((m, n, k), ()) or "row" not in op.parts or "sp" in op.parts[:2] or \
            (ELEM_BITS[bt] != ELEM_BITS[at]) or (at == "f64") != (dt == "f64"):
        raise ValueError(f"mma.sync {shape} {'.'.join(ts)}")
    integer = at in ("s8", "u8")
    sat = "satfinite" in op.parts
    d_ops, a_ops, b_ops, c_ops = (o.items if isinstance(o, Vec) else (o,) for o in op.operands[:4])
    reg_t = {"f32": "f32", "s32": "s32", "f64": "f64"}.get(dt, "b32")
    dw = [ctx.write(o, reg_t) for o in d_ops]
    word = "b64" if at == "f64" else "b32"
    ar = [ctx.read(o, word) for o in a_ops]
    br = [ctx.read(o, word) for o in b_ops]
    cr = [ctx.read(o, "b64" if ct == "f64" else "b32") for o in c_ops]
    per_in = 64 // ELEM_BITS[at] if at == "f64" else 32 // ELEM_BITS[at]
    fa, fb = _frag_a(m, k, per_in), _frag_b(k, per_in)
    fc = _frag_c(m, 2 if ct == "f16" else 1)
    fd = _frag_c(m, 2 if dt == "f16" else 1)
    if (len(ar), len(br), len(cr), len(dw)) != (len(fa), len(fb), len(fc), len(fd)):
        raise ValueError(f"mma.sync {shape}: {len(ar)}/{len(br)}/{len(cr)}/{len(dw)} registers for A/B/C/D")
    num = np.int64 if integer else np.float64

    def gather(cta: Cta, idx: np.ndarray, reads: list[Reader], frags: list[tuple[np.ndarray, np.ndarray]],
               t: str, out: np.ndarray) -> np.ndarray:
        nw = out.shape[0]
        for read, (rows, cols) in zip(reads, frags, strict=True):
            out[:, rows, cols] = elements(np.asarray(read(cta, idx)).reshape(nw, 32), t).reshape(nw, *rows.shape)
        return out

    def run(cta: Cta, idx: np.ndarray) -> None:
        nw = _warps_of(cta, op, idx).shape[0]
        a = gather(cta, idx, ar, fa, at, np.zeros((nw, m, k), num))
        b = gather(cta, idx, br, fb, bt, np.zeros((nw, k, n), num))
        c = gather(cta, idx, cr, fc, ct, np.zeros((nw, m, n), num))
        if at == "f64":  # fmas in k order, each rounded (the H100's order: see the module's text)
            dmat = c
            for j in range(k):
                dmat = fma_f64(a[:, :, j:j + 1], b[:, j:j + 1, :], dmat)
        else:
            dmat = a @ b + c
        for write, (rows, cols) in zip(dw, fd, strict=True):
            write(cta, idx, _pack(dmat[:, rows, cols], dt, sat).reshape(-1))

    return run


# Significant bits the GPU's tensor cores keep while summing an instruction's products and its
# accumulator (docs/emulator.md, "Calibration"; an H100, 2026-12-05): mma.sync with f32
# accumulators keeps f32's 24 bits but truncates (tf32 and fp8 inputs: results up to 13 ulps from
# the sum rounded to nearest; all 20 recorded differences toward zero); wgmma with fp8 inputs
# keeps about 14 (every recorded result's low 10 bits zero; DeepSeek-V3's technical report,
# section 3.3.2, found about 14 bits for FP8 GEMMs on the H800); f16 accumulators are taken at
# f16's 11. Keys: (instruction, accumulator type).
HARDWARE_BITS: dict[tuple[str, str], int] = {
    ("mma.sync", "f32"): 24, ("mma.sync", "f16"): 11, ("wgmma.fp8", "f32"): 14, ("wgmma.fp8", "f16"): 11,
}


def hardware_sum_bound(magnitude: np.ndarray, terms: int, bits: int) -> np.ndarray:
    """How far a tensor core's sum of ``terms`` values may be from the exact sum, where
    ``magnitude`` is the sum of their absolute values (per element: |c| plus the |a_j b_j|) and
    the hardware keeps ``bits`` significant bits with truncation: gamma_n(u) * magnitude, with
    u = 2^(1 - bits) (the unit roundoff of truncation to that many bits) and
    gamma_n(u) = n u / (1 - n u) for n = ``terms``: the bound of summation in any order and
    grouping where each addition (and the final conversion) is rounded with error at most u
    (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 4.2). It holds
    whatever alignment and order the hardware uses, provided it keeps ``bits`` bits at each step
    (Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ
    Computer Science 7:e330, 2021, describe the products as exact, aligned and truncated)."""
    nu = terms * 2.0 ** (1 - bits)
    if nu >= 1:
        raise ValueError(f"{terms} terms at {bits} bits: no bound")
    return np.asarray(magnitude, np.float64) * (nu / (1 - nu))


def rounded(v: np.ndarray, t: str, sat: bool) -> np.ndarray:
    """Exact accumulator sums rounded once to ``t``: float32; int32, wrapped or (``sat``) clamped;
    f16 bits in a uint32, straight from float64 (through float32 would round twice); f64 as is."""
    if t == "s32":
        return ptxtypes.saturate_s32(v) if sat else v.astype(np.int32)
    if t == "f64":
        return v
    if t == "f32":
        return v.astype(np.float32)
    with np.errstate(over="ignore"):
        return v.astype(np.float16).view(np.uint16).astype(np.uint32)


def _pack(v: np.ndarray, t: str, sat: bool) -> np.ndarray:
    """Accumulator values (warps, lanes[, 2]) as one register's contents: rounded once to t, an
    f16 pair packed low element first."""
    r = rounded(v, t, sat)
    return r[..., 0] | (r[..., 1] << np.uint32(16)) if t == "f16" else r


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
    """An MN x K operand (float64; int64 for integer types) read from shared memory through a descriptor."""
    elem = ELEM_BITS[etype] // 8
    d = descriptor(cta, op, value, arch)
    try:
        addrs = smemdesc.operand_addresses(d, mn, k, elem, mn_major)
    except smemdesc.DescriptorError as err:
        raise trap(cta, op, "descriptor", f"descriptor 0x{value:016x}: {err}") from None
    values = to_value(smem_elements(cta, op, addrs, elem), etype)
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


# wgmma's A/B types: K per instruction and the accumulator types each takes (PTX ISA "wgmma.mma_async")
_WGMMA_KINDS = {"f16": (16, ("f32", "f16")), "bf16": (16, ("f32",)), "tf32": (8, ("f32",)),
                "e4m3": (32, ("f32", "f16")), "e5m2": (32, ("f32", "f16")), "s8": (32, ("s32",)), "u8": (32, ("s32",))}


@builder("wgmma")
def _wgmma(op: Op, ctx: Context) -> Exec:
    """wgmma.mma_async: D (64 x N) = A B + D over a warpgroup, A from a descriptor or registers.

    Accumulator element i of a thread sits at the f32 position (reference §2.4); f16 accumulators
    pack elements 2q (low) and 2q + 1 in register q, s32 ones take one register each. Integer
    kinds take no scale or transpose immediates (and 8-bit and tf32 operands are K-major only)."""
    if op.parts[1] in ("fence", "commit_group", "wait_group"):
        return _wgmma_sync(op)
    if op.parts[1] != "mma_async" or "sp" in op.parts:
        raise ValueError(f"wgmma.{op.parts[1]}")
    shape = next(p for p in op.parts if p.startswith("m64n"))
    n = int(shape[4:].split("k")[0])
    k = int(shape.split("k")[1])
    dt, at, bt = mma_types(op)
    k_of, d_types = _WGMMA_KINDS.get(at, (0, ()))
    if k != k_of or dt not in d_types or ELEM_BITS[bt] != ELEM_BITS[at] or (at == "bf16") != (bt == "bf16"):
        raise ValueError(f"wgmma {shape} {dt} <- {at} x {bt}")
    per_d = 2 if dt == "f16" else 1
    sat = "satfinite" in op.parts
    ops = op.operands
    acc = ops[0].items if isinstance(ops[0], Vec) else (ops[0],)
    if len(acc) != n // 2 // per_d:
        raise ValueError(f"{len(acc)} accumulator registers for N = {n}")
    reg_a = isinstance(ops[1], Vec)
    acc_t = {"f32": "f32", "s32": "s32"}.get(dt, "b32")
    acc_r = [ctx.read(o, "b32") for o in acc]
    acc_w = [ctx.write(o, acc_t) for o in acc]
    a_regs = [ctx.read(o, "b32") for o in ops[1].items] if isinstance(ops[1], Vec) else []
    a_desc = None if reg_a else ctx.read(ops[1], "b64")
    b_desc = ctx.read(ops[2], "b64")
    scale_d = ctx.read(ops[3], "pred")
    imms = [o.value if hasattr(o, "value") else 1 for o in ops[4:]]
    neg_a, neg_b = (imms[0] == -1, imms[1] == -1) if len(imms) >= 2 else (False, False)
    trans_a = bool(imms[2]) if not reg_a and len(imms) > 2 else False
    trans_b = bool(imms[-1]) if len(imms) > (2 if reg_a else 3) else False
    tid = np.arange(128)
    w, lane = tid // 32, tid % 32
    g, t = (lane // 4)[:, None], (lane % 4)[:, None]
    i = np.arange(n // 2)[None, :].reshape(-1, per_d)  # accumulator elements per register
    d_rows = [16 * w[:, None] + g + 8 * ((e >> 1) & 1) for e in i]
    d_cols = [8 * (e >> 2) + 2 * t + (e & 1) for e in i]
    per_a = 32 // ELEM_BITS[at]
    j = np.arange(per_a)[None, :]
    a_rows = [16 * w[:, None] + g + 8 * (r % 2) + 0 * j for r in range(len(a_regs))]
    a_cols = [per_a * t + j + 4 * per_a * (r // 2) for r in range(len(a_regs))]
    num = np.int64 if dt == "s32" else np.float64

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
                    a = np.zeros((64, k), num)
                    for vals, rows, cols in zip(a_vals, a_rows, a_cols, strict=True):
                        a[rows, cols] = elements(vals, at)
                else:
                    a = operand(cta, op, a_value, "sm_90", 64, k, at, trans_a)
                b = operand(cta, op, b_value, "sm_90", n, k, bt, trans_b)
                prod = (-a if neg_a else a) @ (-b if neg_b else b).T
                for q, (rows, cols) in enumerate(zip(d_rows, d_cols, strict=True)):
                    val = prod[rows, cols]
                    if accumulate:
                        val = val + elements(np.asarray(acc_r[q](cta, wg)), dt)
                    acc_w[q](cta, wg, _pack(val, dt, sat).reshape(-1))

            if cta.launch.deferred:
                warpgroup_async(cta, int(wg[0]) // 128).uncommitted.append(complete)
            else:
                complete()

    return run
