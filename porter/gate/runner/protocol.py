"""The jobs porter's GPU worker runs and what it answers, as types.

The gate (``porter.gate.check``, ``porter.gate.golden``) builds a job, a runner carries it to a
worker (the real one in ``worker.py``, the fake GPU of ``fake.py``, a test's scripted runner) and
hands back the worker's reply of the matching type. Every producer builds these types and every
consumer reads them by attribute: a field renamed or missing is a type error where it happens,
not a ``KeyError`` several modules away.

On the pipe a job travels as itself (pickled); a reply travels inside an envelope (``{"ok": True,
"reply": ...}`` or ``{"ok": False, "error": ..., "sticky": ..., "kind": ...}``), its large arrays
parked in shared memory on the way (``transfer.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from porter.gate.summary import OutputSummary

# Initial contents of the outputs, one per run of a case: the dtype's NaN (or 0x5A..) poison,
# random finite values no kernel can tell from a result, and zeros (what a caller's memset or
# torch.zeros leaves). A kernel that skips work when it sees "already computed" outputs, leans on
# NaN arithmetic (fmaxf(NaN, v) = v) or writes only where an output is not yet zero fails one.
INITIAL_STATES = ("poison", "random", "zeros")

Outputs = dict[str, np.ndarray]
# Where a case's outputs are compared with the reference: on the GPU, by the worker, an output
# crossing to the parent only where it fails (``porter.gate.runner.judge``), or all of them on the host.
Judge = Literal["device", "host"]


@dataclass(frozen=True)
class Reference:
    """Where a case's reference outputs come from: ``python`` (a function of the spec: ``path``,
    ``function``), ``source`` (a kernel: ``cubin``, ``entry``, its own ``launch``), ``golden``
    (recorded outputs: ``path``) or ``held`` (the caller has them already; to a worker that
    judges on the device it hands them over as ``outputs``). ``key`` names the reference in the
    worker's cache."""

    kind: Literal["python", "source", "golden", "held"]
    key: str = ""
    path: str = ""
    function: str = ""
    cubin: bytes = b""
    entry: str = ""
    launch: dict[str, Any] | None = None
    outputs: Outputs | None = None


PREFETCH_DEPTH = 2  # coming cases a case job names, whose inputs the worker draws ahead (see Upcoming)


@dataclass(frozen=True)
class Upcoming:
    """A case the caller will ask for next (its sizes, seed and value case), whose inputs the
    worker may draw while the GPU works on this one."""

    sizes: dict[str, int]
    seed: int
    values: str = ""


@dataclass(frozen=True)
class CaseJob:
    """One case of a check: the candidate's hot loop once per initial output state (see
    ``jobs.job_case``), and the case's reference, judged where ``judge`` says; with
    ``send_reference`` (the caller keeps references across checks) a reference the worker made
    comes back even where every output passed on the device."""

    op: ClassVar[str] = "case"
    cubin: bytes
    entry: str
    spec_path: str
    sizes: dict[str, int]
    seed: int
    reference: Reference
    values: str = ""
    initials: tuple[str, ...] = INITIAL_STATES
    launch: dict[str, Any] | None = None  # the candidate's own launch directive
    first: bool = False  # a check's first case: the module's globals as loaded
    judge: Judge = "host"
    send_reference: bool = False
    upcoming: tuple[Upcoming, ...] = ()  # the next cases of the check, whose inputs may be drawn ahead


