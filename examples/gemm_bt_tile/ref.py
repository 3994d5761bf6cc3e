"""Reference for gemm_bt_tile (and the toy wgmma kernels in tests/data/native): C = A . Bt^T in float64."""

from __future__ import annotations

import numpy as np


def gemm_bt(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    a = np.asarray(args["A"]).astype(np.float64)
    bt = np.asarray(args["Bt"]).astype(np.float64)
    return {"C": a @ bt.T}
