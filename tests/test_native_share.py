"""The native share bounds the old math too: a kernel that does its math on mma.sync or scalar FMA,
uses that, and issues wgmma beside it for show is not native, whatever share the wgmma did."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate.native import judge_native, older_flops, scalar_fma_flops
from porter.gate.nsight import opcode_bases
from porter.gate.verdict import NativeEvidence
from porter.jsonable import from_jsonable, to_jsonable

HOPPER = ("HGMMA",)
# FLOPs of one warp-level execution, written out here rather than read from porter.
NATIVE = {"HGMMA.64x128x16.F32.BF16": 2 * 64 * 128 * 16 / 4, "HGMMA.64x64x16.F32": 2 * 64 * 64 * 16 / 4}
OLDER = {"HMMA.16816.F32.BF16": 2 * 16 * 8 * 16, "HMMA.1688.F32.TF32": 2 * 16 * 8 * 8, "FFMA": 64.0,
         "FFMA.FTZ": 64.0, "FFMA.RZ": 64.0, "HFMA2.MMA": 128.0, "HFMA2.BF16_V2": 128.0, "DFMA": 64.0}
UNCOUNTED = ("FMUL", "FADD.FTZ", "HADD2", "IMAD.WIDE", "LDG.E.128", "MUFU.EX2", "WARPGROUP.ARRIVE")


def judged(executed: dict[str, int], spec_flops: float, share: float = 0.9) -> NativeEvidence:
    return judge_native("sm_90a", HOPPER, {"HGMMA": 4}, opcode_bases(executed), executed_opcodes=executed,
                        spec_flops=spec_flops, required_share=share)


def test_all_the_math_on_mma_sync_beside_the_wgmma_is_not_native() -> None:
    spec_flops = 2 * 4096.0 ** 3
    executed = {"HGMMA.64x128x16.F32.BF16": int(0.99 * spec_flops / NATIVE["HGMMA.64x128x16.F32.BF16"]),
                "HMMA.16816.F32.BF16": int(0.987 * spec_flops / 4096), "FFMA": int(0.004 * spec_flops / 64)}
    evidence = judged(executed, spec_flops)
    assert evidence.state == "executed beside older math"
    assert "HGMMA did 99.0% of the spec's 1.37e+11 FLOPs, but HMMA 98.7% and FFMA 0.4% also ran: at most 10% " \
           "may run on older instructions" in evidence.summary
    assert evidence.older_share == pytest.approx(0.991, abs=1e-3)
    assert set(evidence.older_flops) == {"HMMA", "FFMA"}


def test_scalar_ffma_doing_the_math_is_caught_in_any_of_its_variants() -> None:
    spec_flops = 1e9
    for variant in ("FFMA", "FFMA.FTZ", "FFMA.RZ", "FFMA.SAT", "HFMA2.MMA", "DFMA.RM", "FFMA2"):
        executed = {"HGMMA.64x64x16.F32": int(spec_flops / NATIVE["HGMMA.64x64x16.F32"]), variant: 10**7}
        assert judged(executed, spec_flops).state == "executed beside older math", variant


def test_what_counts_as_scalar_fma() -> None:
    assert scalar_fma_flops({"FFMA.FTZ": 3, "FFMA": 1, "HFMA2.MMA": 2, "DFMA": 1, "IDP.4A.S8.S8": 1, "UFFMA": 5}) == \
        {"FFMA": 4 * 64, "HFMA2": 2 * 128, "DFMA": 64, "IDP": 256, "UFFMA": 10}
    assert scalar_fma_flops(dict.fromkeys(UNCOUNTED, 1000)) == {}
    assert older_flops(HOPPER, {"HGMMA.64x64x16.F32": 8, "HMMA.16816.F32": 2, "FFMA": 1}) == \
        {"HMMA": 2 * 4096, "FFMA": 64}


def test_an_honest_hgmma_kernel_with_its_epilogue_ffma_is_executed() -> None:
    spec_flops = 2 * 4096.0 ** 3
    executed = {"HGMMA.64x128x16.F32.BF16": int(spec_flops / NATIVE["HGMMA.64x128x16.F32.BF16"]),
                "FFMA": 4096 * 4096 // 32, "HFMA2.MMA": 50_000, "FMUL": 10**9}
    evidence = judged(executed, spec_flops)
    assert evidence.state == "executed" and evidence.older_share is not None and evidence.older_share < 1e-3
    assert "older instructions at most 0.0% (FFMA 0.0% and HFMA2 0.0%)" in evidence.summary


def test_a_minor_share_names_the_scalar_math_too() -> None:
    evidence = judged({"HGMMA.64x64x16.F32": 4, "FFMA": 10**6}, 64e6)
    assert evidence.state == "executed for a minor share" and "(FFMA 100.0%)" in evidence.summary


def test_the_older_figures_round_trip_through_json() -> None:
    evidence = judged({"HGMMA.64x64x16.F32": 10**4, "HMMA.16816.F32": 10**4, "FFMA": 7}, 1e9)
    assert from_jsonable(NativeEvidence, json.loads(json.dumps(to_jsonable(evidence)))) == evidence


@settings(max_examples=300, deadline=None)
@given(native=st.dictionaries(st.sampled_from(sorted(NATIVE)), st.integers(0, 10**7), min_size=1),
       older=st.dictionaries(st.sampled_from(sorted(OLDER)), st.integers(0, 10**8)),
       noise=st.dictionaries(st.sampled_from(UNCOUNTED), st.integers(0, 10**9)),
       spec_flops=st.floats(1e6, 1e13), share=st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_the_old_math_is_bounded_by_the_rest_of_the_share(native: dict[str, int], older: dict[str, int],
                                                          noise: dict[str, int], spec_flops: float,
                                                          share: float) -> None:
    executed = {**native, **older, **noise}
    native_share = sum(NATIVE[op] * n for op, n in native.items()) / spec_flops
    older_share = sum(OLDER[op] * n for op, n in older.items()) / spec_flops
    evidence = judged(executed, spec_flops, share)
    if not any(native.values()):
        assert evidence.state == "present but never executed"
        return
    assert evidence.older_share == pytest.approx(older_share)
    if older_share > (1 - share) * (1 + 1e-6):
        assert evidence.state != "executed"
    if native_share >= share * (1 + 1e-6) and older_share <= (1 - share) * (1 - 1e-6):
        assert evidence.state == "executed"
