"""Steering a port: the protocol in the session (in process), and ``porter port --interactive``
driven through a pseudo-terminal as a developer would use it: a hint reaches the model's next
prompt, an edit is verified as the next candidate, accept and stop end the port, and nothing is
asked when stdin is not a terminal. The port is vector_add on a GPU double (tests/port_doubles.py)
on which only one kernel is right, so that it can pass on a CPU."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from port_doubles import OnlyGoodCubins, fixed_kernel, good_cubins, scripted_vector_add, vector_add_copy

from porter.agent.replay import ReplayModel
from porter.agent.resume import SessionState
from porter.agent.runs import list_runs, read_outcome, read_record, repair_pairs
from porter.agent.session import run_port
from porter.agent.steering import CONTINUE, Action, Steer, add_note, candidate_diff
from porter.cli.steer import TerminalSteering, port_steering
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "porter_with_doubles.py"
HINT = "compute alpha*x with a mul, then add y"


class Scripted:
    """A steering that answers from a list (then goes on), and keeps what it was shown."""

    def __init__(self, *answers: Steer) -> None:
        self.answers = list(answers)
        self.views = []

    def after_candidate(self, view):
        self.views.append(view)
        return self.answers.pop(0) if self.answers else CONTINUE


def _port(tmp_path: Path, toolchain, steering, model=None, on_event=None):
    kernel = vector_add_copy(tmp_path / "va")
    model = model or ReplayModel(scripted_vector_add(tmp_path / "replies.toml"))
    result = run_port(kernel, load_spec(kernel.parent / "porter.toml"), "sm_90", toolchain=toolchain,
                      runner=OnlyGoodCubins(good_cubins(toolchain)), model=model, runs_root=tmp_path / "runs",
                      steering=steering, on_event=on_event)
    return result, model


# -- the protocol, in process -------------------------------------------------------------------

def test_unsteered_the_scripted_port_passes_on_the_double(tmp_path, toolchain):
    result, model = _port(tmp_path, toolchain, None)
    assert [(c.origin, c.status.value) for c in result.candidates] == [
        ("retarget", "failed"), ("model", "failed"), ("model", "passed")]
    assert result.status == "passed" and len(model.received) == 2


def test_a_hint_goes_into_the_next_prompt_and_the_record(tmp_path, toolchain):
    steering = Scripted(CONTINUE, Steer(Action.HINT, HINT))
    result, model = _port(tmp_path, toolchain, steering)
    first, second = model.received
    assert not any(HINT in m["content"] for m in first)
    assert HINT in second[-1]["content"] and second[-1]["role"] == "user"  # with candidate 1's feedback
    state = read_record(SessionState, result.run_dir / "session.json")
    assert [(h.after, h.text) for h in state.hints] == [(1, HINT)]
    assert [p.name for p in (result.run_dir / "messages").glob("*-hint.md")]
    # The steering saw each candidate with its diff against the text before it.
    assert [v.record.index for v in steering.views] == [0, 1]
    assert steering.views[1].previous_label == "candidate 0" and "+\tfma.rn.f32" in steering.views[1].diff


def test_an_edit_is_verified_as_the_next_candidate_and_shown_to_the_model(tmp_path, toolchain):
    wrong_edit = fixed_kernel().replace("add.rn.f32 \t%f4, %f5, %f3;", "sub.rn.f32 \t%f4, %f5, %f3;")
    steering = Scripted(Steer(Action.EDIT, wrong_edit))
    result, model = _port(tmp_path, toolchain, steering)
    origins = [(c.index, c.origin, c.status.value) for c in result.candidates]
    assert origins[:2] == [(0, "retarget", "failed"), (1, "edit", "failed")]
    assert (result.run_dir / "candidates" / "01.ptx").read_text() == wrong_edit
    assert "edited the kernel by hand" in model.received[0][-1]["content"]
    assert "sub.rn.f32" in model.received[0][-1]["content"]
    assert result.status == "passed" and result.best.origin == "model"


def test_an_edit_that_renames_the_entry_is_not_checked_and_the_developer_is_asked_again(tmp_path, toolchain):
    renamed = fixed_kernel().replace(".entry vector_add(", ".entry vector_add2(")
    steering = Scripted(Steer(Action.EDIT, renamed), Steer(Action.EDIT, fixed_kernel()))
    warnings: list[str] = []
    result, _ = _port(tmp_path, toolchain, steering,
                      on_event=lambda kind, **data: warnings.append(data["message"]) if kind == "warning" else None)
    assert result.status == "passed" and [c.origin for c in result.candidates] == ["retarget", "edit"]
    assert len(steering.views) == 2  # asked again after the edit it could not check
    assert any(w.startswith("your edit of candidate 0 was not checked: Your edit renames the entry: it has "
                            "`.entry vector_add2`") for w in warnings), warnings


def test_an_edit_that_passes_ends_the_port(tmp_path, toolchain):
    result, model = _port(tmp_path, toolchain, Scripted(Steer(Action.EDIT, fixed_kernel())))
    assert result.status == "passed" and result.best.origin == "edit" and model.received == []
    assert "the developer's edit" in result.stop_reason
    (pair,) = repair_pairs(result.run_dir)  # a repair towards the developer's edit says so
    assert pair["metadata"]["to"] == 1 and pair["metadata"]["to_origin"] == "edit"


def test_accept_ends_with_the_best_candidate_judged_as_always(tmp_path, toolchain):
    result, model = _port(tmp_path, toolchain, Scripted(CONTINUE, Steer(Action.ACCEPT)))
    assert "accepted by the developer after candidate 1" in result.stop_reason
    assert result.status == "failed" and len(model.received) == 1  # accepting does not make it pass
    assert read_outcome(result.run_dir).ended == "finished" and not result.stopped


def test_stop_ends_without_accepting_and_says_it_can_be_resumed(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, Scripted(Steer(Action.STOP)))
    assert result.stopped and "--resume" in result.stop_reason
    assert read_outcome(result.run_dir).ended == "stopped"


def test_notes_join_the_last_user_message_and_diffs_name_both_sides():
    joined = add_note([{"role": "user", "content": "feedback"}], "a hint")
    assert joined == [{"role": "user", "content": "feedback\n\na hint"}]
    assert add_note([{"role": "assistant", "content": "x"}], "n")[-1] == {"role": "user", "content": "n"}
    diff = candidate_diff("a\nb\n", "a\nc\n", "candidate 0", "candidate 1")
    assert diff.startswith("--- candidate 0\n+++ candidate 1\n") and "-b\n+c\n" in diff
    assert candidate_diff("same\n", "same\n", "x", "y") == ""


def test_the_terminal_steering_reads_its_answers(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, Scripted(Steer(Action.STOP)))
    view = _view(result)
    out = io.StringIO()
    answers = TerminalSteering(stdin=io.StringIO("x\nh\n\nh\nuse fma\n"), stderr=out).after_candidate(view)
    assert answers == Steer(Action.HINT, "use fma")
    assert "'x'? answer h, e, a, s, or Enter" in out.getvalue() and "no hint given" in out.getvalue()
    assert "candidate 0 (retarget, round 0): FAILED" in out.getvalue()
    assert re.search(r"equivalence +failed +\d+ of \d+ cases failed", out.getvalue())
    ended = TerminalSteering(stdin=io.StringIO(""), stderr=io.StringIO())
    assert ended.after_candidate(view) == CONTINUE and ended.closed  # end of input: the port goes on


def test_edit_through_an_editor_that_changes_nothing_is_not_a_candidate(tmp_path, toolchain):
    result, _ = _port(tmp_path, toolchain, Scripted(Steer(Action.STOP)))
    out = io.StringIO()
    steering = TerminalSteering(stdin=io.StringIO("e\ns\n"), stderr=out, editor="true")
    assert steering.after_candidate(_view(result)) == Steer(Action.STOP)
    assert "no change; nothing to check" in out.getvalue()


def _view(result):
    from porter.agent.steering import RoundView

    record = result.candidates[0]
    return RoundView(result.run_id, record, record.path.read_text(), "source text\n", "source", record, result.spend)


def test_interactive_without_a_terminal_says_so_once_and_asks_nothing(capsys):
    assert port_steering(True, stdin=io.StringIO("")) is None
    assert "stdin is not a terminal" in capsys.readouterr().err
    assert port_steering(False) is None


# -- porter port --interactive in a pseudo-terminal ---------------------------------------------

class Terminal:
    """A command on a pseudo-terminal: stdin, stdout and stderr are the terminal, as in a shell."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                     close_fds=True, start_new_session=True)
        os.close(slave)
        self.seen = ""
        self.pos = 0

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the other side is closed
            data = b""
        if not data:
            raise EOFError
        self.seen += data.decode(errors="replace")
        return True

    def expect(self, text: str, timeout: float = 120.0) -> None:
        import time

        deadline = time.monotonic() + timeout
        while text not in self.seen[self.pos:]:
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not self._read(left):
                    raise AssertionError(f"no {text!r} within {timeout} s; the terminal shows:\n{self.seen[-4000:]}")
            except EOFError:
                raise AssertionError(f"the command ended before {text!r}:\n{self.seen[-4000:]}") from None
        self.pos = self.seen.index(text, self.pos) + len(text)

    def answer(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self, timeout: float = 120.0) -> int:
        try:
            while self._read(timeout):
                pass
        except EOFError:
            pass
        code = self.proc.wait(timeout=timeout)
        os.close(self.master)
        return code


