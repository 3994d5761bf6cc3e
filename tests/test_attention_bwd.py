"""examples/attention_bwd: the attention backward pass as a hot loop of three kernels.

On the CPU: the spec loads and its [[kernels]] agree with the module's entries and params; the
kernels assemble for sm_80 and sm_90 without spilling (the sm_90a port for sm_90a; the sm_100a
tcgen05 port, never run, for sm_100a only, with UTCHMMA and no HMMA in its SASS and `porter
check --no-gpu` passing interface and assemble); the reference agrees with finite
differences of the forward loss (causal and not, ragged S, across its row chunks); and the whole
gate runs the hot loop on the fake device (tests/fake_cupy.py) with the three kernels played in
NumPy at the roundings the real ones make (f32 products, f16 P and dS), which is what the
tolerances were set for. On the GPU (`gpu` marker): `porter check` of the real kernels passes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fake_cupy
import numpy as np
import pytest
from fake_cupy import at

from porter.gate.check import CheckOptions, run_check
from porter.gate.inputs import make_args
from porter.gate.runner.fake import InProcessRunner
from porter.gate.runner.jobs import job_case, job_repeat, job_time
from porter.gate.runner.state import WorkerState
from porter.gate.spec import check_against_module, load_spec
from porter.ptx import read_ptx

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "attention_bwd"
KERNEL = EXAMPLE / "kernel_sm80.ptx"
ENTRIES = ("attn_bwd_preprocess", "attn_bwd_dkdv", "attn_bwd_dq")


def _ref() -> Any:
    spec = importlib.util.spec_from_file_location("attention_bwd_ref", EXAMPLE / "ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ref = _ref()


# --- the spec and the module ---------------------------------------------------------------------

def test_the_spec_loads_and_its_kernels_match_the_module() -> None:
    spec = load_spec(EXAMPLE / "porter.toml")
    assert tuple(k.entry for k in spec.kernels) == ENTRIES
    assert spec.kernels[0].args == ("O", "dO", "Delta", "S", "D")
    assert spec.kernels[1].args == ("Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV", "S", "D", "causal", "scale")
    assert spec.kernels[2].args == ("Q", "K", "V", "dO", "LSE", "Delta", "dQ", "S", "D", "causal", "scale")
    module = read_ptx(KERNEL)
    assert {e.name for e in module.entries} == set(ENTRIES)
    assert check_against_module(spec, module) == []
    by_name = {p.name: p for p in spec.params}
    assert by_name["O"].derive is not None and by_name["LSE"].derive is not None
    assert by_name["Delta"].kind == "scratch"
    assert all(by_name[name].deterministic for name in ("dQ", "dK", "dV"))  # no atomics anywhere
    sets = spec.size_sets()
    assert {s["D"] for s in sets} == {64, 128} and {s["causal"] for s in sets} == {0, 1}
    assert {1, 77, 1000} <= {s["S"] for s in sets} and any(s["S"] % 64 for s in sets)
    timed = spec.default_sizes()
    assert (timed["B"], timed["H"], timed["S"], timed["D"]) == (4, 16, 4096, 128)
    assert spec.flops(timed) == 10 * 4 * 16 * 4096**2 * 128
    assert spec.flops({**timed, "causal": 1}) == spec.flops(timed) // 2


def test_the_size_contract_refuses_another_head_dimension(tmp_path: Path) -> None:
    folder = tmp_path / "attention_bwd"
    shutil.copytree(EXAMPLE, folder)
    text = (folder / "porter.toml").read_text()
    (folder / "porter.toml").write_text(text.replace("D = 128\ncausal = 0\n", "D = 96\ncausal = 0\n", 1))
    with pytest.raises(Exception, match=r"kernel\.require\[0\]"):
        load_spec(folder / "porter.toml")


def _ptxas(toolchain: Any, arch: str, kernel: Path = KERNEL) -> str:
    """ptxas -v of ``kernel`` for ``arch`` (the project's ptxas: the pip wheel where CI has no other)."""
    run = subprocess.run([str(toolchain.ptxas.path), "-v", f"-arch={arch}", str(kernel), "-o", os.devnull],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stderr


def _no_spills(info: str) -> None:
    assert sorted(re.findall(r"Compiling entry function '(\w+)'", info)) == sorted(ENTRIES)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    assert len(spills) == 3 and all(s == ("0", "0") for s in spills), info


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_kernels_assemble_without_spilling(toolchain, arch: str) -> None:
    _no_spills(_ptxas(toolchain, arch))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in KERNEL.read_text()
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in KERNEL.read_text()
    assert "cp.async.cg.shared.global" in KERNEL.read_text()


def test_the_sm90a_port_assembles_without_spilling_and_uses_wgmma(toolchain) -> None:
    """kernel_sm90a.ptx (passes on the H200): the same three entries, sm_90a only, no spills."""
    port = EXAMPLE / "kernel_sm90a.ptx"
    _no_spills(_ptxas(toolchain, "sm_90a", port))
    text = port.read_text()
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in text  # S^T, dP^T, S, dP (SS)
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in text  # dV, dK, dQ at D = 128 (RS)
    assert text.count("// porter-kernel:") == 3


# --- the sm_100a (tcgen05) port: assembled and SASS-inspected only (no Blackwell GPU here) -------

PORT_SM100A = EXAMPLE / "kernel_sm100a.ptx"


def test_the_sm100a_port_assembles_for_sm100a_only_without_spilling(toolchain) -> None:
    """kernel_sm100a.ptx (never run: no sm_100a GPU): the same three entries, no spills, tcgen05."""
    _no_spills(_ptxas(toolchain, "sm_100a", PORT_SM100A))
    text = PORT_SM100A.read_text()
    assert "tcgen05.mma.cta_group::1.kind::f16" in text
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in text
    assert "tcgen05.dealloc.cta_group::1.sync.aligned.b32" in text
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one" in text
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in text
    assert "wgmma" not in text and "mma.sync" not in text
    assert text.count("// porter-kernel:") == 3
    # sm_100a-specific: Hopper refuses it as is and when retargeted
    run = subprocess.run([str(toolchain.ptxas.path), "-arch=sm_90a", str(PORT_SM100A), "-o", os.devnull],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    retargeted = toolchain.assemble(text.replace(".target sm_100a", ".target sm_90a"), "sm_90a",
                                    filename=PORT_SM100A.name)
    assert not retargeted.ok and "tcgen05" in retargeted.log


def test_the_sm100a_port_sass_has_utchmma_and_no_hmma(toolchain) -> None:
    if not toolchain.can_disassemble:
        pytest.skip("no nvdisasm or cuobjdump (pip install nvidia-cuda-nvdisasm)")
    result = toolchain.assemble(PORT_SM100A.read_text(), "sm_100a", filename=PORT_SM100A.name)
    assert result.ok and result.cubin is not None
    sass = toolchain.disassemble(result.cubin)  # counts by opcode base: every UTCHMMA.* is a UTCHMMA
    # dkdv: S^T, dP^T (D / 16 each), dV, dK (4 each); dq: S, dP (D / 16 each), dQ (4); D = 64 and 128.
    assert sass.count("UTCHMMA") == (16 + 24) + (12 + 20), sass.histogram()
    assert sass.count("UTCBAR") >= 4 and sass.count("LDTM") >= 1
    assert sass.count("HMMA") == 0 and sass.count("HGMMA") == 0


def test_porter_check_without_a_gpu_passes_interface_and_assemble_for_the_sm100a_port() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # never touch a GPU from this test
    cmd = [sys.executable, "-m", "porter", "check", str(PORT_SM100A), "--arch", "sm_100a", "--no-gpu", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    verdict = json.loads(run.stdout)
    gates = {g["name"]: g["status"] for g in verdict["gates"]}
    assert gates["interface"] == "passed" and gates["assemble"] == "passed", verdict
    assert verdict["status"] == "not run" and gates["equivalence"] == "not run", verdict  # runtime gates
    assert verdict["signature_sass"]["UTCHMMA"] > 0


# --- the reference against finite differences ----------------------------------------------------

def _loss(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray, scale: float, causal: bool) -> float:
    o, _ = ref.forward(q, k, v, scale, causal)
    return float((o * do).sum())


def _brute_force_grads(q, k, v, do, scale, causal, h=1e-6):
    """Central differences of sum(dO * O) in every element of Q, K and V."""
    grads = []
    for which in range(3):
        x = [q, k, v][which]
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            args = [a.copy() for a in (q, k, v)]
            args[which][idx] += h
            up = _loss(*args, do, scale, causal)
            args[which][idx] -= 2 * h
            down = _loss(*args, do, scale, causal)
            g[idx] = (up - down) / (2 * h)
        grads.append(g)
    return grads


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("s", [1, 5, 7])
def test_the_reference_is_the_gradient_of_the_forward(causal: bool, s: int, monkeypatch) -> None:
    rng = np.random.default_rng(s + 10 * causal)
    b, h, d = 1, 2, 4
    q, k, v, do = (rng.standard_normal((b, h, s, d)) for _ in range(4))
    scale = d**-0.5
    # chunks of 3 query rows: the chunking and the causal key ranges are exercised too
    monkeypatch.setattr(ref, "SCORES_PER_CHUNK", 3 * b * h * s)
    o, lse = ref.forward(q, k, v, scale, causal)
    dq, dk, dv = ref.backward(q, k, v, o, do, lse, scale, causal)
    want = _brute_force_grads(q, k, v, do, scale, causal)
    for got, expected in zip((dq, dk, dv), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_the_reference_matches_the_closed_form_of_one_query() -> None:
    """S = 1: P = 1, so dV = dO, dP = dO.V, Delta = dO.O = dO.V, dS = 0: dQ = dK = 0."""
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((2, 3, 1, 8)) for _ in range(4))
    o, lse = ref.forward(q, k, v, 0.5, True)
    np.testing.assert_allclose(o, v)
    np.testing.assert_allclose(lse, 0.5 * (q * k).sum(-1))
    dq, dk, dv = ref.backward(q, k, v, o, do, lse, 0.5, True)
    np.testing.assert_allclose(dv, do)
    np.testing.assert_allclose(dq, 0, atol=1e-12)
    np.testing.assert_allclose(dk, 0, atol=1e-12)


def test_the_derived_inputs_are_the_forward_of_the_drawn_ones() -> None:
    spec = load_spec(EXAMPLE / "porter.toml")
    sizes = {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}
    args = make_args(spec, sizes, seed=3)
    assert args["O"].dtype == np.float16 and args["LSE"].dtype == np.float32
    assert isinstance(args["scale"], np.float32) and args["scale"] == np.float32(0.125)
    q, k, v = (args[n].astype(np.float64) for n in "QKV")
    o, lse = ref.forward(q, k, v, float(args["scale"]), True)
    np.testing.assert_allclose(args["O"].astype(np.float64), o, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(args["LSE"].astype(np.float64), lse, rtol=1e-6)
    # the first row sees its own key only
    np.testing.assert_allclose(args["LSE"][..., 0], float(args["scale"]) * (q[..., 0, :] * k[..., 0, :]).sum(-1),
                               rtol=1e-5)


# --- the whole gate on a fake device, the kernels played in NumPy --------------------------------

def _f16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float16).astype(np.float32)


def _heads(pointer: Any, grid: Any, S: int, D: int, dtype: Any = np.float16) -> np.ndarray:
    bh = int(grid[1])
    return at(pointer, bh * S * D, dtype).reshape(bh, S, D)


def _probabilities(q: np.ndarray, k: np.ndarray, lse: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    s = q @ k.swapaxes(-1, -2)
    p = np.exp2(s * np.float32(scale * 1.4426950408889634) - lse[..., None] * np.float32(1.4426950408889634))
    if causal:
        p = np.where(np.tril(np.ones(p.shape[-2:], dtype=bool)), p, np.float32(0))
    return p.astype(np.float32)


def play_preprocess(grid, block, out, dO, Delta, S, D) -> None:
    S, D = int(S), int(D)
    o, do = (_heads(x, grid, S, D).astype(np.float32) for x in (out, dO))
    at(Delta, int(grid[1]) * S, np.float32)[:] = (o * do).sum(-1).ravel()


def _loaded(grid, S, D, Q, K, V, dO, LSE, Delta):
    q, k, v, do = (_heads(x, grid, S, D).astype(np.float32) for x in (Q, K, V, dO))
    lse = at(LSE, int(grid[1]) * S, np.float32).reshape(-1, S)
    delta = at(Delta, int(grid[1]) * S, np.float32).reshape(-1, S)  # the preprocess's scratch
    return q, k, v, do, lse, delta


def play_dkdv(grid, block, Q, K, V, dO, LSE, Delta, dK, dV, S, D, causal, scale) -> None:
    S, D = int(S), int(D)
    q, k, v, do, lse, delta = _loaded(grid, S, D, Q, K, V, dO, LSE, Delta)
    p = _f16(_probabilities(q, k, lse, float(scale), bool(int(causal))))  # P rounded, as packed
    ds = _f16(p * (do @ v.swapaxes(-1, -2) - delta[..., None]))
    _heads(dV, grid, S, D)[:] = (p.swapaxes(-1, -2) @ do).astype(np.float16)
    _heads(dK, grid, S, D)[:] = (np.float32(scale) * (ds.swapaxes(-1, -2) @ q)).astype(np.float16)


def play_dq(grid, block, Q, K, V, dO, LSE, Delta, dQ, S, D, causal, scale) -> None:
    S, D = int(S), int(D)
    q, k, v, do, lse, delta = _loaded(grid, S, D, Q, K, V, dO, LSE, Delta)
    p = _probabilities(q, k, lse, float(scale), bool(int(causal)))
    ds = _f16(p * (do @ v.swapaxes(-1, -2) - delta[..., None]))
    _heads(dQ, grid, S, D)[:] = (np.float32(scale) * (ds @ k)).astype(np.float16)


def _small_spec(tmp_path: Path) -> Path:
    """The example's spec at sizes NumPy plays in seconds: the timed size and the two S = 2048
    entries brought down, no torch baseline."""
    folder = tmp_path / "attention_bwd"
    shutil.copytree(EXAMPLE, folder)
    text = (folder / "porter.toml").read_text()
    text = text.replace("B = 4\nH = 16\nS = 4096\nD = 128\n", "B = 1\nH = 2\nS = 200\nD = 128\n", 1)
    text = text.replace("S = 2048", "S = 300")
    text = text[: text.index("[baseline]")]
    (folder / "porter.toml").write_text(text)
    return folder / "porter.toml"


def _gate(toolchain: Any, spec_path: Path, bodies: dict[str, Any], **options: Any):
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS.update(bodies)
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    runner = InProcessRunner({"case": lambda job: job_case(state, job), "time": lambda job: job_time(state, job),
                              "repeat": lambda job: job_repeat(state, job)})
    try:
        return run_check(spec_path.parent / "kernel_sm80.ptx", load_spec(spec_path), CheckOptions(**options),
                         toolchain=toolchain, runner=runner)
    finally:
        state.close()


PLAYED = {"attn_bwd_preprocess": play_preprocess, "attn_bwd_dkdv": play_dkdv, "attn_bwd_dq": play_dq}


def test_the_hot_loop_passes_the_gate_played_at_the_kernels_roundings(toolchain, tmp_path: Path) -> None:
    verdict = _gate(toolchain, _small_spec(tmp_path), dict(PLAYED))
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith(
        "3 kernels in sequence (attn_bwd_preprocess, attn_bwd_dkdv, attn_bwd_dq)")
    names = {c.values for c in verdict.cases}
    assert {"peaked", "large"} <= names  # the spec's own value cases ran (porter's wide case is off)


def test_a_dkdv_that_ignores_the_causal_mask_fails(toolchain, tmp_path: Path) -> None:
    def unmasked(grid, block, *args):
        play_dkdv(grid, block, *args[:-2], 0, args[-1])

    verdict = _gate(toolchain, _small_spec(tmp_path), {**PLAYED, "attn_bwd_dkdv": unmasked}, timing=False)
    assert verdict.status == "failed" and "dK" in verdict.reason


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the garbage Delta overflows, as it should
def test_a_dq_that_reads_delta_before_the_preprocess_wrote_it_fails(toolchain, tmp_path: Path) -> None:
    """Delta is scratch (random before the hot loop): a dq kernel run before the preprocess reads
    garbage. Played here by a preprocess that writes nothing."""
    verdict = _gate(toolchain, _small_spec(tmp_path), {**PLAYED, "attn_bwd_preprocess": lambda *a: None},
                    timing=False)
    assert verdict.status == "failed" and "dQ" in verdict.reason


# --- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
def test_the_backward_passes_porter_check_on_the_gpu(runner, toolchain) -> None:
    verdict = run_check(KERNEL, load_spec(EXAMPLE / "porter.toml"), CheckOptions(), toolchain=toolchain,
                        runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith("3 kernels in sequence")
    assert verdict.gate("timing").status == "passed", verdict.gate("timing")


@pytest.mark.gpu
def test_the_backward_passes_timed_causal_and_sanitized(runner, toolchain) -> None:
    options = CheckOptions(sanitize=True, time_at=({"causal": 1},))
    verdict = run_check(KERNEL, load_spec(EXAMPLE / "porter.toml"), options, toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("sanitize").status == "passed", verdict.gate("sanitize")


@pytest.mark.gpu
def test_the_sm90a_port_passes_with_wgmma_executed_and_every_sanitizer_clean(runner, toolchain) -> None:
    options = CheckOptions(arch="sm_90a", native=True, sanitize=True, timing=False)
    verdict = run_check(EXAMPLE / "kernel_sm90a.ptx", load_spec(EXAMPLE / "porter.toml"), options,
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("native").status == "passed", verdict.gate("native")  # HGMMA executed, doing the work
    # Each launch counted once: the five products of the spec's FLOPs and the dq kernel's two
    # recomputed ones (7/5), not twice that (ncu lists every launch of a hot loop twice).
    assert "did 140.0% of the spec's" in verdict.gate("native").summary, verdict.gate("native")
    assert verdict.gate("sanitize").status == "passed", verdict.gate("sanitize")


# --- the fragment arithmetic of kernel_sm80.cu, replayed on one warp in NumPy ---------------------
# A model of the source, not the PTX: the swizzled tile layout, the lane addresses (lane_xor and
# kstep_addr), ldmatrix and mma.m16n8k16 as the PTX ISA defines them, and the accumulator-to-A
# packing. If any index here is wrong, the products below are.

def _swizzled(tile: np.ndarray) -> np.ndarray:
    """A [64, D] f16 tile as the kernels store it in shared memory (load_tile's swz)."""
    rows, d = tile.shape
    raw = np.zeros(rows * d, dtype=np.float16)
    for r in range(rows):
        for c in range(d // 8):
            at_ = (r * 2 * d + ((c ^ (r & 7)) << 4)) // 2
            raw[at_: at_ + 8] = tile[r, c * 8: c * 8 + 8]
    return raw


def _ldsm(smem: np.ndarray, addrs: list[int], trans: bool) -> list[list[tuple[float, float]]]:
    """ldmatrix.x4: regs[lane][i] = the two f16 lane `lane` receives from matrix i."""
    mats = [np.stack([smem[addrs[8 * i + j] // 2: addrs[8 * i + j] // 2 + 8] for j in range(8)]) for i in range(4)]
    out = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        out.append([(m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1]) for m in mats])
    return out


def _mma(acc: np.ndarray, a: list, b0: list, b1: list) -> None:
    """acc[lane] (4 f32) += A . B with fragments per lane, as mma.m16n8k16.row.col defines them."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        A[g, 2 * t: 2 * t + 2], A[g + 8, 2 * t: 2 * t + 2] = a[lane][0], a[lane][1]
        A[g, 2 * t + 8: 2 * t + 10], A[g + 8, 2 * t + 8: 2 * t + 10] = a[lane][2], a[lane][3]
        B[2 * t: 2 * t + 2, g], B[2 * t + 8: 2 * t + 10, g] = b0[lane], b1[lane]
    C = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        acc[lane] += [C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]]


def _lane_xor(addr: int, lane: int) -> int:
    return addr ^ ((lane & 7) << 4)


def _kstep(addr: int, step: int) -> int:
    return (addr ^ ((step & 3) << 5)) + ((step >> 2) << 7)


def _xyt(x: np.ndarray, xrow0: int, y: np.ndarray) -> np.ndarray:
    """xyt_16x64: acc[lane][nt] for X[xrow0:xrow0+16] . Y^T (x, y: [64, D] tiles)."""
    d = x.shape[1]
    sx, sy = _swizzled(x), _swizzled(y)
    acc = np.zeros((8, 32, 4))
    a0 = [_lane_xor((xrow0 + (lane & 15)) * 2 * d + ((lane >> 4) << 4), lane) for lane in range(32)]
    b0 = [_lane_xor(((lane & 7) + ((lane >> 4) << 3)) * 2 * d + (((lane >> 3) & 1) << 4), lane) for lane in range(32)]
    for kk in range(d // 16):
        a = _ldsm(sx, [_kstep(a0[lane], kk) for lane in range(32)], trans=False)
        for np_ in range(4):
            b = _ldsm(sy, [_kstep(b0[lane], kk) + np_ * 16 * 2 * d for lane in range(32)], trans=False)
            _mma(acc[2 * np_], a, [r[0] for r in b], [r[1] for r in b])
            _mma(acc[2 * np_ + 1], a, [r[2] for r in b], [r[3] for r in b])
    return acc


def _as_a(acc: np.ndarray) -> list[list]:
    """The packing of an 8-n-tile accumulator into 4 k-steps of A fragments (pa / dsa)."""
    return [[[(acc[2 * kk][lane][0], acc[2 * kk][lane][1]), (acc[2 * kk][lane][2], acc[2 * kk][lane][3]),
              (acc[2 * kk + 1][lane][0], acc[2 * kk + 1][lane][1]), (acc[2 * kk + 1][lane][2], acc[2 * kk + 1][lane][3])]
             for lane in range(32)] for kk in range(4)]


def _ay(a: list, y: np.ndarray) -> np.ndarray:
    """ay_16xD: acc[lane][dt] for A[16 x 64] . Y (y: a [64, D] tile)."""
    d = y.shape[1]
    sy = _swizzled(y)
    acc = np.zeros((d // 8, 32, 4))
    b0 = [_lane_xor((lane & 15) * 2 * d + ((lane >> 4) << 4), lane) for lane in range(32)]
    for kk in range(4):
        for dp in range(d // 16):
            b = _ldsm(sy, [_kstep(b0[lane], dp) + kk * 16 * 2 * d for lane in range(32)], trans=True)
            _mma(acc[2 * dp], a[kk], [r[0] for r in b], [r[1] for r in b])
            _mma(acc[2 * dp + 1], a[kk], [r[2] for r in b], [r[3] for r in b])
    return acc


def _unfragment(acc: np.ndarray) -> np.ndarray:
    """A [ntiles, 32, 4] accumulator as the 16 x (8 ntiles) matrix it holds."""
    out = np.zeros((16, 8 * acc.shape[0]))
    for nt in range(acc.shape[0]):
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            out[g, nt * 8 + 2 * t: nt * 8 + 2 * t + 2] = acc[nt][lane][:2]
            out[g + 8, nt * 8 + 2 * t: nt * 8 + 2 * t + 2] = acc[nt][lane][2:]
    return out


@pytest.mark.parametrize("d", [64, 128])
def test_the_kernels_fragment_arithmetic_computes_the_products(d: int) -> None:
    rng = np.random.default_rng(d)
    x, y, z = (rng.integers(-4, 5, (64, d)).astype(np.float16) for _ in range(3))  # exact in f16 and f32
    w = 2  # the third warp: rows 32..47 of the block's own tile
    s = _xyt(x, 16 * w, y)  # e.g. S^T = K Q^T for the warp's 16 keys
    np.testing.assert_array_equal(_unfragment(s), x[16 * w: 16 * w + 16].astype(np.float64) @ y.T.astype(np.float64))
    p = np.clip(s, -8, 8)  # values that stay exact once packed to f16, like P^T after the exp
    dv = _ay(_as_a(p), z)  # e.g. dV += P^T dO
    np.testing.assert_array_equal(_unfragment(dv), _unfragment(p) @ z.astype(np.float64))
