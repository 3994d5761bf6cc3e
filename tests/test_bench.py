"""porter bench: tasks, rows read off Verdicts, suite rates and the table (CPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from porter.bench.suite import (
    BenchRow,
    exit_code,
    find_tasks,
    render_markdown,
    row_from_verdict,
    run_bench,
    summarise,
)
from porter.errors import InputError
from porter.gate.native import NativeEvidence
from porter.gate.verdict import Gate, NoJudgement, Status, Timing, Verdict

ROOT = Path(__file__).resolve().parent.parent


def _verdict(equivalence: Status, native: str | None, *, vs_library: float | None = None) -> Verdict:
    gates = (Gate("assemble", Status.PASSED, ""), Gate("equivalence", equivalence, ""))
    evidence = NativeEvidence("sm_90a", native, "", ("HGMMA",)) if native else None  # type: ignore[arg-type]
    timings = (Timing("candidate", 1.0, 0.9, 1.1, 10, roofline_fraction=0.5),) if equivalence is Status.PASSED else ()
    return Verdict(kernel="k.ptx", entry="k", arch="sm_90a", status=Status.PASSED if equivalence is Status.PASSED else equivalence,
                   reason="", gates=gates, native=evidence, timings=timings, speedup_vs_library=vs_library,
                   signature_sass={"HGMMA": 1 if native else 0})


def test_the_shipped_suite_has_its_tasks() -> None:
    tasks = {t.name: t for t in find_tasks(ROOT / "examples")}
    bt = next(t for name, t in tasks.items() if name.startswith("gemm_bt_tile"))
    assert bt.to_arch == "sm_90a" and bt.solution is not None and bt.solution.name == "kernel_sm90a.ptx"
    # one task.toml, two targets: the GEMM family's source ported to Hopper and to Blackwell
    gemm = {t.to_arch: t for name, t in tasks.items() if name.startswith("gemm_bf16")}
    assert set(gemm) == {"sm_90a", "sm_100a"}
    assert {t.source.name for t in gemm.values()} == {"kernel_sm80.ptx"}
    assert gemm["sm_100a"].solution is not None and gemm["sm_100a"].solution.name == "kernel_sm100a.ptx"
    assert len(tasks) == 9  # attention_fwd and attention_bwd: two tasks each, with their reference ports


def test_a_task_file_with_task_tables_that_are_not_tables_is_refused(tmp_path: Path) -> None:
    (tmp_path / "task.toml").write_text("task = [1, 2]\n")
    with pytest.raises(InputError, match=r"task\.toml: needs a \[task\] table or \[\[task\]\] tables"):
        find_tasks(tmp_path)
    (tmp_path / "task.toml").write_text('[[task]]\nsource = "k.ptx"\nto = "sm_90"\nsolution = 3\n')
    with pytest.raises(InputError, match=r"task\.solution: must be a string"):
        find_tasks(tmp_path)


def test_task_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text('[task]\nsource = "k.ptx"\nto = "sm_90"\n')
    with pytest.raises(InputError, match=r"task\.source: no file k\.ptx"):
        find_tasks(tmp_path)
    with pytest.raises(InputError, match=r"no task\.toml"):
        find_tasks(ROOT / "docs")


def test_rows_and_rates_count_only_what_ran() -> None:
    rows = [
        row_from_verdict("a", "m", _verdict(Status.PASSED, "executed", vs_library=1.2), require_native=True),
        row_from_verdict("b", "m", _verdict(Status.PASSED, "absent", vs_library=0.5), require_native=True),
        row_from_verdict("c", "m", _verdict(Status.FAILED, "executed"), require_native=True),
        row_from_verdict("d", "m", _verdict(Status.NOT_RUN, "not measured"), require_native=True),
        BenchRow("e", "solution", NoJudgement.NO_SOLUTION, None, "not run", None, "not run", None, None, None),
    ]
    assert [r.native_executed for r in rows[:4]] == ["yes", "no", "yes", "not run"]
    s = summarise(rows)
    assert (s.ran, s.not_run, s.no_solution) == (3, 1, 1)
    assert (s.correct, s.native_executed, s.faster_than_library, s.with_library) == (2, 2, 1, 2)
    table = render_markdown(rows, s)
    assert "| a | m | passed | yes | yes | yes | yes | - | 1.20x | 50% |" in table
    assert "- correct: 2/3 (67%)" in table and "1 not run" in table and "1 tasks ship no reference port" in table


def test_a_row_says_when_its_equivalence_is_emulated() -> None:
    """Without a GPU for the target, the emulator's answer fills the column, marked; it is never
    counted as correct, and a wrong result in emulation fails the row."""
    def emulated(status: Status) -> Verdict:
        gates = (Gate("assemble", Status.PASSED, ""), Gate("equivalence", Status.NOT_RUN, "no GPU"),
                 Gate("emulation", status, "equivalent in emulation (6 cases, shapes M=1)"))
        return Verdict(kernel="k.ptx", entry="k", arch="sm_100a", status=Status.NOT_RUN if status is Status.PASSED else status,
                       reason="", gates=gates, signature_sass={"UTCHMMA": 4})

    rows = [row_from_verdict("right", "m", emulated(Status.PASSED), require_native=True, port=True),
            row_from_verdict("wrong", "m", emulated(Status.FAILED), require_native=True, port=True),
            row_from_verdict("gpu", "m", _verdict(Status.PASSED, "executed"), require_native=True)]
    assert [(r.status, r.equivalent) for r in rows] == [("not run on target hardware", "yes (emulated)"),
                                                         ("failed", "no (emulated)"), ("passed", "yes")]
    s = summarise(rows)
    assert (s.ran, s.not_run, s.correct) == (2, 1, 1)
    table = render_markdown(rows, s)
    assert "| right | m | not run on target hardware | yes | yes (emulated) | yes |" in table
    assert "| wrong | m | failed | yes | no (emulated) | yes |" in table


def test_solutions_on_a_cpu_machine_are_not_run_never_passed(toolchain, no_gpu) -> None:
    tasks = [t for t in find_tasks(ROOT / "examples") if t.solution is not None]
    rows = run_bench(tasks, models=[None], solutions=True, toolchain=toolchain, runner=no_gpu)
    # gemm_bt_tile -> sm_90a; gemm_bf16, attention_fwd and attention_bwd, each -> sm_90a and -> sm_100a
    assert len(rows) == 7
    for row in rows:
        assert row.status == "not run" and row.assembled and row.native_in_sass, row
        assert row.equivalent == "yes (emulated)", row  # porter's PTX emulator ran each one, and says so
    assert summarise(rows).ran == 0


def test_a_row_that_failed_before_running_counts_as_failed_in_the_table_and_the_summary() -> None:
    """#29: a port ptxas rejected said "failed" in the table but counted as not run in the summary."""
    rejected = Verdict(kernel="k.ptx", entry="k", arch="sm_90a", status=Status.FAILED, reason="assemble: 3 errors",
                       gates=(Gate("interface", Status.PASSED, ""), Gate("assemble", Status.FAILED, "3 errors")))
    rows = [row_from_verdict("a", "m", rejected, require_native=True, port=True),
            row_from_verdict("b", "m", _verdict(Status.NOT_RUN, "not measured"), require_native=True)]
    assert [r.status for r in rows] == ["failed", "not run"]
    s = summarise(rows)
    assert (s.ran, s.not_run, s.correct) == (1, 1, 0)
    assert "Over the 1 rows that ran here (1 not run" in render_markdown(rows, s)


