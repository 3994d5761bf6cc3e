"""porter spec: a first porter.toml from a kernel's signature, which loads and matches the entry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from porter.errors import InputError
from porter.gate.scaffold import choose_entry, scaffold_spec
from porter.gate.spec import check_against_entry, load_spec
from porter.ptx import read_ptx

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("kernel", ["examples/vector_add/kernel.ptx", "examples/gemm_bf16/kernel_sm80.ptx",
                                    "examples/inspect/plain_sm90.ptx", "examples/gemm_bt_tile/kernel_sm90a.ptx"])
def test_the_scaffold_loads_and_matches_its_entry(kernel: str, tmp_path: Path) -> None:
    module = read_ptx(ROOT / kernel)
    entry = choose_entry(module, None)
    (tmp_path / "porter.toml").write_text(scaffold_spec(module, entry))
    spec = load_spec(tmp_path / "porter.toml")
    assert spec.entry == entry.name and check_against_entry(spec, entry) == []
    assert sum(p.is_output for p in spec.params) == 1  # a guess, marked TODO, but a spec needs one


def test_block_and_cluster_come_from_the_ptx(tmp_path: Path) -> None:
    module = read_ptx(ROOT / "examples" / "inspect" / "plain_sm90.ptx")  # .maxntid 128, clusters of 2
    text = scaffold_spec(module, choose_entry(module, None))
    assert "block = [128, 1, 1]" in text and "cluster = [2, 1, 1]" in text


def test_several_entries_need_a_choice() -> None:
    module = read_ptx(ROOT / "tests" / "data" / "ptx" / "rdc_cluster.ptx")
    with pytest.raises(InputError, match="choose one with --entry"):
        choose_entry(module, None)
    with pytest.raises(InputError, match=r"--entry nope: no such \.entry \(entries: "):
        choose_entry(module, "nope")


def test_the_command_never_overwrites(tmp_path: Path) -> None:
    kernel = tmp_path / "k.ptx"
    kernel.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text())
    run = [sys.executable, "-m", "porter", "spec", str(kernel)]
    first = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "porter.toml").read_text()
    second = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert second.returncode == 2 and "never overwrites" in second.stderr
    assert (tmp_path / "porter.toml").read_text() == before
