"""Evidence that the target's own instructions were present, executed, and did the work.

A port counts as architecture-native only when the target's signature instructions (HGMMA for
sm_90a, UTCHMMA for sm_100a, ...) are in the SASS, ran, **and did most of the kernel's math**: a
wgmma path behind a branch that is never taken is not a Hopper port, and neither is an mma.sync
kernel that issues one token wgmma on a discarded tile. Static presence comes from the
disassembly; execution from Nsight Compute (per-opcode executed counts from the Source Counters
page, and the arch profile's pipe metrics); the work share from those counts times each
instruction's FLOPs (read off its shape, ``HGMMA.64x128x16`` or ``HMMA.16816``) against the
spec's ``cost.flops``. The old math is bounded too: what older tensor-core instructions and scalar
FMA executed may be at most the rest of that share, or a kernel could do all of its math on
mma.sync (or FFMA), use that, and issue wgmma beside it for show.
"""

from __future__ import annotations

import re
from dataclasses import replace

from porter.gate.verdict import NativeEvidence

_GROUP_MMA = re.compile(r"^[A-Z]*GMMA\.(\d+)x(\d+)x(\d+)")  # HGMMA/QGMMA/IGMMA: one warpgroup, four warps
_WARP_MMA = re.compile(r"^[A-Z]MMA\.(\d{3,5})(?:\.|$)")  # HMMA.16816, IMMA.16832, DMMA.884: one warp

# Scalar multiply-adds, as FLOPs per warp-level execution with all 32 lanes active (ncu counts a
# warp's instruction once, whatever its active lanes, so this bounds the lanes' work from above).
# Every variant of an opcode counts (FFMA.FTZ, FFMA.RZ, HFMA2.MMA, HFMA2.BF16_V2, DFMA.RM): the
# compiler's own HFMA2.MMA register moves among them, a small overcount. Plain multiplies and adds
# (FMUL, FADD, HMUL2, HADD2, DMUL, DADD) and integer address math (IMAD) do not count.
SCALAR_FMA_FLOPS: dict[str, float] = {
    "FFMA": 32 * 2, "FFMA32I": 32 * 2,  # f32: one multiply-add a lane
    "FFMA2": 32 * 4,  # f32x2 (sm_100): two a lane
    "HFMA2": 32 * 4, "HFMA2_32I": 32 * 4,  # f16x2 / bf16x2: two a lane
    "DFMA": 32 * 2,
    "UFFMA": 2,  # the uniform datapath: one value a warp
}
_DOT_PRODUCT = re.compile(r"^IDP\.([24])A\b")  # IDP.4A / IDP.2A: 4 or 2 integer multiply-adds a lane


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


def scalar_fma_flops(executed: dict[str, int]) -> dict[str, float]:
    """At most the FLOPs done per scalar multiply-add opcode base (FFMA, HFMA2, DFMA, IDP, ...),
    from executed warp-level counts of full SASS opcodes (see :data:`SCALAR_FMA_FLOPS`)."""
    done: dict[str, float] = {}
    for opcode, count in executed.items():
        base = opcode.split(".", 1)[0]
        dot = _DOT_PRODUCT.match(opcode)
        per = 32 * 2 * int(dot.group(1)) if dot else SCALAR_FMA_FLOPS.get(base)
        if per is not None and count:
            done[base] = done.get(base, 0.0) + per * count
    return done


def older_flops(expected: tuple[str, ...], executed: dict[str, int]) -> dict[str, float]:
    """FLOPs per opcode base done outside the target's own instructions: every tensor-core
    instruction whose base is not ``expected`` (HMMA beside HGMMA), then scalar multiply-adds."""
    tensor = {op: v for op, v in tensor_flops(executed).items() if op not in expected}
    return {**tensor, **scalar_fma_flops(executed)}


