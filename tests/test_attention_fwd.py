"""examples/attention_fwd: the spec, the reference, the sm_80 kernel (statically, and through a CPU
emulation of its code), the bench task; and, on a GPU, porter's check of the kernel.

The CPU tests need ptxas (the toolchain fixture skips without it). The emulation
(tests/attention_emulator.py) runs the kernel's own index arithmetic with the PTX ISA's fragment
layouts; the GPU tests at the end are what proves the kernel.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from porter.bench.suite import find_tasks
from porter.gate.scaffold import choose_entry, scaffold_file
from porter.gate.spec import check_against_entry, load_spec
from porter.ptx import read_ptx

ROOT = Path(__file__).resolve().parent.parent
FAMILY = ROOT / "examples" / "attention_fwd"
SPEC = FAMILY / "porter.toml"
SM80 = FAMILY / "kernel_sm80.ptx"
PTX_FILES = sorted(FAMILY.glob("*.ptx"))

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
import attention_emulator as emu  # noqa: E402
from regen_examples import parse_directive  # noqa: E402

_ref_spec = importlib.util.spec_from_file_location("attention_fwd_ref", FAMILY / "ref.py")
ref = importlib.util.module_from_spec(_ref_spec)
_ref_spec.loader.exec_module(ref)  # examples/attention_fwd/ref.py, under a name of its own

# --- the spec ------------------------------------------------------------------------------------

def test_the_spec_loads_and_its_sweep_covers_the_contract() -> None:
    spec = load_spec(SPEC)
    assert spec.entry == "attn_fwd"
    assert spec.default_sizes() == {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 0}
    sets = spec.size_sets()
    assert {(z["D"], z["causal"]) for z in sets} == {(64, 0), (64, 1), (128, 0), (128, 1)}
    lengths = {z["S"] for z in sets}
    assert {1, 77, 1000} <= lengths
    assert any(s % 64 and s > 128 for s in lengths)  # ragged past one tile
    for d in (64, 128):  # each head size meets ragged lengths, causal and not
        assert {z["causal"] for z in sets if z["D"] == d and z["S"] % 64} == {0, 1}
    assert all(z["B"] * z["H"] <= 6 for z in sets)  # small for the float64 reference


def test_the_launch_cost_and_tolerances_at_the_timed_size() -> None:
    spec = load_spec(SPEC)
    at = spec.default_sizes()
    dims = spec.launch_dims(at)
    assert dims.grid == (32, 64, 1) and dims.block == (256, 1, 1) and dims.shared == 167936  # 164 KiB: the tiles and the merge buffer
    assert spec.launch_dims({**at, "D": 64}).shared == 86016
    assert spec.flops(at) == 4 * 4 * 16 * 4096 * 4096 * 128
    assert spec.flops({**at, "causal": 1}) == spec.flops(at) // 2
    assert spec.bytes(at) == 4 * 2 * 4 * 16 * 4096 * 128 + 4 * 4 * 16 * 4096
    assert spec.tolerance("O", at) == (5e-4, 5e-3)
    assert spec.tolerance("LSE", at) == (1e-4, 1e-5)
    assert math.isclose(spec.scalar_value("scale", at), 128 ** -0.5)
    assert {c.name for c in spec.value_cases()} >= {"large_logits", "large_positive_logits", "offset_v", "wide"}


@pytest.mark.parametrize("sizes", ["D = 96\ncausal = 0", "D = 128\ncausal = 2"])
def test_sizes_outside_the_kernels_contract_are_refused(sizes: str, tmp_path: Path) -> None:
    from porter.errors import InputError

    text = SPEC.read_text().replace("D = 128\ncausal = 0", sizes, 1)  # the first is [sizes]
    (tmp_path / "porter.toml").write_text(text)
    (tmp_path / "ref.py").write_text((FAMILY / "ref.py").read_text())
    with pytest.raises(InputError, match=r"kernel\.require\[\d\]: the size contract"):
        load_spec(tmp_path / "porter.toml")


# --- the kernel, statically ----------------------------------------------------------------------

def _targets(ptx: Path) -> tuple[str, ...]:
    build = parse_directive(ptx.with_suffix(".cu"))
    assert build is not None and build.out == ptx, f"{ptx.name}: no porter-regen directive in its .cu"
    return build.ptxas


@pytest.mark.parametrize("ptx", PTX_FILES, ids=lambda p: p.name)
def test_every_ptx_assembles_for_its_targets_with_no_spills(toolchain, ptx: Path) -> None:
    module = read_ptx(ptx)
    targets = _targets(ptx)
    assert targets, f"{ptx.name}: its porter-regen directive names no ptxas= targets"
    for arch in targets:
        result = toolchain.assemble(ptx.read_text(encoding="utf-8"), arch, filename=ptx.name)
        assert result.ok, f"{arch}: " + ("\n".join(map(str, result.errors)) or result.log)
        for entry in module.kernels:
            r = result.resources[entry.name]
            assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), f"{arch}: {result.log}"


def test_the_sm80_kernel_is_mma_sync_ldmatrix_and_cp_async(toolchain) -> None:
    text = SM80.read_text(encoding="utf-8")
    module = read_ptx(SM80)
    assert module.arch == "sm_80" and [e.name for e in module.kernels] == ["attn_fwd"]
    # one template instantiation per head size, 32 rows a warp: 2 * (D/16 * 8 + 4 * D/8) mma per
    # key tile, 128 + 256 in all
    assert text.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == (64 + 64) + (128 + 128)
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in text
    assert "cp.async.cg.shared.global" in text and "cp.async.wait_group 0" in text
    assert "bar.sync" in text  # the warpgroups' named barriers
    assert "ex2.approx.ftz.f32" in text
    if not toolchain.can_disassemble:
        pytest.skip("no nvdisasm or cuobjdump (pip install nvidia-cuda-nvdisasm)")
    for arch in ("sm_80", "sm_90"):
        result = toolchain.assemble(text, arch, filename=SM80.name)
        ops = toolchain.disassemble(result.cubin).histogram()
        assert ops.get("HMMA.16816.F32") == 384, arch
        # V (.trans) per tile: D/8 * 4 / 2; Q (2 per k16 step) and K (4 per k16 step) per tile
        assert ops.get("LDSM.16.MT88.4") == 16 + 32 and ops.get("LDSM.16.M88.4") == (8 + 16) + (16 + 32), arch
        assert not [op for op in ops if op.startswith(("HGMMA", "UTC"))], arch


def test_the_spec_matches_the_kernels_params_and_porter_spec_reads_them_alike(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    entry = read_ptx(SM80).entry("attn_fwd")
    assert check_against_entry(spec, entry) == []
    text, _ = scaffold_file(SM80)
    (tmp_path / "porter.toml").write_text(text)
    read = load_spec(tmp_path / "porter.toml", allow_todo=True)
    assert check_against_entry(read, choose_entry(read_ptx(SM80), None)) == []

    def shape(s):
        return [(p.kind, str(p.dtype), p.role if p.kind == "buffer" else None) for p in s.params]

    assert shape(read) == shape(spec)  # Q, K, V f16 in; O f16 and LSE f32 out; five i32 and an f32


def test_porter_check_without_a_gpu_passes_the_static_gates() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "porter", "check", str(SM80), "--no-gpu", "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 3, run.stderr  # 3: not run (no GPU asked for), never passed
    verdict = json.loads(run.stdout)
    gates = {g["name"]: g["status"] for g in verdict["gates"]}
    assert gates["interface"] == "passed" and gates["assemble"] == "passed", verdict
    assert verdict["status"] == "not run" and gates["equivalence"] == "not run"


def test_the_ptx_is_what_regen_writes_from_the_cu() -> None:
    """The committed PTX is nvcc's output of the committed .cu (banner and .version aside)."""
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "regen_examples.py"), "--check", "--ignore-toolchain",
                          "--only", "attention_fwd/"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    if "not found" in run.stderr + run.stdout and run.returncode != 0:
        pytest.skip("nvcc not found")
    assert run.returncode == 0, run.stdout + run.stderr


