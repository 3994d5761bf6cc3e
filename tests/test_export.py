"""porter export (#29): each repair pair labelled by the failure it repairs, its architectures and
its workload; duplicates by normalised kernel text dropped; a coverage and balance report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from porter.agent.export import coverage, coverage_report, drop_duplicates, failure_label, normalised
from porter.gate.verdict import CaseResult, Gate, OutputCheck, Status, Verdict
from porter.jsonable import to_jsonable
from porter.ptx.assembly import Assembly, Diagnostic

ROOT = Path(__file__).resolve().parent.parent


def _verdict(*gates: tuple[str, str], status: str = "failed", cases: tuple[CaseResult, ...] = (),
             errors: tuple[str, ...] = ()) -> Verdict:
    assembly = Assembly(ok=not errors, arch="sm_90a", diagnostics=tuple(Diagnostic(49, "error", e) for e in errors),
                        resources={}, wall_s=0.0, cached=False, ptxas_version="13.0", log="") if errors else None
    return Verdict(kernel="k.ptx", entry="k", arch="sm_90a", status=status, reason="",
                   gates=tuple(Gate(name, word, "memcheck at n=33: 2 errors" if name == "sanitize" else "")
                               for name, word in gates), cases=cases, assembly=assembly)


def _wrong(summary: str, **fields: Any) -> CaseResult:
    check = OutputCheck("out", False, 1.0, 1.0, 1.0, 10, 100, 0, 0, 1e-3, 1e-3, summary=summary)
    return CaseResult(sizes={"n": 33}, seed=1, status=Status.FAILED, reason="out: 10 of 100 elements wrong",
                      outputs=(check,), **fields)


def test_each_failure_gets_its_class() -> None:
    assemble_failed = (("interface", "passed"), ("assemble", "failed"))
    ran = (("interface", "passed"), ("assemble", "passed"))
    cases = {
        "interface": _verdict(("interface", "failed")),
        "ptxas: unknown instruction": _verdict(*assemble_failed, errors=("Not a name of any known instruction: 'fmaa'",)),
        "ptxas: syntax": _verdict(*assemble_failed, errors=("Parsing error near '}': syntax error",)),
        "ptxas: unsupported on target": _verdict(*assemble_failed,
                                                 errors=("Modifier '.mbarrier_init' requires .target sm_90 or higher",)),
        "ptxas: operands": _verdict(*assemble_failed, errors=("Arguments mismatch for instruction 'fma'",)),
        "wrong result: every tile": _verdict(*ran, ("equivalence", "failed"),
                                             cases=(_wrong("...\nevery tile is bad (4 tiles of 256)"),)),
        "wrong result: scaled": _verdict(*ran, ("equivalence", "failed"),
                                         cases=(_wrong("...\nout ≈ 2 × ref everywhere: a scale applied twice"),)),
        "wrong result: never written": _verdict(*ran, ("equivalence", "failed"),
                                                cases=(_wrong("...\n40 elements never written (still poison)"),)),
        "out-of-bounds": _verdict(*ran, ("equivalence", "failed"),
                                  cases=(_wrong("", guard_violations=("out: 4 bytes past the end",)),)),
        "slow": _verdict(*ran, ("equivalence", "passed"), ("timing", "failed")),
    }
    for label, verdict in cases.items():
        assert failure_label(verdict, verdict.status) == label, label
    native = _verdict(*ran, ("equivalence", "passed"), ("native", "failed"))
    assert failure_label(native, Status.PASSED_WITHOUT_NATIVE) == "not native"
    memcheck = _verdict(*ran, ("equivalence", "passed"), ("sanitize", "failed"))
    assert failure_label(memcheck, "failed") == "out-of-bounds"


def test_duplicates_are_the_same_kernels_up_to_comments_and_spacing() -> None:
    assert normalised("add.s32  %r1, %r2, 1; // x\n\n/* y */ ret;") == "add.s32 %r1, %r2, 1;\nret;"

    def pair(before: str, after: str) -> dict[str, Any]:
        return {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": before},
                             {"role": "assistant", "content": after}]}

    kept, dropped = drop_duplicates([pair("a;", "b;"), pair("a;  // again", "b;"), pair("a;", "c;")])
    assert dropped == 1 and [p["messages"][2]["content"] for p in kept] == ["b;", "c;"]


# --- the command ---------------------------------------------------------------------------------

def _record(index: int, status: str, verdict: Verdict, feedback: str = "") -> dict[str, Any]:
    return {"index": index, "origin": "model", "round": index, "status": status, "feedback": feedback,
            "verdict": to_jsonable(verdict), "require_native": False}


def _run(root: Path, name: str, entry: str, failing: Verdict, fixed_text: str) -> None:
    run = root / ".porter" / "runs" / name
    (run / "candidates").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"kernel": f"/x/{entry}.ptx", "spec": "", "entry": entry,
                                                 "source_arch": "sm_80", "target": "sm_90a", "model": "m"}))
    (run / "prompt.json").write_text(json.dumps([{"role": "system", "content": "sys"},
                                                 {"role": "user", "content": "task"}]))
    passed = _verdict(("interface", "passed"), ("assemble", "passed"), ("equivalence", "passed"),
                      ("timing", "passed"), status=Status.PASSED)
    for index, text, record in ((0, "fmaa.rn.f32 %f1;", _record(0, "failed", failing, "ptxas says no")),
                                (1, fixed_text, _record(1, "passed", passed))):
        (run / "candidates" / f"{index:02d}.ptx").write_text(text + "\n")
        (run / "candidates" / f"{index:02d}.json").write_text(json.dumps(record))


def test_export_labels_pairs_drops_duplicates_and_reports_coverage(tmp_path: Path) -> None:
    ptxas = _verdict(("interface", "passed"), ("assemble", "failed"),
                     errors=("Not a name of any known instruction: 'fmaa'",))
    wrong = _verdict(("interface", "passed"), ("assemble", "passed"), ("equivalence", "failed"),
                     cases=(_wrong("...\nevery tile is bad (4 tiles of 256)"),))
    _run(tmp_path, "r1", "vector_add", ptxas, "fma.rn.f32 %f1;")
    _run(tmp_path, "r2", "vector_add", ptxas, "fma.rn.f32   %f1;  // the same fix, spaced otherwise")
    _run(tmp_path, "r3", "gemm", wrong, "mma.sync %f1;")
    r = subprocess.run([sys.executable, "-m", "porter", "export", "r1", "r2", "r3", "--root", str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    pairs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(p["metadata"]["run"], p["metadata"]["failure"], p["metadata"]["workload"]) for p in pairs] == [
        ("r1", "ptxas: unknown instruction", "vector_add"), ("r3", "wrong result: every tile", "gemm")]
    assert all(p["metadata"]["source_arch"] == "sm_80" and p["metadata"]["verified"] for p in pairs)
    assert "2 repair pairs from 3 runs (1 duplicates dropped by normalised kernel text" in r.stderr
    assert "by failure: ptxas: unknown instruction 1 (50%), wrong result: every tile 1 (50%)" in r.stderr
    assert "by architecture: sm_80 -> sm_90a 2 (100%)" in r.stderr
    assert "by workload: vector_add 1 (50%), gemm 1 (50%)" in r.stderr


def test_the_report_says_where_the_set_is_thin() -> None:
    metadata = [{"verified": v, "failure": f, "source_arch": "sm_80", "target": "sm_90a", "workload": "w"}
                for v, f in ((True, "slow"), (True, "slow"), (True, "slow"), (False, "interface"))]
    report = coverage_report(coverage([{"metadata": m} for m in metadata], runs=2, duplicates=0))
    assert "3 towards candidates verified on hardware, 1 unverified" in report
    assert "balance: 2 failure classes; the largest, slow, holds 75%; a single pair each: interface" in report
