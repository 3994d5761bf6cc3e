"""The gate's pure parts and its behaviour without a GPU (CI has none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.equivalence import block_tile
from porter.gate.spec import load_spec
from porter.gate.verdict import Gate, Status, overall_status
from porter.ptx.arch import cubin_runs_on

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("cubin", "device", "runs"),
    [
        ("sm_90", "sm_90", True),
        ("sm_90a", "sm_90", True),
        ("sm_80", "sm_86", True),  # same major, later minor
        ("sm_86", "sm_80", False),
        ("sm_80", "sm_90", False),  # another major never loads
        ("sm_100a", "sm_90", False),
        ("sm_100a", "sm_103", False),  # arch-specific: that exact arch only
        ("sm_100f", "sm_103", True),
    ],
)
def test_cubin_binary_compatibility(cubin: str, device: str, runs: bool) -> None:
    assert cubin_runs_on(cubin, device) is runs


def test_block_tile_follows_the_grid() -> None:
    assert block_tile((1000, 1000), (8, 8, 1)) == (128, 128)  # ragged GEMM: rounds up to the tile
    assert block_tile((8192, 4096), (8192, 1, 1)) == (1, 4096)  # one block per row
    assert block_tile((4097,), (17, 1, 1)) == (256,)
    assert block_tile((5, 5), (1, 1, 1)) is None


def test_status_words_combine_failed_first() -> None:
    gates = (Gate("assemble", Status.PASSED, ""), Gate("equivalence", Status.NOT_RUN, "no GPU"))
    assert overall_status(gates) == "not run"
    assert overall_status((*gates, Gate("interface", Status.FAILED, ""))) == "failed"
    assert overall_status((Gate("a", Status.PASSED, ""),)) == "passed"


def test_without_a_gpu_the_runtime_gates_are_not_run(toolchain, no_gpu) -> None:
    example = ROOT / "examples" / "gemm_bf16"
    verdict = run_check(example / "kernel_sm80.ptx", load_spec(example / "porter.toml"), CheckOptions(),
                        toolchain=toolchain, runner=no_gpu)
    assert verdict.status == "not run"
    assert verdict.gate("assemble").status == "passed"
    assert "no usable GPU" in verdict.reason
    assert verdict.signature_sass.get("HMMA", 0) > 0  # the static evidence is still there


def test_a_spec_that_does_not_match_the_params_fails_the_interface_gate(toolchain, tmp_path, no_gpu) -> None:
    example = ROOT / "examples" / "vector_add"
    text = (example / "porter.toml").read_text().replace('dtype = "i32"\nvalue = "n"', 'dtype = "i64"\nvalue = "n"')
    (tmp_path / "porter.toml").write_text(text)
    (tmp_path / "ref.py").write_text((example / "ref.py").read_text())
    verdict = run_check(example / "kernel.ptx", load_spec(tmp_path / "porter.toml"), CheckOptions(),
                        toolchain=toolchain, runner=no_gpu)
    assert verdict.status == "failed"
    assert verdict.gate("interface").status == "failed"
    assert any("8 bytes" in d or "4 bytes" in d for d in verdict.gate("interface").details)


def test_clusters_must_be_declared_by_the_entry(tmp_path, toolchain, no_gpu) -> None:
    kernel = ROOT / "examples" / "inspect" / "plain_sm90.ptx"  # declares .reqnctapercluster 2, 1, 1
    spec_text = """
