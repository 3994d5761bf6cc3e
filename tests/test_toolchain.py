"""porter.ptx.toolchain against the real ptxas / nvdisasm / cuobjdump (skipped, with the reason, when absent).

Every probe kernel stores its results to global memory: otherwise ptxas eliminates the
instructions under test and the SASS checks would look at nothing.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from porter.errors import EnvironmentProblem, InputError
from porter.gate.doctor import _tool_check
from porter.install import install_hint
from porter.ptx.toolchain import Toolchain, find_toolchain, search_dirs

WGMMA_PTX = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry wgmma_probe(
	.param .u64 out,
	.param .u64 desc_a,
	.param .u64 desc_b
)
{
	.reg .f32 %f<9>;
	.reg .b64 %rd<8>;
	.reg .b32 %r<2>;

	ld.param.u64 %rd1, [out];
	ld.param.u64 %rd2, [desc_a];
	ld.param.u64 %rd3, [desc_b];
	mov.f32 %f1, 0f00000000;
	mov.f32 %f2, 0f00000000;
	mov.f32 %f3, 0f00000000;
	mov.f32 %f4, 0f00000000;
	mov.f32 %f5, 0f00000000;
	mov.f32 %f6, 0f00000000;
	mov.f32 %f7, 0f00000000;
	mov.f32 %f8, 0f00000000;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %rd2, %rd3, 1, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	cvta.to.global.u64 %rd4, %rd1;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd5, %r1, 32;
	add.s64 %rd6, %rd4, %rd5;
	st.global.v4.f32 [%rd6], {%f1, %f2, %f3, %f4};
	st.global.v4.f32 [%rd6+16], {%f5, %f6, %f7, %f8};
	ret;
}
"""

# {target} is filled in: sm_80 to see the line-level error, sm_90 to see the whole-file fatal.
ELECT_PTX = """\
.version 8.0
.target {target}
.address_size 64

.visible .entry elect_probe(.param .u64 out)
{{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;

	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	elect.sync %r1|%p1, 0xffffffff;
	selp.u32 %r2, 1, 0, %p1;
	st.global.u32 [%rd2], %r2;
	ret;
}}
"""

TYPO_PTX = """\
.version 7.0
.target sm_80
.address_size 64

.visible .entry typo_probe(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;

	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	selpp.u32 %r2, 1, 0, %p1;
	st.global.u32 [%rd2], %r2;
	ret;
}
"""

# A 1 KiB static shared array, one barrier, a guarded (predicated) store, and a .func with a
# dynamically indexed local array, which ptxas keeps as a called function.
SMEM_PTX = """\
.version 7.0
.target sm_80
.address_size 64

.func (.param .b32 ret) pick(.param .b32 x, .param .b32 i)
{
	.local .align 4 .b8 buf[64];
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;

	ld.param.u32 %r1, [x];
	ld.param.u32 %r2, [i];
	mov.u64 %rd1, buf;
	st.local.u32 [%rd1], %r1;
	add.u32 %r3, %r1, 7;
	st.local.u32 [%rd1+4], %r3;
	and.b32 %r4, %r2, 15;
	mul.wide.u32 %rd2, %r4, 4;
	add.u64 %rd3, %rd1, %rd2;
	ld.local.u32 %r5, [%rd3];
	st.param.b32 [ret], %r5;
	ret;
}

.visible .entry smem_probe(.param .u64 out, .param .u32 n)
{
	.shared .align 4 .b8 tile[1024];
	.reg .pred %p<2>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<6>;

	ld.param.u64 %rd1, [out];
	ld.param.u32 %r9, [n];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	shl.b32 %r2, %r1, 2;
	mov.u32 %r3, tile;
	add.u32 %r4, %r3, %r2;
	st.shared.u32 [%r4], %r1;
	bar.sync 0;
	xor.b32 %r5, %r2, 1020;
	add.u32 %r6, %r3, %r5;
	ld.shared.u32 %r7, [%r6];
	{
	.param .b32 a0;
	.param .b32 a1;
	.param .b32 rv;
	st.param.b32 [a0], %r7;
	st.param.b32 [a1], %r9;
	call.uni (rv), pick, (a0, a1);
	ld.param.b32 %r8, [rv];
	}
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	setp.lt.u32 %p1, %r1, %r9;
	@%p1 st.global.u32 [%rd4], %r8;
	ret;
}
"""

