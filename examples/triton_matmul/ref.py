"""Reference and cuBLAS baseline for examples/triton_matmul: C = A·B, f16 in, f16 out (Triton's
matmul_kernel accumulates in f32). Row-major A[M, K], B[K, N], C[M, N] with leading dimensions
K, N and N (the spec passes them as the kernel's stride arguments)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _product64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64: on the GPU (cuBLAS DGEMM) where CuPy has one, since porter also verifies
    the timed size (4096^3 takes seconds in NumPy), else in NumPy."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, or no GPU it can use
        return a.astype(np.float64) @ b.astype(np.float64)
    return cupy.asnumpy(cupy.asarray(a).astype(cupy.float64) @ cupy.asarray(b).astype(cupy.float64))


def matmul(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"c": _product64(np.asarray(args["a"]), np.asarray(args["b"]))}


def cublas(args: dict[str, Any], sizes: dict[str, int]) -> None:
    """cuBLAS (f16 in, f32 compute, f16 out) through CuPy, writing C in place."""
    import cupy

    cupy.matmul(args["a"], args["b"], out=args["c"])
