"""porter.emu on the GEMM examples: sm_80 (mma.sync, ldmatrix, cp.async), sm_90a (TMA, mbarrier,
wgmma) and sm_100a (tcgen05), each against a float64 NumPy product at small shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from porter.emu import emulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def bf16(x: np.ndarray) -> np.ndarray:
    """float -> bf16 bits, rounded to nearest even."""
    b = np.asarray(x, np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _inputs(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (bf16(rng.uniform(-1, 1, (m, k))), bf16(rng.uniform(-1, 1, (k, n))), bf16(rng.uniform(-1, 1, (m, n))))


@pytest.mark.parametrize(("m", "n", "k"), [(128, 192, 256), (64, 64, 16)])
def test_gemm_bt_tile_sm80(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m + n + k)
    a, bt = bf16(rng.uniform(-1, 1, (m, k))), bf16(rng.uniform(-1, 1, (n, k)))
    c = np.full((m, n), np.nan, np.float32)
    ptx = (EXAMPLES / "gemm_bt_tile" / "kernel_sm80.ptx").read_text()
    res = emulate(ptx, "gemm_bt_tile", (n // 64, m // 64), 256, [a, bt, c, np.int32(m), np.int32(n), np.int32(k)])
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    assert np.allclose(c, f64(a) @ f64(bt).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n", "k"), [(129, 136, 72), (77, 77, 40), (1, 8, 8)])
def test_gemm_bf16_sm80(m: int, n: int, k: int) -> None:
    a, b, c = _inputs(m, n, k, 3)
    ldb = ldc = n if n % 8 == 0 else (n + 7) // 8 * 8
    if ldb != n:
        b = np.pad(b, ((0, 0), (0, ldb - n)))
        c = np.pad(c, ((0, 0), (0, ldc - n)))
    before = c.copy()
    ptx = (EXAMPLES / "gemm_bf16" / "kernel_sm80.ptx").read_text()
    res = emulate(ptx, "gemm_bf16_sm80", ((n + 127) // 128, (m + 127) // 128), 256,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, ldb, ldc))], dynamic_smem=49152)
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    ref = f64(a) @ f64(b[:, :n])
    assert np.array_equal(c[:, :n], bf16(ref))  # at these sizes: the bf16 rounding of the float64 product
    assert np.array_equal(c[:, n:], before[:, n:])  # padding untouched


def _tma_gemm(arch: str, m: int, n: int, k: int, block: int) -> tuple[np.ndarray, np.ndarray, object]:
    from porter.emu import TensorMap

    a, b, c = _inputs(m, n, k, 5)
    tm_a = TensorMap(0, 2, (m, k), (k * 2,), (128, 64), "128B")
    tm_b = TensorMap(1, 2, (k, n), (n * 2,), (64, 64), "128B")
    ptx = (EXAMPLES / "gemm_bf16" / f"kernel_{arch}.ptx").read_text()
    res = emulate(ptx, f"gemm_bf16_{arch}", ((n + 255) // 256, (m + 127) // 128), block,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), tm_a, tm_b], dynamic_smem=197632)
    return c, f64(a) @ f64(b), res


@pytest.mark.parametrize(("m", "n", "k"), [(128, 256, 128), (200, 264, 136)])
def test_gemm_bf16_sm90a_tma_wgmma(m: int, n: int, k: int) -> None:
    c, ref, res = _tma_gemm("sm90a", m, n, k, 384)
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    # Per-wgmma rounding to f32, then bf16: within one bf16 ulp of the rounded float64 product.
    assert np.allclose(f64(c), f64(bf16(ref)), rtol=2**-7, atol=1e-6)
    assert (c != bf16(ref)).mean() < 0.01


@pytest.mark.parametrize(("m", "n", "k"), [(256, 256, 128), (200, 264, 136), (1, 8, 8)])
def test_gemm_bf16_sm100a_tcgen05(m: int, n: int, k: int) -> None:
    c, ref, res = _tma_gemm("sm100a", m, n, k, 160)
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    assert np.allclose(f64(c), f64(bf16(ref)), rtol=2**-7, atol=1e-6)
    assert (c != bf16(ref)).mean() < 0.01


def _sm100a_variant(old: str, new: str) -> str:
    ptx = (EXAMPLES / "gemm_bf16" / "kernel_sm100a.ptx").read_text()
    assert ptx.count(old) >= 1
    return ptx.replace(old, new)


def _run_variant(ptx: str, m: int = 128, n: int = 256, k: int = 64) -> tuple[np.ndarray, np.ndarray, object]:
    from porter.emu import TensorMap

    a, b, c = _inputs(m, n, k, 9)
    res = emulate(ptx, "gemm_bf16_sm100a", ((n + 255) // 256, (m + 127) // 128), 160,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), TensorMap(0, 2, (m, k), (k * 2,), (128, 64), "128B"),
                   TensorMap(1, 2, (k, n), (n * 2,), (64, 64), "128B")], dynamic_smem=197632)
    return c, f64(a) @ f64(b), res


def test_sm100a_negative_control_b_major_flipped_gives_wrong_numbers() -> None:
    # idesc 138478736 = 0x08410490 has bit 16 (B MN-major); clearing it reads B as K-major: wrong.
    c, ref, res = _run_variant(_sm100a_variant("mov.b32 \t%r148, 138478736;", f"mov.b32 \t%r148, {138478736 & ~(1 << 16)};"))
    assert res.ok
    assert not np.allclose(f64(c), ref, atol=0.1)


def test_sm100a_with_a_wgmma_descriptor_is_a_descriptor_diagnostic() -> None:
    # The sm_90 constant (bit 46 clear) in place of the sm_100 one.
    _, _, res = _run_variant(_sm100a_variant("4611756662049538048", str(4611756662049538048 & ~(1 << 46))))
    (d,) = res.fatal
    assert d.kind == "descriptor" and "0b001" in d.message and d.line > 0


def test_sm100a_producer_that_skips_the_empty_wait_is_caught_by_a_random_schedule() -> None:
    # The producer's `@%p12 bra` retry of try_wait on empty[s] never taken: with K = 512 it
    # refills a stage the MMAs may not have read yet. minpc (try_wait blocks) hides it; a random
    # schedule lets the producer run on after a failed try_wait, and the MMA thread then waits
    # on full[0] for a phase that the barrier has already passed twice over.
    ptx = _sm100a_variant("\tsetp.eq.s32 \t%p12, %r184, 0;", "\tsetp.ne.s32 \t%p12, %r184, %r184;")
    from porter.emu import TensorMap

    m, n, k = 128, 256, 512
    a, b, c = _inputs(m, n, k, 5)
    res = emulate(ptx, "gemm_bf16_sm100a", (1, 1), 160,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), TensorMap(0, 2, (m, k), (k * 2,), (128, 64), "128B"),
                   TensorMap(1, 2, (k, n), (n * 2,), (64, 64), "128B")], dynamic_smem=197632,
                  schedule=["minpc", "random:0"])
    assert not res.ok
    stuck = [d for d in res.fatal if d.kind == "deadlock" and "phase 2 (parity 0)" in d.message]
    assert stuck and "mbarrier.try_wait" in stuck[0].message


def test_sm90a_descriptor_swizzle_not_the_tmas_is_a_layout_mismatch() -> None:
    from porter.emu import TensorMap

    a_desc = 4611686293305360384  # 0x4000004000010000: 128B swizzle, as TMA wrote A
    wrong = a_desc - (1 << 62) + (2 << 62)  # the same descriptor reading 64B-swizzled rows
    ptx = (EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx").read_text().replace(str(a_desc), str(wrong))
    m, n, k = 128, 256, 64
    a, b, c = _inputs(m, n, k, 2)
    res = emulate(ptx, "gemm_bf16_sm90a", (1, 1), 384,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), TensorMap(0, 2, (m, k), (k * 2,), (128, 64), "128B"),
                   TensorMap(1, 2, (k, n), (n * 2,), (64, 64), "128B")], dynamic_smem=197632)
    found = [d for d in res.diagnostics if d.kind == "descriptor"]
    assert found and "64B swizzle" in found[0].message and "with the 128B swizzle" in found[0].message
    assert "wgmma" in (EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx").read_text().splitlines()[found[0].line - 1]


def test_sm90a_without_wgmma_wait_group_is_a_race() -> None:
    from porter.emu import TensorMap

    ptx = (EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx").read_text()
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") >= 1
    ptx = ptx.replace("wgmma.wait_group.sync.aligned 0;", "wgmma.fence.sync.aligned;")
    m, n, k = 128, 256, 64
    a, b, c = _inputs(m, n, k, 4)
    res = emulate(ptx, "gemm_bf16_sm90a", (1, 1), 384,
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), TensorMap(0, 2, (m, k), (k * 2,), (128, 64), "128B"),
                   TensorMap(1, 2, (k, n), (n * 2,), (64, 64), "128B")], dynamic_smem=197632,
                  schedule=["minpc", "round_robin"])
    assert [d.kind for d in res.diagnostics] == ["race"] and "argument 2" in res.diagnostics[0].message
