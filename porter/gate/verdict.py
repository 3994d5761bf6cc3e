"""The Verdict: porter's one currency. Loop, report, review branch, bot and benchmark all read it.

The Verdict is pure data: what ptxas said (:class:`~porter.ptx.assembly.Assembly`), every case,
timing, the native and sanitizer evidence; it imports no tool runner, and it round-trips through
JSON without loss (:func:`porter.jsonable.to_jsonable` / :func:`porter.jsonable.from_jsonable`).

Status words are one fixed vocabulary, :class:`Status`. A Verdict and each of its gates use four:
- ``passed``  measured and within every bound;
- ``failed``  measured and wrong (the reason says how);
- ``not run`` not measured, with the reason (no GPU of that architecture, no profiler, ...);
- ``error``   porter's or the environment's fault (worker died unexpectedly, toolchain broke).
A port's candidate is judged with the port's requirements into two more:
- ``passed without native instructions``: correct and measured, but the target's own tensor-core
  instructions are absent or never ran where they are required;
- ``not run on target hardware``: the target is absent here; the candidate assembles (with the
  target's signature instructions in its SASS when native instructions are required).
Nothing that was not run is ever ``passed``. :func:`judge` is the one place that turns a Verdict
into a status word and an exit code; everything else asks it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from porter.errors import ExitCode
from porter.ptx.assembly import Assembly


class Status(str, enum.Enum):
    """porter's status words. Members compare equal to their words (``Status.PASSED == "passed"``);
    how each is said outside porter (exit code, answer, JUnit element) is :data:`SAID`."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not run"
    ERROR = "error"
    PASSED_WITHOUT_NATIVE = "passed without native instructions"
    NOT_RUN_ON_TARGET = "not run on target hardware"

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> ExitCode:
        return SAID[self].exit_code

    @property
    def answer(self) -> Answer:
        return SAID[self].answer

    @property
    def junit(self) -> JunitElement | None:
        return SAID[self].junit


Answer = Literal["yes", "no", "not run", "error"]
JunitElement = Literal["failure", "skipped", "error"]


@dataclass(frozen=True)
class Said:
    """How one status is said outside porter: the exit code it gives (a check, a bench, a replay,
    ``porter ci``), its answer to "did it show that?" (the terminal's achievements, the equivalence
    evidence of bench rows, ``porter ci`` and PORT_REPORT) and its JUnit element (none: passed).
    The word itself is the status's value. porter prints no colours (its tables must read the same
    in CI logs), so no status has one."""

    exit_code: ExitCode
    answer: Answer
    junit: JunitElement | None


# Every status, said once: 0 passed; 1 the kernel failed the gate (or passed without the target's
# own instructions); 3 not run, or an error of the environment.
SAID: dict[Status, Said] = {
    Status.PASSED: Said(ExitCode.OK, "yes", None),
    Status.FAILED: Said(ExitCode.FAILED, "no", "failure"),
    Status.NOT_RUN: Said(ExitCode.ENVIRONMENT, "not run", "skipped"),
    Status.ERROR: Said(ExitCode.ENVIRONMENT, "error", "error"),
    Status.PASSED_WITHOUT_NATIVE: Said(ExitCode.FAILED, "no", "failure"),
    Status.NOT_RUN_ON_TARGET: Said(ExitCode.ENVIRONMENT, "not run", "skipped"),
}


class NoJudgement(str, enum.Enum):
    """Why a row that would show a status shows none: a bench task without a reference port to
    check, a kernel ``porter ci --port-to`` did not port, a port run without its result yet."""

    NO_SOLUTION = "no solution"
    NOT_PORTED = "not ported"
    INCOMPLETE = "incomplete"

    def __str__(self) -> str:
        return self.value


def exit_code_for_all(statuses: Iterable[Status]) -> ExitCode:
    """The exit code of several judgements (a bench's rows, a replay's candidates), as a check's:
    1 if any failed, else 3 if any was not run (or met an error), else 0 (all passed, or none)."""
    codes = {status.exit_code for status in statuses}
    return next((code for code in (ExitCode.FAILED, ExitCode.ENVIRONMENT) if code in codes), ExitCode.OK)


NativeState = Literal["executed", "executed for a minor share", "executed beside older math",
                      "present but never executed", "absent", "not measured"]


@dataclass(frozen=True)
class NativeEvidence:
    """Were the target's own tensor-core instructions present, executed, and did they do the work?
    (made by :func:`porter.gate.native.judge_native` from the SASS and ncu's counts)."""

    arch: str
    state: NativeState
    summary: str
    expected: tuple[str, ...]  # the profile's signature SASS opcode bases
    static_counts: dict[str, int] = field(default_factory=dict)  # in the cubin
    executed_counts: dict[str, int] = field(default_factory=dict)  # warp-level, from ncu
    metrics: dict[str, float] = field(default_factory=dict)  # pipe metrics
    profiled_sizes: dict[str, int] = field(default_factory=dict)
    flops_by_instruction: dict[str, float] = field(default_factory=dict)  # tensor-core FLOPs per opcode base
    share: float | None = None  # of the spec's cost.flops done by the expected instructions
    required_share: float | None = None
    # FLOPs per opcode base done on older tensor-core instructions and scalar FMA (an upper bound:
    # every lane of a warp-level instruction counted), and their share of cost.flops
    older_flops: dict[str, float] = field(default_factory=dict)
    older_share: float | None = None