MMA_SM80_PTX = """\
.version 7.0
.target sm_80
.address_size 64

.visible .entry mma_probe(.param .u64 out, .param .u64 inp)
{
	.reg .b32 %r<7>;
	.reg .f32 %f<9>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [out];
	ld.param.u64 %rd2, [inp];
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd4];
	ld.global.v2.b32 {%r5, %r6}, [%rd4+16];
	mov.f32 %f1, 0f00000000;
	mov.f32 %f2, 0f00000000;
	mov.f32 %f3, 0f00000000;
	mov.f32 %f4, 0f00000000;
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	st.global.v4.f32 [%rd3], {%f5, %f6, %f7, %f8};
	ret;
}
"""


def spill_ptx(values: int = 40) -> str:
    """Loads ``values`` floats, sums their squares, then scales each by the sum: all of them are
    live across the sum, so a low register cap forces spills."""
    acc = 2 * values
    body = [f"\tld.global.f32 %f{i}, [%rd2+{4 * i}];" for i in range(values)]
    body.append(f"\tmov.f32 %f{acc}, 0f00000000;")
    body += [f"\tfma.rn.f32 %f{acc}, %f{i}, %f{i}, %f{acc};" for i in range(values)]
    body += [f"\tmul.f32 %f{values + i}, %f{i}, %f{acc};" for i in range(values)]
    body += [f"\tst.global.f32 [%rd1+{4 * i}], %f{values + i};" for i in range(values)]
    return "\n".join(
        [
            ".version 7.0",
            ".target sm_80",
            ".address_size 64",
            "",
            ".visible .entry spill_probe(.param .u64 out, .param .u64 inp)",
            "{",
            f"\t.reg .f32 %f<{acc + 1}>;",
            "\t.reg .b64 %rd<3>;",
            "\tld.param.u64 %rd1, [out];",
            "\tld.param.u64 %rd2, [inp];",
            *body,
            "\tret;",
            "}",
            "",
        ]
    )


