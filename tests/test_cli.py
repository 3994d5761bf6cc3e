"""The command line as a user meets it: exit codes, one-line errors, the inspect verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from porter.errors import ExitCode
from porter.gate.runner.client import GpuRunner, Unavailable
from porter.gate.runner.fake import FakeGpu
from porter.services import Seams

ROOT = Path(__file__).resolve().parent.parent
INSPECT = ROOT / "examples" / "inspect"


def porter(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # never touch a GPU from the CLI tests
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_wgmma_kernel_cannot_go_to_sm100a_and_the_lines_are_named() -> None:
    r = porter("inspect", str(INSPECT / "wgmma_sm90a.ptx"), "--arch", "sm_100a", "--arch", "sm_90a")
    assert r.returncode == 0, r.stderr
    assert "sm_100a  incompatible" in r.stdout
    assert "`wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16` at line 252 exists only on sm_90a" in r.stdout
    assert "HGMMA" in r.stdout  # assembled for sm_90a, the signature is in the SASS


def test_plain_sm90_kernel_goes_to_sm100a_with_at_most_a_retarget() -> None:
    r = porter("inspect", str(INSPECT / "plain_sm90.ptx"), "--arch", "sm_100a", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    (arch,) = report["archs"]
    assert arch["compatibility"]["status"] in ("as-is", "retarget")
    assert arch["assembled"] is True
    assert "retarget to .target sm_100a" in arch["compatibility"]["reason"]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = porter("inspect", str(tmp_path / "nope.ptx"))
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "no such file" in missing.stderr
    garbage = tmp_path / "g.ptx"
    garbage.write_bytes(b"\x00\xff binary junk")
    r = porter("inspect", str(garbage))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    unknown = porter("inspect", str(INSPECT / "plain_sm90.ptx"), "--arch", "sm_42")
    assert unknown.returncode == 2 and "known:" in unknown.stderr


def test_usage_errors_exit_2() -> None:
    assert porter("inspect").returncode == 2
    assert porter("no-such-command").returncode == 2


def test_check_without_a_gpu_is_not_run_exit_3() -> None:
    r = porter("check", str(ROOT / "examples" / "vector_add" / "kernel.ptx"))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "NOT RUN" in r.stdout and "assemble     passed" in r.stdout


def test_check_with_a_broken_spec_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "porter.toml").write_text('[kernel]\nentry = "k"\n[sizes]\nn = 4\n[launch]\ngrid = [1]\nblock = [2000]\n')
    kernel = tmp_path / "k.ptx"
    kernel.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text())
    r = porter("check", str(kernel))
    assert r.returncode == 2
    assert "porter.toml" in r.stderr and "Traceback" not in r.stderr


def test_doctor_reports_the_toolchain() -> None:
    r = porter("doctor")
    assert "ptxas" in r.stdout
    assert r.returncode in (0, 3)


def test_profile_imports_an_ncu_export_into_the_spec(tmp_path: Path) -> None:
    for name in ("kernel.ptx", "porter.toml", "ref.py"):
        (tmp_path / name).write_text((ROOT / "examples" / "vector_add" / name).read_text())
    before = (tmp_path / "porter.toml").read_text()
    export = ROOT / "tests" / "data" / "ncu" / "h200_vector_add_details.csv"
    r = porter("profile", str(tmp_path / "kernel.ptx"), "--from-csv", str(export))
    assert r.returncode == 0, r.stderr
    after = (tmp_path / "porter.toml").read_text()
    assert after.startswith(before.rstrip("\n"))  # the user's spec is kept, [profile] appended
    assert "[profile]" in after and "time_us = 2.02" in after and "registers = 16" in after
    from porter.gate.spec import load_spec

    assert load_spec(tmp_path / "porter.toml").profile["time_us"] == 2.02
    again = porter("profile", str(tmp_path / "kernel.ptx"), "--from-csv", str(export))
    assert again.returncode == 0 and (tmp_path / "porter.toml").read_text().count("[profile]") == 1


def test_a_missing_kernel_is_named_before_its_spec(tmp_path: Path) -> None:
    for command in ("check", "record", "profile"):
        args = [command, str(tmp_path / "nope.ptx")] + (["--out", str(tmp_path / "g")] if command == "record" else [])
        r = porter(*args)
        assert r.returncode == 2 and "nope.ptx: no such file" in r.stderr, (command, r.stderr)


def test_time_at_errors_are_one_line_and_exit_2() -> None:
    kernel = str(ROOT / "examples" / "gemm_bf16" / "kernel_sm80.ptx")
    for value, message in (("M=big", "--time-at: expected NAME=INTEGER pairs"),
                           ("M=8192,Q=2", "'Q' is not a size symbol"),
                           ("M=0", "must be at least 1")):
        r = porter("check", kernel, "--no-gpu", "--time-at", value)
        assert r.returncode == 2, (value, r.stderr)
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_inspect_never_says_as_is_beside_a_ptxas_failure(tmp_path: Path) -> None:
    """#13.7: the verdict column said "as-is" next to "FAILED: line 49: ..." for the same arch."""
    bad = tmp_path / "bad.ptx"
    bad.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text().replace("fma.rn.f32", "fmaa.rn.f32"))
    r = porter("inspect", str(bad), "--arch", "sm_80", "--arch", "sm_90")
    assert r.returncode == 1, r.stderr  # #29: ptxas rejects it for every target: it goes nowhere
    rows = [line for line in r.stdout.splitlines() if line.startswith(("sm_80 ", "sm_90 "))]
    assert len(rows) == 2 and all("ptxas error" in row and "as-is" not in row for row in rows)
    assert "assembles as is" not in r.stdout and "ptxas rejects it for sm_80 (line 49" in r.stdout
    report = json.loads(porter("inspect", str(bad), "--arch", "sm_80", "--json").stdout)
    (arch,) = report["archs"]
    assert arch["verdict"] == "ptxas error" and "assembles as is" not in json.dumps(arch)
    good = json.loads(porter("inspect", str(ROOT / "examples" / "vector_add" / "kernel.ptx"), "--arch", "sm_80",
                             "--json").stdout)
    assert good["archs"][0]["verdict"] == "as-is"


