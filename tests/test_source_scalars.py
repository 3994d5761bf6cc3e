"""A spec scalar the kernel never reads is reported: the kernel cannot honour it (it folded a value
in). Hand-written PTX entries against vector_add's spec (x, y, out, alpha drawn per case, n)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from porter.gate.check import CheckOptions, run_check
from porter.gate.source import reads_param, unread_scalars
from porter.gate.spec import load_spec
from porter.ptx import parse_ptx

VECTOR_ADD = Path(__file__).resolve().parent.parent / "examples" / "vector_add"

HEAD = """.version 7.0
.target sm_80
.address_size 64

.visible .entry {name}(
\t.param .u64 {name}_param_0,
\t.param .u64 {name}_param_1,
\t.param .u64 {name}_param_2,
\t.param .f32 {name}_param_3,
\t.param .u32 {name}_param_4
)
{
\t.reg .pred %p<2>;
\t.reg .f32 %f<5>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<12>;
\tld.param.u64 %rd1, [{name}_param_0];
\tld.param.u64 %rd2, [{name}_param_1];
\tld.param.u64 %rd3, [{name}_param_2];
\tld.param.u32 %r2, [{name}_param_4];
"""
ALPHA_LOADED = "\tld.param.f32 %f1, [{name}_param_3];\n"
ALPHA_FOLDED = "\tmov.f32 %f1, 0f3FC00000;\n"  # alpha = 1.5, compiled in
ALPHA_BY_ADDRESS = "\tmov.u64 %rd11, {name}_param_3;\n\tld.param.f32 %f1, [%rd11];\n"
BODY = """\tmov.u32 %r3, %ctaid.x;
\tmov.u32 %r4, %ntid.x;
\tmov.u32 %r5, %tid.x;
\tmad.lo.s32 %r1, %r3, %r4, %r5;
\tsetp.ge.s32 %p1, %r1, %r2;
\t@%p1 bra $L__BB0_2;
\tcvta.to.global.u64 %rd4, %rd1;
\tmul.wide.s32 %rd5, %r1, 4;
\tadd.s64 %rd6, %rd4, %rd5;
\tld.global.f32 %f2, [%rd6];
\tcvta.to.global.u64 %rd7, %rd2;
\tadd.s64 %rd8, %rd7, %rd5;
\tld.global.f32 %f3, [%rd8];
\tfma.rn.f32 %f4, %f2, %f1, %f3;
\tcvta.to.global.u64 %rd9, %rd3;
\tadd.s64 %rd10, %rd9, %rd5;
\tst.global.f32 [%rd10], %f4;
$L__BB0_2:
\tret;
}
"""


def kernel(alpha: str, name: str = "vector_add") -> str:
    return (HEAD + alpha + BODY).replace("{name}", name)


def test_a_scalar_folded_in_as_a_constant_is_reported() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    assert unread_scalars(spec, parse_ptx(kernel(ALPHA_FOLDED))) == [
        "scalar alpha is never read by vector_add: the kernel cannot honour it (folded in as a constant? a "
        "compile-time constant is declared const = true)"]


@pytest.mark.parametrize("alpha", [ALPHA_LOADED, ALPHA_BY_ADDRESS,
                                   "\tld.param.f32 %f1, [vector_add_param_3+0];\n"])
def test_a_scalar_read_by_load_or_by_address_is_not_reported(alpha: str) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    assert unread_scalars(spec, parse_ptx(kernel(alpha))) == []


def test_a_size_the_kernel_gets_elsewhere_is_not_reported() -> None:
    """``n`` follows the sizes (``value = "n"``): the grid or a tensor map may carry it, and the
    sweep's and the drawn sizes check it; alpha is drawn per case and has no other way in."""
    spec = load_spec(VECTOR_ADD / "porter.toml")
    unread_n = kernel(ALPHA_FOLDED).replace("\tld.param.u32 %r2, [vector_add_param_4];\n",
                                            "\tmov.u32 %r2, 4096;\n")
    warnings = unread_scalars(spec, parse_ptx(unread_n))
    assert len(warnings) == 1 and warnings[0].startswith("scalar alpha ")


def test_one_params_name_is_not_read_in_anothers() -> None:
    entry = parse_ptx(kernel(ALPHA_LOADED, "k")).entry("k")
    assert reads_param(entry, "k_param_3") and not reads_param(entry, "k_param_")
    assert not reads_param(entry, "param_3") and not reads_param(entry, "k_param_30")


def spec_folder(tmp_path: Path, ptx: str, *, old: str = "", new: str = "") -> Path:
    folder = tmp_path / "vector_add"
    shutil.copytree(VECTOR_ADD, folder)
    (folder / "kernel.ptx").write_text(ptx)
    if old:
        text = (folder / "porter.toml").read_text()
        assert old in text
        (folder / "porter.toml").write_text(text.replace(old, new, 1))
    return folder


def test_a_const_scalar_is_compiled_in_on_purpose(tmp_path: Path) -> None:
    folder = spec_folder(tmp_path, kernel(ALPHA_FOLDED), old='range = [-2.0, 2.0]',
                         new='value = 1.5\nconst = true')
    assert unread_scalars(load_spec(folder / "porter.toml"), parse_ptx(kernel(ALPHA_FOLDED))) == []


def test_a_scalar_read_by_one_kernel_of_a_hot_loop_is_read(tmp_path: Path) -> None:
    launch = 'grid = ["ceil_div(n, 256)", 1, 1]\nblock = [256, 1, 1]\nshared = 0\n'
    args = 'args = ["x", "y", "out", "alpha", "n"]\n'
    steps = (f'[[kernels]]\nentry = "first"\n{launch}{args}\n[[kernels]]\nentry = "second"\n{launch}{args}')
    folder = spec_folder(tmp_path, "", old="[launch]\n" + launch, new=steps)
    text = (folder / "porter.toml").read_text().replace('entry = "vector_add"', 'entry = "first"', 1)
    (folder / "porter.toml").write_text(text)
    spec = load_spec(folder / "porter.toml")
    second = kernel(ALPHA_FOLDED, "second").split(".address_size 64\n", 1)[1]
    assert unread_scalars(spec, parse_ptx(kernel(ALPHA_LOADED, "first") + second)) == []
    folded = kernel(ALPHA_FOLDED, "first") + second
    assert unread_scalars(spec, parse_ptx(folded)) == [
        "scalar alpha is never read by first or second: the kernel cannot honour it (folded in as a constant? a "
        "compile-time constant is declared const = true)"]


def test_the_warning_reaches_the_verdict(tmp_path: Path, toolchain: Any) -> None:
    folder = spec_folder(tmp_path, kernel(ALPHA_FOLDED))
    verdict = run_check(folder / "kernel.ptx", load_spec(folder / "porter.toml"), CheckOptions(emulate=False),
                        toolchain=toolchain, runner=None)
    assert verdict.gate("interface").status == "passed" and verdict.gate("assemble").status == "passed"
    assert any(w.startswith("scalar alpha is never read by vector_add") for w in verdict.warnings)
