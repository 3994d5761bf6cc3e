"""porter.emu's diagnostics: waits that can never complete, TMEM misuse, races between schedules."""

from __future__ import annotations

import numpy as np

from porter.emu import emulate


def _kernel(body: str, target: str = "sm_90a") -> str:
    return f"""
.version 8.6
.target {target}
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b8 bar[8];
    .shared .align 4 .b8 slot[4];
    .shared .align 16 .b8 buf[1024];
{body}
}}
"""


def _line_of(ptx: str, text: str) -> int:
    return next(i for i, line in enumerate(ptx.splitlines(), start=1) if text in line)


def test_mbarrier_wait_for_bytes_never_delivered_is_a_deadlock_with_the_counts() -> None:
    ptx = _kernel("""
    mov.u32 %r1, bar;
    mov.u32 %r2, 1;
    mov.u32 %r3, %tid.x;
    setp.eq.u32 %p2, %r3, 0;
    @%p2 mbarrier.init.shared::cta.b64 [%r1], %r2;
    @%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r1], 1024;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    @!%p1 bra WAIT;
    ret;
""")
    res = emulate(ptx, "k", 1, 32, [np.zeros(1, np.uint32)])
    (d,) = res.fatal
    assert d.kind == "deadlock"
    assert d.line == _line_of(ptx, "mbarrier.try_wait")
    assert "tx-count 1024 bytes" in d.message and "1024 expected bytes never delivered" in d.message
    assert "0 of 1 arrivals pending" in d.message


def test_named_barrier_count_never_reached_is_a_deadlock() -> None:
    ptx = _kernel("""
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @!%p1 bra DONE;
    bar.sync 1, 128;
DONE:
    ret;
""")
    res = emulate(ptx, "k", 1, 128, [np.zeros(1, np.uint32)])
    (d,) = res.fatal
    assert d.kind == "deadlock" and d.line == _line_of(ptx, "bar.sync 1, 128")
    assert "waits for 128 threads; 32 arrived" in d.message


def test_tmem_not_freed_and_read_before_written() -> None:
    ptx = _kernel("""
    mov.u32 %r1, slot;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 64;
    ld.shared.u32 %r2, [%r1];
    tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r3, %r4}, [%r2];
    tcgen05.wait::ld.sync.aligned;
    ret;
""", target="sm_100a")
    res = emulate(ptx, "k", 1, 32, [np.zeros(1, np.uint32)])
    kinds = sorted((d.kind, d.line, d.fatal) for d in res.diagnostics)
    assert kinds == [("tmem", _line_of(ptx, "tcgen05.alloc"), True), ("tmem", _line_of(ptx, "tcgen05.ld"), False)]
    assert any("not freed" in d.message for d in res.diagnostics)
    assert any("never written" in d.message for d in res.diagnostics)


def test_tmem_over_allocation_waits_forever() -> None:
    ptx = _kernel("""
    mov.u32 %r1, slot;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 512;
    ret;
""", target="sm_100a")
    res = emulate(ptx, "k", 1, 64, [np.zeros(1, np.uint32)])
    deadlocks = [d for d in res.fatal if d.kind == "deadlock"]
    assert deadlocks and "512 are allocated" in deadlocks[0].message


def test_tmem_access_outside_the_warps_lane_quadrant() -> None:
    ptx = _kernel("""
    mov.u32 %r1, slot;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
    ld.shared.u32 %r2, [%r1];
    add.s32 %r3, %r2, 2097152;
    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r3], {%r2};
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
    ret;
""", target="sm_100a")
    res = emulate(ptx, "k", 1, 32, [np.zeros(1, np.uint32)])
    (d,) = res.fatal
    assert d.kind == "tmem" and "lanes 0..31" in d.message


RACY = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    setp.eq.u32 %p1, %r1, 32;
    @%p1 st.shared.u32 [%r2], 7;
    setp.eq.u32 %p2, %r1, 0;
    @!%p2 bra END;
    ld.shared.u32 %r3, [%r2];
    st.global.u32 [%rd1], %r3;
END:
    ret;
"""


def test_a_missing_barrier_is_reported_as_a_race_between_schedules() -> None:
    out = np.zeros(1, np.uint32)
    res = emulate(_kernel(RACY), "k", 1, 64, [out], schedule=["minpc", "round_robin"])
    races = [d for d in res.diagnostics if d.kind == "race"]
    assert races and "round_robin" in races[0].message and not res.ok
    assert out[0] == 7  # the first schedule's result lands in the caller's array


def test_with_the_barrier_the_schedules_agree() -> None:
    fixed = RACY.replace("    setp.eq.u32 %p2, %r1, 0;", "    bar.sync 0;\n    setp.eq.u32 %p2, %r1, 0;")
    res = emulate(_kernel(fixed), "k", 1, 64, [np.zeros(1, np.uint32)],
                  schedule=["minpc", "round_robin", "random:1", "random:2"])
    assert res.ok and not res.diagnostics


def test_tcgen05_ld_registers_used_before_wait_ld_is_a_race() -> None:
    ptx = _kernel("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, slot;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
    ld.shared.u32 %r2, [%r1];
    mov.u32 %r3, %tid.x;
    add.s32 %r4, %r3, 1000;
    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r2], {%r4};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r5}, [%r2];
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    tcgen05.wait::ld.sync.aligned;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
    ret;
""", target="sm_100a")
    out = np.zeros(32, np.uint32)
    res = emulate(ptx, "k", 1, 32, [out], schedule=["minpc", "round_robin"])
    assert [d.kind for d in res.diagnostics] == ["race"]
    assert np.array_equal(out, np.arange(32) + 1000)  # minpc: the load completed when issued
    fixed = ptx.replace("    tcgen05.wait::ld.sync.aligned;\n", "").replace(
        "    mul.wide.u32 %rd2", "    tcgen05.wait::ld.sync.aligned;\n    mul.wide.u32 %rd2")
    assert emulate(fixed, "k", 1, 32, [out], schedule=["minpc", "round_robin", "random:1"]).ok
