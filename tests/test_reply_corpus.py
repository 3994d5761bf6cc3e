"""The reply corpus (tests/data/replies): every form a model's reply takes, defects included, goes
through a real port on the CPU and the port goes on. Each fixture is the first reply of a scripted
port of examples/gemm_bt_tile to sm_90a; the second reply is the right kernel. A fixture's reply
gives no candidate, or a candidate the gate fails, or a candidate as good as the right kernel;
in every case the port reaches the right kernel (or stops at the fixture's), says what it found
in words the model can act on, records a finished run, and exits with the honest code (3: not
run on target hardware, as a CPU machine must say)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import NoGpuRunner

from porter._toml import tomllib
from porter.agent.replay import ReplayModel
from porter.agent.runs import read_outcome
from porter.agent.session import run_port
from porter.bench.suite import Task, run_bench
from porter.gate.spec import load_spec
from porter.gate.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "replies"
GEMM = ROOT / "examples" / "gemm_bt_tile"
PORT = (GEMM / "kernel_sm90a.ptx").read_text()
SOURCE = (GEMM / "kernel_sm80.ptx").read_text()


@dataclass(frozen=True)
class Fixture:
    """One corpus file (its keys: tests/data/replies/README.md)."""

    reply: str
    finish_reason: str
    candidate: str  # none | failed | checked
    kind: str | None
    says: tuple[str, ...]


def load_fixture(path: Path) -> Fixture:
    data = tomllib.loads(path.read_text())
    port = PORT
    for old, new in data.get("port_edits", []):
        assert old in port, f"{path.name}: port_edits: {old!r} is not in the port"
        port = port.replace(old, new)
    half = "\n".join(PORT.splitlines()[: len(PORT.splitlines()) // 2]) + "\n"
    reply = data["reply"].replace("@PORT_HALF@", half).replace("@PORT@", port).replace("@SOURCE@", SOURCE)
    expect = data["expect"]
    assert expect["candidate"] in ("none", "failed", "checked"), path.name
    return Fixture(reply, data.get("finish_reason", "stop"), expect["candidate"], expect.get("kind"),
                   tuple(expect.get("says", ())))


def replay_script(fixture: Fixture, path: Path) -> Path:
    """The scripted replies: the fixture's reply, then the right kernel (JSON strings are TOML strings)."""
    right = f"The port:\n\n```ptx\n{PORT}```\n"
    path.write_text(
        'label = "scripted reply corpus (not a model)"\n\n'
        f"[[reply]]\ntext = {json.dumps(fixture.reply)}\nfinish_reason = {json.dumps(fixture.finish_reason)}\n\n"
        f"[[reply]]\ntext = {json.dumps(right)}\n")
    return path


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_reply_form_is_feedback_and_the_port_goes_on(path: Path, tmp_path: Path, toolchain) -> None:
    fixture = load_fixture(path)
    model = ReplayModel(replay_script(fixture, tmp_path / "replies.toml"))
    events: list[tuple[str, dict]] = []
    result = run_port(GEMM / "kernel_sm80.ptx", load_spec(GEMM / "porter.toml"), "sm_90a", toolchain=toolchain,
                      runner=NoGpuRunner(), model=model, runs_root=tmp_path / "runs",
                      on_event=lambda kind, **data: events.append((kind, data)))
    # Never the end of the port: it finished (not incomplete), at the honest status and exit code.
    outcome = read_outcome(result.run_dir)
    assert outcome is not None and outcome.ended == "finished"
    gates = [(c.index, c.origin, str(c.status), [(g.name, str(g.status), g.summary[:200]) for g in c.verdict.gates])
             for c in result.candidates]
    assert result.status is Status.NOT_RUN_ON_TARGET and result.status.exit_code == 3, (result.stop_reason, gates)
    assert "cannot run on this machine" in result.stop_reason
    from_model = [c for c in result.candidates if c.origin == "model"]
    if fixture.candidate == "checked":  # as good as the right kernel: the port ends at it
        assert len(model.received) == 1 and len(from_model) == 1
        return
    # The model was asked again, told what was wrong; its next reply (the right kernel) was checked.
    told = model.received[1][-1]
    assert told["role"] == "user"
    for words in fixture.says:
        assert words in told["content"], f"{path.stem}: the model is not told {words!r}:\n{told['content'][:3000]}"
    assert from_model[-1].status is Status.NOT_RUN_ON_TARGET and from_model[-1].round == 2
    if fixture.candidate == "none":
        assert len(from_model) == 1
        assert [data["error"] for kind, data in events if kind == "format-error"] == [fixture.kind]
    else:
        assert len(from_model) == 2 and from_model[0].status is Status.FAILED
        assert all(words in from_model[0].feedback for words in fixture.says)


def test_the_corpus_has_every_form_the_issue_names() -> None:
    names = {p.stem for p in CORPUS.glob("*.toml")}
    forms = ("whole_", "search_replace_", "diff_", "unfenced", "empty", "prose", "truncated", "token_limit",
             "renamed_entry", "no_version", "wrong_target", "no_address_size", "changed_params", "two_kernels",
             "does_not_apply")
    assert all(any(form in name for name in names) for form in forms), names


def _repo_with_gemm(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "k").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        (repo / "k" / name).write_text((GEMM / name).read_text())
    return repo


def _porter(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_renamed_entry_ends_no_port_and_resume_goes_on_past_it(tmp_path: Path) -> None:
    repo = _repo_with_gemm(tmp_path)
    script = replay_script(load_fixture(CORPUS / "whole_renamed_entry.toml"), tmp_path / "replies.toml")
    first = _porter(repo, "port", "k/kernel_sm80.ptx", "--to", "sm_90a", "--model", f"replay:{script}", "--no-gpu",
                    "--max-rounds", "1", "--no-branch")
    # The round's reply gave no candidate; the port ended on its budget, a finished run (exit 1: failed).
    assert first.returncode == 1, first.stderr[-2000:]
    assert ("round 1: no candidate (entry): The kernel in your reply renames the entry: it has "
            "`.entry gemm_bt_tile_sm90a`, but the port's entry is `gemm_bt_tile`") in first.stderr
    assert "Traceback" not in first.stderr
    (run,) = (p for p in (repo / ".porter" / "runs").iterdir() if p.is_dir())
    assert read_outcome(run).ended == "finished"
    again = _porter(repo, "port", "--resume", run.name, "--max-rounds", "1", "--no-gpu", "--no-branch")
    assert again.returncode == 3, again.stderr[-2000:]  # the next reply is the right kernel: not run here
    assert "candidate 1 (model, round 2): checking" in again.stderr
    assert "not usable" not in again.stderr and "no candidate (" not in again.stderr


def test_bench_records_a_row_for_a_task_whose_model_renames_the_entry_and_goes_on(tmp_path: Path, toolchain) -> None:
    script = replay_script(load_fixture(CORPUS / "whole_renamed_entry.toml"), tmp_path / "replies.toml")
    tasks = [Task(name, GEMM, GEMM / "kernel_sm80.ptx", GEMM / "porter.toml", "sm_90a") for name in ("first", "second")]
    rows = run_bench(tasks, models=[f"replay:{script}"], solutions=False, toolchain=toolchain, runner=NoGpuRunner(),
                     runs_root=tmp_path / "runs")
    assert [(r.task, r.status, r.rounds) for r in rows] == [("first", "not run on target hardware", 2),
                                                               ("second", "not run on target hardware", 2)]
