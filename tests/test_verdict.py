"""The Verdict as pure data (a lossless JSON round trip) and the one judgement over it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from porter.gate.verdict import (
    BadElement,
    CaseResult,
    Gate,
    Localization,
    NativeEvidence,
    OutputCheck,
    SanitizerFinding,
    SanitizerReport,
    Status,
    Timing,
    Verdict,
    judge,
    overall_status,
)
from porter.jsonable import from_jsonable, to_jsonable
from porter.ptx.assembly import Assembly, Diagnostic, EntryResources


def _verdict(**changes) -> Verdict:
    fields = dict(
        kernel="k.ptx", entry="k", arch="sm_90a", status=Status.PASSED, reason="every gate passed on this GPU",
        gates=(Gate("interface", Status.PASSED, "3 params"), Gate("assemble", Status.PASSED, "ok"),
               Gate("equivalence", Status.PASSED, "2 cases", ("a", "b")), Gate("timing", Status.PASSED, "fast")),
        cases=(CaseResult({"n": 1000}, 7, Status.PASSED, outputs=(
            OutputCheck("y", True, 0.0, 0.0, float("inf"), 0, 1000, 0, 0, 1e-5, 1e-5, "ok", ("w",), (10, 100),
                        "float32", 0, (BadElement((0, 3), 2.5, 1),),
                        Localization("rows 0-1", ("shifted",), ((0, 0),), 1, 4, (64, 64), True, ((0, 0), (1, 3)))),),
            wall_s=0.1, values="wide"),),
        timings=(Timing("candidate", 1.0, 0.9, 1.1, 10, tflops=None, tbps=2.5, roofline_fraction=0.7, sizes="n=1",
                        ci_low_ms=0.99, ci_high_ms=1.02, set_medians_ms=(0.8, 1.0)),
                 Timing("source", 2.0, 1.9, 2.1, 4)),
        speedup_vs_source=1.5, resources={"k": {"registers": 32}}, signature_sass={"HGMMA": 4},
        native=NativeEvidence("sm_90a", "executed", "executed", ("HGMMA",), {"HGMMA": 4}, {"HGMMA": 256},
                              {"pipe": 0.5}, {"n": 1000}, {"HGMMA": 1e9}, 0.95, 0.9),
        sanitizer=(SanitizerReport("memcheck", True, 1, (SanitizerFinding("memcheck", "Invalid write", "k", 16),),
                                   digests=(1, 2), sizes={"n": 10}),),
        seeds=(3, 4),
        assembly=Assembly(True, "sm_90a", (Diagnostic(12, "warning", "slow", "C7508", "> 12 | x"),),
                          {"k": EntryResources("k", 32, constant_bytes={0: 368})}, 0.2, False, "13.0.88", "log"),
    )
    return Verdict(**{**fields, **changes})


def test_a_verdict_round_trips_through_json_without_loss() -> None:
    verdict = _verdict()
    back = from_jsonable(Verdict, json.loads(json.dumps(to_jsonable(verdict))))
    assert back == verdict
    assert isinstance(back.status, Status) and isinstance(back.assembly.resources["k"], EntryResources)
    assert back.assembly.resources["k"].constant_bytes == {0: 368} and back.cases[0].outputs[0].rel_l2 == float("inf")


def test_a_record_from_an_older_porter_reads_with_defaults() -> None:
    old = {"status": "failed", "gates": [{"name": "assemble", "status": "passed"}]}
    verdict = from_jsonable(Verdict, old)
    assert verdict.status == "failed" and verdict.gate("assemble").summary == "" and verdict.assembly is None


@pytest.mark.parametrize("status, code", [(Status.PASSED, 0), (Status.FAILED, 1), (Status.NOT_RUN, 3), (Status.ERROR, 3)])
def test_a_check_is_judged_by_its_verdict(status: Status, code: int) -> None:
    judged = judge(_verdict(status=status))
    assert (judged.status, judged.exit_code) == (status, code)


def test_a_port_candidate_is_judged_under_the_ports_requirement() -> None:
    absent = NativeEvidence("sm_90a", "absent", "absent", ("HGMMA",))
    assert judge(_verdict(), require_native=True).status is Status.PASSED
    assert judge(_verdict(native=absent), require_native=False).status is Status.PASSED
    without = judge(_verdict(native=absent, status=Status.FAILED), require_native=True)
    assert (without.status, without.exit_code, without.rank) == (Status.PASSED_WITHOUT_NATIVE, 1, 2)
    gates = (Gate("assemble", Status.PASSED, ""), Gate("equivalence", Status.NOT_RUN, "no GPU"))
    here = judge(_verdict(status=Status.NOT_RUN, gates=gates), require_native=True)
    assert (here.status, here.exit_code) == (Status.NOT_RUN_ON_TARGET, 3)
    bare = judge(_verdict(status=Status.NOT_RUN, gates=gates, signature_sass={"HGMMA": 0}), require_native=True)
    assert (bare.status, bare.rank) == (Status.FAILED, 1)
    assert judge(None, require_native=True).status is Status.FAILED
    assert Status("passed without native instructions").exit_code == 1 and Status.NOT_RUN_ON_TARGET.exit_code == 3


_GATE_WORDS = st.sampled_from([Status.PASSED, Status.FAILED, Status.NOT_RUN, Status.ERROR])


@given(interface=st.sampled_from([Status.PASSED, Status.FAILED]), assemble=st.sampled_from([Status.PASSED, Status.FAILED]),
       emulation=st.one_of(st.none(), _GATE_WORDS), hgmma=st.integers(0, 2), native=st.booleans())
def test_where_the_target_is_absent_a_candidate_fails_only_on_a_finding(
        interface: Status, assemble: Status, emulation: Status | None, hgmma: int, native: bool) -> None:
    """A machine without the target: the GPU's gates are not run, the emulator's may be anything.
    The port calls a candidate failed only for something found against it (a failed gate, no
    assembly, or no target instruction where the port needs them); an emulator that lacked an
    instruction or broke down leaves it not run on target hardware, exit 3."""
    gates = (Gate("interface", interface, ""), Gate("assemble", assemble, ""),
             Gate("equivalence", Status.NOT_RUN, "no GPU here"),
             *([Gate("emulation", emulation, "")] if emulation is not None else []))
    verdict = _verdict(status=overall_status(gates), gates=gates, signature_sass={"HGMMA": hgmma}, timings=(),
                       native=None)
    found = Status.FAILED in {g.status for g in gates} or (native and hgmma == 0)
    judged = judge(verdict, require_native=native)
    assert judged.status is (Status.FAILED if found else Status.NOT_RUN_ON_TARGET)
    assert judged.exit_code == (1 if found else 3)
