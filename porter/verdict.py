"""The Verdict: porter's one currency. Loop, report, review branch, bot and benchmark all read it.

Status words are a fixed vocabulary:
- ``passed``  measured and within every bound;
- ``failed``  measured and wrong (the reason says how);
- ``not run`` not measured, with the reason (no GPU of that architecture, no profiler, ...);
- ``error``   porter's or the environment's fault (worker died unexpectedly, toolchain broke).
Nothing that was not run is ever ``passed``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from porter.native import NativeEvidence
from porter.profiler import SanitizerReport

Status = Literal["passed", "failed", "not run", "error"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "not run", "error")


@dataclass(frozen=True)
class OutputCheck:
    """One output buffer of one case, compared with the reference."""

    name: str
    passed: bool
    max_abs_err: float
    max_rel_err: float
    rel_l2: float
    mismatches: int
    total: int
    nan_count: int
    inf_count: int
    atol: float
    rtol: float
    summary: str  # compact text: figures, first bad indices, localization
    warnings: tuple[str, ...] = ()


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
    """Device time of one contender (candidate, source kernel, library), events around each launch."""

    name: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    count: int
    tflops: float | None = None
    tbps: float | None = None
    roofline_fraction: float | None = None  # of the arch profile's peak: max(compute, memory) share
    sizes: str = ""  # the size set, e.g. "M=4096, N=4096, K=4096"


def timing_table(timings: Sequence[Timing]) -> tuple[list[str], list[list[object]]]:
    """Headers and rows of the timings table that the terminal report and PORT_REPORT.md print,
    with an "at" column when the timings span several size sets (``--time-at``)."""

    def num(x: float | None, fmt: str) -> str:
        return "-" if x is None or math.isnan(x) else format(x, fmt)

    several = len({t.sizes for t in timings}) > 1
    headers = ["timed", *(["at"] if several else []), "median ms", "p10-p90 ms", "n", "TFLOP/s", "TB/s", "roofline"]
    rows: list[list[object]] = [
        [t.name, *([t.sizes] if several else []), f"{t.median_ms:.4f}", f"{t.p10_ms:.4f}-{t.p90_ms:.4f}", t.count,
         num(t.tflops, ".1f"), num(t.tbps, ".2f"),
         "-" if t.roofline_fraction is None else f"{100 * t.roofline_fraction:.0f}%"]
        for t in timings
    ]
    return headers, rows


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

    def gate(self, name: str) -> Gate | None:
        return next((g for g in self.gates if g.name == name), None)

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def overall_status(gates: tuple[Gate, ...]) -> Status:
    """Combine gates: any failure -> failed; else any error -> error; else any not run -> not run.

    Every gate counts, timing too: a kernel whose timed launches crash, or leave other outputs
    than its verified ones, or beat the roofline, has not passed.
    """
    statuses = {g.status for g in gates}
    for word in ("failed", "error", "not run"):
        if word in statuses:
            return word  # type: ignore[return-value]
    return "passed"
