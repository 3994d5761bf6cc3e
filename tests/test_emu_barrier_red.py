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


def test_barrier_cta_arrive_signals_without_waiting() -> None:
    """``barrier.cta.arrive`` (the .cta qualifier before the kind) does not wait for the count: warp 0
    arrives on barrier 1, which warp 1 never reaches, and both finish."""
    ptx = """
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 barrier.cta.arrive 1, 64;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""
    out = np.zeros(64, np.uint32)
    res = emulate(ptx, "k", 1, 64, [out], schedule=["minpc", "round_robin"])
    assert res.ok, [str(d) for d in res.diagnostics]
    assert out.tolist() == list(range(64))
