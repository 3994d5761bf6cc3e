"""Reference for examples/softmax: numerically stable row softmax in float64."""

from __future__ import annotations

import numpy as np


def softmax(args: dict[str, object], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(args["x"], dtype=np.float64)[:rows, :cols]  # drop the padding columns
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
