"""Evidence that the target's own instructions were present, executed, and did the work.

A port counts as architecture-native only when the target's signature instructions (HGMMA for
sm_90a, UTCHMMA for sm_100a, ...) are in the SASS, ran, **and did most of the kernel's math**: a
wgmma path behind a branch that is never taken is not a Hopper port, and neither is an mma.sync
kernel that issues one token wgmma on a discarded tile. Static presence comes from the
disassembly; execution from Nsight Compute (per-opcode executed counts from the Source Counters
page, and the arch profile's pipe metrics); the work share from those counts times each
instruction's FLOPs (read off its shape, ``HGMMA.64x128x16`` or ``HMMA.16816``) against the
spec's ``cost.flops``.
"""

from __future__ import annotations

import re

from porter.gate.verdict import NativeEvidence

_GROUP_MMA = re.compile(r"^[A-Z]*GMMA\.(\d+)x(\d+)x(\d+)")  # HGMMA/QGMMA/IGMMA: one warpgroup, four warps
_WARP_MMA = re.compile(r"^[A-Z]MMA\.(\d{3,5})(?:\.|$)")  # HMMA.16816, IMMA.16832, DMMA.884: one warp


def instruction_flops(opcode: str) -> float | None:
    """FLOPs one warp-level execution of a tensor-core SASS instruction does (ncu counts a
    warpgroup instruction once per warp), or None when its shape is not in its name."""
    if m := _GROUP_MMA.match(opcode):
        rows, cols, depth = (int(x) for x in m.groups())
        return 2.0 * rows * cols * depth / 4
    if m := _WARP_MMA.match(opcode):
        digits = m.group(1)
        rows = 16 if digits.startswith("16") else int(digits[0])
        rest = digits[len(str(rows)):]
        return 2.0 * rows * int(rest[0]) * int(rest[1:])
    return None


def tensor_flops(executed: dict[str, int]) -> dict[str, float]:
    """FLOPs done per opcode base (HGMMA, HMMA, ...), from executed counts of full SASS opcodes."""
    done: dict[str, float] = {}
    for opcode, count in executed.items():
        per = instruction_flops(opcode)
        if per is not None and count:
            base = opcode.split(".", 1)[0]
            done[base] = done.get(base, 0.0) + per * count
    return done


def judge_native(arch: str, expected: tuple[str, ...], static_counts: dict[str, int],
                 executed_counts: dict[str, int] | None, metrics: dict[str, float] | None = None,
                 *, not_measured_reason: str = "", sizes: dict[str, int] | None = None,
                 executed_opcodes: dict[str, int] | None = None, spec_flops: float | None = None,
                 required_share: float | None = None) -> NativeEvidence:
    """Combine static counts, executed counts and the work share into one state, with a sentence.

    ``executed_opcodes`` (full SASS opcodes) and ``spec_flops`` give the share; with a
    ``required_share``, execution that does less than that share of the work is "executed for a
    minor share", and without ``spec_flops`` the share cannot be judged ("not measured").
    """
    present = {op: n for op, n in static_counts.items() if n}
    names = ", ".join(expected)
    base = dict(expected=expected, static_counts=dict(static_counts), metrics=dict(metrics or {}),
                profiled_sizes=dict(sizes or {}))
    if not present:
        return NativeEvidence(arch, "absent", f"none of {arch}'s signature instructions ({names}) is in the SASS", **base)
    if executed_counts is None:
        return NativeEvidence(arch, "not measured",
                              f"{', '.join(present)} present in the SASS; execution not measured: {not_measured_reason}",
                              **base)
    ran = {op: executed_counts.get(op, 0) for op in present}
    if not any(ran.values()):
        return NativeEvidence(
            arch, "present but never executed",
            f"{', '.join(present)} is in the SASS but never executed on this input: the {arch} path sits behind a "
            "branch that is not taken (check the condition that guards it)", executed_counts=ran, **base)
    counts = ", ".join(f"{op} x{n}" for op, n in ran.items() if n)
    by_op = tensor_flops(executed_opcodes or {})
    if required_share is None:
        return NativeEvidence(arch, "executed", f"{counts} (warp-level instructions)", executed_counts=ran,
                              flops_by_instruction=by_op, **base)
    if not spec_flops:
        return NativeEvidence(arch, "not measured",
                              f"{counts} executed, but the spec declares no cost.flops, so the share of the work "
                              f"done by {names} cannot be measured (add [cost] flops)",
                              executed_counts=ran, flops_by_instruction=by_op, required_share=required_share, **base)
    native = sum(v for op, v in by_op.items() if op in expected)
    share = native / spec_flops
    others = ", ".join(f"{op} {100 * v / spec_flops:.1f}%" for op, v in by_op.items() if op not in expected)
    split = f"{names} did {100 * share:.1f}% of the spec's {spec_flops:.3g} FLOPs" + (f" ({others})" if others else "")
    fields = dict(executed_counts=ran, flops_by_instruction=by_op, share=share, required_share=required_share, **base)
    if share + 1e-9 < required_share:
        return NativeEvidence(arch, "executed for a minor share",
                              f"{counts} executed, but {split}; at least {100 * required_share:.0f}% must run on "
                              f"{arch}'s own instructions", **fields)
    return NativeEvidence(arch, "executed", f"{counts} (warp-level instructions); {split}", **fields)
