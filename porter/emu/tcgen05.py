"""tcgen05 (sm_100a): tensor memory, its allocation, the MMA into it, commit, ld/st.

Tensor memory is 128 lanes x 512 columns of 32 bits per CTA, addressed ``lane << 16 | column``
(async-tensor-core reference §3.3). Allocation hands out a power-of-two number of columns,
aligned to that number, to a whole warp; an allocation that cannot be served waits (a deadlock
diagnostic when no dealloc can come), one after ``relinquish_alloc_permit`` or one never freed by
exit is reported. Every word remembers whether anything wrote it, so that a read (an ld, or an
MMA that accumulates) of a word never written is reported, as is an access outside the columns
allocated or outside the warp's lane quadrant (warp % 4).

``tcgen05.mma`` decodes its instruction descriptor field by field (§3.1) and its shared-memory
descriptors with the sm_100 layout (§3.2). An MMA runs (reads its shared-memory operands) when
it completes: at issue under the min-PC schedule, at a later scheduling decision under the
others, but always before the issuing thread's next ``tcgen05.commit`` arrives, and in issue
order per thread. Under those schedules a ``tcgen05.ld`` (``st``) reads (writes) TMEM and its
registers only at the warp's next ``tcgen05.wait::ld`` (``::st``). D[m][n] goes to lane m, column base + n for
M = 128, and to lane (m % 16) + 32 (m / 16) for M = 64 (CUTLASS's map, one source).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from porter.emu.access import store
from porter.emu.context import Context, Exec, Wait, builder, trap
from porter.emu.decode import Addr, Imm, Op, Reg, Vec
from porter.emu.diagnostics import Diagnostic
from porter.emu.memory import RANK_SHIFT, SHARED_OFFSET_MASK
from porter.emu.state import Cta
from porter.emu.sync import arrive_on
from porter.emu.tensorcore import operand, rounded, to_value

LANES, COLUMNS = 128, 512


@dataclass
class Tmem:
    data: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), np.uint32))
    written: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), bool))
    owner: np.ndarray = field(default_factory=lambda: np.full(COLUMNS, -1, np.int64))  # allocation start per column
    allocations: dict[int, tuple[int, int]] = field(default_factory=dict)  # start -> (columns, line)
    relinquished: bool = False
    issued: dict[int, list[Callable[[], None]]] = field(default_factory=dict)  # thread -> MMAs not yet run
    # (warp, "ld" | "st") -> tcgen05.ld/st not yet complete (per-warp schedules: until tcgen05.wait)
    moves: dict[tuple[int, str], list[Callable[[], None]]] = field(default_factory=dict)


def _flush(cta: Cta, thread: int) -> None:
    """Run the MMAs ``thread`` issued and that have not run yet, in issue order."""
    for execute in tmem(cta).issued.pop(thread, []):
        execute()


def tmem(cta: Cta) -> Tmem:
    state = cta.ext.get("tmem")
    if state is None:
        state = cta.ext["tmem"] = Tmem()
        cta.ext.setdefault("at_exit", []).append(_leak_check)
    return state


def _leak_check(cta: Cta) -> None:
    state = tmem(cta)
    for start, (cols, line) in state.allocations.items():
        cta.launch.findings.add(Diagnostic(
            "tmem", line, f"TMEM columns {start}..{start + cols - 1} allocated here were not freed before the CTA "
            "exited (tcgen05.dealloc missing)", cta.ctaid, True))


def _warps(cta: Cta, op: Op, idx: np.ndarray) -> np.ndarray:
    if idx.size % 32 or not (idx.reshape(-1, 32) % 32 == np.arange(32)).all():
        raise trap(cta, op, "not-converged", f"`{op.text}` needs whole warps (.sync.aligned); run by {idx.size} "
                   "threads")
    return idx.reshape(-1, 32)


def _first(values: object) -> int:
    return int(np.asarray(values).reshape(-1)[0])


def _cta_group(op: Op) -> None:
    if "cta_group::2" in op.parts:
        raise ValueError("cta_group::2 (CTA pairs)")


@builder("tcgen05")
def _tcgen05(op: Op, ctx: Context) -> Exec:
    _cta_group(op)
    what = op.parts[1]
    if what.startswith("wait::"):
        return _wait(what.split("::", 1)[1])
    if what.startswith("fence"):
        return lambda cta, idx: None
    build = {"alloc": _alloc, "dealloc": _dealloc, "relinquish_alloc_permit": _relinquish, "mma": _mma,
             "commit": _commit, "ld": _ld, "st": _st}.get(what)
    if build is None:
        raise ValueError(f"tcgen05.{what}")
    return build(op, ctx)


def _wait(kind: str) -> Exec:
    """tcgen05.wait::ld / ::st: the executing warps' earlier loads (stores) complete."""

    def run(cta: Cta, idx: np.ndarray) -> None:
        moves = tmem(cta).moves
        for warp in np.unique(idx // 32):
            for complete in moves.pop((int(warp), kind), []):
                complete()

    return run


def _alloc(op: Op, ctx: Context) -> Exec:
    dst = ctx.address(op.operands[0], "shared")
    ncols = ctx.read(op.operands[1], "u32")

    def run(cta: Cta, idx: np.ndarray) -> Wait | None:
        state = tmem(cta)
        waiting = []
        for warp in _warps(cta, op, idx):
            n = _first(ncols(cta, warp))
            if n < 32 or n > COLUMNS or n & (n - 1):
                raise trap(cta, op, "tmem", f"tcgen05.alloc of {n} columns: must be a power of 2 in [32, 512]")
            if state.relinquished:
                raise trap(cta, op, "tmem", "tcgen05.alloc after tcgen05.relinquish_alloc_permit")
            start = next((s for s in range(0, COLUMNS, n) if (state.owner[s : s + n] < 0).all()), None)
            if start is None:
                waiting.append(warp)
                continue
            state.owner[start : start + n] = start
            state.allocations[start] = (n, op.line)
            addr = dst(cta, warp[:1])
            store(cta, "shared", addr, np.array([[start]], np.uint32).view(np.uint8), warp[:1], op.line)
        if not waiting:
            return None
        left = np.concatenate(waiting)

        def reason() -> str:
            used = {s: c for s, (c, _) in state.allocations.items()}
            return (f"tcgen05.alloc cannot get its columns: TMEM holds {COLUMNS} columns and "
                    f"{sum(used.values())} are allocated ({', '.join(f'{c} at {s}' for s, c in used.items())}) "
                    "and never freed")

        return Wait(left, reason, None, kind="tmem")

    return run


def _dealloc(op: Op, ctx: Context) -> Exec:
    taddr = ctx.read(op.operands[0], "b32")
    ncols = ctx.read(op.operands[1], "u32")

    def run(cta: Cta, idx: np.ndarray) -> None:
        state = tmem(cta)
        for warp in _warps(cta, op, idx):
            addr, n = _first(taddr(cta, warp)), _first(ncols(cta, warp))
            col = addr & 0xFFFF
            got = state.allocations.get(col)
            if got is None or got[0] != n:
                have = ", ".join(f"{c} columns at {s}" for s, (c, _) in state.allocations.items()) or "none"
                raise trap(cta, op, "tmem", f"tcgen05.dealloc of {n} columns at column {col}, which is no allocation "
                           f"(allocated: {have})")
            del state.allocations[col]
            state.owner[col : col + n] = -1
            state.written[:, col : col + n] = False
        cta.launch.version += 1

    return run


def _relinquish(op: Op, ctx: Context) -> Exec:
    def run(cta: Cta, idx: np.ndarray) -> None:
        tmem(cta).relinquished = True

    return run


def _region(cta: Cta, op: Op, lanes: np.ndarray, cols: np.ndarray, *, reading: bool, what: str) -> None:
    """Check that (lanes, cols) lie in allocated columns and, for a read, were written."""
    state = tmem(cta)
    if cols.size and (int(cols.min()) < 0 or int(cols.max()) >= COLUMNS or int(lanes.max()) >= LANES):
        raise trap(cta, op, "tmem", f"{what} reaches TMEM lane {int(lanes.max())} / column {int(cols.max())}, "
                   f"outside {LANES} x {COLUMNS}")
    if (state.owner[cols] < 0).any():
        bad = int(cols.reshape(-1)[np.argmax((state.owner[cols] < 0).reshape(-1))])
        raise trap(cta, op, "tmem", f"{what} touches TMEM column {bad}, which is not allocated")
    if reading and not state.written[lanes, cols].all() and cta.launch.findings.once_per_line("tmem", op.line):
        shape = np.broadcast(lanes, cols).shape
        unwritten = np.argwhere(~state.written[lanes, cols].reshape(shape))
        lane = int(np.broadcast_to(lanes, shape)[tuple(unwritten[0])])
        cta.launch.findings.add(Diagnostic(
            "tmem", op.line, f"{what} reads TMEM never written ({len(unwritten)} words, e.g. lane {lane})", cta.ctaid,
            False))


# ----------------------------------------------------------------------------- mma


@dataclass(frozen=True)
class InstrDesc:
    """The 32-bit instruction descriptor of kind::f16/tf32/f8f6f4/i8 (PTX "Instruction descriptor")."""

    d_type: str
    a_type: str
    b_type: str
    negate_a: bool
    negate_b: bool
    a_mn_major: bool
    b_mn_major: bool
    n: int
    m: int
    saturate: bool = False


class NotEmulated(ValueError):
    """A valid descriptor asking for what the emulator does not do (an `unsupported` diagnostic)."""


_D_TYPES = {0: "f16", 1: "f32", 2: "s32"}
# per kind: the A/B type codes of bits [7,10) and [10,13), and the D types the kind takes
_AB_TYPES = {"f16": {0: "f16", 1: "bf16"}, "tf32": {2: "tf32"},
             "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}, "i8": {0: "u8", 1: "s8"}}
_KIND_D = {"f16": ("f16", "f32"), "tf32": ("f32",), "f8f6f4": ("f16", "f32"), "i8": ("s32",)}
K_OF = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}


def decode_idesc(value: int, kind: str) -> InstrDesc:
    def bits(lo: int, width: int) -> int:
        return (value >> lo) & ((1 << width) - 1)

    if bits(2, 1):
        raise NotEmulated("sparse MMA (descriptor bit 2) is not emulated")
    if bits(30, 2):
        raise ValueError(f"max shift field [30,32) is {bits(30, 2)}; only .ws MMAs may set it")
    if bits(6, 1) or bits(23, 1) or bits(29, 1):
        raise ValueError("a reserved bit (6, 23 or 29) is set")
    table = _AB_TYPES.get(kind)
    if table is None:
        raise ValueError(f"kind::{kind} is not emulated")
    d = _D_TYPES.get(bits(4, 2))
    a, b = table.get(bits(7, 3)), table.get(bits(10, 3))
    if d not in _KIND_D[kind] or a is None or b is None:
        raise ValueError(f"types D={bits(4, 2)} A={bits(7, 3)} B={bits(10, 3)} are not valid for kind::{kind}")
    if "e2m1" in (a, b):
        raise NotEmulated("e2m1 operands of kind::f8f6f4 are not emulated (where a 4-bit element sits in its "
                         "shared-memory byte is not pinned down)")
    if bits(3, 1) and kind != "i8":
        raise ValueError("bit 3 (saturate) is set; only kind::i8 saturates")
    if kind == "i8" and (bits(13, 1) or bits(14, 1)):
        raise ValueError("negate bits 13/14 are set; kind::i8 cannot negate")
    if (bits(15, 1) and a[0] == "e" and a[1] in "23") or (bits(16, 1) and b[0] == "e" and b[1] in "23"):
        raise ValueError("MN-major (transposed) operands are 8-bit or wider only; fp6 is K-major")
    n, m = bits(17, 6) << 3, bits(24, 5) << 4
    if m not in (64, 128):
        raise ValueError(f"M = {m} (field [24,29) = {bits(24, 5)}); cta_group::1 takes 64 or 128")
    if not 8 <= n <= 256:
        raise ValueError(f"N = {n} (field [17,23) = {bits(17, 6)}); must be 8..256")
    return InstrDesc(d, a, b, bool(bits(13, 1)), bool(bits(14, 1)), bool(bits(15, 1)), bool(bits(16, 1)), n, m,
                     bool(bits(3, 1)))


@dataclass(frozen=True)
class _Issued:
    """An MMA's operands as its issuing thread gave them (register values at issue)."""

    idesc: int
    a_desc: int
    b_desc: int
    taddr: int
    accumulate: bool
    disabled: tuple[int, ...] | None


def _d_lanes(m: int, base: int) -> np.ndarray:
    rows = np.arange(m)
    return base + (rows if m == 128 else (rows % 16) + 32 * (rows // 16))


def _mma(op: Op, ctx: Context) -> Exec:
    kind = next(p.split("::", 1)[1] for p in op.parts if p.startswith("kind::"))
    if kind not in K_OF or "ws" in op.parts or "sp" in op.parts or "block_scale" in op.parts:
        raise ValueError(f"tcgen05.mma kind::{kind} {'/'.join(op.parts[3:])}")
    k = K_OF[kind]
    ops = list(op.operands)
    d_addr = ctx.read(ops[0].base, "b32") if isinstance(ops[0], Addr) and isinstance(ops[0].base, Reg) else None
    if d_addr is None or not isinstance(ops[0], Addr):
        raise ValueError("[d-tmem] must be a register address")
    d_off = ops[0].offset
    if isinstance(ops[1], Addr):
        raise ValueError("A in tensor memory is not emulated")
    a_desc, b_desc, idesc = ctx.read(ops[1], "b64"), ctx.read(ops[2], "b64"), ctx.read(ops[3], "b32")
    rest = ops[4:]
    disable = None
    if rest and isinstance(rest[0], Vec):
        disable = [ctx.read(o, "b32") for o in rest[0].items]
        rest = rest[1:]
    enable = ctx.read(rest[0], "pred")
    scale = rest[1].value if len(rest) > 1 and isinstance(rest[1], Imm) else 0

    def run(cta: Cta, idx: np.ndarray) -> None:
        for i in range(idx.size):  # each issuing thread starts its own MMA
            one = idx[i : i + 1]
            issued = _Issued(
                _first(idesc(cta, one)) & 0xFFFFFFFF, _first(a_desc(cta, one)) & 0xFFFFFFFFFFFFFFFF,
                _first(b_desc(cta, one)) & 0xFFFFFFFFFFFFFFFF, (_first(d_addr(cta, one)) + d_off) & 0xFFFFFFFF,
                bool(np.asarray(enable(cta, one)).reshape(-1)[0]),
                tuple(_first(r(cta, one)) for r in disable) if disable is not None else None)
            thread = int(one[0])

            def run_issued(issued: _Issued = issued) -> None:
                execute(cta, issued)

            def flush(thread: int = thread) -> None:
                _flush(cta, thread)

            tmem(cta).issued.setdefault(thread, []).append(run_issued)
            cta.launch.defer(flush)

    def execute(cta: Cta, issued: _Issued) -> None:
        """The MMA when it runs: operands read from shared memory then, D written to TMEM."""
        state = tmem(cta)
        try:
            desc = decode_idesc(issued.idesc, kind)
        except ValueError as err:
            kind_of = "unsupported" if isinstance(err, NotEmulated) else "descriptor"
            raise trap(cta, op, kind_of, f"instruction descriptor 0x{issued.idesc:08x}: {err}") from None
        a = operand(cta, op, issued.a_desc, "sm_100", desc.m, k, desc.a_type, desc.a_mn_major)
        b = operand(cta, op, issued.b_desc, "sm_100", desc.n, k, desc.b_type, desc.b_mn_major)
        if desc.negate_a:
            a = -a
        if desc.negate_b:
            b = -b
        lanes = _d_lanes(desc.m, issued.taddr >> 16)[:, None]
        cols = (issued.taddr & 0xFFFF) + np.arange(desc.n)[None, :]
        _region(cta, op, lanes, cols, reading=issued.accumulate, what="tcgen05.mma's accumulator")
        prod = a @ b.T
        old = state.data[lanes, cols]
        if issued.accumulate:
            prod = prod + to_value(old, desc.d_type) * (2.0 ** -scale if scale else 1)
        new = _to_tmem(prod, desc)
        keep = np.zeros(desc.m, bool)
        if issued.disabled is not None:
            keep = np.array([(issued.disabled[ln // 32] >> (ln % 32)) & 1 for ln in lanes[:, 0]], bool)
        new = np.where(keep[:, None], old, new)
        state.data[lanes, cols] = new
        state.written[lanes, cols] |= ~keep[:, None]

    return run


def _to_tmem(d: np.ndarray, desc: InstrDesc) -> np.ndarray:
    """Exact sums as TMEM words, rounded once as mma.sync and wgmma round them (an f16 in the low
    half; s32 clamped where the descriptor's saturate bit is set)."""
    return rounded(d, desc.d_type, desc.saturate).view(np.uint32)


def _commit(op: Op, ctx: Context) -> Exec:
    addr = ctx.address(op.operands[0], "shared::cluster")
    mask = ctx.read(op.operands[1], "u16") if "multicast::cluster" in op.parts else None

    def run(cta: Cta, idx: np.ndarray) -> None:
        a = addr(cta, idx)
        for i in range(idx.size):
            ad = int(a[i])
            if mask is None:
                bars = [ad]
            else:
                m = _first(mask(cta, idx[i : i + 1]))
                bars = [(ad & SHARED_OFFSET_MASK) | (c.rank << RANK_SHIFT) for c in cta.cluster_ctas if m >> c.rank & 1]

            def complete(thread: int = int(idx[i]), bars: list[int] = bars) -> None:
                """When the thread's earlier MMAs have run: one arrive on each barrier."""
                _flush(cta, thread)
                for bar in bars:
                    arrive_on(cta, bar, 1, op)

            cta.launch.defer(complete)

    return run


# ----------------------------------------------------------------------------- ld / st


def _access_map(shape: str, num: int, imm: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane offset, column offset) per (thread, register) of a tcgen05.ld/st shape (§3.5)."""
    t = np.arange(32)[:, None]
    if shape == "32x32b":
        j = np.arange(num)[None, :]
        return np.broadcast_to(t, (32, num)), np.broadcast_to(j, (32, num))
    if shape == "16x256b":
        j = np.arange(4 * num)[None, :]
        i, h, e = j // 4, (j // 2) % 2, j % 2
        return t // 4 + 8 * h + 0 * j, 8 * i + 2 * (t % 4) + e
    if shape == "16x128b":
        j = np.arange(2 * num)[None, :]
        i, h = j // 2, j % 2
        return t // 4 + 8 * h + 0 * j, 4 * i + t % 4
    if shape == "16x64b":
        j = np.arange(num)[None, :]
        return t // 4 + 8 * (t % 2) + 0 * j, 2 * j + (t // 2) % 2
    if shape == "16x32bx2":
        j = np.arange(num)[None, :]
        return np.where(t < 16, t, t - 16) + 0 * j, j + np.where(t < 16, 0, imm)
    raise ValueError(f"tcgen05 shape .{shape}")


def _ldst(op: Op, ctx: Context, load: bool) -> Exec:
    shape = next(p for p in op.parts if p in ("32x32b", "16x256b", "16x128b", "16x64b", "16x32bx2"))
    num = int(next(p for p in op.parts if p.startswith("x") and p[1:].isdigit())[1:])
    packed = "pack::16b" in op.parts or "unpack::16b" in op.parts
    regs_op, addr_op = (op.operands[0], op.operands[1]) if load else (op.operands[1], op.operands[0])
    regs = regs_op.items if isinstance(regs_op, Vec) else (regs_op,)
    imm = op.operands[2].value if len(op.operands) > 2 and isinstance(op.operands[2], Imm) else 0
    lane_off, col_off = _access_map(shape, num, imm)
    words = lane_off.shape[1]
    if packed:  # two 16-bit halves per register: twice the columns, taken in adjacent pairs
        lane_off, col_off = _access_map(shape, 2 * num, imm)
    if len(regs) != words:
        raise ValueError(f"{len(regs)} registers for .{shape}.x{num}")
    if not isinstance(addr_op, Addr) or not isinstance(addr_op.base, Reg):
        raise ValueError("[taddr] must be a register address")
    taddr = ctx.read(addr_op.base, "b32")
    t_off = addr_op.offset
    writers = [ctx.write(r, "b32") for r in regs] if load else []
    readers = [ctx.read(r, "b32") for r in regs] if not load else []
    kind = "ld" if load else "st"
    what = f"tcgen05.{kind}"

    def run(cta: Cta, idx: np.ndarray) -> None:
        state = tmem(cta)
        for warp in _warps(cta, op, idx):
            addrs = np.asarray(taddr(cta, warp)).astype(np.int64) + t_off
            if not (addrs == addrs[0]).all():
                raise trap(cta, op, "tmem", f"{what}: the threads of a warp pass different addresses")
            base = int(addrs[0])
            lane0, col0 = base >> 16, base & 0xFFFF
            quadrant = (int(warp[0]) // 32) % 4
            lanes = lane0 + lane_off
            cols = col0 + col_off
            if (lanes // 32 != quadrant).any():
                raise trap(cta, op, "tmem", f"{what} by warp {int(warp[0]) // 32} reaches TMEM lanes "
                           f"{int(lanes.min())}..{int(lanes.max())}; warp % 4 = {quadrant} may only touch lanes "
                           f"{32 * quadrant}..{32 * quadrant + 31}")
            complete: Callable[[], None]
            if load:
                def complete_ld(warp: np.ndarray = warp, lanes: np.ndarray = lanes, cols: np.ndarray = cols) -> None:
                    _region(cta, op, lanes, cols, reading=True, what=what)
                    vals = state.data[lanes, cols]
                    if packed:
                        vals = (vals[:, 0::2] & 0xFFFF) | ((vals[:, 1::2] & 0xFFFF) << 16)
                    for j, write in enumerate(writers):
                        write(cta, warp, vals[:, j].astype(np.uint32))

                complete = complete_ld
            else:
                vals = np.stack([np.asarray(r(cta, warp)).astype(np.uint32) for r in readers], axis=1)
                if packed:
                    vals = np.stack([vals & 0xFFFF, vals >> 16], axis=2).reshape(32, -1)

                def complete_st(lanes: np.ndarray = lanes, cols: np.ndarray = cols, vals: np.ndarray = vals) -> None:
                    _region(cta, op, lanes, cols, reading=False, what=what)
                    state.data[lanes, cols] = vals
                    state.written[lanes, cols] = True

                complete = complete_st

            if cta.launch.deferred:
                state.moves.setdefault((int(warp[0]) // 32, kind), []).append(complete)
            else:
                complete()

    return run


def _ld(op: Op, ctx: Context) -> Exec:
    return _ldst(op, ctx, load=True)


def _st(op: Op, ctx: Context) -> Exec:
    return _ldst(op, ctx, load=False)
