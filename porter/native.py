"""Evidence that the target's own instructions were present and executed.

A port counts as architecture-native only when the target's signature instructions (HGMMA for
sm_90a, UTCHMMA for sm_100a, ...) are in the SASS **and** ran: a wgmma path behind a branch that
is never taken is not a Hopper port. Static presence comes from the disassembly; execution from
Nsight Compute (per-opcode executed counts from the Source Counters page, and the arch profile's
pipe metrics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NativeState = Literal["executed", "present but never executed", "absent", "not measured"]


@dataclass(frozen=True)
class NativeEvidence:
    arch: str
    state: NativeState
    summary: str
    expected: tuple[str, ...]  # the profile's signature SASS opcode bases
    static_counts: dict[str, int] = field(default_factory=dict)  # in the cubin
    executed_counts: dict[str, int] = field(default_factory=dict)  # warp-level, from ncu
    metrics: dict[str, float] = field(default_factory=dict)  # pipe metrics
    profiled_sizes: dict[str, int] = field(default_factory=dict)


def judge_native(arch: str, expected: tuple[str, ...], static_counts: dict[str, int],
                 executed_counts: dict[str, int] | None, metrics: dict[str, float] | None = None,
                 *, not_measured_reason: str = "", sizes: dict[str, int] | None = None) -> NativeEvidence:
    """Combine static and executed counts into one of the four states, with a sentence for each."""
    present = {op: n for op, n in static_counts.items() if n}
    names = ", ".join(expected)
    if not present:
        return NativeEvidence(arch, "absent", f"none of {arch}'s signature instructions ({names}) is in the SASS",
                              expected, dict(static_counts), {}, dict(metrics or {}), dict(sizes or {}))
    if executed_counts is None:
        return NativeEvidence(arch, "not measured",
                              f"{', '.join(present)} present in the SASS; execution not measured: {not_measured_reason}",
                              expected, dict(static_counts), {}, dict(metrics or {}), dict(sizes or {}))
    ran = {op: executed_counts.get(op, 0) for op in present}
    if any(ran.values()):
        counts = ", ".join(f"{op} x{n}" for op, n in ran.items() if n)
        return NativeEvidence(arch, "executed", f"{counts} (warp-level instructions)",
                              expected, dict(static_counts), ran, dict(metrics or {}), dict(sizes or {}))
    return NativeEvidence(
        arch, "present but never executed",
        f"{', '.join(present)} is in the SASS but never executed on this input: the {arch} path sits behind a "
        "branch that is not taken (check the condition that guards it)",
        expected, dict(static_counts), ran, dict(metrics or {}), dict(sizes or {}),
    )
