"""Reference for gemm_bt_tile (and the toy wgmma kernels in tests/data/native): C = A . Bt^T in float64."""

from __future__ import annotations

import numpy as np


def gemm_bt(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 A . Bt^T: on the GPU (cuBLAS DGEMM) where CuPy is importable, else in NumPy."""
    a = np.asarray(args["A"]).astype(np.float64)
    bt = np.asarray(args["Bt"]).astype(np.float64)
    try:
        import cupy
    except ImportError:
        return {"C": a @ bt.T}
    return {"C": cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(bt).T)}
