"""Reference for tests/data/attacks/vector_add_alpha_range: out = alpha * x + y in float64,
with whatever alpha porter drew for the case (args["alpha"])."""

from __future__ import annotations

import numpy as np


def vector_add(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    x = np.asarray(args["x"], dtype=np.float64)
    y = np.asarray(args["y"], dtype=np.float64)
    return {"out": float(args["alpha"]) * x + y}  # type: ignore[arg-type]
