"""tools/emu_calibrate.py's GPU side, on the fake device of tests/fake_cupy.py: the arguments the
kernel gets (pointers to the right buffers, typed scalars), results copied back, rows computed.
The real run is on the H200 (the command is in docs/emulator.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import fake_cupy
import numpy as np
import pytest
from fake_cupy import at
from test_emu_examples import _calibrate

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(fake_cupy._Device, "compute_capability", "90", raising=False)
    cal = _calibrate()
    return cal


def test_vector_add_rows_on_the_fake_device(fake_gpu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cal = fake_gpu
    seen = {}

    def vector_add(grid: tuple[int, ...], block: tuple[int, ...], x: int, y: int, out: int, alpha: np.float32,
                   n: np.int32) -> None:
        seen.update(alpha=alpha, n=n, grid=grid, block=block)
        k = int(n)
        xs, ys = at(x, k, np.float32), at(y, k, np.float32)
        exact = xs.astype(np.float64) * np.float64(alpha) + ys  # one rounding, as fma.rn
        at(out, k, np.float32)[:] = exact.astype(np.float32)

    monkeypatch.setitem(fake_cupy.KERNELS, "vector_add", vector_add)
    monkeypatch.setattr(cal, "KERNELS", [(ROOT / "examples" / "vector_add", "kernel.ptx", {"n": 1000})])
    gpu = cal.Gpu()
    assert gpu.sm == "sm_90"
    (row,) = cal.calibrate(gpu, tmp_path)
    assert "gpu_error" not in row, row.get("gpu_error")
    assert row["bitwise_equal"] and row["bitwise_equal_fraction"] == 1.0 and row["max_ulps_emu_vs_gpu"] == 0
    assert row["emu_vs_reference_ok"] and row["gpu_vs_reference_ok"] and row["emu_vs_gpu_within_bound"]
    assert isinstance(seen["alpha"], np.float32) and isinstance(seen["n"], np.int32) and int(seen["n"]) == 1000
    assert seen["grid"] == (4, 1, 1) and seen["block"] == (256, 1, 1)


def test_a_wrong_gpu_result_shows_in_the_row(fake_gpu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cal = fake_gpu

    def off_by_one_ulp(grid: tuple[int, ...], block: tuple[int, ...], x: int, y: int, out: int, alpha: np.float32,
                       n: np.int32) -> None:
        k = int(n)
        exact = (at(x, k, np.float32).astype(np.float64) * np.float64(alpha) + at(y, k, np.float32)).astype(np.float32)
        at(out, k, np.float32)[:] = np.nextafter(exact, np.float32(np.inf))

    monkeypatch.setitem(fake_cupy.KERNELS, "vector_add", off_by_one_ulp)
    monkeypatch.setattr(cal, "KERNELS", [(ROOT / "examples" / "vector_add", "kernel.ptx", {"n": 33})])
    (row,) = cal.calibrate(cal.Gpu(), tmp_path)
    assert not row["bitwise_equal"] and row["max_ulps_emu_vs_gpu"] == 1 and row["emu_vs_gpu_within_bound"]


def test_an_output_of_several_dimensions_compares_with_the_gpus_flat_buffer(fake_gpu) -> None:
    """The emulator hands outputs back in the spec's shape (softmax: rows x cols), the GPU side as the
    flat buffer it copied back (on the H200, 2026-12-05, this stopped the calibration)."""
    cal = fake_gpu
    emu = np.random.default_rng(2).standard_normal((5, 1000)).astype(np.float32)
    gpu = emu.reshape(-1).copy()
    gpu[1234] = np.nextafter(gpu[1234], np.float32(np.inf))
    row = cal.agreement(emu, gpu, 1e-3, 1e-2)
    assert row["bitwise_equal_fraction"] == 4999 / 5000 and row["max_ulps_emu_vs_gpu"] == 1
    assert row["emu_vs_gpu_within_bound"]
    with pytest.raises(ValueError, match="differ"):
        cal.agreement(emu, gpu[:-1], 1e-3, 1e-2)


def test_elements_left_out_of_every_verdict_are_counted_apart_and_nan_payloads_agree(fake_gpu) -> None:
    """Where the reference is not finite the gate judges nothing, so the two sides may order an
    inf - inf differently there; two NaNs of other payloads are the same value, not 4M ulps apart."""
    cal = fake_gpu
    emu = np.array([1.0, np.nan, np.inf, 5.0], np.float32)
    gpu = np.array([1.0, np.nan, -np.inf, 5.0], np.float32)
    gpu.view(np.uint32)[1] = 0x7FFFFFFF  # the GPU's NaN
    judged = np.array([True, True, False, True])
    row = cal.agreement(emu, gpu, 1e-3, 1e-2, judged)
    assert row["emu_vs_gpu_within_bound"] and row["max_ulps_emu_vs_gpu"] == 0
    assert row["unjudged_elements"] == 1 and row["unjudged_differing"] == 1
    gpu[3] = 6.0
    row = cal.agreement(emu, gpu, 1e-3, 1e-2, judged)
    assert not row["emu_vs_gpu_within_bound"] and row["outside_bound"] == [(3, 5.0, 6.0)]


def test_corpus_rows_hold_the_emulator_to_the_gpu_within_the_cases_ulps(fake_gpu, monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    """The instruction corpus (tests/emu_corpus.py) on the device: a GPU that computes what the ISA
    says agrees bit for bit; one that differs in a bit of one word is out of bound there, and the
    row names the element."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emu_corpus import topics

    cal = fake_gpu
    (bits,) = [t for t in topics() if t.name == "bits"]
    (case,) = bits.cases
    model = case.expect(case.make_args(np.random.default_rng(7)))[2]
    flip = {"index": None}

    def on_device(grid: tuple[int, ...], block: tuple[int, ...], x: int, y: int, out: int, n: np.int32) -> None:
        words = at(out, model.size, np.uint32)
        words[:] = model
        if flip["index"] is not None:
            words[flip["index"]] ^= 1

    monkeypatch.setitem(fake_cupy.KERNELS, "bits", on_device)
    monkeypatch.setattr("emu_corpus.topics", lambda: [bits])
    (row,) = cal.calibrate_corpus(cal.Gpu(), tmp_path)
    assert row["emu_vs_reference_ok"] and row["gpu_vs_reference_ok"]
    assert row["bitwise_equal"] and row["emu_vs_gpu_within_bound"]
    flip["index"] = 17
    (row,) = cal.calibrate_corpus(cal.Gpu(), tmp_path)
    assert not row["emu_vs_gpu_within_bound"] and not row["gpu_vs_reference_ok"]
    assert [i for i, _, _ in row["outside_bound"]] == [17]