@dataclass(frozen=True)
class SanitizerFinding:
    tool: str
    message: str  # first line of the report, e.g. "Invalid __global__ write of size 4 bytes"
    function: str = ""
    offset: int | None = None  # byte offset of the SASS instruction in the function
    sass: str = ""  # that instruction, from the disassembly
    detail: str = ""  # thread/block and address lines


def size_label(sizes: Mapping[str, int]) -> str:
    """A size set as people read it: ``M=4096, N=4096, K=4096``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


@dataclass(frozen=True)
class SanitizerReport:
    """One compute-sanitizer tool's run over one launch (made by :mod:`porter.gate.nsight`)."""

    tool: str
    ran: bool
    errors: int
    findings: tuple[SanitizerFinding, ...]
    reason: str = ""  # why it did not run; when it ran, the launch's own error if it left no digests
    wall_s: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)  # the size set it ran at
    digests: tuple[int, ...] = ()  # of the checked launch's outputs (a clean run only)


IndexTuple = tuple[int, ...]


@dataclass(frozen=True)
class BadElement:
    """One element that failed: its index in C order, the kernel's value and the reference's."""

    index: IndexTuple
    got: float | int
    expected: float | int


@dataclass(frozen=True)
class Localization:
    """Where and how an output is wrong, as sentences with numbers for the agent.

    ``bad_region`` is the inclusive bounding box ``(lo, hi)`` of the wrong elements; it is None only
    when the shapes differ, in which case elements cannot be paired at all.
    """

    summary: str
    patterns: tuple[str, ...]
    bad_tiles: tuple[IndexTuple, ...]  # tile coordinates of the first few bad tiles, C order
    bad_tile_count: int
    tile_count: int
    tile: IndexTuple
    tile_is_guess: bool
    bad_region: tuple[IndexTuple, IndexTuple] | None


@dataclass(frozen=True)
class OutputCheck:
    """One output buffer of one case, compared with the reference (made by
    :func:`porter.gate.compare.compare`, which also writes ``summary``).

    Errors are measured over the elements whose difference is finite; NaN and Inf are counted
    separately. When the shapes differ the error fields are NaN and every reference element counts
    as a mismatch.
    """

    name: str
    passed: bool
    max_abs_err: float
    max_rel_err: float  # |out - ref| / max(|ref|, float64 tiny)
    rel_l2: float  # ||out - ref|| / ||ref||; 0 when both are 0, inf when only ||ref|| is 0
    mismatches: int
    total: int
    nan_count: int
    inf_count: int
    atol: float
    rtol: float
    summary: str = ""  # compact text: figures, first bad indices, localization
    warnings: tuple[str, ...] = ()
    shape: IndexTuple = ()
    dtype: str = ""
    ref_nan_count: int = 0
    first_bad: tuple[BadElement, ...] = ()
    localization: Localization | None = None  # where and how it is wrong
    unjudged: int = 0  # elements left out: the reference is not finite there, or beyond the dtype's range

    @property
    def judged(self) -> int:
        """Elements compared with the reference (``total`` less those left out)."""
        return self.total - self.unjudged


@dataclass(frozen=True)
class CaseResult:
    """One size set and seed of the equivalence sweep."""

    sizes: dict[str, int]
    seed: int
    status: Status
    reason: str = ""  # for failed / error: what went wrong, in one line
    outputs: tuple[OutputCheck, ...] = ()
    guard_violations: tuple[str, ...] = ()  # out-of-bounds writes into guard bands
    inputs_modified: tuple[str, ...] = ()  # input buffers the kernel wrote
    nondeterminism: str = ""  # run-to-run difference, when found
    fault: str = ""  # CUDA error / timeout that killed the run
    wall_s: float = 0.0
    values: str = ""  # the value case ("" = the spec's default fills; "wide" = porter's wider inputs)


@dataclass(frozen=True)
class Timing:
    """Device time of one contender (candidate, source kernel, library), events around each launch.

    Timing rotates through input sets whose buffers lie differently (see ``runner.rounds``); the
    median, its interval and the percentiles are those of the contender's slowest set, ``count``
    the launches over all sets."""

    name: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    count: int
    tflops: float | None = None
    tbps: float | None = None
    roofline_fraction: float | None = None  # of the arch profile's peak: max(compute, memory) share
    sizes: str = ""  # the size set, e.g. "M=4096, N=4096, K=4096"
    # The median's 95% confidence interval (see porter.gate.median_ci); None: too few launches.
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    set_medians_ms: tuple[float, ...] = ()  # the median on each input set, in the timing run's order

    @property
    def ci_half_width(self) -> float | None:
        """Half the interval's width over the median (0.004: ±0.4%); None without an interval."""
        if self.ci_low_ms is None or self.ci_high_ms is None or self.median_ms <= 0:
            return None
        return (self.ci_high_ms - self.ci_low_ms) / 2 / self.median_ms


