"""Reference and cuBLAS baseline for examples/gemm_bf16: C = A·B (bf16 in, bf16 out)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _product64(a: np.ndarray, b: np.ndarray) -> Any:
    """a @ b in float64 for bf16 a and b: on the GPU (cuBLAS DGEMM) where CuPy finds one, since
    porter also verifies the timed size (4096^3: seconds in NumPy), returned there (porter copies
    a CuPy array down itself, into page-locked memory); else in NumPy (a machine without a GPU, or
    with CuPy and no driver: the simulated GPU of tools/bench_throughput.py)."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except ImportError:
        return a.astype(np.float64) @ b.astype(np.float64)
    except cupy.cuda.runtime.CUDARuntimeError:
        return a.astype(np.float64) @ b.astype(np.float64)

    def widen(x: np.ndarray) -> object:  # bf16 is the top half of an f32: shift the bits up on the GPU
        bits = cupy.asarray(np.ascontiguousarray(x).view(np.uint16)).astype(cupy.uint32) << 16
        return bits.view(cupy.float32).astype(cupy.float64)

    return widen(a) @ widen(b)


def gemm(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 product of the bf16 inputs; C's padding columns keep their incoming values."""
    m, n, k = int(sizes["M"]), int(sizes["N"]), int(sizes["K"])
    product = _product64(np.asarray(args["A"])[:m, :k], np.asarray(args["B"])[:k, :n])
    incoming = np.asarray(args["C"])
    if incoming.shape == product.shape:  # no padding columns: nothing of the incoming C is kept
        return {"C": product}
    c = incoming.astype(np.float64)  # a copy, with the caller's padding columns
    c[:m, :n] = product.get() if hasattr(product, "get") else product
    return {"C": c}


def cublas(args: dict[str, Any], sizes: dict[str, int]) -> None:
    """cuBLAS through CuPy, on the GPU, writing C in place (the same views of A, B, C)."""
    import cupy

    m, n, k = int(sizes["M"]), int(sizes["N"]), int(sizes["K"])
    a = args["A"][:m, :k]
    b = args["B"][:k, :n]
    c = args["C"]
    if c.shape[1] == n:  # dense C: let cuBLAS write it directly
        cupy.matmul(a, b, out=c)
    else:
        c[:m, :n] = cupy.matmul(a, b)