@dataclass(frozen=True)
class CaseReply:
    """Each run's outputs (None: bit-identical to the first run's), the initial states they
    started from, the reference (None when it was ``held``, or judged on the device and not asked
    for), out-of-bounds writes, inputs the kernel changed, the first run's output digests (0 for an
    output declared nondeterministic), the kernel's seconds and, where buffers could not be fenced,
    why, and the module variables its launches left other than they found them. A case judged on
    the device where every output of every run passed (and no output declared
    deterministic differs between runs) has ``summaries`` (per run, per output) and no ``outputs``;
    any other case has ``outputs`` and no ``summaries``, and is judged on the host."""

    outputs: list[Outputs | None]
    initials: list[str]
    reference: Outputs | None
    summaries: list[dict[str, OutputSummary]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    digests: list[int] = field(default_factory=list)
    kernel_s: float = 0.0
    fence: str = ""
    worker_s: float = 0.0
    moved: list[str] = field(default_factory=list)  # module variables the case's launches moved (state.state_moves)


@dataclass(frozen=True)
class Contender:
    """One timed contender: a kernel (``cubin``, ``entry``, its own ``launch``) or a library
    callable (``path``, ``function``)."""

    name: str
    kind: Literal["kernel", "callable"]
    cubin: bytes = b""
    entry: str = ""
    launch: dict[str, Any] | None = None
    path: str = ""
    function: str = ""


@dataclass(frozen=True)
class TimeJob:
    """Time contenders interleaved at one size set, rotating through one input set per seed (a
    seed may come twice: set ``i`` lies as a checked case's run ``i``, see ``jobs.job_time``),
    until each contender's median on each set is known within ±``ci_target`` (95%) or
    ``budget_s`` or ``max_reps`` is spent; with ``references`` (one per seed), nondeterministic
    outputs are held to them."""

    op: ClassVar[str] = "time"
    spec_path: str
    sizes: dict[str, int]
    seeds: tuple[int, ...]
    contenders: tuple[Contender, ...]
    budget_s: float = 2.0
    max_reps: int = 1000
    min_reps: int = 20  # the first batch: 10 a set over two sets, an interval of the 2nd and 9th of 10
    ci_target: float = 0.01  # relative half-width of each median's 95% confidence interval
    references: tuple[Reference | None, ...] | None = None


@dataclass(frozen=True)
class TimeReply:
    """Per contender (in the job's order): its launch times, one per round run (as many as the
    run took to know the medians, see ``jobs.job_time``); for a kernel, one number per output
    per timed launch (launch ``r`` ran on set ``r % len(seeds)``) and the guard problems."""

    names: list[str]
    times_ms: list[list[float]]
    digests: list[list[int] | None]
    outputs_per_launch: int
    guards: list[list[str]]
    seeds: list[int]
    worker_s: float = 0.0

    def of(self, name: str) -> int:
        """The index of contender ``name``."""
        return self.names.index(name)


@dataclass(frozen=True)
class RepeatJob:
    """The candidate launched ``launches`` times in a row on a timed size set's first input set
    (placed as that set is timed), as a program calls it: its module's globals as loaded before the
    first launch, then carried from launch to launch, each launch from fresh poison and digested as
    a timed launch is (see ``jobs.job_repeat``); with ``reference``, nondeterministic outputs are
    held to it. Not timed, so it shares the GPU."""

    op: ClassVar[str] = "repeat"
    spec_path: str
    sizes: dict[str, int]
    seed: int
    candidate: Contender
    launches: int
    reference: Reference | None = None


@dataclass(frozen=True)
class RepeatReply:
    """One number per output per launch (as :class:`TimeReply`'s digests), the guard problems, and
    the module variables a launch after the first left other than it found them, each with the
    first launch that did (see ``state.state_moves``)."""

    digests: list[int]
    guards: list[str]
    moved: list[str] = field(default_factory=list)
    worker_s: float = 0.0


@dataclass(frozen=True)
class OutputsJob:
    """Run a kernel once and return its outputs (``porter record``)."""

    op: ClassVar[str] = "outputs"
    cubin: bytes
    entry: str
    spec_path: str
    sizes: dict[str, int]
    seed: int
    values: str = ""
    launch: dict[str, Any] | None = None


@dataclass(frozen=True)
class OutputsReply:
    outputs: Outputs
    worker_s: float = 0.0


Job = CaseJob | TimeJob | RepeatJob | OutputsJob
Reply = CaseReply | TimeReply | RepeatReply | OutputsReply
REPLY_TYPES: dict[type, type] = {CaseJob: CaseReply, TimeJob: TimeReply, RepeatJob: RepeatReply,
                                 OutputsJob: OutputsReply}
EXCLUSIVE_OPS = frozenset({TimeJob.op})  # jobs that hold the GPU alone (timing)


def moved_reason(names: list[str]) -> str:
    """What a launch that left module variables (``names``) other than it found them is told, as
    every gate says it (the worker's cases and launches in a row, the emulator's cases); see
    ``state.state_moves`` for why the rule holds."""
    many = len(names) > 1
    return (f"left module variable{'s' if many else ''} {', '.join(names)} other than it found "
            f"{'them' if many else 'it'}: a kernel whose state moves from launch to launch can break at a launch "
            "after the last one checked; only a module's first launch may set a variable for good")
