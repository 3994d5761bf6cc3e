"""The state of a launch and of each CTA: registers, shared and local memory, special registers.

Registers are NumPy arrays with one element per thread of the CTA (raw bits, see
:mod:`porter.emu.ptxtypes`); an instruction runs on the indices of the threads that execute it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from porter.emu import ptxtypes
from porter.emu.diagnostics import Diagnostic, Findings
from porter.emu.memory import SHARED_START, GlobalMemory

if TYPE_CHECKING:
    from porter.emu.decode import Program


@dataclass
class Launch:
    """What all CTAs of a launch share."""

    program: Program
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    memory: GlobalMemory
    param_bytes: np.ndarray
    const_bytes: np.ndarray
    symbols: dict[str, int]  # variable and parameter name -> address in its own space
    shared_layout: dict[str, int]  # shared variable -> offset in every CTA
    shared_size: int  # bytes of shared memory per CTA, SHARED_START included
    dynamic_smem: int
    local_size: int
    tensormaps: dict[int, Any]  # param-space offset of a CUtensorMap param -> its TensorMap
    findings: Findings = field(default_factory=Findings)
    check_uninitialized: bool = True
    # What a kernel could read of its surroundings, drawn from ``seed`` (the same for every
    # schedule of one emulate() call): the SMs (%nsmid, each CTA's %smid), the launch's %gridid,
    # and the bytes shared and local memory hold before anything writes them.
    seed: int = 0
    sm_count: int = 132
    steps: int = 0
    version: int = 0  # bumped by every change a blocked wait might be waiting for
    # Asynchronous completions (TMA, bulk copies, tcgen05.mma and commit): run at once when
    # ``deferred`` is False, else queued here and run by the scheduler at its next decision.
    deferred: bool = False
    pending: list[Callable[[], None]] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)  # what device-side printf printed, call by call

    @property
    def grid_id(self) -> int:
        """%gridid: 64 bits drawn from the seed (a gate's case seed is a small number)."""
        return random.Random(self.seed).getrandbits(64)

    def defer(self, complete: Callable[[], None]) -> None:
        """Run an asynchronous operation's completion now, or later under a deferring schedule."""
        if self.deferred:
            self.pending.append(complete)
        else:
            complete()


def _garbage(draw: np.random.Generator, n: int, dtype: np.dtype) -> np.ndarray:
    """``n`` registers of ``dtype`` holding random bits (predicates random truths)."""
    if dtype == np.dtype(bool):
        return draw.integers(0, 2, n).astype(bool)
    return draw.integers(0, 256, n * dtype.itemsize, np.uint8).view(dtype)


class Cta:
    """One CTA: registers for every thread, its shared memory, TMEM, barriers and async state."""

    def __init__(self, launch: Launch, ctaid: tuple[int, int, int], rank: int) -> None:
        self.launch = launch
        self.ctaid = ctaid
        self.rank = rank
        bx, by, bz = launch.block
        self.nthreads = n = bx * by * bz
        t = np.arange(n, dtype=np.uint32)
        self.tid = (t % bx, (t // bx) % by, t // (bx * by))
        self.linear = t
        draw = np.random.default_rng([launch.seed, rank, *ctaid])
        self.smid = int(draw.integers(launch.sm_count))
        self.smem = draw.integers(0, 256, launch.shared_size, np.uint8)  # what an earlier kernel left
        self.smem_written = np.zeros(launch.shared_size, bool)
        self.smem_written[:SHARED_START] = True
        # The swizzle span a TMA load wrote each byte with (-1: written otherwise, or not at all),
        # so that an MMA descriptor reading it with another swizzle is reported.
        self.smem_swizzle = np.full(launch.shared_size, -1, np.int16)
        self.local = draw.integers(0, 256, (n, launch.local_size), np.uint8)
        # A register holds whatever was there until the kernel writes it (on a GPU, what an earlier
        # kernel or thread left): a result that depends on one never written differs between draws.
        self.regs: dict[str, np.ndarray] = {name: _garbage(draw, n, ptxtypes.storage(decl))
                                            for name, decl in launch.program.registers.items()}
        self.exited = np.zeros(n, bool)
        self.cluster_ctas: list[Cta] = [self]
        self.current: np.ndarray | None = None  # the thread indices of the instruction being run
        # Per-subsystem state, created by the module that owns it (sync, tcgen05, cp.async ...).
        self.ext: dict[str, Any] = {}

    def reg(self, name: str, store: np.dtype | None = None) -> np.ndarray:
        arr = self.regs.get(name)
        if arr is None:
            arr = self.regs[name] = np.zeros(self.nthreads, store if store is not None else np.uint64)
        return arr

    def check_written(self, target: Cta, offs: np.ndarray, width: int, line: int) -> None:
        """Report (once per line) a read of shared bytes nothing has written."""
        if not self.launch.check_uninitialized:
            return
        written = target.smem_written[offs[:, None] + np.arange(width)]
        if not written.all():
            i = int(np.argmax(~written.all(axis=1)))
            self.launch.findings.add(Diagnostic(
                "uninitialized-shared", line,
                f"read of shared memory never written, at offset 0x{int(offs[i]):x} ({width} bytes)",
                self.ctaid, False, {"offset": int(offs[i])}))
