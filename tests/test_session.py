"""The porting loop with the scripted model, on the CPU (real ptxas; GPU gates `not run`),
its run records, replay and export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from porter.agent.llm import Budget
from porter.agent.replay import ReplayModel
from porter.agent.runs import find_run, list_runs, no_pairs_reason, repair_pairs
from porter.agent.session import PortRequest, PortSession, choose_target
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_bt_tile"
SCRIPT = EXAMPLE / "scripted_session.toml"


def _port(tmp_path: Path, toolchain, model, **overrides):
    from conftest import NoGpuRunner

    events: list[tuple[str, dict]] = []
    request = PortRequest(kernel=EXAMPLE / "kernel_sm80.ptx", spec=load_spec(EXAMPLE / "porter.toml"), to_arch="sm_90a",
                          runs_root=tmp_path / "runs", **overrides)
    session = PortSession(request, toolchain=toolchain, runner=NoGpuRunner(), model=model,
                          on_event=lambda kind, **data: events.append((kind, data)))
    return session.run(), events


def test_no_model_gives_the_retarget_baseline_and_says_so(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, None)
    assert [c.origin for c in result.candidates] == ["retarget"]
    assert "no model configured" in result.stop_reason
    assert result.require_native  # mma.sync -> wgmma: the tensor-core model changes
    native = result.best.verdict.gate("native")
    assert native.status == "failed" and "absent" in native.summary  # the retarget keeps HMMA
    assert result.status == "failed"


def test_scripted_session_walks_the_repair_path_on_the_cpu(tmp_path, toolchain):
    result, events = _port(tmp_path, toolchain, ReplayModel(SCRIPT))
    origins = [(c.origin, c.verdict.gate("assemble").status) for c in result.candidates]
    assert origins == [("retarget", "passed"), ("model", "failed"), ("model", "passed"), ("model", "passed")]
    # The first reply's ptxas error went back to the model with the offending line.
    first_feedback = result.candidates[1].feedback
    assert "m64n64k8" in first_feedback
    # No GPU here: the second reply, wrong in every tile, is failed in emulation and told so; the
    # loop stops at the first candidate with HGMMA in its SASS that is equivalent in emulation.
    assert result.candidates[2].verdict.gate("emulation").status == "failed"
    assert "emulation" in result.candidates[2].feedback
    assert result.status == "not run on target hardware"
    assert result.best.index == 3 and result.best.verdict.signature_sass["HGMMA"] > 0
    assert result.best.verdict.gate("emulation").status == "passed"
    assert result.spend.rounds == 3
    assert any(kind == "format-error" for kind, _ in events) is False
    # Everything was recorded as it happened.
    run = find_run(tmp_path / "runs", result.run_id)
    assert (run / "result.json").is_file() and len(list((run / "messages").glob("*.md"))) >= 5
    (summary,) = list_runs(tmp_path / "runs")
    assert summary.status == "not run on target hardware" and summary.candidates == 4


def test_an_emulator_that_breaks_down_ends_the_port_not_run_never_failed(tmp_path, toolchain, monkeypatch):
    """The emulator (or the spec's reference) raising says nothing of the kernel: the candidate
    with HGMMA in its SASS is as far as this machine goes, and the stop reason says why."""
    from porter.gate import emulated

    def broken(*args, **kwargs):
        raise MemoryError("the emulator ran out of memory")

    monkeypatch.setattr(emulated, "emulate", broken)
    result, _ = _port(tmp_path, toolchain, ReplayModel(SCRIPT))
    assert result.status == "not run on target hardware" and result.status.exit_code == 3
    assert result.best.verdict.gate("emulation").status == "error"
    assert "(emulation error: " in result.stop_reason and "MemoryError" in result.stop_reason
    assert result.best.verdict.signature_sass["HGMMA"] > 0
    # The retarget (HMMA, no wgmma) is still failed where native instructions are required.
    assert result.candidates[0].status == "failed"


def test_budget_stops_before_a_call_that_would_exceed_it(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, ReplayModel(SCRIPT), budget=Budget(max_rounds=1))
    assert result.spend.rounds == 1
    assert "round budget" in result.stop_reason


def test_malformed_replies_are_capped(tmp_path, toolchain):
    script = tmp_path / "junk.toml"
    script.write_text('label = "scripted junk"\n' + '[[reply]]\ntext = "I would rather not."\n' * 4)
    result, events = _port(tmp_path, toolchain, ReplayModel(script))
    assert "3 rounds in a row gave no candidate (last: no-code: Your reply holds no kernel" in result.stop_reason
    assert sum(kind == "format-error" for kind, _ in events) == 3


def test_export_writes_repair_pairs_only_towards_candidates_verified_on_hardware(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, ReplayModel(SCRIPT))
    # Without a GPU nothing passed on hardware: by default there is nothing to learn from.
    assert list(repair_pairs(result.run_dir)) == []
    assert "no later candidate passed on hardware" in no_pairs_reason(result.run_dir, include_unverified=False)
    pairs = list(repair_pairs(result.run_dir, include_unverified=True))
    by_source = {pair["metadata"]["from"]: pair for pair in pairs}
    # Each failure is paired with the next candidate that got further: the reply that did not assemble
    # with the one that did (failed in emulation), the baseline and that one with the last.
    assert {k: pair["metadata"]["to"] for k, pair in by_source.items()} == {0: 3, 1: 2, 2: 3}
    first = by_source[1]
    assert first["metadata"]["verified"] is False and first["metadata"]["to_status"] == "failed"
    assert first["metadata"]["model"] == "replay:scripted_session.toml" and first["metadata"]["from_status"] == "failed"
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert "m64n64k8" in first["messages"][1]["content"]  # the failing candidate and its feedback
    assert "m64n64k16" in first["messages"][2]["content"]  # the better candidate


def test_export_pairs_a_failure_with_a_later_candidate_that_passed_on_hardware(tmp_path):
    run = tmp_path / "run"
    (run / "candidates").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": "openai/gpt-x", "target": "sm_90a"}))
    (run / "prompt.json").write_text(json.dumps([{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]))
    records = [
        {"index": 0, "passes": False, "status": "failed", "feedback": "wrong",
         "verdict": {"status": "failed", "gates": [{"name": "assemble", "status": "passed"}]}},
        {"index": 1, "passes": False, "status": "not run on target hardware", "feedback": "could not run",
         "verdict": {"status": "not run", "gates": [{"name": "assemble", "status": "passed"}]}},
        {"index": 2, "passes": True, "status": "passed", "feedback": "",
         "verdict": {"status": "passed", "gates": [{"name": "assemble", "status": "passed"},
                                                   {"name": "equivalence", "status": "passed"}]}},
    ]
    for record in records:
        (run / "candidates" / f"{record['index']:02d}.ptx").write_text(f"// candidate {record['index']}\n")
        (run / "candidates" / f"{record['index']:02d}.json").write_text(json.dumps(record))
    pairs = list(repair_pairs(run))
    assert [(p["metadata"]["from"], p["metadata"]["to"]) for p in pairs] == [(0, 2), (1, 2)]
    assert all(p["metadata"]["verified"] and p["metadata"]["to_status"] == "passed" for p in pairs)
    assert pairs[0]["metadata"]["model"] == "openai/gpt-x"
    assert "// candidate 2" in pairs[0]["messages"][2]["content"]


def test_target_choice_for_a_family_name(toolchain):
    from porter.ptx import read_ptx

    wgmma = read_ptx(ROOT / "examples" / "inspect" / "wgmma_sm90a.ptx")
    target, why = choose_target(wgmma, "sm_100")
    assert target == "sm_100a" and "tcgen05" in why
    plain = read_ptx(ROOT / "examples" / "vector_add" / "kernel.ptx")
    assert choose_target(plain, "sm_100")[0] == "sm_100"


@pytest.mark.parametrize("args", [["runs"], ["replay", "nope"]])
def test_run_commands_on_an_empty_repo(tmp_path, args):
    r = subprocess.run([sys.executable, "-m", "porter", *args, "--root", str(tmp_path)], capture_output=True,
                       text=True, cwd=ROOT)
    if args == ["runs"]:
        assert r.returncode == 0 and "no runs" in r.stdout
    else:
        assert r.returncode == 2 and "no run 'nope'" in r.stderr


def test_cli_port_json_with_the_scripted_model(tmp_path):
    env_root = tmp_path / "repo"
    env_root.mkdir()
    subprocess.run(["git", "init", "-q", str(env_root)], check=True)
    kernel_dir = env_root / "k"
    kernel_dir.mkdir()
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        (kernel_dir / name).write_text((EXAMPLE / name).read_text())
    r = subprocess.run([sys.executable, "-m", "porter", "port", str(kernel_dir / "kernel_sm80.ptx"), "--to", "sm_90a",
                        "--model", f"replay:{SCRIPT}", "--no-gpu", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 3, r.stderr[-2000:]
    output = json.loads(r.stdout)
    result = output["result"]
    assert result["status"] == "not run on target hardware"
    assert output["review"] is None  # not passed, and no --branch-on-failure: no branch
    assert (env_root / ".porter" / "runs" / result["run_id"] / "candidates" / "03.ptx").is_file()
    events = [json.loads(line)["event"] for line in r.stderr.splitlines() if line.startswith("{")]
    assert events[0] == "start" and events[-1] == "done"
    listed = subprocess.run([sys.executable, "-m", "porter", "runs", "--root", str(env_root)], capture_output=True,
                            text=True, cwd=ROOT)
    assert result["run_id"] in listed.stdout
    # The run replays on "another machine": here, with the same verdicts, from the clone's own spec.
    replayed = subprocess.run([sys.executable, "-m", "porter", "replay", result["run_id"][:20], "--root", str(env_root),
                               "--no-gpu"], capture_output=True, text=True, cwd=ROOT)
    # Three candidates reproduce their record; the last could not run here either: not run, exit 3.
    assert replayed.returncode == 3, replayed.stdout + replayed.stderr
    assert replayed.stdout.count("same") == 3 and "not run   not run  not run" in replayed.stdout
    exported = subprocess.run([sys.executable, "-m", "porter", "export", result["run_id"], "--root", str(env_root)],
                              capture_output=True, text=True, cwd=ROOT)
    assert exported.returncode == 0 and exported.stdout == ""  # nothing passed on hardware here...
    assert f"run {result['run_id']}: no repair pairs: no later candidate passed on hardware" in exported.stderr
    exported = subprocess.run([sys.executable, "-m", "porter", "export", result["run_id"], "--root", str(env_root),
                               "--include-unverified"], capture_output=True, text=True, cwd=ROOT)
    pairs = [json.loads(line) for line in exported.stdout.splitlines()]  # ... unless asked for, marked
    assert len(pairs) == 3 and all(p["messages"][2]["role"] == "assistant" for p in pairs)
    assert not any(p["metadata"]["verified"] for p in pairs)


@pytest.mark.gpu
def test_scripted_session_reaches_a_passing_candidate_on_a_gpu(tmp_path, toolchain, runner):
    request = PortRequest(kernel=EXAMPLE / "kernel_sm80.ptx", spec=load_spec(EXAMPLE / "porter.toml"), to_arch="sm_90a",
                          runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=toolchain, runner=runner, model=ReplayModel(SCRIPT)).run()
    statuses = [(c.origin, c.verdict.status) for c in result.candidates]
    assert statuses == [("retarget", "failed"), ("model", "failed"), ("model", "failed"), ("model", "passed")], statuses
    assert result.candidates[0].verdict.gate("equivalence").status == "passed"  # correct, but HMMA only
    assert result.candidates[2].verdict.gate("equivalence").status == "failed"  # the wrong-rows reply
    assert result.status == "passed" and result.best.index == 3
    assert result.best.verdict.native.state == "executed"
