"""cp.async: copies from global to shared memory that land when the issuing thread waits for them.

A ``cp.async`` reads its source when issued and lands in shared memory only when a
``cp.async.wait_group``/``wait_all`` (or ``cp.async.mbarrier.arrive``) of the issuing thread
covers it, so a kernel that reads the destination too early sees the old bytes, as it might on
the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.emu.access import load
from porter.emu.context import Context, Exec, builder, trap
from porter.emu.decode import Imm, Op, Reg
from porter.emu.memory import RANK_SHIFT, SHARED_OFFSET_MASK
from porter.emu.state import Cta
from porter.emu.sync import arrive_on, per_address


@dataclass
class _Copy:
    threads: np.ndarray  # the issuing thread of each copy
    group: np.ndarray  # its group number in that thread (cp.async.commit_group count at issue)
    dst: np.ndarray  # shared offsets (own CTA)
    data: np.ndarray  # (copies, bytes)


@dataclass
class AsyncCopies:
    """One CTA's cp.async copies not yet landed, and each thread's committed-group count."""

    committed: np.ndarray
    pending: list[_Copy] = field(default_factory=list)

    def land(self, cta: Cta, threads: np.ndarray, below: np.ndarray | None) -> None:
        """Land the copies of ``threads`` whose group number is < ``below[thread]`` (None: all)."""
        keep: list[_Copy] = []
        for c in self.pending:
            mine = np.isin(c.threads, threads)
            if below is not None:
                mine &= c.group < below[c.threads]
            if mine.any():
                offs = c.dst[mine]
                cols = offs[:, None] + np.arange(c.data.shape[1])
                cta.smem[cols] = c.data[mine]
                cta.smem_written[cols] = True
                cta.smem_swizzle[cols] = -1
            if (~mine).any():
                keep.append(_Copy(c.threads[~mine], c.group[~mine], c.dst[~mine], c.data[~mine]))
        self.pending = keep


def copies(cta: Cta) -> AsyncCopies:
    state = cta.ext.get("cp.async")
    if state is None:
        state = cta.ext["cp.async"] = AsyncCopies(np.zeros(cta.nthreads, np.int64))
    return state


@builder("cp.async")
def _cp(op: Op, ctx: Context) -> Exec:
    if op.parts[:3] == ("cp", "async", "commit_group"):
        def commit(cta: Cta, idx: np.ndarray) -> None:
            copies(cta).committed[idx] += 1

        return commit
    if op.parts[:3] in (("cp", "async", "wait_group"), ("cp", "async", "wait_all")):
        keep = 0
        if op.parts[2] == "wait_group":
            n = op.operands[0]
            if not isinstance(n, Imm):
                raise ValueError("wait_group needs an immediate")
            keep = n.value

        def wait(cta: Cta, idx: np.ndarray) -> None:
            state = copies(cta)
            if op.parts[2] == "wait_all":
                state.land(cta, idx, None)
                return
            state.land(cta, idx, state.committed - keep)

        return wait
    return _cp_async(op, ctx)


def _cp_async(op: Op, ctx: Context) -> Exec:
    """``cp.async.ca|cg.shared{::cta}.global [dst], [src], cp-size{, src-size}{, policy}``."""
    dst = ctx.address(op.operands[0], "shared")
    src = ctx.address(op.operands[1], "global")
    size_op = op.operands[2]
    if not isinstance(size_op, Imm):
        raise ValueError("cp-size must be an immediate")
    size = size_op.value
    rest = list(op.operands[3:])
    if "L2::cache_hint" in op.parts and rest:
        rest.pop()
    src_size = None
    ignore = None
    if rest:
        last = rest[-1]
        if isinstance(last, Reg) and ctx.program.registers.get(last.name) == ".pred":
            ignore = ctx.read(last, "pred")
            rest.pop()
        if rest:
            src_size = ctx.read(rest[0], "u32")
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> None:
        d = dst(cta, idx).astype(np.int64) & SHARED_OFFSET_MASK
        n = np.full(idx.size, size, np.int64)
        if src_size is not None:
            n = np.minimum(np.broadcast_to(np.asarray(src_size(cta, idx)), (idx.size,)).astype(np.int64), size)
        if ignore is not None:
            n = np.where(ignore(cta, idx), 0, n)
        data = np.zeros((idx.size, size), np.uint8)
        reading = n > 0
        if reading.any():
            got = load(cta, "global", src(cta, idx)[reading], size if (n[reading] == size).all() else 1, idx[reading],
                       line) if (n[reading] == size).all() else None
            if got is not None:
                data[reading] = got
            else:
                for i in np.flatnonzero(reading):
                    k = int(n[i])
                    data[i, :k] = load(cta, "global", src(cta, idx[i : i + 1]) + np.arange(k, dtype=np.uint64), 1,
                                       np.repeat(idx[i : i + 1], k), line).reshape(-1)
        if (d < 1024).any() or (d + size > cta.smem.size).any():
            raise trap(cta, op, "out-of-bounds", f"cp.async destination 0x{int(d.min()):x} outside shared memory")
        state = copies(cta)
        state.pending.append(_Copy(idx.copy(), state.committed[idx].copy(), d, data))

    return run


@builder("cp.async.mbarrier")
def _cp_async_arrive(op: Op, ctx: Context) -> Exec:
    """``cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [mbar]``: the thread's cp.async copies land,
    then it arrives; without ``.noinc`` the pending count was raised first, so the arrival is net zero."""
    addr = ctx.address(op.operands[0], "shared")
    noinc = "noinc" in op.parts

    def run(cta: Cta, idx: np.ndarray) -> None:
        copies(cta).land(cta, idx, None)
        if not noinc:
            return
        for ad, n in per_address(addr(cta, idx)).items():
            arrive_on(cta, (ad & SHARED_OFFSET_MASK) | (cta.rank << RANK_SHIFT), n, op)

    return run
