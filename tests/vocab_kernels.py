"""The kernels of tests/data/vocab/pipeline.cuh played in NumPy, for the fake device of
tests/fake_cupy.py: the same arguments, the same bytes written (and, in the broken variants, the
same mistakes), so that the gate and the worker can be driven through the whole hot loop on a CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fake_cupy import at

ROWS_PER_BLOCK = 32


def _rows(pointer: Any, rows: int, ld: int) -> np.ndarray:
    return at(pointer, rows * ld, np.float32).reshape(rows, ld)


def rn_delta(grid: Any, block: Any, X: Any, W: Any, delta: Any, R: Any, C: Any, ldx: Any) -> None:
    R, C, ldx = int(R), int(C), int(ldx)
    x = _rows(X, R, ldx)[:, :C]
    at(delta, R, np.float32)[:] = (x @ at(W, C, np.float32)).astype(np.float32)


def rn_center(grid: Any, block: Any, X: Any, mean: Any, delta: Any, Y: Any, eps: Any, R: Any, C: Any, ldx: Any,
              ldy: Any, *, writes_padding: bool = False) -> None:
    R, C, ldx, ldy = int(R), int(C), int(ldx), int(ldy)
    x = _rows(X, R, ldx)[:, :C]
    y = _rows(Y, R, ldy)
    m, d = at(mean, R, np.float32)[:, None], at(delta, R, np.float32)[:, None]
    y[:, :C] = (x - m) * d + np.float32(eps)
    if writes_padding:
        y[:, C:] = (0 - m) * d + np.float32(eps)


def rn_fused(grid: Any, block: Any, X: Any, W: Any, mean: Any, delta: Any, Y: Any, eps: Any, R: Any, C: Any,
             ldx: Any, ldy: Any) -> None:
    rn_delta(grid, block, X, W, delta, R, C, ldx)
    rn_center(grid, block, X, mean, delta, Y, eps, R, C, ldx, ldy)


class ColumnSums:
    """rn_colsum: each block of 32 rows adds its partial sums to S in an order that changes from
    launch to launch (as atomics land), so that S's last bits vary; ``skip_row0`` plays the
    variant that leaves row 0 out, ``skipping`` turns it on from outside (a kernel that skips
    work only on later launches)."""

    def __init__(self, *, skip_row0: bool = False) -> None:
        self.skipping = skip_row0
        self.rng = np.random.default_rng(0)

    def __call__(self, grid: Any, block: Any, X: Any, delta: Any, S: Any, R: Any, C: Any, ldx: Any) -> None:
        R, C, ldx = int(R), int(C), int(ldx)
        x = _rows(X, R, ldx)[:, :C]
        d = at(delta, R, np.float32).copy()
        if self.skipping:
            d[0] = 0
        s = at(S, C, np.float32)
        blocks = [(first, min(R, first + ROWS_PER_BLOCK)) for first in range(0, R, ROWS_PER_BLOCK)]
        for k in self.rng.permutation(len(blocks)):
            first, last = blocks[k]
            s += (x[first:last] * d[first:last, None]).sum(axis=0, dtype=np.float32)


def kernels(variant: str = "") -> dict[str, Any]:
    """The bodies of one variant's kernels by entry name (see pipeline.cuh's PORTER_* macros)."""
    colsum = ColumnSums(skip_row0=variant == "skips_work")
    bodies: dict[str, Any] = {"rn_delta": rn_delta, "rn_center": rn_center, "rn_colsum": colsum,
                              "rn_fused": rn_fused}
    if variant == "writes_padding":
        bodies["rn_center"] = lambda *a: rn_center(*a, writes_padding=True)
    return bodies
