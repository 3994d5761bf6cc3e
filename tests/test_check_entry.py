"""porter check --entry: which kernel of a module of several to check against a spec, and one line
listing the entries when the name is wrong, or missing where it is needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import as_nvcc_of

ROOT = Path(__file__).resolve().parent.parent
NVCC = ROOT / "tests" / "data" / "compiled" / "nvcc" / "kernels.ptx"
ENTRIES = ("_Z7row_sumPK6__halfPfii, _Z10scale_bf16PK13__nv_bfloat16PS_if, _Z9wmma_bf16PK13__nv_bfloat16S1_Pfiii, "
           "_Z9histogramPKiPjii, axpy_inplace, axpy_inplace_x2, _Z10wgmma_tilePK13__nv_bfloat16S1_Pf")

AXPY_SPEC = """
[kernel]
entry = "axpy_inplace"
description = "y = alpha * x + y, f32"

[sizes]
n = 4096
[[sweep]]
n = 1
[[sweep]]
n = 1000

[[params]]
name = "x"
kind = "buffer"
dtype = "f32"
shape = ["n"]
[[params]]
name = "y"
kind = "buffer"
dtype = "f32"
shape = ["n"]
role = "inout"
[[params]]
name = "workspace"
kind = "scratch"
[[params]]
name = "n"
kind = "scalar"
dtype = "i32"
value = "n"
[[params]]
name = "alpha"
kind = "scalar"
dtype = "f32"
range = [-2.0, 2.0]

[launch]
grid = ["ceil_div(n, {per_block})"]
block = [256]

[reference]
python = "ref.py:axpy"
"""

REF = '''
def axpy(args, sizes):
    return {"y": args["alpha"] * args["x"].astype("float64") + args["y"]}
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copyfile(NVCC, tmp_path / "kernels.ptx")
    (tmp_path / "porter.toml").write_text(AXPY_SPEC.replace("{per_block}", "256"))
    (tmp_path / "ref.py").write_text(REF)
    return tmp_path


def porter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd)


def gates(r: subprocess.CompletedProcess[str]) -> dict[str, str]:
    verdict = json.loads(r.stdout)
    return {g["name"]: g["status"] for g in verdict["gates"]} | {"entry": verdict["entry"]}


def failing(r: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    """The gates that did not pass, with their summaries (what an assertion should show)."""
    return [(g["name"], g["summary"]) for g in json.loads(r.stdout)["gates"] if g["status"] != "passed"]


def test_the_spec_names_one_of_several_entries_and_that_one_is_checked(folder: Path) -> None:
    r = porter("check", "kernels.ptx", "--no-gpu", "--json", cwd=folder)
    assert r.returncode == 3, r.stderr  # interface and assembly pass; no GPU here to run it
    assert gates(r) == {"interface": "passed", "assemble": "passed", "equivalence": "not run", "emulation": "passed",
                        "entry": "axpy_inplace"}


def test_entry_checks_a_variant_in_the_same_module_against_the_same_spec(folder: Path) -> None:
    r = porter("check", "kernels.ptx", "--entry", "axpy_inplace_x2", "--no-gpu", "--json", cwd=folder)
    assert r.returncode == 3, r.stderr
    assert gates(r)["interface"] == "passed" and gates(r)["entry"] == "axpy_inplace_x2"


def test_entry_of_a_kernel_with_another_interface_fails_the_interface(folder: Path) -> None:
    r = porter("check", "kernels.ptx", "--entry", "_Z9histogramPKiPjii", "--no-gpu", "--json", cwd=folder)
    assert r.returncode == 1 and gates(r)["interface"] == "failed"


def test_a_wrong_entry_lists_the_entries(folder: Path) -> None:
    r = porter("check", "kernels.ptx", "--entry", "axpy", "--no-gpu", cwd=folder)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr == f"porter: error: kernels.ptx: --entry axpy: no such .entry (entries: {ENTRIES})\n"


def test_a_spec_entry_the_module_lacks_asks_for_entry(folder: Path) -> None:
    (folder / "porter.toml").write_text(AXPY_SPEC.replace("{per_block}", "256").replace(
        'entry = "axpy_inplace"', 'entry = "axpy_fused"'))
    r = porter("check", "kernels.ptx", "--no-gpu", cwd=folder)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr == (f"porter: error: kernels.ptx: no .entry 'axpy_fused' (the spec's kernel.entry); its 7 "
                        f"entries are {ENTRIES}: choose the one to check with --entry\n")


def test_a_single_entry_by_another_name_is_named(folder: Path) -> None:
    text = (ROOT / "examples" / "vector_add" / "kernel.ptx").read_text()
    (folder / "one.ptx").write_text(text)
    r = porter("check", "one.ptx", "--no-gpu", cwd=folder)
    assert r.returncode == 2
    assert "its one entry is vector_add: --entry vector_add checks it against this spec" in r.stderr


def test_entry_wins_over_a_porter_launch_entry(folder: Path) -> None:
    text = NVCC.read_text()
    (folder / "port.ptx").write_text('// porter-launch: entry = "axpy_gone", grid = ["ceil_div(n, 256)"], '
                                     "block = [256]\n" + text)
    r = porter("check", "port.ptx", "--no-gpu", cwd=folder)
    assert r.returncode == 2 and "no .entry 'axpy_gone' (its porter-launch line)" in r.stderr
    r = porter("check", "port.ptx", "--entry", "axpy_inplace_x2", "--no-gpu", "--json", cwd=folder)
    assert r.returncode == 3 and gates(r)["entry"] == "axpy_inplace_x2"


@pytest.mark.gpu
def test_on_a_gpu_both_variants_pass_and_a_wrong_launch_fails(folder: Path, toolchain) -> None:
    as_nvcc_of(toolchain, NVCC, folder)  # under a CUDA 12 ptxas, kernels.ptx as nvcc 12 writes it
    for entry in ("axpy_inplace", "axpy_inplace_x2"):
        grid = "256" if entry == "axpy_inplace" else "512"
        (folder / "porter.toml").write_text(AXPY_SPEC.replace("{per_block}", grid))
        r = porter("check", "kernels.ptx", "--entry", entry, "--no-timing", "--json", cwd=folder)
        assert r.returncode == 0, (entry, failing(r))
    # the x2 variant launched with a quarter of the threads it needs leaves half of y as it was
    (folder / "porter.toml").write_text(AXPY_SPEC.replace("{per_block}", "1024"))
    r = porter("check", "kernels.ptx", "--entry", "axpy_inplace_x2", "--no-timing", "--json", cwd=folder)
    assert r.returncode == 1


def test_the_gpu_worker_launches_the_entry_it_is_sent_not_the_specs(folder: Path) -> None:
    """The H200 run of test_on_a_gpu_both_variants... found the worker launching the spec's
    kernel.entry whatever --entry chose: axpy_inplace ran where axpy_inplace_x2 was checked."""
    from porter.gate.runner.state import WorkerState

    state = WorkerState(None, fenced=False, folder=folder)
    spec_path = str(folder / "porter.toml")
    chosen = state.spec(spec_path, None, "axpy_inplace_x2")
    assert [step.entry for step in chosen.sequence()] == ["axpy_inplace_x2"]
    assert state.spec(spec_path, None, "axpy_inplace_x2") is chosen  # the reference cache keys on identity
    assert [step.entry for step in state.spec(spec_path).sequence()] == ["axpy_inplace"]