def line_of(ptx: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    return next(n for n, text in enumerate(ptx.splitlines(), 1) if needle in text)


def fake_tool(folder: Path, name: str, version: str, body: str = "") -> Path:
    """An executable shell script that answers ``--version`` like the CUDA tools do."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then\n'
        f'  echo "Cuda compilation tools, release {version.rsplit(".", 1)[0]}, V{version}"\n'
        "  exit 0\n"
        "fi\n"
        f"{body}\n"
    )
    path.chmod(0o755)
    return path


def wheel_ptxas() -> Path | None:
    for entry in sys.path:
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin"):
            candidate = Path(entry or ".") / sub / "ptxas"
            if entry and candidate.is_file():
                return candidate
    return None


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def toolchain(cache_dir: Path) -> Toolchain:
    found = find_toolchain()
    if found.ptxas is None:
        pytest.skip("ptxas not found: pip install nvidia-cuda-nvcc, or set PORTER_CUDA_HOME")
    assert found.cache_dir == cache_dir
    return found


@pytest.fixture
def disassembler(toolchain: Toolchain) -> Toolchain:
    if toolchain.nvdisasm is None and toolchain.cuobjdump is None:
        pytest.skip("neither nvdisasm nor cuobjdump found: pip install nvidia-cuda-nvdisasm")
    return toolchain


# --- discovery ------------------------------------------------------------------------------


def test_search_order_and_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [])  # no pip wheels
    porter_home, cuda_home, on_path = tmp_path / "porter_home", tmp_path / "cuda_home", tmp_path / "on_path"
    fake_tool(porter_home / "bin", "ptxas", "99.1.7")
    fake_tool(porter_home, "ptxas", "98.0.1")
    fake_tool(cuda_home / "bin", "ptxas", "88.2.3")
    fake_tool(on_path, "ptxas", "77.0.5")
    env = {"PORTER_CUDA_HOME": str(porter_home), "CUDA_HOME": str(cuda_home), "PATH": str(on_path)}
    assert search_dirs(env) == (porter_home / "bin", porter_home, cuda_home / "bin", on_path)

    found = find_toolchain(env).ptxas
    assert found is not None
    assert (found.path, found.version, found.source) == (
        porter_home / "bin" / "ptxas",
        "99.1.7",
        "PORTER_CUDA_HOME",
    )

    (porter_home / "bin" / "ptxas").unlink()
    found = find_toolchain(env).ptxas
    assert found is not None
    assert (found.path, found.version, found.source) == (porter_home / "ptxas", "98.0.1", "PORTER_CUDA_HOME")

    (porter_home / "ptxas").unlink()
    with pytest.raises(InputError, match="PORTER_CUDA_HOME="):  # named for its ptxas: never passed over
        find_toolchain(env)
    del env["PORTER_CUDA_HOME"]
    found = find_toolchain(env).ptxas
    assert found is not None
    assert (found.version, found.source) == ("88.2.3", "CUDA_HOME")

    found = find_toolchain({"PATH": str(on_path)}).ptxas
    assert found is not None
    assert (found.name, found.version, found.source) == ("ptxas", "77.0.5", "PATH")


def test_pip_wheel_found_without_path_or_cuda_env() -> None:
    wheel = wheel_ptxas()
    if wheel is None:
        pytest.skip("no ptxas wheel on sys.path: pip install nvidia-cuda-nvcc")
    found = find_toolchain({}).ptxas
    assert found is not None
    assert found.source == "pip wheel"
    assert found.path == wheel
    assert found.version[0].isdigit()


def test_missing_tools_raise_with_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [])
    tools = find_toolchain({"PORTER_CACHE_DIR": str(tmp_path)})
    assert (tools.ptxas, tools.nvdisasm, tools.cuobjdump) == (None, None, None)
    assert not tools.can_disassemble
    for name in ("ptxas", "nvdisasm", "cuobjdump"):
        with pytest.raises(EnvironmentProblem) as info:
            tools.require(name)
        # #29: the hint doctor gives, the README's source-checkout install (porter-kernels is not published)
        assert str(info.value).endswith(f"install it with: {install_hint(name)}")
        assert "pip install -e '.[cuda13]' in porter's source checkout" in str(info.value)
        assert _tool_check(name, None, essential=False).hint == install_hint(name)
        assert "\n" not in str(info.value)
        assert info.value.exit_code == 3
    with pytest.raises(EnvironmentProblem, match="ptxas"):
        tools.assemble(WGMMA_PTX, "sm_90a")
    with pytest.raises(EnvironmentProblem, match=r"\.\[cuda13\]"):
        tools.disassemble(b"")


def test_ptxas_timeout_is_a_fatal_diagnostic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [])
    fake_tool(tmp_path / "cuda" / "bin", "ptxas", "99.0.1", body="sleep 30")
    tools = find_toolchain({"PORTER_CUDA_HOME": str(tmp_path / "cuda"), "PORTER_CACHE_DIR": str(tmp_path)})
    start = time.perf_counter()
    result = tools.assemble(WGMMA_PTX, "sm_90a", timeout_s=0.5)
    assert time.perf_counter() - start < 10
    assert not result.ok
    assert result.cubin is None
    assert result.errors[-1].severity == "fatal"
    assert "timed out" in result.errors[-1].message
    assert not tools.assemble(WGMMA_PTX, "sm_90a", timeout_s=0.5).cached  # timeouts are not cached


# --- diagnostics from real ptxas output --------------------------------------------------------


def test_wgmma_on_sm100a_reports_each_line(toolchain: Toolchain) -> None:
    result = toolchain.assemble(WGMMA_PTX, "sm_100a")
    assert not result.ok
    assert result.cubin is None
    errors = [d for d in result.errors if d.line is not None]
    expected = {
        line_of(WGMMA_PTX, "wgmma.fence"): "wgmma.fence",
        line_of(WGMMA_PTX, "wgmma.mma_async"): "wgmma.mma_async with floating point types",
        line_of(WGMMA_PTX, "wgmma.commit_group"): "wgmma.commit_group",
        line_of(WGMMA_PTX, "wgmma.wait_group"): "wgmma.wait_group",
    }
    assert {d.line for d in errors} == set(expected)
    for d in errors:
        assert d.severity == "error"
        assert f"Instruction '{expected[d.line]}'" in d.message
        assert "sm_100a" in d.message
    fence = next(d for d in errors if d.line == line_of(WGMMA_PTX, "wgmma.fence"))
    marked = [row for row in fence.context.splitlines() if row.startswith(">")]
    assert len(marked) == 1 and "wgmma.fence.sync.aligned" in marked[0]
    assert len(fence.context.splitlines()) == 5
    assert f" {fence.line} |" in marked[0]
    # The closing "aborted" message has no line and no context.
    assert result.errors[-1].line is None and result.errors[-1].severity == "fatal"
    assert result.errors[-1].context == ""


def test_sm90_feature_on_sm80(toolchain: Toolchain) -> None:
    ptx = ELECT_PTX.format(target="sm_80")
    result = toolchain.assemble(ptx, "sm_80")
    assert not result.ok
    first = result.errors[0]
    assert (first.line, first.severity) == (line_of(ptx, "elect.sync"), "error")
    assert first.message == "Feature 'elect' requires .target sm_90 or higher"
    assert "elect.sync %r1|%p1" in first.context

    # PTX still saying .target sm_90, assembled for sm_80: one whole-file fatal, no line.
    result = toolchain.assemble(ELECT_PTX.format(target="sm_90"), "sm_80")
    assert not result.ok
    assert [(d.line, d.severity) for d in result.errors] == [(None, "fatal")]


def test_opcode_typo_and_syntax_error(toolchain: Toolchain) -> None:
    result = toolchain.assemble(TYPO_PTX, "sm_80")
    first = result.errors[0]
    assert (first.line, first.severity) == (line_of(TYPO_PTX, "selpp"), "error")
    assert "selpp" in first.message
    assert str(first).startswith(f"line {first.line}: error: ")

    broken = TYPO_PTX.replace("selpp.u32 %r2, 1, 0, %p1;", "selp.u32 %r2, 1, 0, %p1")
    result = toolchain.assemble(broken, "sm_80")
    first = result.errors[0]
    # ptxas reports a parse error as a fatal on the line after the missing ';'.
    assert (first.line, first.severity) == (line_of(broken, "st.global"), "fatal")
    assert "syntax error" in first.message


def test_warnings_and_numbered_advisories(toolchain: Toolchain) -> None:
    result = toolchain.assemble(spill_ptx(), "sm_80", flags=("-maxrregcount=24", "--warn-on-spills"))
    assert result.ok
    assert any("spilled" in w.message and w.line is None for w in result.warnings)

    setmaxnreg = WGMMA_PTX.replace("\twgmma.fence.sync.aligned;", "\tsetmaxnreg.dec.sync.aligned.u32 40;")
    result = toolchain.assemble(setmaxnreg.replace("wgmma.", "// wgmma."), "sm_90a")
    assert result.ok
    (advisory,) = result.diagnostics
    assert (advisory.severity, advisory.code, advisory.line) == ("info", "C7508", None)
    assert advisory.message.startswith("Potential Performance Loss: 'setmaxnreg' ignored")


# --- resources ----------------------------------------------------------------------------------


def test_resources_of_entry_and_func(toolchain: Toolchain) -> None:
    result = toolchain.assemble(SMEM_PTX, "sm_80")
    assert result.ok, result.log
    assert result.diagnostics == ()
    entry = result.resources["smem_probe"]
    assert entry.registers is not None and entry.registers > 0
    assert entry.shared_bytes == 1024
    assert entry.barriers == 1
    assert entry.constant_bytes.get(0, 0) > 0  # the parameter bank, reported for sm_8x
    # ptxas 13 prints "Function properties for pick" with a 0-byte frame and no "Used" line;
    # pick's local array is charged to the entry that calls it.
    assert result.resources["pick"].registers is None
    assert entry.stack_frame >= 64 and entry.cumulative_stack >= 64

    result = toolchain.assemble(WGMMA_PTX, "sm_90a")
    assert result.ok
    assert set(result.resources) == {"wgmma_probe"}
    assert result.resources["wgmma_probe"].registers > 0


def test_spills_forced_by_register_cap(toolchain: Toolchain) -> None:
    free = toolchain.assemble(spill_ptx(), "sm_80").resources["spill_probe"]
    assert (free.spill_stores, free.spill_loads) == (0, 0)
    capped = toolchain.assemble(spill_ptx(), "sm_80", flags=("-maxrregcount=24",)).resources["spill_probe"]
    assert capped.registers is not None and capped.registers <= 24
    assert capped.spill_stores > 0 and capped.spill_loads > 0
    assert capped.stack_frame >= capped.spill_stores


def test_command_and_filename(toolchain: Toolchain) -> None:
    assert toolchain.ptxas is not None
    result = toolchain.assemble(TYPO_PTX, "sm_80", filename="my kernel.ptx", flags=("-O2",))
    assert result.command == (
        str(toolchain.ptxas.path),
        "-v",
        "-arch=sm_80",
        "-O2",
        "my kernel.ptx",
        "-o",
        "out.cubin",
    )
    assert result.command_line.endswith("-arch=sm_80 -O2 'my kernel.ptx' -o out.cubin")
    assert "ptxas my kernel.ptx, line" in result.log
    assert result.ptxas_version == toolchain.ptxas.version
    with pytest.raises(InputError):
        toolchain.assemble(TYPO_PTX, "sm_80", filename="sub/kernel.ptx")


# --- cache --------------------------------------------------------------------------------------


def test_cache_hit_miss_and_failures(toolchain: Toolchain, cache_dir: Path) -> None:
    start = time.perf_counter()
    first = toolchain.assemble(WGMMA_PTX, "sm_90a")
    fresh_s = time.perf_counter() - start
    assert first.ok and not first.cached and first.cubin

    start = time.perf_counter()
    second = toolchain.assemble(WGMMA_PTX, "sm_90a")
    hit_s = time.perf_counter() - start
    assert second.cached
    assert hit_s < fresh_s / 3
    assert second.cubin == first.cubin
    assert dataclasses.replace(second, cached=False) == first

    assert not toolchain.assemble(WGMMA_PTX, "sm_90a", flags=("-O2",)).cached
    assert not toolchain.assemble(WGMMA_PTX, "sm_90a", filename="other.ptx").cached

    failed = toolchain.assemble(WGMMA_PTX, "sm_100a")
    again = toolchain.assemble(WGMMA_PTX, "sm_100a")
    assert not failed.cached and again.cached
    assert again.errors == failed.errors and again.cubin is None
    assert list(cache_dir.rglob("*.json"))


def test_corrupt_cache_entries_are_rewritten(toolchain: Toolchain, cache_dir: Path) -> None:
    first = toolchain.assemble(WGMMA_PTX, "sm_90a")
    (meta,) = cache_dir.rglob("*.json")
    (cubin,) = cache_dir.rglob("*.cubin")

    meta.write_text("{not json")
    assert not toolchain.assemble(WGMMA_PTX, "sm_90a").cached
    assert toolchain.assemble(WGMMA_PTX, "sm_90a").cached

    cubin.write_bytes(b"truncated")
    rebuilt = toolchain.assemble(WGMMA_PTX, "sm_90a")
    assert not rebuilt.cached and rebuilt.cubin == first.cubin
    assert toolchain.assemble(WGMMA_PTX, "sm_90a").cubin == first.cubin
    assert not list(cache_dir.rglob("*.tmp"))


def test_use_cache_false_neither_reads_nor_writes(toolchain: Toolchain, cache_dir: Path) -> None:
    assert not toolchain.assemble(WGMMA_PTX, "sm_90a", use_cache=False).cached
    assert not cache_dir.exists()
    toolchain.assemble(WGMMA_PTX, "sm_90a")
    assert not toolchain.assemble(WGMMA_PTX, "sm_90a", use_cache=False).cached


# --- disassembly --------------------------------------------------------------------------------


def test_wgmma_sm90a_shows_hgmma(disassembler: Toolchain) -> None:
    result = disassembler.assemble(WGMMA_PTX, "sm_90a")
    assert result.cubin is not None
    sass = disassembler.disassemble(result.cubin)
    assert set(sass.functions) == {"wgmma_probe"}
    function = sass.functions["wgmma_probe"]
    assert function.count("HGMMA") == 1
    assert sass.histogram()["HGMMA.64x16x16.F32.BF16"] == 1
    assert sass.bases()["HGMMA"] == sass.count("HGMMA") == 1
    assert function.bases()["WARPGROUP"] == 2  # ARRIVE and DEPBAR.LE
    hgmma = next(i for i in function.instructions if i.startswith("HGMMA"))
    assert "/*" not in hgmma and not hgmma.endswith(";")
    assert sum(function.opcodes.values()) == len(function.instructions)


def test_mma_sync_sm80_shows_hmma(disassembler: Toolchain) -> None:
    result = disassembler.assemble(MMA_SM80_PTX, "sm_80")
    assert result.cubin is not None
    sass = disassembler.disassemble(result.cubin)
    assert sass.count("HMMA") == 1
    assert any(opcode.startswith("HMMA.16816.F32") for opcode in sass.histogram())
    assert sass.count("HGMMA") == 0


def test_predicated_instructions_and_callees(disassembler: Toolchain) -> None:
    if disassembler.nvdisasm is None:
        pytest.skip("nvdisasm not found (cuobjdump does not list callees): pip install nvidia-cuda-nvdisasm")
    result = disassembler.assemble(SMEM_PTX, "sm_80")
    assert result.cubin is not None
    sass = disassembler.disassemble(result.cubin)
    predicated = [i for f in sass.functions.values() for i in f.instructions if i.startswith("@")]
    assert predicated
    for instruction in predicated:
        opcode = instruction.split()[1]
        assert sass.histogram()[opcode] >= 1
        assert not opcode.startswith("@")
    # nvdisasm names a callee placed in the entry's section "$entry$callee".
    assert set(sass.functions) == {"smem_probe", "$smem_probe$pick"}
    assert sass.functions["smem_probe"].count("BAR") == 1
    assert sass.functions["smem_probe"].count("CALL") == 1
    assert sass.functions["$smem_probe$pick"].count("RET") == 1


def test_cuobjdump_fallback(disassembler: Toolchain) -> None:
    if disassembler.cuobjdump is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    result = disassembler.assemble(WGMMA_PTX, "sm_90a")
    assert result.cubin is not None
    sass = dataclasses.replace(disassembler, nvdisasm=None).disassemble(result.cubin)
    assert sass.tool.startswith("cuobjdump")
    assert sass.functions["wgmma_probe"].count("HGMMA") == 1
    assert not any("/*" in i for i in sass.functions["wgmma_probe"].instructions)
    if disassembler.nvdisasm is not None:
        reference = disassembler.disassemble(result.cubin)
        assert sass.histogram() == reference.histogram()


def test_disassembling_garbage_is_an_environment_problem(disassembler: Toolchain) -> None:
    with pytest.raises(EnvironmentProblem, match="could not disassemble"):
        disassembler.disassemble(b"not an ELF file")


def test_a_porter_cuda_home_without_ptxas_is_bad_input_as_toolchain_is(tmp_path: Path) -> None:
    """#29: PORTER_CUDA_HOME naming a folder without ptxas was passed over for another ptxas."""
    (tmp_path / "empty").mkdir()
    for home, said in ((tmp_path / "empty", "no ptxas that runs"), (tmp_path / "nowhere", "no such folder")):
        with pytest.raises(InputError, match=f"PORTER_CUDA_HOME={home}: {said}"):
            find_toolchain({"PORTER_CUDA_HOME": str(home), "PATH": os.environ.get("PATH", "")})
    r = subprocess.run([sys.executable, "-m", "porter", "doctor"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PORTER_CUDA_HOME": str(tmp_path / "empty")})
    assert r.returncode == 2 and "PORTER_CUDA_HOME=" in r.stderr and "no ptxas that runs" in r.stderr
