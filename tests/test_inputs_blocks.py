"""Inputs are drawn a block at a time on every core (porter.gate.inputs): the values still depend on
the seed alone, as a golden folder and the emulator need when they regenerate them elsewhere."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate import inputs
from porter.gate.spec import load_spec

VECTOR_ADD = Path(__file__).resolve().parent.parent / "examples" / "vector_add" / "porter.toml"


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**48), workers=st.integers(1, 5),
       n=st.one_of(st.integers(1, 100), st.integers(inputs.BLOCK, 3 * inputs.BLOCK + 5)))
def test_the_values_are_the_same_whatever_threads_draw_them(seed: int, n: int, workers: int) -> None:
    spec = load_spec(VECTOR_ADD)
    many = inputs.make_args(spec, {"n": n}, seed)
    with ThreadPoolExecutor(max_workers=workers) as pool, patch.object(inputs, "_drawers", lambda: pool):
        again = inputs.make_args(spec, {"n": n}, seed)
    assert many.keys() == again.keys()
    assert all(np.asarray(many[k]).tobytes() == np.asarray(again[k]).tobytes() for k in many)


def test_each_block_is_its_own_stream() -> None:
    """Two blocks of one buffer, and one block of two sizes, hold other values: no block repeats
    another, so no kernel finds a period in porter's inputs."""
    spec = load_spec(VECTOR_ADD)
    x = inputs.make_args(spec, {"n": 2 * inputs.BLOCK}, 5)["x"]
    assert not np.array_equal(x[: inputs.BLOCK], x[inputs.BLOCK:])
    shorter = inputs.make_args(spec, {"n": inputs.BLOCK}, 5)["x"]
    assert not np.array_equal(shorter, x[: inputs.BLOCK])
