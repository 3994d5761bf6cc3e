"""examples/gemm_bf16 (the sm_90a wgmma and sm_100a tcgen05 GEMMs), checked statically with the real ptxas and nvdisasm.

Neither kernel is run here (tests/test_gate_gpu.py runs the Hopper one). Each must assemble for its
own target with no spills and carry its generation's tensor-core and TMA SASS, must be refused by
the other generation's architecture-specific target (as is, and with the ``.target`` line
rewritten, as a porter retarget would), and must take the sm_80 kernel's parameters plus the two
TMA descriptors its porter-param lines declare, so that the family's one spec launches it.
Skipped, with the reason, where ptxas or a disassembler is missing.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from porter.gate.spec import check_against_entry, launch_directive, load_spec, with_launch
from porter.ptx import read_ptx

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FAMILY = EXAMPLES / "gemm_bf16"
SPEC = FAMILY / "porter.toml"  # the sm_80 kernel's spec: one problem, one spec


@dataclasses.dataclass(frozen=True)
class Kernel:
    ptx: Path
    entry: str
    arch: str
    other: str  # the other generation's arch-specific target, which must refuse it
    sass: dict[str, int]  # signature opcode base -> the least count expected in the SASS
    refusal: str  # what ptxas names when the .target line is rewritten to `other`


KERNELS = {
    "sm_90a": Kernel(
        ptx=FAMILY / "kernel_sm90a.ptx",
        entry="gemm_bf16_sm90a",
        arch="sm_90a",
        other="sm_100a",
        sass={"HGMMA": 4, "WARPGROUP": 1, "USETMAXREG": 2, "UTMALDG": 5},
        refusal="wgmma",
    ),
    "sm_100a": Kernel(
        ptx=FAMILY / "kernel_sm100a.ptx",
        entry="gemm_bf16_sm100a",
        arch="sm_100a",
        other="sm_90a",
        sass={"UTCHMMA": 4, "UTCBAR": 2, "LDTM": 1, "UTMALDG": 5},
        refusal="tcgen05",
    ),
}
KERNEL_IDS = list(KERNELS)


def _assemble(toolchain, kernel: Kernel, arch: str, *, retarget: bool = False):
    text = kernel.ptx.read_text(encoding="utf-8")
    if retarget:
        text = re.sub(r"^\.target\s+\S+", f".target {arch}", text, count=1, flags=re.MULTILINE)
    return toolchain.assemble(text, arch, filename=kernel.ptx.name)


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_assembles_for_its_target_with_no_spills(toolchain, name: str) -> None:
    kernel = KERNELS[name]
    result = _assemble(toolchain, kernel, kernel.arch)
    assert result.ok, "\n".join(map(str, result.errors)) or result.log
    assert not result.errors
    resources = result.resources[kernel.entry]
    assert (resources.spill_stores, resources.spill_loads) == (0, 0), result.log
    assert resources.stack_frame == 0, result.log


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_its_sass_has_the_generation_signature(toolchain, name: str) -> None:
    if not toolchain.can_disassemble:
        pytest.skip("no nvdisasm or cuobjdump (pip install nvidia-cuda-nvdisasm)")
    kernel = KERNELS[name]
    result = _assemble(toolchain, kernel, kernel.arch)
    assert result.ok and result.cubin is not None
    sass = toolchain.disassemble(result.cubin)
    counts = {op: sass.count(op) for op in kernel.sass}
    assert all(counts[op] >= least for op, least in kernel.sass.items()), counts
    assert sass.count("HMMA") == 0, "the tensor-core work must not fall back to mma.sync"
    assert sass.count("LDGSTS") == 0, "operands arrive by TMA, not by per-thread cp.async"
    if name == "sm_90a":
        # the block tile's shape and B's transpose (row-major B is N-major for wgmma)
        hgmma = [op for op in sass.histogram() if op.startswith("HGMMA")]
        assert hgmma == ["HGMMA.64x256x16.F32.BF16"], hgmma
        assert ".tnspB" in sass.text


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_the_other_generation_refuses_it(toolchain, name: str) -> None:
    kernel = KERNELS[name]
    as_is = _assemble(toolchain, kernel, kernel.other)
    assert not as_is.ok
    retargeted = _assemble(toolchain, kernel, kernel.other, retarget=True)
    assert not retargeted.ok
    messages = " ".join(d.message for d in retargeted.errors)
    assert kernel.refusal in messages and kernel.other in messages, messages


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_its_params_are_the_sm80_kernels_plus_two_tensor_maps(name: str) -> None:
    kernel = KERNELS[name]
    module = read_ptx(kernel.ptx)
    assert [e.name for e in module.kernels] == [kernel.entry]
    assert module.arch == kernel.arch
    sm80 = load_spec(SPEC)
    own = with_launch(sm80, launch_directive(kernel.ptx.read_text(encoding="utf-8"), source=kernel.ptx.name),
                      source=kernel.ptx.name)
    assert [p.name for p in own.params] == [p.name for p in sm80.params] + ["tmA", "tmB"]
    assert check_against_entry(own, module.entry(kernel.entry)) == []
    # The descriptors cover the logical matrices (padding columns stay outside) in 128B-swizzled boxes.
    at = {**own.default_sizes(), "M": 200, "N": 264, "K": 136, "lda": 144, "ldb": 280}
    a, b = own.tensormap_geometry("tmA", at), own.tensormap_geometry("tmB", at)
    assert (a.dims, a.strides, a.box, a.swizzle) == ((200, 136), (288,), (128, 64), "128B")
    assert (b.dims, b.strides, b.box, b.swizzle) == ((136, 264), (560,), (64, 64), "128B")
    # Without the descriptors the sm_80 params alone do not launch it.
    assert check_against_entry(dataclasses.replace(sm80, entry=kernel.entry), module.entry(kernel.entry))


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_it_declares_its_launch_and_runs_under_the_sm80_spec(name: str) -> None:
    """One problem, one spec: each kernel carries its own launch (porter-launch) in its PTX."""
    kernel = KERNELS[name]
    text = kernel.ptx.read_text(encoding="utf-8")
    directive = launch_directive(text, source=kernel.ptx.name)
    assert directive is not None and directive["entry"] == kernel.entry
    own = with_launch(load_spec(SPEC), directive, source=kernel.ptx.name)
    assert check_against_entry(own, read_ptx(kernel.ptx).entry(kernel.entry)) == []
    dims = own.launch_dims({**own.default_sizes(), "M": 4096, "N": 4096})
    assert dims.grid == (16, 32, 1) and dims.shared == 197632  # 4 x 48 KiB stages + 1 KiB to align them
