"""bar.red under the per-warp schedules: warps arrive one at a time, and each must still get the
reduction over the whole generation (the corpus topic barriers_red runs under minpc only)."""

from __future__ import annotations

import numpy as np
import pytest
from emu_corpus import CorpusCase, topics

from porter.emu import emulate

TOPIC = next(t for t in topics() if t.name == "barriers_red")


@pytest.mark.parametrize("schedule", ["round_robin", "random:5"])
@pytest.mark.parametrize("case", TOPIC.cases, ids=[f"{c.entry}-{i}" for i, c in enumerate(TOPIC.cases)])
def test_barrier_reductions_under_per_warp_schedules(case: CorpusCase, schedule: str) -> None:
    args = case.make_args(np.random.default_rng(11))
    expected = case.expect([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    res = emulate(TOPIC.ptx, case.entry, case.grid, case.block, args, schedule=schedule)
    assert res.ok, [str(d) for d in res.diagnostics]
    for i, want in expected.items():
        assert np.array_equal(args[i], want)
