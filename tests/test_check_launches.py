"""Launches under ncu and compute-sanitizer are held to the verified ones, and memcheck runs up to
the largest checked size set: the decisions, on a CPU, with crafted reports and digests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gate_defenses import ScriptedRunner

from porter.gate import nsight
from porter.gate.check import CheckOptions, run_check
from porter.gate.nsight import launch_failure
from porter.gate.plan import Case, plan_cases, total_buffer_bytes
from porter.gate.spec import load_spec
from porter.gate.under_tools import (
    LARGEST_MEMCHECK_TIMEOUT_S,
    SANITIZER_TIMEOUT_S,
    SanitizerRun,
    ToolLaunch,
    largest_checked,
    launch_differs,
    native_gate,
    not_held,
    sanitize_gate,
    sanitizer_runs,
)
from porter.gate.verdict import NativeEvidence, SanitizerReport

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
AT = {"n": 4097}
VERIFIED = {Case(AT, 7).key(): [11, 12]}
EXECUTED = NativeEvidence("sm_90a", "executed", "HGMMA x64", ("HGMMA",), {"HGMMA": 4}, {"HGMMA": 64})


# --- a launch under a tool must leave the verified outputs ------------------------------------------

def test_a_profiled_launch_that_left_no_outputs_fails_the_native_gate() -> None:
    crashed = ToolLaunch((), AT, "CUDADriverError: CUDA_ERROR_ILLEGAL_INSTRUCTION")
    problem = launch_differs("the profiled launch", crashed, 7, VERIFIED)
    assert "the profiled launch at n=4097 did not complete: it left no outputs (CUDADriverError" in problem
    gate = native_gate(EXECUTED, problem)
    assert gate.status == "failed" and gate.summary == problem and "executed: HGMMA x64" in gate.details


def test_a_launch_is_held_to_the_verified_digests_at_its_own_case() -> None:
    assert launch_differs("the profiled launch", ToolLaunch((11, 12), AT), 7, VERIFIED) == ""
    assert "left other outputs" in launch_differs("the profiled launch", ToolLaunch((11, 13), AT), 7, VERIFIED)
    assert "left other outputs" in launch_differs("x", ToolLaunch((11,), AT), 7, VERIFIED)  # one output short
    assert "did not complete" in launch_differs("x", ToolLaunch((), AT), 7, VERIFIED)
    other_seed = ToolLaunch((), AT)
    assert launch_differs("x", other_seed, 8, VERIFIED) == ""  # nothing verified at seed 8 to hold it to ...
    assert "no checked launch ran there" in not_held("x", other_seed, 8, VERIFIED)  # ... and the gate says so
    assert not_held("x", ToolLaunch((11, 12), AT), 7, VERIFIED) == ""


def test_an_unheld_profiled_launch_is_said_among_the_native_gates_details() -> None:
    note = not_held("the profiled launch", ToolLaunch((1,), {"n": 5}), 7, VERIFIED)
    gate = native_gate(EXECUTED, "", note)
    assert gate.status == "passed" and note in gate.details


def test_a_clean_sanitizer_run_that_left_no_outputs_fails_the_sanitize_gate() -> None:
    clean = SanitizerReport("memcheck", True, 0, (), sizes=dict(AT), digests=(11, 12))
    crashed = SanitizerReport("racecheck", True, 0, (), "CUDARuntimeError: an illegal memory access",
                              sizes=dict(AT))
    problems = [p for r in (clean, crashed)
                if (p := launch_differs(f"{r.tool}'s launch", ToolLaunch(r.digests, r.sizes, r.reason), 7, VERIFIED))]
    assert len(problems) == 1 and problems[0].startswith("racecheck's launch at n=4097 did not complete")
    gate = sanitize_gate((clean, crashed), problems)
    assert gate.status == "failed" and gate.summary == problems[0]
    notes = ["memcheck's launch at n=5 was not held to verified outputs: ..."]
    assert sanitize_gate((clean,), [], notes).details == tuple(notes)


def test_the_launchs_own_error_is_read_from_the_tools_output() -> None:
    text = ("========= COMPUTE-SANITIZER\nporter launch_once: CUDARuntimeError: cudaErrorLaunchFailure\n"
            "========= ERROR SUMMARY: 0 errors\n")
    assert launch_failure(text) == "CUDARuntimeError: cudaErrorLaunchFailure"
    assert launch_failure("==PROF== Disconnected\n") == ""


# --- memcheck up to the largest checked size set --------------------------------------------------

SMALL, MIDDLE, LARGE = {"n": 1}, {"n": 4097}, {"n": 50_000_017}


def test_memcheck_runs_at_the_largest_checked_size_set_with_a_longer_timeout() -> None:
    runs = sanitizer_runs(SMALL, MIDDLE, LARGE)
    assert [(r.tool, r.sizes) for r in runs if r.tool == "memcheck"] == [("memcheck", SMALL), ("memcheck", MIDDLE),
                                                                         ("memcheck", LARGE)]
    assert SanitizerRun("memcheck", LARGE, LARGEST_MEMCHECK_TIMEOUT_S) in runs
    assert LARGEST_MEMCHECK_TIMEOUT_S > SANITIZER_TIMEOUT_S
    assert {(r.tool, tuple(r.sizes.items())) for r in runs if r.tool != "memcheck"} == \
        {(tool, (("n", 1),)) for tool in ("racecheck", "initcheck", "synccheck")}
    assert sanitizer_runs(SMALL, MIDDLE, MIDDLE) == sanitizer_runs(SMALL, MIDDLE)  # one memcheck a size set
    assert sanitizer_runs(SMALL, SMALL, SMALL) == sanitizer_runs(SMALL, SMALL)


sizes = st.builds(lambda n: {"n": n}, st.integers(1, 6))


@given(small=sizes, middle=sizes, largest=st.none() | sizes)
def test_memcheck_covers_every_size_set_given_once_and_the_slow_tools_the_smallest(
        small: dict[str, int], middle: dict[str, int], largest: dict[str, int] | None) -> None:
    runs = sanitizer_runs(small, middle, largest)
    memcheck = [r.sizes for r in runs if r.tool == "memcheck"]
    wanted = [small, middle] + ([largest] if largest is not None else [])
    assert all(s in memcheck for s in wanted) and all(m in wanted for m in memcheck)
    assert len(memcheck) == len({tuple(m.items()) for m in memcheck})
    assert [r.tool for r in runs if r.tool != "memcheck"] == ["racecheck", "initcheck", "synccheck"]
    assert all(r.sizes == small for r in runs if r.tool != "memcheck")


@pytest.mark.parametrize("example", ["vector_add", "gemm_bf16", "softmax", "attention_fwd"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_the_largest_checked_case_is_the_plans_largest_at_the_first_seed(example: str, seed: int) -> None:
    spec = load_spec(EXAMPLES / example / "porter.toml")
    seeds = (seed, seed + 1)
    plan = plan_cases(spec, seeds, timed=[spec.default_sizes()])
    largest = largest_checked(spec, plan, seeds[0])
    comparable = [c for c in plan if c.seed == seeds[0] and not c.values]
    assert largest is not None and any(c.sizes == largest for c in comparable)
    assert all(total_buffer_bytes(spec, c.sizes) <= total_buffer_bytes(spec, largest) for c in comparable)
    large = [c.sizes for c in plan if c.why == "large"]
    if large:  # the large case is never smaller than what it is chosen over
        assert total_buffer_bytes(spec, largest) >= total_buffer_bytes(spec, large[0])
    assert largest_checked(spec, plan, seed + 2) is None  # no case at another seed: nothing comparable


def test_a_value_case_at_a_larger_size_is_not_chosen() -> None:
    spec = load_spec(EXAMPLES / "vector_add" / "porter.toml")
    plan = [Case({"n": 10}, 1), Case({"n": 100}, 1, "wide", why="wide"), Case({"n": 1000}, 2)]
    assert largest_checked(spec, plan, 1) == {"n": 10}


# --- run_check asks for them ----------------------------------------------------------------------

def _sanitized(monkeypatch: pytest.MonkeyPatch, toolchain: Any, leaves: Any) -> tuple[Any, list[tuple]]:
    """A check of vector_add with --sanitize, compute-sanitizer replaced by a clean report whose
    digests ``leaves(tool, sizes)`` gives (the scripted worker's are 42 for every case)."""
    asked: list[tuple] = []

    def fake(job: Any, tool: str, *, timeout_s: float = 600.0) -> SanitizerReport:
        asked.append((tool, dict(job.sizes), timeout_s))
        return SanitizerReport(tool, True, 0, (), digests=leaves(tool, job.sizes))

    monkeypatch.setattr(nsight, "run_sanitizer", fake)
    spec = load_spec(EXAMPLES / "vector_add" / "porter.toml")
    verdict = run_check(EXAMPLES / "vector_add" / "kernel.ptx", spec, CheckOptions(sanitize=True, timing=False),
                        toolchain=toolchain, runner=ScriptedRunner())
    return verdict, asked


def test_a_check_runs_memcheck_at_its_large_case(monkeypatch: pytest.MonkeyPatch, toolchain: Any) -> None:
    verdict, asked = _sanitized(monkeypatch, toolchain, lambda tool, sizes: (42,))
    biggest = max((c.sizes for c in verdict.cases if c.seed == verdict.seeds[0] and not c.values),
                  key=lambda s: s["n"])
    assert biggest["n"] > 12582919  # above the sweep: the large case
    assert ("memcheck", biggest, LARGEST_MEMCHECK_TIMEOUT_S) in asked
    assert verdict.gate("sanitize").status == "passed" and f"memcheck (n={biggest['n']})" in verdict.gate("sanitize").summary


def test_a_sanitizer_launch_that_left_nothing_fails_the_check(monkeypatch: pytest.MonkeyPatch, toolchain: Any) -> None:
    verdict, _ = _sanitized(monkeypatch, toolchain, lambda tool, sizes: () if sizes["n"] > 12582919 else (42,))
    gate = verdict.gate("sanitize")
    assert verdict.status == "failed" and gate.status == "failed"
    assert gate.summary.startswith("memcheck's launch at n=") and "did not complete" in gate.summary
