"""porter.emu on Triton fixtures without a spec: device-side tensor maps (copy_tma builds its
CUtensorMaps with tensormap.replace), a matmul in clusters of two CTAs (num_ctas = 2), and the
H200 softmax and layernorm from their launch.json, each against NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_emu_examples import _calibrate

from porter.emu import emulate

DATA = Path(__file__).resolve().parent / "data" / "compiled"


@pytest.mark.parametrize(("m", "n"), [(100, 128), (64, 64)])
def test_copy_tma_with_tensor_maps_built_on_the_device(m: int, n: int) -> None:
    ptx = (DATA / "triton" / "copy_tma.ptx").read_text()
    x = np.random.default_rng(m).uniform(-1, 1, (m, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    grid = ((m + 63) // 64, (n + 63) // 64)
    scratch = np.zeros(256 * grid[0] * grid[1], np.uint8)  # global_scratch_size 256 per program
    res = emulate(ptx, "copy_tma", grid, 128, [x, out, np.int32(m), np.int32(n), scratch, None], dynamic_smem=16392)
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    assert np.array_equal(out, 2 * x)


def test_matmul_in_clusters_of_two() -> None:
    ptx = (DATA / "triton" / "num_ctas2" / "matmul_kernel.ptx").read_text()
    m, n, k = 256, 256, 128
    rng = np.random.default_rng(2)
    a, b = rng.uniform(-1, 1, (m, k)).astype(np.float16), rng.uniform(-1, 1, (k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    programs = (m // 128) * (n // 128)
    res = emulate(ptx, "matmul_kernel", 2 * programs, 128,  # .reqnctapercluster 2: two CTAs a program
                  [a, b, c, *(np.int32(v) for v in (m, n, k, k, n, n)), None, None], dynamic_smem=73728,
                  schedule=["minpc", "random:1"])
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c.astype(np.float64), ref, atol=1e-2, rtol=1e-2)


def test_h200_softmax_and_layernorm_from_launch_json() -> None:
    cal = _calibrate()
    ptx, entry, args, threads, shared = cal.launch_args(cal.TRITON_H200 / "softmax", {"x_ptr": [8, 1000],
                                                                                       "y_ptr": [8, 1000]})
    assert emulate(ptx, entry, 8, threads, args, dynamic_smem=shared).ok
    x = args[0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(args[1].astype(np.float64), e / e.sum(axis=1, keepdims=True), atol=2e-3, rtol=1e-2)

    ptx, entry, args, threads, shared = cal.launch_args(
        cal.TRITON_H200 / "layernorm", {"x_ptr": [8, 1000], "y_ptr": [8, 1000], "mean_ptr": [8], "rstd_ptr": [8]})
    assert emulate(ptx, entry, 8, threads, args, dynamic_smem=shared).ok

    def f(bits: np.ndarray) -> np.ndarray:
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    x, w, b = f(args[0]), f(args[1]), f(args[2])
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    assert np.allclose(f(args[3]), (x - mean) * rstd * w + b, atol=2e-2, rtol=1e-2)
    assert np.allclose(args[4], mean[:, 0], atol=1e-6) and np.allclose(args[5], rstd[:, 0], rtol=1e-5)