def test_the_exit_code_is_a_checks() -> None:
    passed = row_from_verdict("a", "m", _verdict(Status.PASSED, "executed"), require_native=True)
    failed = row_from_verdict("c", "m", _verdict(Status.FAILED, "executed"), require_native=True)
    not_run = row_from_verdict("d", "m", _verdict(Status.NOT_RUN, "not measured"), require_native=True)
    missing = BenchRow("e", "solution", NoJudgement.NO_SOLUTION, None, "not run", None, "not run", None, None, None)
    assert exit_code([passed, missing]) == 0
    assert exit_code([passed, not_run, missing]) == 3
    assert exit_code([failed, not_run, passed]) == 1


def test_bench_solutions_without_a_gpu_exits_3(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "examples" / "gemm_bt_tile", suite / "gemm_bt_tile")
    r = subprocess.run([sys.executable, "-m", "porter", "bench", str(suite), "--solutions"], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "| not run |" in r.stdout


def test_bench_ports_are_recorded_where_porter_runs_finds_them(toolchain, no_gpu, tmp_path: Path) -> None:
    """#29: bench recorded its runs under each task's folder, where `porter runs` does not look."""
    import subprocess

    from porter.agent.runs import list_runs

    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gemm_bt_tile", repo / "suite" / "gemm_bt_tile")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tasks = find_tasks(repo / "suite")
    (row,) = run_bench(tasks, models=[None], solutions=False, toolchain=toolchain, runner=no_gpu)
    assert row.status == "failed", row  # the retarget alone keeps mma.sync: no wgmma in the SASS
    assert not (repo / "suite" / "gemm_bt_tile" / ".porter").exists()
    assert len(list_runs(repo / ".porter" / "runs")) == 1
