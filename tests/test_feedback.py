"""Feedback for the model, built from hand-made Verdicts and ptxas results."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from porter.agent.edits import apply_reply
from porter.agent.feedback import feedback_for, format_error_feedback, middle_cut
from porter.gate.native import NativeEvidence
from porter.gate.verdict import CaseResult, Gate, OutputCheck, Status, Timing, Verdict
from porter.ptx.toolchain import AssembleResult, Diagnostic, EntryResources

CANDIDATE = "\n".join(f"line {n} of the kernel" for n in range(1, 41)) + "\n"

LOCALIZATION = (
    "C: FAILED, 1000 of 1000000 elements wrong, [1000, 1000] f32 (atol 1e-05, rtol 0.0001)\n"
    "  wrong only in the last block column: columns 896..999 (the ragged edge of N)"
)


def _check(name: str, passed: bool, summary: str) -> OutputCheck:
    return OutputCheck(
        name=name,
        passed=passed,
        max_abs_err=0.0 if passed else 3.5,
        max_rel_err=0.0,
        rel_l2=0.0,
        mismatches=0 if passed else 1000,
        total=1_000_000,
        nan_count=0,
        inf_count=0,
        atol=1e-5,
        rtol=1e-4,
        summary=summary,
    )


def _verdict(**fields: object) -> Verdict:
    base: dict[str, object] = dict(
        kernel="candidate.ptx",
        entry="k",
        arch="sm_90a",
        status=Status.FAILED,
        reason="equivalence: 1 of 2 cases failed",
        gates=(
            Gate("interface", Status.PASSED, "6 params match the spec"),
            Gate("assemble", Status.PASSED, "ptxas -arch=sm_90a ok in 0.20 s"),
            Gate("equivalence", Status.FAILED, "1 of 2 cases failed; first: C: 1000 of 1000000 elements wrong"),
        ),
    )
    base.update(fields)
    return Verdict(**base)  # type: ignore[arg-type]


def test_failed_equivalence_shows_the_localization_and_sizes() -> None:
    cases = (
        CaseResult(
            sizes={"M": 128, "N": 128}, seed=0, status=Status.PASSED, outputs=(_check("C", True, "C: ok"),)
        ),
        CaseResult(
            sizes={"M": 1000, "N": 1000},
            seed=1,
            status=Status.FAILED,
            reason="C: 1000 of 1000000 elements wrong",
            outputs=(_check("C", False, LOCALIZATION),),
            guard_violations=("C: 12 bytes written after the end (first at byte 4000000)",),
            inputs_modified=("A",),
        ),
        CaseResult(
            sizes={"M": 1000, "N": 1000}, seed=2, status=Status.FAILED, reason="C: 998 of 1000000 elements wrong"
        ),
    )
    text = feedback_for(_verdict(cases=cases), None, candidate_text=CANDIDATE, require_native=False)
    assert text.startswith("Verdict for sm_90a: FAILED: equivalence: 1 of 2 cases failed")
    assert "First failing case: M=1000, N=1000; seed 1" in text
    assert "wrong only in the last block column: columns 896..999" in text
    assert "C: 12 bytes written after the end" in text and "wrote input buffers" in text and ": A" in text
    assert "- M=1000, N=1000; seed 2: C: 998 of 1000000 elements wrong" in text
    assert "Passed at: M=128, N=128" in text
    assert "- equivalence: failed:" in text
    assert text.rstrip().splitlines()[-1].startswith("- equivalence failed: 1 of 2 cases failed")


def test_faults_and_races_are_reported() -> None:
    cases = (
        CaseResult(
            sizes={"M": 64},
            seed=0,
            status=Status.FAILED,
            reason="nondeterministic: C: runs differ",
            nondeterminism="C: results differ between two identical runs in 7 of 4096 elements",
        ),
        CaseResult(
            sizes={"M": 4096},
            seed=0,
            status=Status.FAILED,
            reason="timeout: killed after 10 s",
            fault="timeout: killed after 10 s",
        ),
    )
    text = feedback_for(_verdict(cases=cases), None, candidate_text=CANDIDATE, require_native=False)
    assert "nondeterministic (two identical runs differ): C: results differ" in text
    assert "- M=4096; seed 0: timeout: killed after 10 s" in text


def test_assemble_failure_shows_the_offending_lines() -> None:
    context = "  55 | line 55 of the kernel\n> 57 | wgmma.fence.sync.aligned;\n  58 | line 58 of the kernel"
    result = AssembleResult(
        ok=False,
        arch="sm_100a",
        cubin=None,
        diagnostics=(
            Diagnostic(
                line=57,
                severity="error",
                message="Instruction 'wgmma.fence' not supported on .target 'sm_100a'",
                context=context,
            ),
            Diagnostic(
                line=12, severity="error", message="Unknown symbol 'x'"
            ),  # no context: built from the text
            Diagnostic(line=None, severity="warning", message="Potential Performance Loss", code="C7508"),
        ),
        resources={},
        command=("ptxas",),
        wall_s=0.1,
        cached=False,
        ptxas_version="13.0.88",
        log="",
    )
    text = feedback_for(None, result, candidate_text=CANDIDATE, require_native=True)
    assert text.startswith("ptxas -arch=sm_100a: FAILED")
    assert "ptxas -arch=sm_100a: 2 error(s)" in text
    assert "line 57: error: Instruction 'wgmma.fence' not supported on .target 'sm_100a'" in text
    assert "    > 57 | wgmma.fence.sync.aligned;" in text
    assert "    > 12 | line 12 of the kernel" in text and "     10 | line 10 of the kernel" in text
    assert "warning [C7508]: Potential Performance Loss" in text
    assert "- ptxas rejects the kernel" in text


def test_assemble_gate_without_a_result_uses_the_candidate_text() -> None:
    verdict = _verdict(
        status=Status.FAILED,
        reason="assemble: ptxas -arch=sm_100a: 1 errors",
        arch="sm_100a",
        gates=(
            Gate("assemble", Status.FAILED, "ptxas -arch=sm_100a: 1 errors", ("line 30: Unknown symbol 'x'",)),
        ),
    )
    text = feedback_for(verdict, None, candidate_text=CANDIDATE, require_native=True)
    assert "line 30: Unknown symbol 'x'\n      28 | line 28 of the kernel" in text
    assert "    > 30 | line 30 of the kernel" in text
    assert "Signature instructions" not in text  # nothing to inspect in a kernel that did not assemble


def test_missing_native_instructions_are_named() -> None:
    passed = (
        Gate("assemble", Status.PASSED, "ok"),
        Gate("equivalence", Status.PASSED, "16 cases equal to the reference"),
        Gate("native", Status.FAILED, "absent: none of sm_90a's signature instructions (HGMMA) is in the SASS"),
    )
    evidence = NativeEvidence(
        arch="sm_90a",
        state="absent",
        summary="none of sm_90a's signature instructions is in the SASS",
        expected=("HGMMA", "QGMMA"),
        static_counts={"HGMMA": 0, "QGMMA": 0},
    )
    verdict = _verdict(
        gates=passed,
        signature_sass={"HGMMA": 0, "QGMMA": 0},
        native=evidence,
        reason="native: absent",
        resources={
            "k": {"registers": 90, "shared_bytes": 0, "spill_stores": 0, "spill_loads": 0, "stack_frame": 0}
        },
    )
    text = feedback_for(verdict, None, candidate_text=CANDIDATE, require_native=True)
    assert "HGMMA not in SASS" in text and "QGMMA not in SASS" in text
    assert "Native execution: absent:" in text
    assert "- native failed: absent" in text
    assert "- k: 90 registers, 0 B static shared, stack 0 B, no spills" in text


def test_native_present_but_not_executed_and_unprofiled() -> None:
    evidence = NativeEvidence(
        arch="sm_90a",
        state="present but never executed",
        summary="HGMMA is in the SASS but never executed",
        expected=("HGMMA",),
        static_counts={"HGMMA": 8},
        executed_counts={"HGMMA": 0},
    )
    gates = (Gate("assemble", Status.PASSED, "ok"), Gate("native", Status.FAILED, "present but never executed: ..."))
    text = feedback_for(
        _verdict(gates=gates, signature_sass={"HGMMA": 8}, native=evidence),
        None,
        candidate_text=CANDIDATE,
        require_native=True,
    )
    assert "HGMMA x8 in SASS" in text and "Native execution: present but never executed" in text
    # no native gate at all: the SASS alone decides what is said
    unprofiled = _verdict(
        gates=(Gate("assemble", Status.PASSED, "ok"),), status=Status.PASSED, signature_sass={"HGMMA": 0}
    )
    text = feedback_for(unprofiled, None, candidate_text=CANDIDATE, require_native=True)
    assert "none of sm_90a's signature instructions (HGMMA) is in the SASS" in text
    assert "What still blocks passed: nothing" not in text
    relaxed = feedback_for(unprofiled, None, candidate_text=CANDIDATE, require_native=False)
    assert relaxed.endswith("What still blocks passed: nothing.")


def test_speed_spills_and_not_run() -> None:
    gates = (
        Gate("assemble", Status.PASSED, "ok"),
        Gate("equivalence", Status.NOT_RUN, "needs a sm_100a GPU to run; this machine has an H200"),
        Gate("timing", Status.PASSED, "candidate 0.5 ms"),
    )
    timings = (
        Timing("candidate", 0.5, 0.49, 0.52, 50, tflops=275.0, roofline_fraction=0.28),
        Timing("source", 0.4, 0.39, 0.41, 50),
        Timing("library", 0.2, 0.19, 0.21, 50),
    )
    resources = {
        "k": {
            "registers": 255,
            "shared_bytes": 1024,
            "spill_stores": 64,
            "spill_loads": 128,
            "stack_frame": 64,
        }
    }
    verdict = _verdict(
        gates=gates,
        status=Status.NOT_RUN,
        timings=timings,
        speedup_vs_source=0.8,
        speedup_vs_library=0.4,
        resources=resources,
    )
    text = feedback_for(verdict, None, candidate_text=CANDIDATE, require_native=False)
    assert (
        "- candidate: 0.5000 ms median (p10-p90 0.4900-0.5200, n=50), 275.0 TFLOP/s, 28% of roofline" in text
    )
    assert "candidate vs source: 0.80x (slower)" in text and "candidate vs library: 0.40x (slower)" in text
    assert "255 registers" in text and "SPILLS 64 B stored / 128 B loaded" in text
    assert "- equivalence was not run here (needs a sm_100a GPU" in text


def test_resources_from_the_assembler_when_nothing_ran() -> None:
    result = AssembleResult(
        ok=True,
        arch="sm_100a",
        cubin=b"cubin",
        diagnostics=(),
        resources={"k": EntryResources("k", registers=40), "helper": EntryResources("helper")},
        command=("ptxas",),
        wall_s=0.1,
        cached=True,
        ptxas_version="13.0.88",
        log="",
    )
    text = feedback_for(None, result, candidate_text=CANDIDATE, require_native=True)
    assert "- k: 40 registers" in text and "helper" not in text
    assert "nothing has been run yet" in text


def test_long_feedback_is_cut_in_the_middle() -> None:
    many = tuple(
        CaseResult(sizes={"M": m}, seed=0, status=Status.FAILED, reason="C: wrong " + "x" * 250)
        for m in range(1, 60)
    )
    text = feedback_for(
        _verdict(cases=many), None, candidate_text=CANDIDATE, require_native=False, max_chars=900
    )
    assert len(text) <= 900
    assert text.startswith("Verdict for sm_90a") and "characters cut ...]" in text
    assert "What still blocks passed:" in text


def test_middle_cut_keeps_head_and_tail() -> None:
    text = "\n".join(f"row {i:04d}" for i in range(1000))
    cut = middle_cut(text, 500)
    assert len(cut) <= 500 and cut.startswith("row 0000\n") and cut.endswith("row 0999")
    assert "[... " in cut and " characters cut ...]" in cut
    removed = int(cut.split("[... ")[1].split(" ")[0])
    head, tail = cut.split("\n[... ")[0], cut.split("cut ...]\n")[1]
    assert len(head) + len(tail) + removed == len(text)
    assert middle_cut("short", 500) == "short"
    assert middle_cut(text, 10) == text[:10]


@given(st.text(max_size=3000), st.integers(min_value=0, max_value=4000))
def test_middle_cut_never_exceeds_the_limit(text: str, limit: int) -> None:
    cut = middle_cut(text, limit)
    assert len(cut) <= max(0, limit)
    if len(text) <= limit:
        assert cut == text


def test_format_error_feedback() -> None:
    outcome = apply_reply("\tret;\n", "<<<<<<< SEARCH\n\texit;\n=======\n\tret;\n>>>>>>> REPLACE\n")
    text = format_error_feedback(outcome)
    assert text.startswith("Your last reply's edits were not applied.")
    assert outcome.error in text and "The kernel is unchanged" in text
    assert "holds no code" in format_error_feedback(apply_reply("", "no idea"))
    with pytest.raises(ValueError):
        format_error_feedback(apply_reply("\tret;\n", "```ptx\n.version 8.0\n.entry k()\n{\n}\n```"))
