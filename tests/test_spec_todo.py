"""A spec with its todo list not empty is refused by everything that would run a kernel against it,
with the list: the guesses porter spec made cannot be checked by accident."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from porter.errors import InputError
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
TRITON = ROOT / "tests" / "data" / "compiled" / "triton"


def porter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd)})


@pytest.fixture
def scaffolded(tmp_path: Path) -> Path:
    """A Triton matmul and the spec porter spec wrote beside it, untouched."""
    for suffix in (".ptx", ".json"):
        shutil.copyfile(TRITON / f"matmul_kernel{suffix}", tmp_path / f"matmul_kernel{suffix}")
    r = porter("spec", "matmul_kernel.ptx", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path


EXPECTED = ("porter.toml: 6 things left to fill in (its todo list): sizes, params[0].shape, params[1].shape, "
            "params[2].shape, launch.grid, reference. Fill each in and delete it from `todo`")


def test_load_spec_refuses_it_and_names_every_item(scaffolded: Path) -> None:
    with pytest.raises(InputError) as err:
        load_spec(scaffolded / "porter.toml")
    assert str(err.value).startswith(EXPECTED)
    assert load_spec(scaffolded / "porter.toml", allow_todo=True).entry == "matmul_kernel"


@pytest.mark.parametrize("command", [
    ["check", "matmul_kernel.ptx", "--no-gpu"],
    ["check", "matmul_kernel.ptx", "--against", "matmul_kernel.ptx", "--no-gpu"],
    ["port", "matmul_kernel.ptx", "--to", "sm_100a", "--no-gpu", "--no-branch"],
    ["record", "matmul_kernel.ptx", "--out", "golden"],
    ["profile", "matmul_kernel.ptx", "--dry-run"],
])
def test_check_port_record_and_profile_refuse_it_with_one_line(command: list[str], scaffolded: Path) -> None:
    r = porter(*command, cwd=scaffolded)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("porter: error: " + EXPECTED) and r.stderr.count("\n") == 1
    assert not (scaffolded / "golden").exists() and not (scaffolded / ".porter").exists()


def test_deleting_the_items_is_what_lets_it_run(scaffolded: Path) -> None:
    spec = scaffolded / "porter.toml"
    text = spec.read_text()
    head, rest = text.split("todo = [", 1)
    spec.write_text(head + "todo = [" + rest.replace('"sizes",', "", 1))
    with pytest.raises(InputError, match=r"5 things left to fill in \(its todo list\): params\[0\]\.shape"):
        load_spec(spec)
    spec.write_text(head + "todo = []" + rest.split("\n]\n", 1)[1])
    assert load_spec(spec).entry == "matmul_kernel"  # porter cannot tell a fixed guess from a kept one


@pytest.mark.parametrize("value, message", [
    ('"sizes"', "todo: must be a list of strings"),
    ("[1, 2]", "todo: must be a list of strings"),
])
def test_a_malformed_todo_is_one_line(value: str, message: str, tmp_path: Path) -> None:
    text = (ROOT / "examples" / "vector_add" / "porter.toml").read_text()
    (tmp_path / "porter.toml").write_text(f"todo = {value}\n" + text)
    shutil.copyfile(ROOT / "examples" / "vector_add" / "ref.py", tmp_path / "ref.py")
    with pytest.raises(InputError, match=message):
        load_spec(tmp_path / "porter.toml")


def test_blank_items_are_not_items(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "vector_add" / "porter.toml").read_text()
    (tmp_path / "porter.toml").write_text('todo = ["", "  "]\n' + text)
    shutil.copyfile(ROOT / "examples" / "vector_add" / "ref.py", tmp_path / "ref.py")
    assert load_spec(tmp_path / "porter.toml").entry == "vector_add"
