"""Launches under ncu and compute-sanitizer are held to the verified ones: the decisions, on a
CPU, with crafted reports and digests."""

from __future__ import annotations

from porter.gate.check import (
    ToolLaunch,
    _launch_differs,
    _native_gate,
    _not_held,
    _sanitize_gate,
)
from porter.gate.nsight import launch_failure
from porter.gate.plan import Case
from porter.gate.verdict import NativeEvidence, SanitizerReport

AT = {"n": 4097}
VERIFIED = {Case(AT, 7).key(): [11, 12]}
EXECUTED = NativeEvidence("sm_90a", "executed", "HGMMA x64", ("HGMMA",), {"HGMMA": 4}, {"HGMMA": 64})


# --- a launch under a tool must leave the verified outputs ------------------------------------------

def test_a_profiled_launch_that_left_no_outputs_fails_the_native_gate() -> None:
    crashed = ToolLaunch((), AT, "CUDADriverError: CUDA_ERROR_ILLEGAL_INSTRUCTION")
    problem = _launch_differs("the profiled launch", crashed, 7, VERIFIED)
    assert "the profiled launch at n=4097 did not complete: it left no outputs (CUDADriverError" in problem
    gate = _native_gate(EXECUTED, problem)
    assert gate.status == "failed" and gate.summary == problem and "executed: HGMMA x64" in gate.details


def test_a_launch_is_held_to_the_verified_digests_at_its_own_case() -> None:
    assert _launch_differs("the profiled launch", ToolLaunch((11, 12), AT), 7, VERIFIED) == ""
    assert "left other outputs" in _launch_differs("the profiled launch", ToolLaunch((11, 13), AT), 7, VERIFIED)
    assert "left other outputs" in _launch_differs("x", ToolLaunch((11,), AT), 7, VERIFIED)  # one output short
    assert "did not complete" in _launch_differs("x", ToolLaunch((), AT), 7, VERIFIED)
    other_seed = ToolLaunch((), AT)
    assert _launch_differs("x", other_seed, 8, VERIFIED) == ""  # nothing verified at seed 8 to hold it to ...
    assert "no checked launch ran there" in _not_held("x", other_seed, 8, VERIFIED)  # ... and the gate says so
    assert _not_held("x", ToolLaunch((11, 12), AT), 7, VERIFIED) == ""


def test_an_unheld_profiled_launch_is_said_among_the_native_gates_details() -> None:
    note = _not_held("the profiled launch", ToolLaunch((1,), {"n": 5}), 7, VERIFIED)
    gate = _native_gate(EXECUTED, "", note)
    assert gate.status == "passed" and note in gate.details


def test_a_clean_sanitizer_run_that_left_no_outputs_fails_the_sanitize_gate() -> None:
    clean = SanitizerReport("memcheck", True, 0, (), sizes=dict(AT), digests=(11, 12))
    crashed = SanitizerReport("racecheck", True, 0, (), "CUDARuntimeError: an illegal memory access",
                              sizes=dict(AT))
    problems = [p for r in (clean, crashed)
                if (p := _launch_differs(f"{r.tool}'s launch", ToolLaunch(r.digests, r.sizes, r.reason), 7, VERIFIED))]
    assert len(problems) == 1 and problems[0].startswith("racecheck's launch at n=4097 did not complete")
    gate = _sanitize_gate((clean, crashed), problems)
    assert gate.status == "failed" and gate.summary == problems[0]
    notes = ["memcheck's launch at n=5 was not held to verified outputs: ..."]
    assert _sanitize_gate((clean,), [], notes).details == tuple(notes)


def test_the_launchs_own_error_is_read_from_the_tools_output() -> None:
    text = ("========= COMPUTE-SANITIZER\nporter launch_once: CUDARuntimeError: cudaErrorLaunchFailure\n"
            "========= ERROR SUMMARY: 0 errors\n")
    assert launch_failure(text) == "CUDARuntimeError: cudaErrorLaunchFailure"
    assert launch_failure("==PROF== Disconnected\n") == ""
