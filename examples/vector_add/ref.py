"""Reference for examples/vector_add: out = alpha * x + y, computed in float64."""

from __future__ import annotations

import numpy as np


def vector_add(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    n = int(sizes["n"])
    x = np.asarray(args["x"], dtype=np.float64)[:n]
    y = np.asarray(args["y"], dtype=np.float64)[:n]
    alpha = float(args["alpha"])  # type: ignore[arg-type]
    return {"out": alpha * x + y}
