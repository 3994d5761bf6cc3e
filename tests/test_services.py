"""The service layer on the CPU: what the commands call, without the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter import services
from porter.agent.runs import candidates, read_config, read_outcome
from porter.errors import InputError
from porter.gate.check import CheckOptions
from porter.gate.verdict import Status, judge

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
GEMM = ROOT / "examples" / "gemm_bt_tile"


def test_check_without_a_gpu_is_not_run_and_exits_3(toolchain) -> None:
    spec = services.find_spec(VECTOR_ADD / "kernel.ptx", None)
    verdict = services.check(VECTOR_ADD / "kernel.ptx", spec, CheckOptions(), gpu=False)
    assert verdict.status == "not run" and judge(verdict).exit_code == 3
    assert verdict.assembly is not None and verdict.assembly.ok  # ptxas' outcome travels in the Verdict


def test_find_spec_says_where_it_looked(tmp_path: Path) -> None:
    kernel = tmp_path / "k.ptx"
    kernel.write_text("// nothing\n")
    with pytest.raises(InputError, match=r"no spec \(porter.toml beside the kernel\)"):
        services.find_spec(kernel, None)


def test_gpu_runner_off_is_none() -> None:
    with services.gpu_runner(False) as runner:
        assert runner is None


def test_a_port_and_its_replay_read_typed_records(tmp_path: Path, toolchain, monkeypatch) -> None:
    work = tmp_path / "gemm"
    shutil.copytree(GEMM, work)
    monkeypatch.chdir(work)  # no repository: the runs go under the current folder
    ported = services.port(work / "kernel_sm80.ptx", "sm_90a", model=f"replay:{work / 'scripted_session.toml'}",
                           branch=False, gpu=False, env={})
    result = ported.result
    assert result.status is Status.NOT_RUN_ON_TARGET and ported.review is None
    config, outcome = read_config(result.run_dir), read_outcome(result.run_dir)
    assert config.require_native and config.target == "sm_90a" and outcome.status is Status.NOT_RUN_ON_TARGET
    records = [r for _, _, r in candidates(result.run_dir)]
    assert [r.status for r in records] == [c.status for c in result.candidates]
    assert records[-1].verdict == result.candidates[-1].verdict  # lossless: the Verdict read back is the same
    raw = json.loads((result.run_dir / "candidates" / f"{records[-1].index:02d}.json").read_text())
    assert raw["status"] == "not run on target hardware"
    replayed = services.replay(result.run_id, work, gpu=False)
    assert replayed.agrees and [r.index for r in replayed.rows] == [r.index for r in records]


def test_replay_json_has_the_record_and_exits_as_a_check(tmp_path: Path, toolchain, monkeypatch) -> None:
    """#29: `replay --json` gave the Verdicts alone (no recorded status, no agreement) and exited 0
    when nothing could run here."""
    import os
    import subprocess
    import sys

    work = tmp_path / "gemm"
    shutil.copytree(GEMM, work)
    monkeypatch.chdir(work)
    ported = services.port(work / "kernel_sm80.ptx", "sm_90a", model=f"replay:{work / 'scripted_session.toml'}",
                           branch=False, gpu=False, env={})
    r = subprocess.run([sys.executable, "-m", "porter", "replay", ported.result.run_id, "--no-gpu", "--json"],
                       capture_output=True, text=True, cwd=work, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""})
    data = json.loads(r.stdout)
    assert r.returncode == 3 == data["exit_code"], r.stderr
    assert data["agrees"] is True
    assert [row["recorded"] for row in data["rows"]] == [c.verdict.status for c in ported.result.candidates]
    assert all(row["agrees"] and row["verdict"]["status"] == row["recorded"] for row in data["rows"])
    assert "not run" in {row["outcome"] for row in data["rows"]}
    assert services.replay(ported.result.run_id, work, gpu=False).exit_code == 3


def test_a_replay_that_does_not_reproduce_its_record_exits_1() -> None:
    from porter.gate.verdict import Status, Verdict

    def row(index: int, recorded: str, now: str) -> services.ReplayRow:
        return services.ReplayRow(index, "model", recorded, Verdict(kernel="k.ptx", entry="k", arch="sm_90a",
                                                                    status=Status(now), reason="", gates=()))

    here = Path("run")
    assert services.Replayed(here, (row(0, "failed", "failed"), row(1, "passed", "passed"))).exit_code == 0
    assert services.Replayed(here, (row(0, "passed", "not run"), row(1, "passed", "passed"))).exit_code == 3
    assert services.Replayed(here, (row(0, "passed", "failed"), row(1, "passed", "not run"))).exit_code == 1


def test_a_replayed_candidate_without_a_record_never_agrees_and_says_so() -> None:
    from porter.gate.verdict import Verdict

    def row(recorded: Status | None, now: Status) -> services.ReplayRow:
        return services.ReplayRow(0, "model", recorded, Verdict(kernel="k.ptx", entry="k", arch="sm_90",
                                                                status=now, reason="", gates=()))

    assert row(Status.PASSED, Status.PASSED).agrees and row(Status.PASSED, Status.PASSED).outcome == Status.PASSED
    assert row(Status.PASSED, Status.FAILED).outcome == Status.FAILED
    missing = row(None, Status.PASSED)
    assert not missing.agrees and missing.outcome == Status.FAILED and missing.recorded_word == "?"
    assert row(None, Status.NOT_RUN).outcome == Status.NOT_RUN  # nothing could be compared here
    data = services.Replayed(Path("run"), (missing,)).as_data()
    assert data["rows"][0]["recorded"] == "?" and data["agrees"] is False
