"""The two Triton examples: the spec porter spec writes for each (kept as written.toml), the spec a
user made of it by filling in only sizes, shapes, grid and reference (porter.toml), its reference,
and, on a GPU, porter check passing against it."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from porter._toml import tomllib
from porter.gate.scaffold import scaffold_file
from porter.gate.source import check_spec_matches
from porter.gate.spec import load_spec
from porter.ptx import read_ptx

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KERNELS = {"triton_matmul": "matmul_kernel.ptx", "triton_attention": "attn_fwd.ptx"}
# Specs for two of the kernels Triton compiled on the H200 (their semantics read off their .ttgir;
# no Triton source for them here): filled in from what porter spec wrote, for the GPU test below.
H200 = Path(__file__).resolve().parent / "data" / "compiled" / "triton_h200"
H200_SPECS = {"matmul": "matmul_kernel.ptx", "attn_fwd": "attn_fwd_kernel.ptx"}
ALL = [EXAMPLES / f / k for f, k in KERNELS.items()] + [H200 / f / k for f, k in H200_SPECS.items()]


@pytest.mark.parametrize("folder", sorted(KERNELS))
def test_written_toml_is_what_porter_spec_writes(folder: str) -> None:
    text, _ = scaffold_file(EXAMPLES / folder / KERNELS[folder])
    assert text == (EXAMPLES / folder / "written.toml").read_text()


@pytest.mark.parametrize("folder", sorted(KERNELS))
def test_the_user_changed_only_what_porter_could_not_know(folder: str) -> None:
    written = load_spec(EXAMPLES / folder / "written.toml", allow_todo=True)
    filled = load_spec(EXAMPLES / folder / "porter.toml")  # its todo list is empty: no refusal
    assert tomllib.loads((EXAMPLES / folder / "porter.toml").read_text())["todo"] == []
    for a, b in zip(written.params, filled.params, strict=True):
        assert (a.kind, a.dtype, a.role, a.bytes) == (b.kind, b.dtype, b.role, b.bytes), b.name
    w, f = written.launch, filled.launch
    assert (w.block, w.shared, w.cluster) == (f.block, f.shared, f.cluster)
    module = read_ptx(EXAMPLES / folder / KERNELS[folder])
    check_spec_matches(filled, module, EXAMPLES / folder / KERNELS[folder])  # what porter port checks first


def test_the_readme_shows_the_real_diff() -> None:
    folder = EXAMPLES / "triton_matmul"
    diff = "".join(difflib.unified_diff((folder / "written.toml").read_text().splitlines(keepends=True),
                                        (folder / "porter.toml").read_text().splitlines(keepends=True),
                                        "written.toml", "porter.toml", n=1))
    shown = re.search(r"```diff\n(.*?)```", (folder / "README.md").read_text(), re.S)
    assert shown is not None and shown.group(1) == diff


def _reference(folder: str, function: str):
    spec = importlib.util.spec_from_file_location(f"ref_{folder}", EXAMPLES / folder / "ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


def test_the_attention_reference_is_attention() -> None:
    """Against the textbook form: natural softmax, and the natural log-sum-exp over ln 2 (the
    reference works in base 2 with the kernel's f32 constant for log2(e): agreement to ~1e-7)."""
    rng = np.random.default_rng(5)
    z, h, n = 2, 3, 40
    q, k, v = (rng.uniform(-1, 1, (z, h, n, 64)).astype(np.float16) for _ in range(3))
    scale = float(np.float32(0.125))
    got = _reference("triton_attention", "attention")({"Q": q, "K": k, "V": v, "sm_scale": scale},
                                                        {"Z": z, "H": h, "N_CTX": n})
    s = np.einsum("zhmd,zhnd->zhmn", q.astype(np.float64), k.astype(np.float64)) * scale
    e = np.exp(s - s.max(-1, keepdims=True))
    expected_out = np.einsum("zhmn,zhnd->zhmd", e / e.sum(-1, keepdims=True), v.astype(np.float64))
    expected_lse = (np.log(e.sum(-1)) + s.max(-1)) / np.log(2)
    assert got["Out"].shape == (z, h, n, 64) and got["LSE"].shape == (z * h, n)
    assert np.allclose(got["Out"], expected_out, rtol=1e-6, atol=1e-8)
    assert np.allclose(got["LSE"], expected_lse.reshape(z * h, n), rtol=1e-6, atol=1e-8)


def test_the_matmul_reference_is_the_product() -> None:
    rng = np.random.default_rng(6)
    a, b = rng.uniform(-1, 1, (48, 32)).astype(np.float16), rng.uniform(-1, 1, (32, 16)).astype(np.float16)
    got = _reference("triton_matmul", "matmul")({"a": a, "b": b}, {"M": 48, "N": 16, "K": 32})["c"]
    assert np.allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12)


@pytest.mark.parametrize("kernel", ALL, ids=lambda k: k.parent.name)
def test_the_filled_specs_load_and_match_their_kernels(kernel: Path) -> None:
    check_spec_matches(load_spec(kernel.parent / "porter.toml"), read_ptx(kernel), kernel)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ALL, ids=lambda k: k.parent.name)
def test_porter_check_passes_on_the_gpu(kernel: Path, runner, toolchain) -> None:
    from porter.gate.check import CheckOptions, run_check

    verdict = run_check(kernel, load_spec(kernel.parent / "porter.toml"), CheckOptions(native=True),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("equivalence").status == "passed"
