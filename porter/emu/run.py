"""The public entry point: :func:`emulate` one kernel launch, get an :class:`EmuResult`.

CTAs run one cluster at a time, in grid order (x fastest). A fatal diagnostic (an out-of-bounds
access, a deadlock, an unsupported instruction) stops the launch, as a fault stops a GPU
launch; the buffers then hold whatever was written until then. With several schedules the
launch runs once per schedule on fresh copies of the arguments, and outputs that differ between
schedules are reported as an ordering race.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from porter.emu.args import ModuleGlobals, TensorMap, lay_out, lay_out_globals
from porter.emu.calls import function_addresses, link
from porter.emu.compile import compile_program
from porter.emu.context import Context
from porter.emu.decode import Program
from porter.emu.diagnostics import Diagnostic, EmuTrap, Findings
from porter.emu.memory import LOCAL_WINDOW, SHARED_START, GlobalMemory
from porter.emu.schedule import Deadlocked, Scheduler
from porter.emu.state import Cta, Launch
from porter.errors import InputError
from porter.ptx.arch import get_profile
from porter.ptx.model import PtxModule
from porter.ptx.parser import parse_ptx

Dim3 = tuple[int, int, int]
MAX_SHARED = 232448  # the H200/B200 opt-in maximum of shared memory per CTA


@dataclass
class EmuResult:
    """The outcome of one emulated launch (or of one per schedule, compared)."""

    buffers: dict[int, np.ndarray]  # argument index -> the array the kernel wrote (the caller's own when it could be)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    steps: int = 0  # instruction executions (groups of threads count once)
    seconds: float = 0.0
    schedules: tuple[str, ...] = ("minpc",)
    # What device-side printf printed, one string per call and thread (a group's threads in
    # thread order), under the first schedule.
    printed: list[str] = field(default_factory=list)
    seed: int = 0  # what drew the launch's surroundings (emulate's ``seed``)

    @property
    def fatal(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.fatal]

    @property
    def ok(self) -> bool:
        """No fatal diagnostic and no race between schedules."""
        return not self.fatal and not any(d.kind == "race" for d in self.diagnostics)


def _dim3(v: int | Sequence[int]) -> Dim3:
    t = (v,) if isinstance(v, int) else tuple(v)
    t = tuple(t) + (1,) * (3 - len(t))
    return int(t[0]), int(t[1]), int(t[2])


@lru_cache(maxsize=16)
def _decoded(digest: str, text: str, entry: str) -> Program:
    return link(parse_ptx(text), entry)


def program_of(ptx: str | PtxModule, entry: str) -> Program:
    if isinstance(ptx, PtxModule):
        return link(ptx, entry)
    return _decoded(hashlib.sha1(ptx.encode()).hexdigest(), ptx, entry)


def _shared_layout(program: Program, dynamic: int) -> tuple[dict[str, int], int]:
    layout: dict[str, int] = {}
    off = SHARED_START
    externs = []
    for var in program.variables.values():
        if var.space != "shared":
            continue
        if var.size is None:
            externs.append(var)
            continue
        off = (off + var.align - 1) // var.align * var.align
        layout[var.name] = off
        off += var.size
    align = max([16] + [v.align for v in externs])
    off = (off + align - 1) // align * align
    for var in externs:
        layout[var.name] = off
    return layout, off + dynamic


def _local_layout(program: Program, symbols: dict[str, int]) -> int:
    off = 0
    for var in program.variables.values():
        if var.space == "local":
            off = (off + var.align - 1) // var.align * var.align
            symbols[var.name] = LOCAL_WINDOW + off
            off += var.size or 0
    return off


def _sm_count(program: Program) -> int:
    """The SMs of the target's flagship part (%nsmid), 132 (an H100's) where porter has no profile."""
    try:
        return get_profile(program.module.arch).peak.sm_count
    except InputError:
        return 132


@dataclass(frozen=True)
class _Surroundings:
    """What one emulate() call's launches share besides the program: the places' seed, the arguments'
    alignments, the read-only ones, their names in findings, the module's variables."""

    seed: int
    aligns: Mapping[int, int]
    read_only: Collection[int]
    names: Mapping[int, str]
    module: ModuleGlobals | None


