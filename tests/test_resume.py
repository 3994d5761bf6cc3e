"""Resume: a port interrupted for real (SIGINT to the command) or ended by its budget goes on with
``porter port --resume`` and ends where the uninterrupted port ends; a run recorded on a machine
without the GPU goes on where the GPU is, from its own copies of the kernel, spec and replies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import NoGpuRunner
from port_doubles import (
    OnlyGoodCubins,
    fixed_kernel,
    good_cubins,
    scripted_vector_add,
    vector_add_copy,
    wrong_kernel,
)

from porter import services
from porter.agent.llm import Budget
from porter.agent.replay import ReplayModel
from porter.agent.resume import SessionState, resume_point
from porter.agent.runs import list_runs, read_outcome, read_record
from porter.agent.session import resume_port, run_port
from porter.errors import InputError
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "porter_with_doubles.py"
GEMM = ROOT / "examples" / "gemm_bt_tile"


def _vector_add(tmp_path: Path, toolchain, *, runner=None, budget=None):
    kernel = vector_add_copy(tmp_path / "va")
    model = ReplayModel(scripted_vector_add(tmp_path / "replies.toml"))
    return run_port(kernel, load_spec(kernel.parent / "porter.toml"), "sm_90", toolchain=toolchain,
                    runner=runner or OnlyGoodCubins(good_cubins(toolchain)), model=model,
                    runs_root=tmp_path / "runs", budget=budget)


def _resume(run_dir: Path, toolchain, runner, budget=None):
    point = resume_point(run_dir)
    model = ReplayModel(point.run_dir / point.inputs.model.removeprefix("replay:"), start=point.state.replies
                        if point.state else 0)
    return resume_port(point, toolchain=toolchain, runner=runner, model=model, budget=budget)


def _ending(result):
    best = result.best
    return result.status, best.index, best.origin, best.path.read_text()


def test_a_port_ended_by_its_budget_resumes_to_the_same_passing_candidate(tmp_path, toolchain):
    whole = _vector_add(tmp_path / "a", toolchain)
    cut = _vector_add(tmp_path / "b", toolchain, budget=Budget(max_rounds=1))
    assert "round budget spent" in cut.stop_reason and cut.status == "failed"
    resumed = _resume(cut.run_dir, toolchain, OnlyGoodCubins(good_cubins(toolchain)), Budget(max_rounds=1))
    assert resumed.run_id == cut.run_id and _ending(resumed) == _ending(whole)
    assert resumed.status == "passed" and resumed.spend.rounds == 2  # one round, then one more
    state = read_record(SessionState, resumed.run_dir / "session.json")
    assert len(state.resumes) == 1 and state.resumes[0].budget["max_rounds"] == 1


def test_a_budget_on_resume_counts_from_where_the_run_stood(tmp_path, toolchain):
    cut = _vector_add(tmp_path, toolchain, budget=Budget(max_rounds=1))
    again = _resume(cut.run_dir, toolchain, OnlyGoodCubins(good_cubins(toolchain)), Budget(max_rounds=0))
    assert "round budget spent: 1 of 1 rounds used" in again.stop_reason  # zero more rounds is a budget
    assert len(again.candidates) == 2


def test_a_run_of_two_samples_per_round_resumes_after_every_reply_it_had(tmp_path, toolchain):
    kernel = vector_add_copy(tmp_path / "va")
    script = scripted_vector_add(tmp_path / "replies.toml",
                                 replies=(wrong_kernel(), wrong_kernel() + "// another sample\n", fixed_kernel()))
    cut = run_port(kernel, load_spec(kernel.parent / "porter.toml"), "sm_90", toolchain=toolchain,
                   runner=OnlyGoodCubins(good_cubins(toolchain)), model=ReplayModel(script),
                   runs_root=tmp_path / "runs", budget=Budget(max_rounds=2), candidates=2)
    assert [c.origin for c in cut.candidates] == ["retarget", "model", "model"] and cut.status == "failed"
    state = read_record(SessionState, cut.run_dir / "session.json")
    assert state.replies == 2 and state.sampled == 1  # one reply in the conversation (the round's best), one other sample
    resumed = _resume(cut.run_dir, toolchain, OnlyGoodCubins(good_cubins(toolchain)), Budget(max_rounds=1))
    # The resumed model goes on with the third reply (the fixed kernel), not the round's second again.
    assert resumed.status == "passed" and resumed.best.index == 3
    assert resumed.best.path.read_text().strip() == fixed_kernel().strip()


def test_the_gemm_scripted_port_resumes_to_the_same_end_without_a_gpu(tmp_path, toolchain):
    spec = load_spec(GEMM / "porter.toml")
    kernel = GEMM / "kernel_sm80.ptx"
    script = GEMM / "scripted_session.toml"
    whole = run_port(kernel, spec, "sm_90a", toolchain=toolchain, runner=NoGpuRunner(), model=ReplayModel(script),
                     runs_root=tmp_path / "a")
    cut = run_port(kernel, spec, "sm_90a", toolchain=toolchain, runner=NoGpuRunner(), model=ReplayModel(script),
                   runs_root=tmp_path / "b", budget=Budget(max_rounds=1))
    resumed = _resume(cut.run_dir, toolchain, NoGpuRunner())
    assert _ending(resumed) == _ending(whole)
    assert resumed.status == "not run on target hardware" and resumed.best.index == 3


def test_a_run_recorded_without_the_gpu_resumes_where_it_is_and_passes(tmp_path, toolchain):
    here = _vector_add(tmp_path / "laptop", toolchain, runner=NoGpuRunner())
    assert here.status == "not run on target hardware" and len(here.candidates) == 1
    # The run folder alone goes to the other machine: the kernel, spec and replies it was made from do not.
    moved = tmp_path / "gpu-box" / ".porter" / "runs" / here.run_id
    shutil.copytree(here.run_dir, moved)
    shutil.rmtree(tmp_path / "laptop")
    there = _resume(moved, toolchain, OnlyGoodCubins(good_cubins(toolchain)))
    assert [(c.index, c.origin, c.status.value) for c in there.candidates] == [
        (0, "retarget", "not run on target hardware"), (1, "recheck", "failed"), (2, "model", "failed"),
        (3, "model", "passed")]
    assert there.best.path.read_text().strip() == fixed_kernel().strip()


def test_what_cannot_be_resumed_is_one_line(tmp_path, toolchain):
    passed = _vector_add(tmp_path, toolchain)
    with pytest.raises(InputError, match=r"passed \(candidate 2\): there is nothing to resume"):
        resume_point(passed.run_dir)
    old = tmp_path / "old"
    shutil.copytree(passed.run_dir, old)
    (old / "inputs.json").unlink()
    with pytest.raises(InputError, match="cannot be resumed"):
        resume_point(old)
    r = subprocess.run([sys.executable, "-m", "porter", "port", "k.ptx", "--resume", "x"], capture_output=True,
                       text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "drop KERNEL" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "porter", "port", "--resume", "nope"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "no run 'nope'" in r.stderr


# -- interrupted for real -----------------------------------------------------------------------

def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    env.pop("PORTER_MODEL", None)
    return env


def _port_command(folder: Path) -> list[str]:
    kernel = vector_add_copy(folder / "va")
    scripted_vector_add(folder / "replies.toml")
    return [sys.executable, str(DRIVER), "port", str(kernel), "--to", "sm_90", "--model",
            f"replay:{folder / 'replies.toml'}", "--no-branch"]


def _as_in_a_terminal() -> None:
    """In the child before it runs: Ctrl-C's default, as a terminal's foreground job has it. A test
    run started in the background of a script inherits SIGINT ignored, and Python keeps it so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(proc: subprocess.Popen, text: str, timeout: float = 120.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while text not in seen:
        line = proc.stderr.readline()
        if not line or time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in:\n{seen[-3000:]}")
        seen += line
    return seen


def test_ctrl_c_after_the_first_round_leaves_a_run_that_resumes_to_the_uninterrupted_end(tmp_path):
    whole = tmp_path / "whole"
    whole.mkdir()
    done = subprocess.run([*_port_command(whole), "--json"], cwd=whole, env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    uninterrupted = json.loads(done.stdout)["result"]

    cut = tmp_path / "cut"
    cut.mkdir()
    # The scripted model takes its time over the second reply: the SIGINT arrives during that call.
    prompts = cut / "prompts.jsonl"
    proc = subprocess.Popen(_port_command(cut), cwd=cut, env=_env(PORTER_TEST_SLOW_FROM="1",
                                                                  PORTER_TEST_PROMPTS=str(prompts)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)
    _wait_for(proc, "candidate 1: failed")
    # The second prompt is written as it is sent: from then on the port is inside the slow call.
    deadline = time.monotonic() + 60
    while not (prompts.exists() and len(prompts.read_text().splitlines()) >= 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted; its records are whole" in err and "porter port --resume" in err
    assert "Traceback" not in err
    (summary,) = list_runs(cut / ".porter" / "runs")
    assert summary.status == "interrupted" and summary.candidates == 2
    run = summary.path
    for record in run.rglob("*.json"):
        json.loads(record.read_text())  # every record whole
    outcome = read_outcome(run)
    assert outcome.ended == "interrupted" and outcome.best in (0, 1)
    state = read_record(SessionState, run / "session.json")
    assert state.pending is None and state.current == 1 and state.replies == 1

    resumed = subprocess.run([sys.executable, str(DRIVER), "port", "--resume", summary.id[:22], "--no-branch",
                              "--json"], cwd=cut, env=_env(), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)["result"]
    assert result["run_id"] == summary.id
    assert (result["status"], result["best"]["index"]) == (uninterrupted["status"], uninterrupted["best"]["index"])
    assert Path(result["best"]["path"]).read_text() == Path(uninterrupted["best"]["path"]).read_text()
    assert [c["origin"] for c in result["candidates"]] == [c["origin"] for c in uninterrupted["candidates"]]
    assert read_outcome(run).ended == "finished"


def test_services_resume_finds_the_kernel_in_this_clone_for_the_review(tmp_path, toolchain, monkeypatch):
    kernel = vector_add_copy(tmp_path / "va")
    monkeypatch.chdir(tmp_path)
    cut = run_port(kernel, load_spec(kernel.parent / "porter.toml"), "sm_90", toolchain=toolchain,
                   runner=NoGpuRunner(), model=ReplayModel(scripted_vector_add(tmp_path / "r.toml")),
                   runs_root=tmp_path / ".porter" / "runs")
    # No repository here: the resumed port that passes says where its files could go instead.
    good = good_cubins(toolchain)
    ported = services.resume(cut.run_id, tmp_path, env={},
                             seams=services.Seams(runner_factory=lambda device: OnlyGoodCubins(good)))
    assert ported.result.status == "passed"
    assert ported.review is not None and ported.review.branch is None and "--out DIR" in ported.review.reason



@pytest.mark.gpu
def test_ctrl_c_during_a_check_on_the_gpu_resumes_to_the_pass(tmp_path):
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        shutil.copyfile(GEMM / name, tmp_path / name)
    command = [sys.executable, "-m", "porter", "port", "kernel_sm80.ptx", "--to", "sm_90a", "--model",
               f"replay:{GEMM / 'scripted_session.toml'}", "--no-branch"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_as_in_a_terminal)
    _wait_for(proc, "candidate 2 (model, round 2): checking", timeout=300)
    proc.send_signal(signal.SIGINT)  # while the worker runs candidate 2's cases
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    (summary,) = list_runs(tmp_path / ".porter" / "runs")
    assert summary.status == "interrupted"
    state = read_record(SessionState, summary.path / "session.json")
    assert state.pending is not None and state.pending.index == 2  # saved, not judged: checked again on resume
    resumed = subprocess.run([sys.executable, "-m", "porter", "port", "--resume", summary.id, "--no-branch",
                              "--json"], cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)["result"]
    assert [(c["origin"], c["status"]) for c in result["candidates"]] == [
        ("retarget", "passed without native instructions"), ("model", "failed"), ("model", "failed"),
        ("model", "passed")]
    assert result["best"]["index"] == 3 and result["best"]["verdict"]["native"]["state"] == "executed"
