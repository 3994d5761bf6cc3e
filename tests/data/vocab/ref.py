"""Reference and derive function of tests/data/vocab/porter.toml (the pipeline of pipeline.cuh)."""

from __future__ import annotations

from typing import Any

import numpy as np


def row_mean(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """The derived input: the mean of each row of X (computed once per case, then cast to f32)."""
    return {"mean": np.asarray(args["X"], dtype=np.float64).mean(axis=1)}


def pipeline(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Y and S in float64, from the inputs as the kernels get them (mean and eps in f32)."""
    assert isinstance(args["eps"], np.float32) and isinstance(args["amp"], np.float32)
    x = np.asarray(args["X"], dtype=np.float64)
    w = np.asarray(args["W"], dtype=np.float64)
    mean = np.asarray(args["mean"], dtype=np.float64)
    delta = x @ w
    y = (x - mean[:, None]) * delta[:, None] + np.float64(args["eps"])
    return {"Y": y, "S": x.T @ delta}