@dataclass(frozen=True)
class Gate:
    """One gate's outcome: assemble, equivalence, native, timing."""

    name: str
    status: Status
    summary: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    kernel: str
    entry: str
    arch: str  # the architecture the candidate was assembled for
    status: Status
    reason: str
    gates: tuple[Gate, ...]
    cases: tuple[CaseResult, ...] = ()
    timings: tuple[Timing, ...] = ()
    speedup_vs_source: float | None = None  # > 1: the candidate is faster
    speedup_vs_library: float | None = None
    resources: dict[str, dict[str, object]] = field(default_factory=dict)
    signature_sass: dict[str, int] = field(default_factory=dict)
    gpu: str = ""  # "NVIDIA H200 (sm_90), driver 580.159.04"
    toolchain: str = ""
    native: NativeEvidence | None = None
    sanitizer: tuple[SanitizerReport, ...] = ()
    warnings: tuple[str, ...] = ()
    wall_s: float = 0.0
    seeds: tuple[int, ...] = ()  # the check's seeds: `porter check --seeds` with them reproduces its inputs
    judged_share: float | None = None  # of the output elements of every case, the share compared (None: none ran)
    assembly: Assembly | None = None  # what ptxas said: diagnostics with their lines, resources, log

    def gate(self, name: str) -> Gate | None:
        return next((g for g in self.gates if g.name == name), None)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED


def judged_share(cases: tuple[CaseResult, ...] | list[CaseResult]) -> float | None:
    """Of every output element of ``cases``, the share compared with the reference (the others'
    reference is not finite or leaves the dtype's range); None when no element was compared."""
    total = sum(o.total for c in cases for o in c.outputs)
    return sum(o.judged for c in cases for o in c.outputs) / total if total else None


def overall_status(gates: tuple[Gate, ...]) -> Status:
    """Combine gates: any failure -> failed; else any error -> error; else any not run -> not run.

    Every gate counts, timing too: a kernel whose timed launches crash, or leave other outputs
    than its verified ones, or beat the roofline, has not passed.
    """
    statuses = {g.status for g in gates}
    for word in (Status.FAILED, Status.ERROR, Status.NOT_RUN):
        if word in statuses:
            return word
    return Status.PASSED


@dataclass(frozen=True)
class Judgement:
    """What a Verdict amounts to: its status word, the exit code, and how far it got (``rank``: 3
    passed, 2 correct but not native or not run on the target, 1 assembled, 0 not)."""

    status: Status
    exit_code: ExitCode
    rank: int

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED


def _gate_passed(verdict: Verdict, name: str) -> bool:
    gate = verdict.gate(name)
    return gate is not None and gate.status == Status.PASSED


def _only_the_emulator_erred(verdict: Verdict) -> bool:
    """An error verdict whose only erring gate is ``emulation``: the emulator (or the spec's
    reference) raised, which says nothing of the kernel (:func:`porter.gate.emulated.emulation_gate`)."""
    erred = {g.name for g in verdict.gates if g.status == Status.ERROR}
    return verdict.status == Status.ERROR and erred == {"emulation"}


def judge(verdict: Verdict | None, *, require_native: bool | None = None) -> Judgement:
    """The one judgement. ``require_native=None`` judges a check: the Verdict's own status word.
    A bool judges a port's candidate under the port's requirement (the target's own tensor-core
    instructions executed, doing the work, where ``require_native``): ``passed``, ``passed without
    native instructions``, ``not run on target hardware`` or ``failed``. No candidate is ``failed``."""
    if verdict is None:
        return Judgement(Status.FAILED, Status.FAILED.exit_code, 0)
    native = bool(require_native)
    assembled = _gate_passed(verdict, "assemble")
    if verdict.status == Status.PASSED and (not native or (verdict.native is not None
                                                            and verdict.native.state == "executed")):
        port, rank = Status.PASSED, 3
    elif _gate_passed(verdict, "equivalence"):
        port, rank = Status.PASSED_WITHOUT_NATIVE, 2
    elif (verdict.status == Status.NOT_RUN or _only_the_emulator_erred(verdict)) and assembled and (
            not native or any(verdict.signature_sass.values())):
        # Not run because the target is absent: as far as this machine can take it, if it carries
        # the target's own instructions where they are required. An emulator that broke down
        # showed nothing about the kernel: not run, as where it lacks an instruction, never failed.
        port, rank = Status.NOT_RUN_ON_TARGET, 2
    else:
        port, rank = Status.FAILED, 1 if assembled else 0
    status = verdict.status if require_native is None else port
    return Judgement(status, status.exit_code, rank)
