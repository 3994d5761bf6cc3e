"""Which toolchain porter uses when there are several: the rules of porter.ptx.selection, then the same
through find_toolchain on real folders of (fake) tools, then the one line the gate says before a
cubin this driver cannot load would reach the GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_toolchain import fake_tool

from porter.gate.check import runnable_cubin
from porter.gate.runner.client import DeviceInfo
from porter.ptx import parse_ptx
from porter.ptx.selection import choose, cubins_load, driver_problem
from porter.ptx.toolchain import Tool, find_toolchain


def tool(name: str, version: str, source: str = "pip wheel", folder: str = "") -> Tool:
    return Tool(name=name, path=Path(folder or f"/{source}/{version}") / name, version=version, source=source)


CUDA_HOME_12_4 = [tool(n, "12.4.131", "CUDA_HOME", "/usr/local/cuda-12.4/bin") for n in ("ptxas", "nvdisasm", "cuobjdump")]
WHEEL_12 = tool("ptxas", "12.9.86", folder="/venv/nvidia/cuda_nvcc/bin")
WHEEL_13 = [tool(n, "13.5.37", folder="/venv/nvidia/cu13/bin") for n in ("ptxas", "nvdisasm", "cuobjdump")]


def found(*tools: Tool) -> dict[str, list[Tool]]:
    out: dict[str, list[Tool]] = {}
    for t in tools:
        out.setdefault(t.name, []).append(t)
    return out


def test_without_a_driver_the_newest_complete_release_wins_over_search_order() -> None:
    path_ptxas = tool("ptxas", "13.0.88", "PATH", "/usr/local/bin")  # first in search order, alone
    choice = choose(found(path_ptxas, *WHEEL_13, WHEEL_12), driver=None)
    assert (choice.ptxas, choice.nvdisasm, choice.cuobjdump) == tuple(WHEEL_13)
    assert choice.notes == ()


def test_a_cuda_12_driver_gets_a_cuda_12_ptxas_and_says_what_it_skipped() -> None:
    choice = choose(found(*WHEEL_13, WHEEL_12), driver="12.4")
    assert choice.ptxas == WHEEL_12
    assert choice.nvdisasm == WHEEL_13[1]  # no CUDA 12 disassembler here: the newest reads its cubins
    assert choice.notes[0] == "ptxas 13.5.37 (pip wheel) not used: this driver (CUDA 12.4) cannot load its CUDA 13 cubins"
    assert "no CUDA 12 wheel of nvdisasm or cuobjdump exists" in choice.notes[1]
    assert not any("cannot load" in n for n in choice.notes[1:])


def test_a_consistent_release_beats_a_newer_lone_ptxas() -> None:
    choice = choose(found(*CUDA_HOME_12_4, *WHEEL_13, WHEEL_12), driver="12.4")
    assert (choice.ptxas, choice.nvdisasm, choice.cuobjdump) == tuple(CUDA_HOME_12_4)
    assert choice.notes == ("ptxas 13.5.37 (pip wheel) not used: this driver (CUDA 12.4) cannot load its CUDA 13 cubins",)


def test_a_mismatch_that_cannot_be_avoided_is_one_line() -> None:
    choice = choose(found(*WHEEL_13), driver="12.8")
    assert choice.ptxas == WHEEL_13[0]
    (line,) = choice.notes
    assert line == ("ptxas 13.5.37 (pip wheel) makes CUDA 13 cubins, which this driver (CUDA 12.8) cannot load: "
                    "pip install -e '.[cuda12]' in porter's source checkout, or point --toolchain / "
                    "PORTER_CUDA_HOME at a CUDA 12.x toolkit")
    assert line == driver_problem(WHEEL_13[0], "12.8")


def test_the_named_folder_overrides_everything() -> None:
    forced = tool("ptxas", "12.9.86", "PORTER_CUDA_HOME", "/carried/cuda12/bin")
    choice = choose(found(forced, *WHEEL_13), driver="13.0")
    assert choice.ptxas == forced
    assert choice.nvdisasm == WHEEL_13[1]
    old_forced = tool("ptxas", "11.8.89", "PORTER_CUDA_HOME")
    assert choose(found(old_forced, *WHEEL_13), driver=None).ptxas == old_forced  # even when older


def test_driver_rules() -> None:
    assert cubins_load(WHEEL_13[0], None)  # no driver, no constraint
    assert cubins_load(WHEEL_13[0], "13.0")  # a newer minor of the same major loads (the H200: 13.5 on 13.0)
    assert not cubins_load(WHEEL_13[0], "12.9")
    assert cubins_load(WHEEL_12, "13.0") and cubins_load(WHEEL_12, "12.2")
    assert driver_problem(WHEEL_12, "13.0") is None
    assert driver_problem(WHEEL_12, "11.8") == ("ptxas 12.9.86 (pip wheel) makes CUDA 12 cubins, which this driver "
                                                "(CUDA 11.8) cannot load: point --toolchain / PORTER_CUDA_HOME at a "
                                                "CUDA 11.x toolkit")


def test_find_toolchain_chooses_among_real_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [])  # no pip wheels but these
    cu12, cu13, on_path = tmp_path / "cuda-12.6", tmp_path / "cuda-13.1", tmp_path / "bin"
    for name in ("ptxas", "nvdisasm", "cuobjdump"):
        fake_tool(cu12 / "bin", name, "12.6.85")
        fake_tool(cu13 / "bin", name, "13.1.80")
    fake_tool(on_path, "ptxas", "13.0.88")
    env = {"CUDA_HOME": str(cu12), "PATH": f"{on_path}:{cu13 / 'bin'}"}
    chosen = find_toolchain(env, driver=None)
    assert [t.version for t in (chosen.ptxas, chosen.nvdisasm, chosen.cuobjdump)] == ["13.1.80"] * 3
    on_12 = find_toolchain(env, driver="12.8")
    assert [t.path.parent for t in (on_12.ptxas, on_12.nvdisasm, on_12.cuobjdump)] == [cu12 / "bin"] * 3
    assert on_12.driver == "12.8" and len(on_12.notes) == 2  # both CUDA 13 ptxas skipped, each said
    forced = find_toolchain({**env, "PORTER_CUDA_HOME": str(on_path)}, driver=None)
    assert (forced.ptxas.version, forced.ptxas.source) == ("13.0.88", "PORTER_CUDA_HOME")
    assert forced.nvdisasm.version == "13.1.80"  # same major, the newest


def test_the_gate_refuses_to_hand_the_gpu_a_cubin_its_driver_cannot_load(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [])
    fake_tool(tmp_path / "bin", "ptxas", "13.5.37", body="exit 1")
    toolchain = find_toolchain({"PORTER_CUDA_HOME": str(tmp_path), "PORTER_CACHE_DIR": str(tmp_path / "c")},
                               driver=None)
    device = DeviceInfo("NVIDIA H100", "sm_90", "9.0", 132, 50 << 20, 232448, "12.4", "12.4", "13.6.0")
    kernel = parse_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n")
    cubin, why = runnable_cubin(kernel, None, device, toolchain, "k.ptx")
    assert cubin is None
    assert why.startswith("ptxas 13.5.37 (PORTER_CUDA_HOME) makes CUDA 13 cubins, which this driver (CUDA 12.4) "
                          "cannot load")


def test_the_choice_says_why_this_ptxas_over_the_others() -> None:
    """#29: doctor listed the other ptxas without saying why it took the one it took."""
    path_ptxas = tool("ptxas", "13.0.88", "PATH", "/usr/local/bin")
    assert choose(found(path_ptxas, *WHEEL_13), driver=None).why.startswith("the most complete release")
    older = tool("ptxas", "12.9.86", "PATH", "/opt/bin")
    assert choose(found(older, path_ptxas), driver=None).why.startswith("the newest release")
    twin = tool("ptxas", "13.0.88", "PATH", "/opt/bin")
    assert choose(found(path_ptxas, twin), driver=None).why.startswith("the first found in search order")
    assert "cannot load" in choose(found(*WHEEL_13, WHEEL_12), driver="12.4").why
    assert choose(found(path_ptxas), driver=None).why == ""


def test_doctor_says_why_it_uses_its_ptxas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from porter.gate.doctor import toolchain_notes

    monkeypatch.setattr(sys, "path", [])
    fake_tool(tmp_path / "a", "ptxas", "13.0.88")
    fake_tool(tmp_path / "b", "ptxas", "13.1.20")
    monkeypatch.setenv("PATH", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    monkeypatch.delenv("PORTER_CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    (note,) = [n for n in toolchain_notes(find_toolchain(driver=None)) if n.startswith("other ptxas here")]
    assert "porter uses ptxas 13.1.20 (PATH): the newest release among equally complete ones" in note
