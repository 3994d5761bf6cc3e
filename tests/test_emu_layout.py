"""Where the emulator places a launch's global buffers: drawn per launch (slot and a 256-byte
aligned start), so that no pointer value or distance between buffers tells a kernel it is
emulated; accesses on either side of a buffer are still caught and name it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.emu import emulate

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


def test_pointers_differ_between_launches_and_keep_cudamallocs_alignment_only() -> None:
    seen = [_pointers() for _ in range(12)]
    firsts = {a for a, _ in seen}
    distances = {b - a for a, b in seen}
    assert len(firsts) == 12 and len(distances) == 12
    assert all(p % 256 == 0 and p < 1 << 48 for pair in seen for p in pair)
    assert any(p % 4096 for pair in seen for p in pair)  # not page-aligned as a rule


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