def _vector_add(folder: Path) -> Path:
    for name in ("kernel.ptx", "porter.toml", "ref.py"):
        (folder / name).write_text((ROOT / "examples" / "vector_add" / name).read_text())
    return folder / "kernel.ptx"


def test_a_bad_against_kernel_is_bad_input_even_without_a_gpu(tmp_path: Path) -> None:
    """#29: a missing, empty, unparsable or mismatched --against was `not run` (exit 3) without a GPU."""
    kernel = _vector_add(tmp_path)
    (tmp_path / "empty.ptx").write_text("")
    (tmp_path / "junk.ptx").write_text("hello {")
    (tmp_path / "f64.ptx").write_text(kernel.read_text().replace(".param .f32", ".param .f64"))
    (tmp_path / "small.ptx").write_text(kernel.read_text().replace(".maxntid 256, 1, 1", ".maxntid 128, 1, 1"))
    for source, said in (("nope.ptx", "no such file"), ("empty.ptx", "empty file"), ("junk.ptx", "expected a PTX"),
                         ("f64.ptx", "'alpha'"), ("small.ptx", ".maxntid (128, 1, 1)")):
        r = porter("check", str(kernel), "--against", str(tmp_path / source))
        assert r.returncode == 2, (source, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, (source, r.stderr)


def test_a_reference_that_cannot_import_is_bad_input(tmp_path: Path) -> None:
    kernel = _vector_add(tmp_path)
    for text, said in (("def other(args, sizes):\n    return {}\n", "has no function 'vector_add'"),
                       ("def vector_add(:\n", "does not import: line 1")):
        (tmp_path / "ref.py").write_text(text)
        r = porter("check", str(kernel))
        assert r.returncode == 2 and said in r.stderr, (text, r.stderr)


def test_check_holds_the_candidate_to_the_spec_block_as_port_does(tmp_path: Path) -> None:
    kernel = _vector_add(tmp_path)
    kernel.write_text(kernel.read_text().replace(".maxntid 256, 1, 1", ".maxntid 128, 1, 1"))
    r = porter("check", str(kernel), "--json")
    assert r.returncode == 1, r.stderr
    (interface,) = [g for g in json.loads(r.stdout)["gates"] if g["name"] == "interface"]
    assert interface["status"] == "failed" and "at most .maxntid (128, 1, 1)" in interface["details"][0]


def test_a_path_porter_cannot_write_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """#29: a folder porter could not write ended in `internal error: PermissionError` (exit 3)."""
    from porter.cli.app import main

    kernel = _vector_add(tmp_path)
    target = tmp_path / "locked" / "porter.toml"

    write_text = Path.write_text

    def denied(self: Path, *args: Any, **kwargs: Any) -> int:
        if self == target:  # only the user's path: porter's own scratch files (a ptxas probe) still write
            raise PermissionError(13, "Permission denied", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", denied)
    monkeypatch.setattr(sys, "argv", ["porter", "spec", str(kernel), "--out", str(target)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == f"porter: error: {target}: Permission denied\n"


def test_check_native_on_a_kernel_without_tensor_core_work_is_not_required(tmp_path: Path) -> None:
    """#29: `check --native` on a vector add said FAILED (native instructions absent), where port
    says native instructions are not required of it."""
    r = porter("check", str(_vector_add(tmp_path)), "--native", "--json")
    verdict = json.loads(r.stdout)
    assert r.returncode == 3 and verdict["status"] == "not run", r.stdout  # no GPU here: nothing failed
    assert "native" not in {g["name"] for g in verdict["gates"]}
    assert any(w.startswith("--native: not required") for w in verdict["warnings"])
    text = porter("check", str(tmp_path / "kernel.ptx"), "--native").stdout
    assert "FAILED" not in text and "not required" in text


def test_inspect_exits_1_only_when_ptxas_rejects_every_target(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ptx"
    bad.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text().replace("fma.rn.f32", "fmaa.rn.f32"))
    assert porter("inspect", str(bad), "--arch", "sm_80", "--json").returncode == 1
    assert porter("inspect", str(bad), "--no-assemble").returncode == 0  # nothing asked of ptxas
    assert porter("inspect", str(INSPECT / "wgmma_sm90a.ptx"), "--arch", "sm_100a", "--arch", "sm_90a").returncode == 0


def test_spec_refuses_a_kernel_ptxas_rejects(tmp_path: Path) -> None:
    """#29: `porter spec` wrote a spec for a kernel that does not assemble."""
    bad = tmp_path / "bad.ptx"
    bad.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text().replace("fma.rn.f32", "fmaa.rn.f32"))
    r = porter("spec", str(bad))
    assert r.returncode == 2 and "does not assemble for sm_80" in r.stderr and "line 49" in r.stderr, r.stderr
    assert not (tmp_path / "porter.toml").exists()


def test_spec_suggests_checking_against_the_reference_not_the_kernel_itself(tmp_path: Path) -> None:
    kernel = tmp_path / "k.ptx"
    kernel.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text())
    r = porter("spec", str(kernel))
    assert r.returncode == 0, r.stderr
    assert "--against" not in r.stdout and f"`porter check {kernel}`" in r.stdout
    assert f"`porter port {kernel} --to ARCH`" in r.stdout


def _main(monkeypatch: pytest.MonkeyPatch, seams: Seams, *args: str) -> int:
    """``porter ARGS`` in this process on ``seams``; its exit code."""
    from porter.cli.app import main

    monkeypatch.setattr(sys, "argv", ["porter", *args])
    monkeypatch.delenv("PORTER_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(seams)
    assert isinstance(exited.value.code, int)
    return exited.value.code


def test_a_bug_in_porter_exits_70_in_one_line_saying_how_to_see_the_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """#31: a bug in porter exited 3, the code of a machine without a GPU."""

    def broken(device: int) -> GpuRunner:
        raise RuntimeError("a bug in porter,\nsaid over two lines")

    code = _main(monkeypatch, Seams(runner_factory=broken), "check", str(_vector_add(tmp_path)))
    assert code == ExitCode.INTERNAL == 70
    assert capsys.readouterr().err == ("porter: internal error: RuntimeError: a bug in porter, said over two lines "
                                       "(set PORTER_DEBUG=1 for the traceback)\n")


def test_a_gpu_worker_that_cannot_start_is_one_line_exit_3(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """#31: a worker that failed to start (here `porter worker`'s second GPU) ended as an internal error."""
    pytest.importorskip("distributed")
    first = FakeGpu(device_count=2)
    seams = Seams(runner_factory=lambda device: first.runner() if device == 0 else Unavailable("CUDA error: no device"))
    code = _main(monkeypatch, seams, "worker", "--scheduler", "tcp://127.0.0.1:8786")
    assert code == ExitCode.ENVIRONMENT == 3
    assert capsys.readouterr().err == "porter: error: porter worker needs GPU 1: CUDA error: no device\n"