MENU_END = "s: stop > "


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PORTER_TEST_PROMPTS": str(tmp_path / "prompts.jsonl"),
           "TERM": "dumb", "COLUMNS": "200", **extra}
    env.pop("PORTER_MODEL", None)
    return env


def _interactive(tmp_path: Path, *extra: str, **env: str) -> Terminal:
    kernel = vector_add_copy(tmp_path / "va")
    scripted_vector_add(tmp_path / "replies.toml")
    args = [sys.executable, str(DRIVER), "port", str(kernel), "--to", "sm_90", "--model",
            f"replay:{tmp_path / 'replies.toml'}", "--no-branch", "--interactive", *extra]
    return Terminal(args, tmp_path, _env(tmp_path, **env))


def _prompts(tmp_path: Path) -> list[list[dict[str, str]]]:
    path = tmp_path / "prompts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_hint_typed_at_the_terminal_reaches_the_next_prompt(tmp_path):
    term = _interactive(tmp_path)
    term.expect("candidate 0 (retarget, round 0): FAILED")
    term.expect("diff against source:")
    term.expect(MENU_END)
    term.answer("")  # go on
    term.expect("candidate 1 (model, round 1): FAILED")
    term.expect("diff against candidate 0:")
    term.expect(MENU_END)
    term.answer("h")
    term.expect("hint> ")
    term.answer(HINT)
    term.expect("hint after candidate 1 recorded")
    term.expect("porter port: PASSED - candidate 2 passes every gate")
    assert term.finish() == 0
    first, second = _prompts(tmp_path)
    assert not any(HINT in m["content"] for m in first) and HINT in second[-1]["content"]