def test_a_corpus_case_for_a_newer_gpu_is_not_launched_and_says_why(fake_gpu, monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """sm_100a cases (tcgen05, the narrow conversions) run in the emulator only on an H200."""
    from emu_corpus import topics

    cal = fake_gpu
    assert cal.runs_on("sm_89", "sm_90") and cal.runs_on("sm_90a", "sm_90")
    assert not cal.runs_on("sm_100a", "sm_90") and not cal.runs_on("sm_90a", "sm_100")
    newer = [t for t in topics() if any(c.arch == "sm_100a" for c in t.cases)][:1]
    monkeypatch.setattr("emu_corpus.topics", lambda: newer)
    rows = cal.calibrate_corpus(cal.Gpu(), tmp_path)
    assert rows and all(r["gpu_error"] == "needs sm_100a: not run on sm_90" for r in rows)
    assert all(r["emu_vs_reference_ok"] for r in rows)


def test_corpus_agreement_counts_infinities_nans_and_integer_words_as_they_are(fake_gpu) -> None:
    """The H100 run of 2026-12-05 printed 9223372036854775807 as the largest ulp distance of outputs
    that were floats stored as words (compared as integers: any difference was "the whole range").
    Floats now count ulps; the same infinity on both sides is equal, opposite ones are not, two
    NaNs are equal whatever their payloads; integer outputs count differing elements, not ulps."""
    cal = fake_gpu
    emu = np.array([1.0, np.inf, np.nan, -np.inf, 3.0], np.float32)
    gpu = np.array([np.nextafter(np.float32(1), np.float32(0)), np.inf, np.nan, np.inf, 3.0], np.float32)
    gpu.view(np.uint32)[2] = 0x7FFFFFFF
    row = cal.corpus_agreement(emu, gpu, emu.copy(), 1, None)
    assert row["max_ulps_emu_vs_gpu"] < 1 << 32 and row["differing_elements"] == 2
    assert [i for i, _, _ in row["outside_bound"]] == [3]  # -inf against +inf: a real difference
    words = np.array([0x7FFFFFFF, 5, 0x80000000], np.uint32)
    other = np.array([0xFFC00000, 5, 0], np.uint32)
    row = cal.corpus_agreement(words, other, words.copy(), 0, None)
    assert row["max_ulps_emu_vs_gpu"] is None and row["differing_elements"] == 2
    assert not row["emu_vs_gpu_within_bound"] and not row["gpu_vs_reference_ok"]


def test_a_tensor_core_row_holds_the_gpu_to_the_hardware_sum_bound(fake_gpu, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """mma.sync tf32 with f32 accumulators on a GPU that truncates the exact sum to f32 (what the
    H100 did: 1 to 4 ulps toward zero from the sum rounded to nearest) is in bound: within
    gamma_9(2^-23) of the sum of |products| and |c|, not bit for bit. A GPU a thousandth off is not."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emu_corpus import Topic, topics

    cal = fake_gpu
    (mma,) = [t for t in topics() if t.name == "mma_sync_types"]
    (case,) = [c for c in mma.cases if c.entry == "mma_tf32_k8"]
    off = {"relative": 0.0}

    def on_device(grid: tuple[int, ...], block: tuple[int, ...], pa: int, pb: int, pc: int, pd: int) -> None:
        a = at(pa, 2 * 16 * 8, np.float32).astype(np.float64).reshape(2, 16, 8)
        bt = at(pb, 2 * 8 * 8, np.float32).astype(np.float64).reshape(2, 8, 8)
        c = at(pc, 2 * 16 * 8, np.float32).astype(np.float64).reshape(2, 16, 8)
        exact = (a @ bt.transpose(0, 2, 1) + c).reshape(-1) * (1 + off["relative"])
        near = exact.astype(np.float32)
        above = np.abs(near.astype(np.float64)) > np.abs(exact)
        at(pd, exact.size, np.float32)[:] = np.where(above, np.nextafter(near, np.float32(0)), near)

    monkeypatch.setitem(fake_cupy.KERNELS, "mma_tf32_k8", on_device)
    monkeypatch.setattr("emu_corpus.topics", lambda: [Topic(mma.name, mma.ptx, (case,))])
    (row,) = cal.calibrate_corpus(cal.Gpu(), tmp_path)
    assert row["emu_vs_reference_ok"] and row["bound"] == {"ulps": 0, "hardware_sum": True}
    assert not row["bitwise_equal"] and 0 < row["max_ulps_emu_vs_gpu"] <= 2, row["max_ulps_emu_vs_gpu"]
    assert row["emu_vs_gpu_within_bound"] and row["gpu_vs_reference_ok"], row["outside_bound"]
    assert 0 < row["max_fraction_of_bound"] < 1
    off["relative"] = 1e-3
    (row,) = cal.calibrate_corpus(cal.Gpu(), tmp_path)
    assert not row["emu_vs_gpu_within_bound"] and not row["gpu_vs_reference_ok"]