[kernel]
entry = "bulk_scale_sm90"
[sizes]
n = 4096
[[params]]
name = "inp"
kind = "buffer"
dtype = "f32"
shape = ["n"]
[[params]]
name = "out"
kind = "buffer"
dtype = "f32"
shape = ["n"]
role = "out"
[[params]]
name = "scale"
kind = "scalar"
dtype = "f32"
value = "2"
[[params]]
name = "n"
kind = "scalar"
dtype = "u32"
value = "n"
[launch]
grid = ["round_up(ceil_div(n, 1024), 2)", 1, 1]
block = [128, 1, 1]
cluster = [CLUSTER, 1, 1]
"""
    (tmp_path / "ref.py").write_text("def f(args, sizes):\n    return {}\n")
    results = {}
    for size in (2, 4):
        (tmp_path / "porter.toml").write_text(spec_text.replace("CLUSTER", str(size)))
        verdict = run_check(kernel, load_spec(tmp_path / "porter.toml"), CheckOptions(), toolchain=toolchain,
                            runner=no_gpu)
        results[size] = verdict
    assert results[2].gate("interface").status == "passed"
    assert results[4].status == "failed"
    assert "clusters of (4, 1, 1) but the entry has .reqnctapercluster 2, 1, 1" in results[4].gate("interface").details[0]


def test_a_candidate_with_its_own_launch_is_checked_under_the_sources_spec(toolchain, tmp_path, no_gpu) -> None:
    """A Hopper port with another entry name, block shape and shared memory, against the sm_80 spec."""
    declared = ROOT / "examples" / "gemm_bf16" / "kernel_sm90a.ptx"  # carries its porter-launch line
    spec = load_spec(ROOT / "examples" / "gemm_bf16" / "porter.toml")
    plain = tmp_path / "plain.ptx"
    plain.write_text("".join(line for line in declared.read_text().splitlines(keepends=True)
                             if "porter-launch:" not in line))
    with pytest.raises(InputError, match=r"no \.entry 'gemm_bf16_sm80'"):
        run_check(plain, spec, CheckOptions(), toolchain=toolchain, runner=no_gpu)
    verdict = run_check(declared, spec, CheckOptions(), toolchain=toolchain, runner=no_gpu)
    assert verdict.entry == "gemm_bf16_sm90a"
    assert verdict.gate("interface").status == "passed" and verdict.gate("assemble").status == "passed"
    assert verdict.status == "not run" and verdict.signature_sass.get("HGMMA", 0) > 0


@pytest.mark.parametrize(
    ("kernel", "device_arch", "builds_for", "note"),
    [
        ("examples/gemm_bt_tile/kernel_sm90a.ptx", "sm_90", "sm_90a", ""),  # its own target runs here
        ("examples/gemm_bt_tile/kernel_sm80.ptx", "sm_90", "sm_90", "ran as sm_90"),  # forward-compatible PTX
        ("examples/gemm_bf16/kernel_sm100a.ptx", "sm_90", None, "needs a sm_100a GPU"),
    ],
)
def test_a_source_kernel_is_built_for_a_target_this_gpu_runs(kernel, device_arch, builds_for, note, toolchain) -> None:
    from porter.gate.check import runnable_cubin
    from porter.gate.runner.client import DeviceInfo
    from porter.ptx import read_ptx

    device = DeviceInfo("H200", device_arch, "9.0", 132, 50 << 20, 232448, "13.0", "13.0", "14.2.0")
    cubin, why = runnable_cubin(read_ptx(ROOT / kernel), None, device, toolchain, Path(kernel).name)
    if builds_for is None:
        assert cubin is None and note in why
    else:
        assert cubin is not None and why.startswith(note)
        expected = toolchain.assemble(read_ptx(ROOT / kernel).text, builds_for, filename="x.ptx")
        assert cubin == expected.cubin


def test_timings_at_several_sizes_are_told_apart_in_the_report() -> None:
    from porter.gate.verdict import Timing, Verdict
    from porter.report.terminal import render_verdict

    timings = (Timing("candidate", 0.2, 0.19, 0.21, 200, sizes="M=4096"), Timing("library", 0.18, 0.17, 0.19, 200, sizes="M=4096"),
               Timing("candidate", 1.6, 1.5, 1.7, 150, sizes="M=8192"), Timing("library", 1.5, 1.4, 1.6, 150, sizes="M=8192"))
    v = Verdict(kernel="k.ptx", entry="k", arch="sm_90a", status=Status.PASSED, reason="", gates=(Gate("timing", Status.PASSED, ""),),
                timings=timings, speedup_vs_library=0.9, signature_sass={"HGMMA": 4})
    text = render_verdict(v)
    assert "at" in text.split("median ms")[0].split("\n")[-1]
    assert [line.split()[1] for line in text.splitlines() if line.startswith(("candidate ", "library "))] == \
        ["M=4096", "M=4096", "M=8192", "M=8192"]
    assert "execution not measured (--native)" in text