# --- the reference -------------------------------------------------------------------------------

def brute_force(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Row by row with math.exp and Python sums: the definition, nothing shared with ref.py."""
    b, h, s, d = q.shape
    o = np.zeros((b, h, s, d))
    lse = np.zeros((b, h, s))
    for i in range(b):
        for j in range(h):
            for r in range(s):
                keys = range(r + 1) if causal else range(s)
                logits = [scale * float(np.dot(q[i, j, r].astype(np.float64), k[i, j, c].astype(np.float64))) for c in keys]
                top = max(logits)
                weights = [math.exp(x - top) for x in logits]
                total = sum(weights)
                o[i, j, r] = sum(w * v[i, j, c].astype(np.float64) for w, c in zip(weights, keys, strict=True)) / total
                lse[i, j, r] = top + math.log(total)
    return o, lse


def _inputs(rng: np.random.Generator, b: int, h: int, s: int, d: int, spread: float = 1.0):
    return tuple(rng.uniform(-spread, spread, (b, h, s, d)).astype(np.float16) for _ in range(3))


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("s", [1, 13, 70])
def test_the_reference_is_softmax_attention_and_its_log_sum_exp(s: int, causal: int, monkeypatch) -> None:
    rng = np.random.default_rng(s * 2 + causal)
    b, h, d = 2, 3, 64
    q, k, v = _inputs(rng, b, h, s, d, spread=3.0)
    scale = np.float32(d ** -0.5)
    monkeypatch.setattr(ref, "SCORE_ELEMENTS", 2 * s + 1)  # several blocks of heads and of rows
    got = ref.attention({"Q": q, "K": k, "V": v, "causal": causal, "scale": scale},
                        {"B": b, "H": h, "S": s, "D": d, "causal": causal})
    want_o, want_lse = brute_force(q, k, v, float(scale), bool(causal))
    assert got["O"].shape == (b, h, s, d) and got["LSE"].shape == (b, h, s)
    np.testing.assert_allclose(got["O"], want_o, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["LSE"], want_lse, rtol=1e-12, atol=1e-12)
    if causal:  # the first query sees only its own key
        np.testing.assert_allclose(got["O"][:, :, 0], v[:, :, 0].astype(np.float64))


def test_the_reference_survives_logits_that_overflow_exp() -> None:
    rng = np.random.default_rng(7)
    q, k, v = (rng.uniform(3, 4, (1, 1, 40, 64)).astype(np.float16) for _ in range(3))  # logits ~ 98
    got = ref.attention({"Q": q, "K": k, "V": v, "causal": 0, "scale": np.float32(0.125)},
                        {"B": 1, "H": 1, "S": 40, "D": 64, "causal": 0})
    assert np.all(np.isfinite(got["O"])) and np.all(got["LSE"] > 90)
    np.testing.assert_allclose(got["LSE"], brute_force(q, k, v, 0.125, False)[1], rtol=1e-12)


def test_the_lse_tolerance_catches_one_dropped_key_at_4097() -> None:
    """The spec's comment: dropping key S-1 of S=4097 moves LSE by ~2.4e-4 (its weight), past
    atol + rtol |LSE| in most rows; one element outside the tolerance fails a check."""
    rng = np.random.default_rng(3)
    s, d = 4097, 64
    q, k, v = (x.reshape(1, s, d).astype(np.float64) for x in _inputs(rng, 1, 1, s, d))
    _, full = ref.attention_math(np, q, k, v, d ** -0.5, False)
    scores = q[0] @ k[0, : s - 1].T * d ** -0.5
    dropped = np.log(np.exp(scores).sum(axis=1))
    atol, rtol = load_spec(SPEC).tolerance("LSE", {"B": 1, "H": 1, "S": s, "D": d, "causal": 0})
    outside = np.abs(dropped - full[0]) > atol + rtol * np.abs(full[0])
    assert outside.mean() > 0.5


# --- the kernel's code, emulated -----------------------------------------------------------------

def _check_emulated(b: int, h: int, s: int, d: int, causal: int, *, qk: float = 1.0, policy: str = "late",
                    seed: int = 0, order: tuple[int, int] = (0, 1)) -> None:
    rng = np.random.default_rng(seed)
    q, k = (rng.uniform(-qk, qk, (b, h, s, d)).astype(np.float16) for _ in range(2))
    v = rng.uniform(-1, 1, (b, h, s, d)).astype(np.float16)
    scale = np.float32(d ** -0.5)
    o, lse = emu.attn_fwd(q, k, v, causal, scale, policy=policy, order=order)
    want = ref.attention({"Q": q, "K": k, "V": v, "causal": causal, "scale": scale},
                         {"B": b, "H": h, "S": s, "D": d, "causal": causal})
    spec = load_spec(SPEC)
    sizes = {"B": b, "H": h, "S": s, "D": d, "causal": causal}
    for name, got in (("O", o.astype(np.float64)), ("LSE", lse.astype(np.float64))):
        atol, rtol = spec.tolerance(name, sizes)
        bad = ~(np.abs(got - want[name]) <= atol + rtol * np.abs(want[name]))  # NaN is bad
        assert not bad.any(), f"{name}: {bad.sum()} of {bad.size} outside the tolerance, first at {np.argwhere(bad)[0]}"


@pytest.mark.parametrize(("b", "h", "s", "d", "causal", "policy", "order"), [
    (1, 1, 1, 64, 0, "late", (0, 1)),      # one query, one key: warpgroup 1 has no tile
    (1, 2, 77, 128, 1, "late", (1, 0)),    # a ragged key tile, causal
    (2, 1, 77, 64, 0, "early", (0, 1)),
    (1, 1, 200, 64, 1, "early", (1, 0)),   # two query tiles, four key tiles, the last of 8 keys
    (1, 1, 130, 128, 0, "late", (0, 1)),   # a query tile of 2 rows
    (1, 1, 330, 128, 0, "early", (1, 0)),  # six key tiles: three per warpgroup, the last ragged
    (1, 1, 390, 64, 1, "late", (1, 0)),    # causal, 7 key tiles in the last query tile (odd split)
])
def test_the_kernels_code_computes_attention(b, h, s, d, causal, policy, order) -> None:
    _check_emulated(b, h, s, d, causal, policy=policy, order=order)


def test_the_kernels_code_keeps_large_logits_finite() -> None:
    _check_emulated(1, 1, 150, 128, 1, qk=16.0)  # logits up to ~300: the running max must be subtracted


def test_the_emulation_fails_a_pipeline_that_waits_for_too_little(monkeypatch) -> None:
    """The negative control: retire one cp.async group fewer at every wait and the tiles are not
    there yet (the emulated shared memory holds NaN), so the check above must fail."""
    wait = emu.Smem.wait_group
    monkeypatch.setattr(emu.Smem, "wait_group", lambda self, n: wait(self, n + 1))
    with pytest.raises(AssertionError, match="outside the tolerance"):
        _check_emulated(1, 1, 200, 64, 1)


# --- porter bench, the GPU script ----------------------------------------------------------------

def test_the_bench_task_ports_the_sm80_kernel_to_hopper() -> None:
    tasks = find_tasks(FAMILY / "task.toml")
    hopper = [t for t in tasks if t.to_arch == "sm_90a"]
    assert len(hopper) == 1 and hopper[0].source == SM80 and hopper[0].spec == SPEC
    text = (FAMILY / "task.toml").read_text()
    assert "kernel_sm90a.ptx" in text and "kernel_sm100a.ptx" in text  # the ports' agreed names
    for t in tasks:  # each task's solution is the reference port for its target
        assert t.solution is not None and t.solution.name == f"kernel_{t.to_arch.replace('_', '')}.ptx"
        assert t.solution.exists()


def test_the_gpu_script_is_valid_bash_and_checks_the_kernel() -> None:
    script = ROOT / "tools" / "gpu_attention.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert 'python3 -m porter check "examples/attention_fwd/kernel_$k.ptx"' in text
    loop = re.search(r"^for k in (.*?); do", text, re.MULTILINE)
    runnable = {p.stem.removeprefix("kernel_") for p in (ROOT / "examples" / "attention_fwd").glob("kernel_*.ptx")
                if "sm100" not in p.stem}
    assert loop and set(loop.group(1).split()) == runnable  # every kernel that can run on a Hopper GPU
    sizes = re.search(r"^SIZES=\((.*?)\)", text, re.MULTILINE | re.DOTALL)
    assert sizes and "--time-at" in text
    assert set(sizes.group(1).split()) == {f"B=4,H=16,S={s},D=128,causal={c}" for s in (4096, 8192) for c in (0, 1)}
    assert "CUDNN_ATTENTION" in text and "FLASH_ATTENTION" in text


# --- on the GPU ----------------------------------------------------------------------------------

def _porter_check(*args: str, timeout: float = 1200) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "porter", "check", *args, "--json"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=timeout)
    assert run.stdout.strip(), run.stderr
    return json.loads(run.stdout)


@pytest.mark.gpu
def test_gpu_the_sm80_kernel_passes_porter_check_with_every_sanitizer_clean() -> None:
    verdict = _porter_check(str(SM80.relative_to(ROOT)), "--sanitize")
    gates = {g["name"]: g for g in verdict["gates"]}
    assert verdict["status"] == "passed", verdict["reason"]
    assert gates["equivalence"]["status"] == "passed" and gates["timing"]["status"] == "passed"
    assert gates["sanitize"]["status"] == "passed", gates["sanitize"]
    assert verdict["speedup_vs_library"] is not None  # torch SDPA ran beside it


@pytest.mark.gpu
def test_gpu_the_sm90a_port_passes_with_wgmma_executed_and_every_sanitizer_clean() -> None:
    port = FAMILY / "kernel_sm90a.ptx"
    verdict = _porter_check(str(port.relative_to(ROOT)), "--arch", "sm_90a", "--native", "--sanitize", "--no-timing")
    gates = {g["name"]: g for g in verdict["gates"]}
    assert verdict["status"] == "passed", verdict["reason"]
    assert gates["native"]["status"] == "passed" and gates["sanitize"]["status"] == "passed", gates


@pytest.mark.gpu
def test_gpu_the_sm80_kernel_passes_causal_at_a_ragged_length() -> None:
    verdict = _porter_check(str(SM80.relative_to(ROOT)), "--time-at", "B=2,H=8,S=4097,D=64,causal=1")
    assert verdict["status"] == "passed", verdict["reason"]