def _launch(program: Program, args: list[Any], grid: Dim3, block: Dim3, cluster: Dim3, dynamic_smem: int,
            check_uninitialized: bool, around: _Surroundings) -> tuple[Launch, dict[int, np.ndarray]]:
    seed = around.seed
    memory = GlobalMemory(random.Random(seed))
    for kept in (around.module.buffers.values() if around.module is not None else ()):
        memory.place(kept)  # before the arguments are drawn: a module variable's address never changes
    layout = lay_out(program, args, memory, around.aligns, around.read_only, around.names)
    symbols = function_addresses(program.module) | layout.symbols
    const = lay_out_globals(program, layout.memory, symbols, around.module)
    shared_layout, shared_size = _shared_layout(program, dynamic_smem)
    local_size = _local_layout(program, symbols)
    tensormaps: dict[int, Any] = {off: tm for off, tm in layout.tensormaps.items()}
    launch = Launch(program, grid, block, cluster, layout.memory, layout.param_bytes, const, symbols, shared_layout,
                    shared_size, dynamic_smem, local_size, tensormaps, Findings(),
                    check_uninitialized=check_uninitialized, seed=seed, sm_count=_sm_count(program))
    if shared_size - SHARED_START > MAX_SHARED:
        launch.findings.add(Diagnostic("trap", 0, f"{shared_size - SHARED_START} bytes of shared memory per CTA, "
                                       f"more than the {MAX_SHARED} a GPU grants", (0, 0, 0), True))
    return launch, layout.arrays


def _clusters(grid: Dim3, cluster: Dim3) -> list[list[Dim3]]:
    gx, gy, gz = grid
    cx, cy, cz = cluster
    if gx % cx or gy % cy or gz % cz:
        raise ValueError(f"grid {grid} is not a whole number of clusters {cluster}")
    out = []
    for z0 in range(0, gz, cz):
        for y0 in range(0, gy, cy):
            for x0 in range(0, gx, cx):
                out.append([(x0 + x, y0 + y, z0 + z) for z in range(cz) for y in range(cy) for x in range(cx)])
    return out


def _run_once(program: Program, args: list[Any], grid: Dim3, block: Dim3, cluster: Dim3, dynamic_smem: int,
              schedule: str, max_steps: int, check_uninitialized: bool,
              ctas: Sequence[Dim3] | None, around: _Surroundings) -> tuple[dict[int, np.ndarray], Launch]:
    launch, arrays = _launch(program, args, grid, block, cluster, dynamic_smem, check_uninitialized, around)
    if any(d.fatal for d in launch.findings.items):
        return arrays, launch
    execs = compile_program(program, launch)

    ctx = Context(program, launch)
    guards = [ctx.read(op.guard, "pred") if op.guard is not None else None for op in program.ops]
    wanted = set(ctas) if ctas is not None else None
    for members in _clusters(grid, cluster):
        if wanted is not None and not wanted & set(members):
            continue
        group = [Cta(launch, cid, rank) for rank, cid in enumerate(members)]
        for c in group:
            c.cluster_ctas = group
        try:
            Scheduler(program, execs, guards, group, schedule, max_steps).run()
            for c in group:
                for check in c.ext.get("at_exit", []):
                    check(c)
        except EmuTrap as err:
            launch.findings.add(err.diagnostic)
            break
        except Deadlocked:
            break
    return arrays, launch


