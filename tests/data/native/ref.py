"""Reference for the toy wgmma kernels: C = A . Bt^T in float64."""

from __future__ import annotations

import numpy as np


def gemm_bt(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    a = np.asarray(args["A"]).astype(np.float64)
    bt = np.asarray(args["Bt"]).astype(np.float64)
    return {"C": a @ bt.T}
