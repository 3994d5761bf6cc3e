"""porter port's honest outcomes for what a user gets wrong: each is one line on stderr, exit 2, no
traceback, said before any work (no run recorded), naming what the user typed; and what a port
needs that only a flag can say (--entry), and a resumed run that cannot go further here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NoGpuRunner, as_nvcc_of
from port_doubles import scripted_vector_add, vector_add_copy
from test_check_entry import AXPY_SPEC, NVCC, REF

from porter.agent.model_choice import resolve_model
from porter.agent.replay import ReplayModel
from porter.agent.resume import resume_point
from porter.agent.session import resume_port, run_port
from porter.errors import InputError
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_bt_tile"


def _repo(tmp_path: Path) -> Path:
    """A git repository with one commit holding gemm_bt_tile's source, spec and reference in k/."""
    repo = tmp_path / "repo"
    (repo / "k").mkdir(parents=True)
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        shutil.copyfile(GEMM / name, repo / "k" / name)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "k"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def _porter(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PORTER_MODEL", "PORTER_API_BASE")}
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd,
                          env={**env, "PYTHONPATH": str(ROOT)})


def _refused(r: subprocess.CompletedProcess, repo: Path) -> str:
    """The one line of a user error said before any work; its text after ``porter: error:``."""
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("porter: error: "), r.stderr
    assert not (repo / ".porter" / "runs").exists()  # nothing was started
    return r.stderr.removeprefix("porter: error: ").strip()


PORT = ("port", "k/kernel_sm80.ptx", "--to", "sm_90a", "--no-gpu")


@pytest.mark.parametrize(("flags", "named"), [
    (("--no-branch", "--branch-on-failure"), ("--no-branch", "--branch-on-failure")),
    (("--no-branch", "--push", "origin"), ("--no-branch", "--push")),
    (("--no-branch", "--in-place"), ("--no-branch", "--in-place")),
    (("--in-place", "--out", "somewhere"), ("--in-place", "--out")),
])
def test_flags_that_contradict_each_other_are_named_before_any_work(tmp_path: Path, flags, named) -> None:
    repo = _repo(tmp_path)
    said = _refused(_porter(repo, *PORT, *flags), repo)
    assert all(flag in said for flag in named) and "contradict" in said