def _shares(flops: dict[str, float], spec_flops: float) -> str:
    """``HMMA 98.7% and FFMA 0.4%``, largest first."""
    parts = [f"{op} {100 * v / spec_flops:.1f}%" for op, v in sorted(flops.items(), key=lambda kv: -kv[1])]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)


def judge_native(arch: str, expected: tuple[str, ...], static_counts: dict[str, int],
                 executed_counts: dict[str, int] | None, metrics: dict[str, float] | None = None,
                 *, not_measured_reason: str = "", sizes: dict[str, int] | None = None,
                 executed_opcodes: dict[str, int] | None = None, spec_flops: float | None = None,
                 required_share: float | None = None) -> NativeEvidence:
    """Combine static counts, executed counts and the work share into one state, with a sentence.

    ``executed_opcodes`` (full SASS opcodes) and ``spec_flops`` give the share; with a
    ``required_share``, execution that does less than that share of the work is "executed for a
    minor share", execution beside older tensor-core instructions or scalar FMA that did more than
    ``1 - required_share`` of it is "executed beside older math", and without ``spec_flops`` the
    shares cannot be judged ("not measured").
    """
    present = {op: n for op, n in static_counts.items() if n}
    names = ", ".join(expected)
    base = NativeEvidence(arch, "absent", "", expected, static_counts=dict(static_counts), metrics=dict(metrics or {}),
                          profiled_sizes=dict(sizes or {}))
    if not present:
        return replace(base, summary=f"none of {arch}'s signature instructions ({names}) is in the SASS")
    if executed_counts is None:
        return replace(base, state="not measured",
                       summary=f"{', '.join(present)} present in the SASS; execution not measured: {not_measured_reason}")
    ran = {op: executed_counts.get(op, 0) for op in present}
    if not any(ran.values()):
        return replace(
            base, state="present but never executed", executed_counts=ran,
            summary=f"{', '.join(present)} is in the SASS but never executed on this input: the {arch} path sits "
            "behind a branch that is not taken (check the condition that guards it)")
    counts = ", ".join(f"{op} x{n}" for op, n in ran.items() if n)
    by_op = tensor_flops(executed_opcodes or {})
    if required_share is None:
        return replace(base, state="executed", summary=f"{counts} (warp-level instructions)", executed_counts=ran,
                       flops_by_instruction=by_op)
    if not spec_flops:
        return replace(base, state="not measured",
                       summary=f"{counts} executed, but the spec declares no cost.flops, so the share of the work "
                       f"done by {names} cannot be measured (add [cost] flops)",
                       executed_counts=ran, flops_by_instruction=by_op, required_share=required_share)
    native = sum(v for op, v in by_op.items() if op in expected)
    share = native / spec_flops
    older = older_flops(expected, executed_opcodes or {})
    older_share = sum(older.values()) / spec_flops
    split = f"{names} did {100 * share:.1f}% of the spec's {spec_flops:.3g} FLOPs"
    measured = replace(base, executed_counts=ran, flops_by_instruction=by_op, share=share, required_share=required_share,
                       older_flops=older, older_share=older_share)
    if share + 1e-9 < required_share:
        others = f" ({_shares(older, spec_flops)})" if older else ""
        return replace(measured, state="executed for a minor share",
                       summary=f"{counts} executed, but {split}{others}; at least {100 * required_share:.0f}% must "
                       f"run on {arch}'s own instructions")
    if older_share > 1 - required_share + 1e-9:
        return replace(measured, state="executed beside older math",
                       summary=f"{counts} executed and {split}, but {_shares(older, spec_flops)} also ran: at most "
                       f"{100 * (1 - required_share):.0f}% may run on older instructions (earlier tensor "
                       "cores, scalar FMA at 32 lanes a warp instruction): the math was done twice, and "
                       "which result the kernel used cannot be told")
    extra = f"; older instructions at most {100 * older_share:.1f}% ({_shares(older, spec_flops)})" if older else ""
    return replace(measured, state="executed", summary=f"{counts} (warp-level instructions); {split}{extra}")
