"""examples/attention_fwd: the Hopper (wgmma) and Blackwell (tcgen05) attention-forward kernels,
checked statically with the real ptxas and disassembler.

Neither kernel runs here (no GPU on the CPU test machines; no Blackwell GPU anywhere yet). Each
must assemble for its own target with no spills, carry its generation's tensor-core SASS and no
mma.sync fallback, be named by ``porter inspect`` as bound to its architecture, and take exactly
the fixed attn_fwd interface that every architecture's kernel shares, so one spec launches all
of them. Skipped, with the reason, where ptxas or a disassembler is missing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from porter.gate.spec import launch_directive
from porter.ptx import read_ptx

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "examples" / "attention_fwd"
ENTRY = "attn_fwd"
# attn_fwd(const __half* Q, const __half* K, const __half* V, __half* O, float* LSE,
#          int B, int H, int S, int D, int causal, float scale)
INTERFACE = (".u64",) * 5 + (".u32",) * 5 + (".f32",)


@dataclasses.dataclass(frozen=True)
class Kernel:
    ptx: Path
    arch: str
    block: int  # threads, from the kernel's porter-launch line and its .maxntid
    tensor_maps: tuple[str, ...]  # the porter-param tensor maps appended after the interface, in order
    sass: dict[str, int]  # opcode prefix -> the least count expected in the SASS
    absent: tuple[str, ...]  # opcodes that must not appear (another generation's MMA)


KERNELS = {
    "sm_90a": Kernel(
        ptx=FOLDER / "kernel_sm90a.ptx",
        arch="sm_90a",
        block=384,
        tensor_maps=("Q", "K", "V"),  # TMA loads: one 4-D map over each input
        # S = Q K^T: m64n128k16 (SS); O += P V: m64n64k16 (D = 64) and m64n128k16 (D = 128), RS.
        sass={"HGMMA.64x128x16.F32": 16, "HGMMA.64x64x16.F32": 8, "WARPGROUP.ARRIVE": 1, "USETMAXREG": 2},
        absent=("HMMA", "UTCHMMA"),
    ),
    "sm_100a": Kernel(
        ptx=FOLDER / "kernel_sm100a.ptx",
        arch="sm_100a",
        block=288,
        tensor_maps=(),
        sass={"UTCHMMA": 16, "UTCBAR": 2, "LDTM": 1, "STTM": 1},
        absent=("HMMA", "HGMMA"),
    ),
}
KERNEL_IDS = list(KERNELS)


def _assemble(toolchain, kernel: Kernel):
    return toolchain.assemble(kernel.ptx.read_text(encoding="utf-8"), kernel.arch, filename=kernel.ptx.name)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_assembles_for_its_target_with_no_spills(toolchain, name: str) -> None:
    kernel = KERNELS[name]
    result = _assemble(toolchain, kernel)
    assert result.ok, "\n".join(map(str, result.errors)) or result.log
    resources = result.resources[ENTRY]
    assert (resources.spill_stores, resources.spill_loads) == (0, 0), result.log
    assert resources.stack_frame == 0, result.log
    # ptxas serialises wgmma when registers of an in-flight wgmma are touched (C7513/C7514):
    # the pipelining of the Q.K^T and P.V GEMMs would be lost without any error.
    assert "serialized" not in result.log, result.log


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_its_sass_has_the_generation_tensor_core_opcodes(toolchain, name: str) -> None:
    if not toolchain.can_disassemble:
        pytest.skip("no nvdisasm or cuobjdump (pip install nvidia-cuda-nvdisasm)")
    kernel = KERNELS[name]
    result = _assemble(toolchain, kernel)
    assert result.ok and result.cubin is not None
    histogram = toolchain.disassemble(result.cubin).histogram()  # full opcode -> count

    def count(prefix: str) -> int:
        return sum(n for op, n in histogram.items() if op == prefix or op.startswith(prefix + "."))

    counts = {op: count(op) for op in kernel.sass}
    assert all(counts[op] >= least for op, least in kernel.sass.items()), counts
    for op in kernel.absent:
        assert count(op) == 0, f"{op} in the {kernel.arch} SASS"


def _inspect(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # never touch a GPU from these tests
    cmd = [sys.executable, "-m", "porter", "inspect", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def test_porter_inspect_says_the_hopper_kernel_is_sm90a_only() -> None:
    ptx = str(KERNELS["sm_90a"].ptx)
    r = _inspect(ptx, "--arch", "sm_90a", "--arch", "sm_100a", "--json")
    assert r.returncode == 0, r.stderr
    archs = {a["arch"]: a for a in json.loads(r.stdout)["archs"]}
    assert archs["sm_90a"]["compatibility"]["status"] == "as-is"
    assert archs["sm_100a"]["compatibility"]["status"] == "incompatible"
    text = _inspect(ptx, "--arch", "sm_100a").stdout
    assert re.search(r"`wgmma\.[^`]*` at line \d+ exists only on sm_90a", text), text


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_its_params_are_the_fixed_interface(name: str) -> None:
    kernel = KERNELS[name]
    module = read_ptx(kernel.ptx)
    assert [e.name for e in module.kernels] == [ENTRY]
    assert module.arch == kernel.arch
    entry = module.entry(ENTRY)
    interface, appended = entry.params[:len(INTERFACE)], entry.params[len(INTERFACE):]
    assert tuple(p.type for p in interface) == INTERFACE
    assert all(p.array_size is None for p in interface), "the 11 interface params come first, unchanged"
    # A port may append CUtensorMaps (128 bytes, 64-aligned, by value), each declared for porter.
    assert [(p.type, p.array_size, p.align) for p in appended] == [(".b8", 128, 64)] * len(kernel.tensor_maps)
    launch = launch_directive(kernel.ptx.read_text(encoding="utf-8"), source=kernel.ptx.name)
    assert launch is not None
    declared = launch.get("params", [])
    assert [(d["kind"], d["tensor"]) for d in declared] == [("tensormap", name) for name in kernel.tensor_maps]
    assert launch["entry"] == ENTRY
    assert launch["grid"] == ["ceil_div(S, 128)", "H", "B"]
    assert launch["block"] == [kernel.block, 1, 1]
    maxntid = entry.directive("maxntid")
    assert maxntid is not None and maxntid.values[0] == kernel.block
