"""examples/gemm_bf16 (the sm_90a wgmma and sm_100a tcgen05 GEMMs), checked statically with the real ptxas and nvdisasm.

Neither kernel is run here. Each must assemble for its own target with no spills and carry its
generation's tensor-core SASS, must be refused by the other generation's architecture-specific
target (as is, and with the ``.target`` line rewritten, as a porter retarget would), and must take
exactly the parameters of examples/gemm_bf16_sm80, so that the sm_80 spec's params launch it. Skipped,
with the reason, where ptxas or a disassembler is missing.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from porter.inspect import read_ptx
from porter.spec import check_against_entry, launch_directive, load_spec, with_launch

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FAMILY = EXAMPLES / "gemm_bf16"
SM80_SPEC = EXAMPLES / "gemm_bf16_sm80" / "porter.toml"


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
        sass={"HGMMA": 4, "WARPGROUP": 1, "USETMAXREG": 2, "LDGSTS": 1},
        refusal="wgmma",
    ),
    "sm_100a": Kernel(
        ptx=FAMILY / "kernel_sm100a.ptx",
        entry="gemm_bf16_sm100a",
        arch="sm_100a",
        other="sm_90a",
        sass={"UTCHMMA": 4, "UTCBAR": 2, "LDTM": 1, "LDGSTS": 1},
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
def test_its_params_are_the_sm80_kernels(name: str) -> None:
    kernel = KERNELS[name]
    module = read_ptx(kernel.ptx)
    assert [e.name for e in module.kernels] == [kernel.entry]
    assert module.arch == kernel.arch
    sm80 = load_spec(SM80_SPEC)
    # Only the entry name differs from the sm_80 spec; every param must agree.
    as_sm80 = dataclasses.replace(sm80, entry=kernel.entry)
    assert check_against_entry(as_sm80, module.entry(kernel.entry)) == []


@pytest.mark.parametrize("name", KERNEL_IDS)
def test_it_declares_its_launch_and_runs_under_the_sm80_spec(name: str) -> None:
    """One problem, one spec: each kernel carries its own launch (porter-launch) in its PTX."""
    kernel = KERNELS[name]
    text = kernel.ptx.read_text(encoding="utf-8")
    directive = launch_directive(text, source=kernel.ptx.name)
    assert directive is not None and directive["entry"] == kernel.entry
    own = with_launch(load_spec(SM80_SPEC), directive, source=kernel.ptx.name)
    assert check_against_entry(own, read_ptx(kernel.ptx).entry(kernel.entry)) == []
    dims = own.launch_dims({**own.default_sizes(), "M": 4096, "N": 4096})
    assert dims.grid == (16, 32, 1) and dims.shared == 196608