def test_an_edit_in_the_editor_is_verified_and_can_pass(tmp_path):
    fixed = tmp_path / "fixed.ptx"
    fixed.write_text(fixed_kernel())
    editor = tmp_path / "editor.py"
    editor.write_text(f"import shutil, sys\nshutil.copyfile({str(fixed)!r}, sys.argv[1])\n")
    term = _interactive(tmp_path, EDITOR=f"{sys.executable} {editor}")
    term.expect(MENU_END)
    term.answer("e")
    term.expect("your edit of candidate 0 is candidate 1: checking it")
    term.expect("porter port: PASSED - candidate 1 (the developer's edit) passes every gate")
    assert term.finish() == 0
    assert _prompts(tmp_path) == []  # no model call was needed


def test_accept_at_the_terminal_ends_the_port_with_its_best(tmp_path):
    term = _interactive(tmp_path)
    term.expect(MENU_END)
    term.answer("")
    term.expect("candidate 1 (model, round 1)")
    term.expect(MENU_END)
    term.answer("a")
    term.expect("porter port: FAILED - accepted by the developer after candidate 1")
    assert term.finish() == 1  # accepting a failed candidate does not make it pass
    assert len(_prompts(tmp_path)) == 1


def test_stop_at_the_terminal_then_resume_without_one_passes(tmp_path):
    term = _interactive(tmp_path)
    term.expect(MENU_END)
    term.answer("s")
    term.expect("stopped by the developer after candidate 0 (`porter port --resume")
    assert term.finish() == 1
    (run,) = list_runs(tmp_path / ".porter" / "runs")
    assert run.status == "stopped" and read_outcome(run.path).ended == "stopped"
    again = subprocess.run([sys.executable, str(DRIVER), "port", "--resume", run.id, "--no-branch",
                            "--interactive"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("stdin is not a terminal") == 1 and MENU_END not in again.stderr + again.stdout
    assert "porter port: PASSED - candidate 2 passes every gate" in again.stdout


@pytest.mark.parametrize("piped", [False, True])
def test_interactive_with_stdin_not_a_terminal_never_prompts(tmp_path, piped):
    kernel = vector_add_copy(tmp_path / "va")
    scripted_vector_add(tmp_path / "replies.toml")
    r = subprocess.run([sys.executable, str(DRIVER), "port", str(kernel), "--to", "sm_90", "--model",
                        f"replay:{tmp_path / 'replies.toml'}", "--no-branch", "--interactive"], cwd=tmp_path,
                       env=_env(tmp_path), capture_output=True, text=True,
                       **({"input": "h\nZZ-hint-from-a-pipe\n"} if piped else {"stdin": subprocess.DEVNULL}))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("stdin is not a terminal") == 1
    assert MENU_END not in r.stderr + r.stdout and "PASSED" in r.stdout
    assert not any("ZZ-hint-from-a-pipe" in m["content"] for p in _prompts(tmp_path) for m in p)
