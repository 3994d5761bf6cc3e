"""porter's Python children import nothing from the folder porter runs in and hold no provider key
(porter/gate/runner/sealed.py): ``porter ci`` runs in a pull request's checkout, whose files are
the attacker's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from porter.gate.nsight import _child_env, _launch_command, _run_launch
from porter.gate.runner import Runner, sealed
from porter.gate.runner.digestkey import DIGEST_KEY_ENV
from porter.gate.runner.fake import act, serve
from porter.gate.runner.protocol import OutputsReply


def _hostile_checkout(folder: Path, marker: Path) -> None:
    """A checkout whose ``multiprocessing`` and ``porter`` would each leave ``marker`` if imported."""
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (folder / "multiprocessing.py").write_text(payload)
    for package in ("porter", "porter/gate", "porter/gate/runner"):
        (folder / package).mkdir(parents=True, exist_ok=True)
        (folder / package / "__init__.py").write_text(payload)
    (folder / "porter/gate/runner/launch_once.py").write_text(payload)


@pytest.fixture
def hostile_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    checkout, marker = tmp_path / "checkout", tmp_path / "ran"
    checkout.mkdir()
    _hostile_checkout(checkout, marker)
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-bots-own")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-bots-too")
    return marker


def test_a_worker_started_in_a_hostile_checkout_runs_none_of_its_python_and_has_no_key(hostile_cwd: Path) -> None:
    with Runner(target=serve, startup_timeout_s=60) as runner:
        reply = runner.call(act("environ"), 30)
    assert isinstance(reply, OutputsReply)
    names = set(reply.outputs["names"].tolist())
    assert not hostile_cwd.exists(), hostile_cwd.read_text()
    assert "OPENAI_API_KEY" not in names and "AWS_SECRET_ACCESS_KEY" not in names
    assert DIGEST_KEY_ENV in names and "PATH" in names
    assert os.environ["OPENAI_API_KEY"] == "sk-the-bots-own"  # the parent keeps its own


def test_a_tools_launch_in_a_hostile_checkout_imports_porters_launch_once(hostile_cwd: Path, tmp_path: Path) -> None:
    """What ncu and compute-sanitizer run (``python -m porter.gate.runner.launch_once``), started
    as porter starts it; the job is missing, so porter's own launch_once fails on reading it."""
    out = _run_launch(_launch_command(tmp_path / "no-job.json"), 120, 0)
    assert not hostile_cwd.exists(), hostile_cwd.read_text()
    assert out.returncode != 0 and "no-job.json" in out.stderr


def test_a_child_python_started_with_porters_environment_has_no_key_and_no_folder_on_its_path(
        hostile_cwd: Path) -> None:
    probe = "import os, sys; print(os.getcwd()); print(sys.path[0]); print(os.environ.get('OPENAI_API_KEY'))"
    out = _run_launch([sys.executable, "-c", probe], 60, 0)
    cwd, first, key = out.stdout.splitlines()
    assert Path(cwd) == sealed.empty_folder() and not any(sealed.empty_folder().iterdir())
    assert key == "None" and "OPENAI_API_KEY" not in _child_env(0)
    if sys.version_info >= (3, 11):
        assert first != "" and Path(first) != Path(cwd)  # PYTHONSAFEPATH: the folder is not on the path


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)


@given(prefix=_NAME, word=st.sampled_from(["KEY", "key", "Token", "SECRET", "password", "PASSWD", "credentials"]),
       suffix=_NAME | st.just(""))
def test_every_variable_that_names_a_secret_is_dropped_and_the_digest_key_kept(prefix: str, word: str,
                                                                             suffix: str) -> None:
    name = prefix + "_" + word + suffix
    env = sealed.child_env({name: "x", DIGEST_KEY_ENV: "00000000000000ff", "PATH": "/bin"})
    assert name not in env
    assert env[DIGEST_KEY_ENV] == "00000000000000ff" and env["PATH"] == "/bin" and env["PYTHONSAFEPATH"] == "1"


@pytest.mark.skipif(os.name != "posix", reason="the launcher is a POSIX shell script")
def test_the_launcher_quotes_what_it_is_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A variable's name is the environment's to choose: one that would be shell syntax stays a name."""
    marker = tmp_path / "shell-ran"
    monkeypatch.setenv(f"X_KEY;touch {marker}", "1")
    script = sealed.launcher()
    import subprocess
    out = subprocess.run([script, "-c", "import os; print(os.getcwd())"], capture_output=True, text=True,
                         timeout=60, check=True)
    assert Path(out.stdout.strip()) == sealed.empty_folder() and not marker.exists()
