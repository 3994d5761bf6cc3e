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
