"""Reference for the H200-made Triton matmul (tests/data/compiled/triton_h200/matmul): C = A·B in float64."""

from __future__ import annotations

from typing import Any

import numpy as np


def matmul(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    a, b = np.asarray(args["a_ptr"]), np.asarray(args["b_ptr"])
    try:  # on the GPU where CuPy has one: the timed size is 4096^3
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return {"c_ptr": a.astype(np.float64) @ b.astype(np.float64)}
    return {"c_ptr": cupy.asnumpy(cupy.asarray(a).astype(cupy.float64) @ cupy.asarray(b).astype(cupy.float64))}
