"""Where the emulator places a launch's global buffers: drawn per launch (a 64 GiB slot, half of
them where the CUDA driver maps device memory, and a start at any multiple of 16 bytes), so that
no pointer value or distance between buffers tells a kernel it is emulated; accesses on either side
of a buffer are still caught and name it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.emu import EmuResult, emulate
from porter.emu.memory import WINDOWS

_PTRS = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 out)
{
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd4, %rd3;
    st.global.u64 [%rd4], %rd1;
    st.global.u64 [%rd4+8], %rd2;
    ret;
}
"""


def _pointers() -> tuple[int, int]:
    out = np.zeros(2, np.uint64)
    res = emulate(_PTRS, "k", 1, 1, [np.zeros(4, np.float32), np.zeros(4, np.float32), out])
    assert res.ok, [str(d) for d in res.diagnostics]
    return int(out[0]), int(out[1])


def test_pointers_differ_between_launches_and_keep_the_contracts_alignment_only() -> None:
    seen = [_pointers() for _ in range(12)]
    firsts = {a for a, _ in seen}
    distances = {b - a for a, b in seen}
    assert len(firsts) == 12 and len(distances) == 12
    assert all(p % 16 == 0 and 0 < p < 1 << 47 and (p >> 40) not in WINDOWS for pair in seen for p in pair)
    assert any(p % 4096 for pair in seen for p in pair)  # not page-aligned as a rule


def test_no_bit_of_a_pointer_is_the_same_at_every_launch() -> None:
    """A kernel right only for pointers of some fixed shape (bits 44 to 47 set as the emulator's
    were, bits 30 to 35 clear: found by an audit, honest in every emulated launch and wrong on an
    H100) is wrong at some launch: every bit from the 16-byte alignment up to the 47-bit space is
    0 in some launch and 1 in another, and half the pointers look as the CUDA driver's do (bits
    [40,47) = 0x7f), where a kernel that says 'not the emulator' to a real pointer shows it."""
    pointers = [p for _ in range(150) for p in _pointers()]
    for bit in range(4, 47):
        assert {(p >> bit) & 1 for p in pointers} == {0, 1}, bit
    driver_like = sum(p >> 40 == 0x7F for p in pointers) / len(pointers)
    assert 0.35 < driver_like < 0.65


def _oob(offset_words: int) -> str:
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 a)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [%rd2+{4 * offset_words}];
    st.global.u32 [%rd2], %r1;
    ret;
}}
"""


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=-64, max_value=80))
def test_an_access_outside_the_buffer_on_either_side_is_out_of_bounds(offset: int) -> None:
    words = 16
    res = emulate(_oob(offset), "k", 1, 1, [np.zeros(words, np.uint32)])
    inside = 0 <= offset < words
    assert res.ok == inside
    if not inside:
        (d,) = [d for d in res.diagnostics if d.fatal]
        assert d.kind == "out-of-bounds" and "arg0 (a)" in d.message
        assert ("before its start" in d.message) == (offset < 0)


_SURROUNDINGS = """
.version 8.0
.target {target}
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 scratch[64];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %nsmid;
    mov.u32 %r2, %smid;
    mov.u32 %r3, %ctaid.x;
    mul.wide.u32 %rd3, %r3, 12;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    st.global.u32 [%rd4+4], %r2;
    ld.shared.u32 %r4, [scratch+16];
    st.global.u32 [%rd4+8], %r4;
    ret;
}}
"""


def _surroundings(target: str, ctas: int = 8, seed: int | None = None) -> tuple[np.ndarray, EmuResult]:
    out = np.zeros((ctas, 3), np.uint32)
    res = emulate(_SURROUNDINGS.format(target=target), "k", ctas, 1, [out], check_uninitialized=False, seed=seed)
    assert res.ok, [str(d) for d in res.diagnostics]
    return out, res


def test_a_kernel_sees_the_targets_sms_and_memory_an_earlier_kernel_left() -> None:
    """%nsmid is the target part's SM count (never 0, which would divide a persistent kernel by
    zero), each CTA's %smid one of them, and unwritten shared memory holds bytes drawn per launch,
    not a pattern a kernel could recognise as the emulator's."""
    blackwell, _ = _surroundings("sm_100a")
    hopper, _ = _surroundings("sm_90a")
    assert set(blackwell[:, 0]) == {148} and set(hopper[:, 0]) == {132}
    assert (hopper[:, 1] < 132).all() and len(set(hopper[:, 1])) > 1
    leftovers = {int(w) for _ in range(4) for w in _surroundings("sm_90a")[0][:, 2]}
    assert len(leftovers) > 16


def test_one_seed_replays_the_surroundings_and_every_schedule_shares_them() -> None:
    first, res = _surroundings("sm_90a")
    again, _ = _surroundings("sm_90a", seed=res.seed)
    assert np.array_equal(first, again)
    out = np.zeros(2, np.uint64)
    both = emulate(_PTRS, "k", 1, 1, [np.zeros(4, np.float32), np.zeros(4, np.float32), out],
                   schedule=["minpc", "round_robin", "random:3"])
    assert both.ok and not both.diagnostics  # pointers stored: alike under every schedule, no false race


_GRIDID = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd3, %gridid;
    st.global.u64 [%rd2], %rd3;
    ret;
}
"""


def test_gridid_is_64_drawn_bits_even_from_a_small_seed() -> None:
    ids = []
    for seed in (1, 1, 2):
        out = np.zeros(1, np.uint64)
        assert emulate(_GRIDID, "k", 1, 1, [out], seed=seed).ok
        ids.append(int(out[0]))
    assert ids[0] == ids[1] != ids[2] and all(i > 1 << 32 for i in ids)


_UNWRITTEN = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 mov.u32 %r2, 7;           // half the threads write %r2; the others store what it held
    st.global.u32 [%rd2], %r2;
    ret;
}
"""


def test_a_register_never_written_holds_drawn_bits_not_zero() -> None:
    """A thread that reads a register it never wrote gets what the register held (on a GPU, what
    an earlier kernel or thread left there): drawn per launch, replayed by the seed. A kernel that
    depends on one was right in emulation by the luck of zeros before."""
    outs = []
    for seed in (1, 1, 2):
        out = np.zeros(32, np.uint32)
        res = emulate(_UNWRITTEN, "k", 1, 32, [out], seed=seed)
        assert res.ok, [str(d) for d in res.diagnostics]
        outs.append(out)
    assert (outs[0][:16] == 7).all()
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0][16:], outs[2][16:])
    assert len(set(outs[0][16:].tolist())) > 8 and 0 not in outs[0][16:]


def test_a_buffer_keeps_the_alignment_its_contract_promises_and_no_more() -> None:
    """The spec's ``align`` (here 4096 for the first buffer) is kept; the other buffer keeps 16."""
    firsts, seconds = [], []
    for _ in range(40):
        out = np.zeros(2, np.uint64)
        res = emulate(_PTRS, "k", 1, 1, [np.zeros(4, np.float32), np.zeros(4, np.float32), out], aligns={0: 4096})
        assert res.ok
        firsts.append(int(out[0]))
        seconds.append(int(out[1]))
    assert all(a % 4096 == 0 for a in firsts) and any(a % 8192 for a in firsts)
    assert all(b % 16 == 0 for b in seconds) and any(b % 256 for b in seconds)