def test_push_to_a_remote_the_repository_lacks_is_said_before_the_port(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    said = _refused(_porter(repo, *PORT, "--push", "upstream"), repo)
    assert said == ("--push upstream: the repository has no remote 'upstream' (remotes: none); add it with "
                    "`git remote add upstream URL`, or name another")


def test_an_unknown_agent_is_said_before_the_port_with_the_known_ones(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    said = _refused(_porter(repo, *PORT, "--no-branch", "--agent", "prot"), repo)
    assert said.startswith("no agent 'prot' (did you mean 'port'?); agents: ") and "port" in said


@pytest.mark.parametrize(("flag", "value"), [("--max-minutes", "-1"), ("--max-rounds", "-2"),
                                             ("--max-tokens", "-5"), ("--max-usd", "-0.5")])
def test_a_negative_budget_names_the_flag_typed(tmp_path: Path, flag: str, value: str) -> None:
    repo = _repo(tmp_path)
    said = _refused(_porter(repo, *PORT, flag, value), repo)
    assert said == f"{flag} must not be negative (got {float(value):g})"
    assert "max_wall_s" not in said


def test_an_unknown_key_in_the_config_is_refused_with_the_key_it_resembles(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".porter").mkdir()
    (repo / ".porter" / "config.toml").write_text('modle = "openai/gpt-4o"\n')
    said = _refused(_porter(repo, *PORT, "--no-branch"), repo)
    assert said == (f"{repo / '.porter' / 'config.toml'}: unknown key 'modle' (did you mean 'model'?); porter "
                    "reads model and api_base")
    (repo / ".porter" / "config.toml").write_text('model = "replay:r.toml"\napi_bsae = "http://x"\n')
    with pytest.raises(InputError, match=r"unknown key 'api_bsae' \(did you mean 'api_base'\?\)"):
        resolve_model(None, env={}, config_path=repo / ".porter" / "config.toml")


@pytest.fixture
def several(tmp_path: Path, toolchain) -> Path:
    """A module of seven kernels and a spec for axpy_inplace (which axpy_inplace_x2 shares)."""
    folder = tmp_path / "several"
    folder.mkdir()
    shutil.copyfile(as_nvcc_of(toolchain, NVCC, tmp_path / "fit"), folder / "kernels.ptx")
    (folder / "porter.toml").write_text(AXPY_SPEC.replace("{per_block}", "256"))
    (folder / "ref.py").write_text(REF)
    return folder


def test_entry_chooses_the_kernel_of_a_module_of_several_to_port(several: Path) -> None:
    r = _porter(several, "port", "kernels.ptx", "--to", "sm_90a", "--no-gpu", "--no-branch", "--json",
                "--entry", "axpy_inplace_x2")
    assert r.returncode == 3, r.stderr[-2000:]  # the retarget assembles; no GPU here to run it
    result = json.loads(r.stdout)["result"]
    assert result["entry"] == "axpy_inplace_x2" and result["best"]["verdict"]["entry"] == "axpy_inplace_x2"
    config = json.loads((several / ".porter" / "runs" / result["run_id"] / "config.json").read_text())
    assert config["entry_option"] == "axpy_inplace_x2"  # a resumed run goes on with the same entry
    wrong = _porter(several, "port", "kernels.ptx", "--to", "sm_90a", "--no-gpu", "--no-branch", "--entry", "axpy")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "kernels.ptx: --entry axpy: no such .entry (entries: _Z7row_sumPK6__halfPfii, " in wrong.stderr
    again = _porter(several, "port", "--resume", result["run_id"], "--entry", "axpy_inplace")
    assert again.returncode == 2 and "drop --entry" in again.stderr


def _resume(run_dir: Path, toolchain):
    point = resume_point(run_dir)
    model = ReplayModel(point.run_dir / point.inputs.model.removeprefix("replay:"),
                        start=point.state.replies if point.state else 0)
    return resume_port(point, toolchain=toolchain, runner=NoGpuRunner(), model=model)


def test_resuming_a_not_run_port_without_the_gpu_adds_no_identical_recheck(tmp_path: Path, toolchain) -> None:
    first = run_port(GEMM / "kernel_sm80.ptx", load_spec(GEMM / "porter.toml"), "sm_90a", toolchain=toolchain,
                     runner=NoGpuRunner(), model=ReplayModel(GEMM / "scripted_session.toml"), runs_root=tmp_path)
    assert first.status == "not run on target hardware" and len(first.candidates) == 4
    for _ in range(2):  # each resume on a machine without the GPU checks the last candidate again, and adds nothing
        again = _resume(first.run_dir, toolchain)
        assert [c.origin for c in again.candidates] == ["retarget", "model", "model", "model"]
        assert again.status == "not run on target hardware" and again.best.index == 3
        assert again.stop_reason.startswith("checked again on this machine: candidate 3 assembles for sm_90a")
    assert sorted(p.name for p in (first.run_dir / "candidates").iterdir()) == [
        "00.json", "00.ptx", "01.json", "01.ptx", "02.json", "02.ptx", "03.json", "03.ptx"]


def test_resuming_a_port_whose_retarget_could_not_run_adds_no_identical_recheck(tmp_path: Path, toolchain) -> None:
    kernel = vector_add_copy(tmp_path / "va")
    first = run_port(kernel, load_spec(kernel.parent / "porter.toml"), "sm_90", toolchain=toolchain,
                     runner=NoGpuRunner(), model=ReplayModel(scripted_vector_add(tmp_path / "replies.toml")),
                     runs_root=tmp_path / "runs")
    assert [c.origin for c in first.candidates] == ["retarget"] and first.status == "not run on target hardware"
    again = _resume(first.run_dir, toolchain)
    assert [c.origin for c in again.candidates] == ["retarget"]
    assert again.stop_reason.startswith("checked again on this machine: candidate 0 assembles for sm_90")
