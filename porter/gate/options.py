"""What a check is asked to do: its options, and the size sets it times."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from porter.errors import InputError
from porter.gate.spec import Spec

JUDGE_ENV = "PORTER_JUDGE"


def default_judge() -> Literal["device", "host"]:
    """Where a check compares outputs with the reference: on the GPU (``device``, the default: an
    output copied back only where it fails) or, with ``PORTER_JUDGE=host`` (for debugging the
    device path), every output on the host as before."""
    value = os.environ.get(JUDGE_ENV, "device")
    if value == "device":
        return "device"
    if value == "host":
        return "host"
    raise InputError(f"{JUDGE_ENV}={value!r}: give device or host")


def timed_sizes(spec: Spec, options: CheckOptions) -> list[dict[str, int]]:
    """The size sets the timing gate runs at: each --time-at set, or [sizes]."""
    return [spec.timing_sizes(o) for o in options.time_at] or [spec.default_sizes()]


@dataclass(frozen=True)
class CheckOptions:
    arch: str | None = None  # assemble for this target; default: the candidate's .target
    against: Path | None = None  # source kernel: the reference (unless golden) and a speed baseline
    speed_baseline: Path | None = None  # source kernel timed beside the candidate, not used as reference
    golden: Path | None = None  # outputs recorded by `porter record`
    seeds: tuple[int, ...] = ()  # () = a fresh pair for this check (see plan_seeds)
    timing: bool = True
    case_timeout_s: float = 60.0
    timing_budget_s: float = 0.4  # the most a timing run spends at one size set (it stops sooner at timing_ci)
    # Timing stops once each median's 95% confidence interval is within ±timing_ci (0.01: ±1%).
    timing_ci: float = 0.01
    # Profile with ncu: were the target's own instructions executed, and did they do the work?
    # None: when the cubin holds the target's signature instructions (a claim to be native, held to).
    native: bool | None = False
    sanitize: bool = False  # memcheck up to the largest checked case; racecheck, initcheck, synccheck on the smallest
    time_at: tuple[dict[str, int], ...] = ()  # [sizes] overrides to time at; default: [sizes] itself
    entry: str | None = None  # the candidate's entry to check (--entry); default: the spec's (or its porter-launch)
    # A thorough check (`porter ci`, a port's final candidate) draws its large size set past 2^31 bytes.
    thorough: bool = False
    # Run the candidate in porter's PTX emulator too (the emulation gate). None: where no GPU here
    # can run it. Evidence only: a check that emulated but ran nothing on a GPU stays `not run`.
    emulate: bool | None = None
    judge: Literal["device", "host"] = field(default_factory=default_judge)  # see default_judge