def emulate(ptx: str | PtxModule, entry: str, grid: int | Sequence[int], block: int | Sequence[int],
            args: Sequence[Any], *, dynamic_smem: int = 0, cluster: int | Sequence[int] | None = None,
            schedule: str | Sequence[str] = "minpc", max_steps: int = 50_000_000,
            check_uninitialized: bool = True, ctas: Sequence[Sequence[int]] | None = None,
            seed: int | None = None, aligns: Mapping[int, int] | None = None, read_only: Collection[int] = (),
            names: Mapping[int, str] | None = None, module: ModuleGlobals | None = None) -> EmuResult:
    """Run ``entry`` of ``ptx`` on the CPU over ``args`` (see :mod:`porter.emu.args`).

    ``schedule`` is one schedule or several (``"minpc"``, ``"round_robin"``, ``"random:SEED"``);
    with several, each runs on a fresh copy of the arguments, the first one's results go to the
    caller's arrays, and any output that differs between them is reported as a race. ``ctas``
    limits the run to the clusters holding those CTA ids (a quick look at one tile). ``cluster``
    defaults to the entry's ``.reqnctapercluster`` (else one CTA per cluster). ``seed`` draws
    what a kernel could read of its surroundings (where its buffers lie, the bits of registers and
    of shared and local memory before it writes them, %smid, %gridid): the same for every
    schedule, fresh and unpredictable when None (:attr:`EmuResult.seed` says which, to replay it).
    ``aligns`` maps an array argument's index to the alignment its start keeps (the spec's
    contract), where that is more than 16 bytes or the pointer's ``.ptr .align``. A store to an
    array argument whose index is in ``read_only`` is fatal (``read-only``), as a store through
    the GPU gate's read-only mapping of an input faults. ``names`` says what findings call an
    array argument, by its index (by default ``arg2 (param_name)``, or ``argument 2`` in a
    race). ``module`` carries the module's
    ``.global`` variables between calls (:class:`~porter.emu.args.ModuleGlobals`); with several
    schedules each starts from them, and the first one's end state is kept.
    """
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little")
    started = time.perf_counter()
    program = program_of(ptx, entry)
    schedules = (schedule,) if isinstance(schedule, str) else tuple(schedule)
    if cluster is None:
        declared = program.entry.directive("reqnctapercluster")
        cluster = declared.values if declared is not None and declared.values else (1, 1, 1)
    g, b, c = _dim3(grid), _dim3(block), _dim3(cluster)
    only = [_dim3(x) for x in ctas] if ctas is not None else None
    args = list(args)
    pristine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    loaded = module.copy() if module is not None and len(schedules) > 1 else None
    results: list[tuple[dict[int, np.ndarray], Launch]] = []
    for i, s in enumerate(schedules):
        run_args = args if i == 0 else [a.copy() if isinstance(a, np.ndarray) else a for a in pristine]
        around = _Surroundings(seed, aligns or {}, frozenset(read_only), names or {},
                               module if i == 0 or loaded is None else loaded.copy())
        with np.errstate(all="ignore"):  # a kernel's overflows and NaNs are its results, not Python's warnings
            results.append(_run_once(program, run_args, g, b, c, dynamic_smem, s, max_steps, check_uninitialized,
                                     only, around))
    buffers, main = results[0]
    diagnostics = list(main.findings.items)
    for s, (other, launch) in zip(schedules[1:], results[1:], strict=True):
        for d in launch.findings.items:
            if d not in diagnostics:
                diagnostics.append(d)
        for k, arr in buffers.items():
            a = arr.reshape(-1).view(np.uint8)
            o = other[k].reshape(-1).view(np.uint8)
            if not np.array_equal(a, o):
                first = int(np.argmax(a != o))
                diagnostics.append(Diagnostic(
                    "race", 0, f"{(names or {}).get(k, f'argument {k}')} differs between schedules {schedules[0]} and {s} "
                    f"({int((a != o).sum())} bytes, first at byte {first}): an ordering race", (0, 0, 0), False,
                    {"argument": k, "first_byte": first}))
    return EmuResult(buffers, diagnostics, main.steps, time.perf_counter() - started, schedules, main.printed, seed)


__all__ = ["EmuResult", "ModuleGlobals", "TensorMap", "emulate"]
