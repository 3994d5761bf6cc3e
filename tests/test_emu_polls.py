"""Threads that poll (nanosleep, mbarrier.test_wait): a sleep or a failed poll goes on, and only a
loop that keeps polling while nothing can change what it waits for is a deadlock."""

from __future__ import annotations

import numpy as np
import pytest

from porter.emu import emulate

SCHEDULES = ["minpc", "round_robin", "random:3"]


def _kernel(body: str) -> str:
    return f"""
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b8 bar[8];
    .shared .align 4 .b8 flag[4];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
{body}
}}
"""


def _line_of(ptx: str, text: str) -> int:
    return next(i for i, line in enumerate(ptx.splitlines(), start=1) if text in line)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_thread_that_sleeps_once_goes_on(schedule: str) -> None:
    ptx = _kernel("""
    nanosleep.u32 10;
    st.global.u32 [%rd3], %r1;
    ret;
""")
    out = np.zeros(64, np.uint32)
    res = emulate(ptx, "k", 1, 64, [out], schedule=schedule)
    assert res.ok, [str(d) for d in res.diagnostics]
    assert out.tolist() == list(range(64))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_bounded_loop_of_sleeps_ends(schedule: str) -> None:
    ptx = _kernel("""
    mov.u32 %r2, 0;
AGAIN:
    nanosleep.u32 10;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra AGAIN;
    st.global.u32 [%rd3], %r2;
    ret;
""")
    out = np.zeros(40, np.uint32)
    res = emulate(ptx, "k", 1, 40, [out], schedule=schedule)
    assert res.ok, [str(d) for d in res.diagnostics]
    assert (out == 5).all()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_spin_on_a_flag_nobody_sets_is_a_deadlock(schedule: str) -> None:
    ptx = _kernel("""
    mov.u32 %r2, flag;
    st.shared.u32 [%r2], 0;
SPIN:
    ld.volatile.shared.u32 %r3, [%r2];
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    nanosleep.u32 10;
    bra SPIN;
DONE:
    st.global.u32 [%rd3], %r3;
    ret;
""")
    out = np.zeros(64, np.uint32)
    res = emulate(ptx, "k", 1, 64, [out], schedule=schedule)
    assert res.fatal and {d.kind for d in res.fatal} == {"deadlock"}
    assert {d.line for d in res.fatal} == {_line_of(ptx, "nanosleep.u32 10")}
    assert "nanosleep in a loop that nothing else can end" in res.fatal[0].message
    assert not out.any()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_spin_on_a_flag_another_warp_sets_after_sleeping_ends(schedule: str) -> None:
    """Warp 1 spins until warp 0, which first sleeps, publishes 7 and raises the flag."""
    ptx = _kernel("""
    mov.u32 %r2, flag;
    setp.eq.u32 %p3, %r1, 0;
    @%p3 st.shared.u32 [%r2], 0;
    bar.sync 0;
    setp.ge.u32 %p2, %r1, 32;
    @%p2 bra CONSUMER;
    nanosleep.u32 100;
    mov.u32 %r3, 7;
    st.volatile.shared.u32 [%r2], %r3;
    bra DONE;
CONSUMER:
    ld.volatile.shared.u32 %r3, [%r2];
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    nanosleep.u32 10;
    bra CONSUMER;
DONE:
    st.global.u32 [%rd3], %r3;
    ret;
""")
    out = np.zeros(64, np.uint32)
    res = emulate(ptx, "k", 1, 64, [out], schedule=schedule)
    assert res.ok, [str(d) for d in res.diagnostics]
    assert (out == 7).all()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_one_failed_test_wait_returns_false_and_the_thread_goes_on(schedule: str) -> None:
    ptx = _kernel("""
    mov.u32 %r2, bar;
    mov.u32 %r4, 2;
    setp.eq.u32 %p3, %r1, 0;
    @%p3 mbarrier.init.shared::cta.b64 [%r2], %r4;
    bar.sync 0;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    selp.u32 %r3, 1, 2, %p1;
    st.global.u32 [%rd3], %r3;
    ret;
""")
    out = np.zeros(32, np.uint32)
    res = emulate(ptx, "k", 1, 32, [out], schedule=schedule)
    assert res.ok, [str(d) for d in res.diagnostics]
    assert (out == 2).all()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_test_wait_loop_on_a_phase_that_never_completes_is_a_deadlock(schedule: str) -> None:
    ptx = _kernel("""
    mov.u32 %r2, bar;
    mov.u32 %r4, 2;
    setp.eq.u32 %p3, %r1, 0;
    @%p3 mbarrier.init.shared::cta.b64 [%r2], %r4;
    bar.sync 0;
    @%p3 mbarrier.arrive.shared::cta.b64 %rd4, [%r2];
POLL:
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra POLL;
    ret;
""")
    res = emulate(ptx, "k", 1, 32, [np.zeros(32, np.uint32)], schedule=schedule)
    (d,) = res.fatal
    assert d.kind == "deadlock" and d.line == _line_of(ptx, "mbarrier.test_wait")
    assert "1 of 2 arrivals pending" in d.message
