"""porter.emu core: the vector-add and softmax examples against NumPy, and instruction semantics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from porter.emu import emulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _kernel(body: str, params: str = ".param .u64 out", target: str = "sm_80", regs: str = "") -> str:
    return f"""
.version 8.0
.target {target}
.address_size 64
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b16 %h<8>;
    .reg .b32 %r<32>;
    .reg .f32 %f<32>;
    .reg .b64 %rd<16>;
    {regs}
{body}
}}
"""


def test_vector_add_matches_numpy() -> None:
    ptx = (EXAMPLES / "vector_add" / "kernel.ptx").read_text()
    n = 1000
    rng = np.random.default_rng(1)
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    res = emulate(ptx, "vector_add", ((n + 255) // 256,), (256,), [x, y, out, np.float32(1.5), np.int32(n)])
    assert res.ok and not res.diagnostics
    expected = (x.astype(np.float64) * np.float64(np.float32(1.5)) + y).astype(np.float32)  # one rounding: fma
    assert np.array_equal(out, expected)


@pytest.mark.parametrize(("rows", "cols", "ld"), [(1, 1, 1), (5, 31, 31), (3, 1000, 1005), (2, 4097, 4097)])
def test_softmax_matches_float64_reference(rows: int, cols: int, ld: int) -> None:
    ptx = (EXAMPLES / "softmax" / "kernel.ptx").read_text()
    rng = np.random.default_rng(rows * cols)
    x = rng.uniform(-100, 100, (rows, ld)).astype(np.float32)
    y = np.full((rows, cols), np.nan, np.float32)
    res = emulate(ptx, "softmax_rows", (rows,), (256,), [x, y, np.int32(rows), np.int32(cols), np.int32(ld)])
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    xs = x[:, :cols].astype(np.float64)
    e = np.exp(xs - xs.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert np.allclose(y, ref, rtol=1e-4, atol=1e-12)


def _run1(body: str, out: np.ndarray, threads: int = 32, **kw: object) -> list[str]:
    res = emulate(_kernel(body, **kw), "k", 1, threads, [out])  # type: ignore[arg-type]
    return [str(d) for d in res.diagnostics]


def test_fma_rounds_once_and_directed_modes() -> None:
    # a*b+c with a tie after the float64 rounding: 1 + 2^-24 + 2^-60 must round up, not to even.
    a, b, c = np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(-(2**-11))
    body = f"""
    ld.param.u64 %rd1, [out];
    mov.f32 %f1, 0f{a.view(np.uint32):08X};
    mov.f32 %f2, 0f{b.view(np.uint32):08X};
    mov.f32 %f3, 0f{c.view(np.uint32):08X};
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd1], %f4;
    mov.f32 %f5, 0f3F800000;
    mov.f32 %f6, 0f40400000;
    div.rn.f32 %f7, %f5, %f6;
    st.global.f32 [%rd1+4], %f7;
    add.rm.f32 %f8, %f7, %f7;
    st.global.f32 [%rd1+8], %f8;
    fma.rp.f32 %f9, %f7, %f6, %f5;
    st.global.f32 [%rd1+12], %f9;
    """
    out = np.zeros(4, np.float32)
    assert _run1(body, out, threads=1) == []
    exact = float(a) * float(b) + float(c)  # 1 + 2^-24 exactly: a tie in f32 that rounds to even (1.0)
    assert out[0] == np.float32(exact)
    assert out[1] == np.float32(1) / np.float32(3)
    assert out[2] == np.float32(2.0 / 3.0) or out[2] == np.nextafter(np.float32(2.0 / 3.0), np.float32(0))
    assert out[3] >= np.float32(2.0)


def test_bf16_conversion_and_packing() -> None:
    body = """
    ld.param.u64 %rd1, [out];
    mov.f32 %f1, 0f3F808000;
    mov.f32 %f2, 0f3F818000;
    cvt.rn.bf16x2.f32 %r1, %f1, %f2;
    st.global.b32 [%rd1], %r1;
    cvt.rn.bf16.f32 %h1, %f2;
    cvt.f32.bf16 %f3, %h1;
    st.global.f32 [%rd1+4], %f3;
    """
    out = np.zeros(2, np.uint32)
    assert _run1(body, out, threads=1) == []
    # 0x3F808000 is a tie between 0x3F80 and 0x3F81 (to even: 0x3F80); 0x3F818000 ties to 0x3F82.
    assert out[0] == (0x3F80 << 16) | 0x3F82
    assert out[1] == 0x3F820000


def test_divergent_branches_reconverge_for_a_shuffle() -> None:
    body = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.s32 %p1, %r2, 0;
    @%p1 bra EVEN;
    mul.lo.s32 %r3, %r1, 10;
    bra.uni JOIN;
EVEN:
    mul.lo.s32 %r3, %r1, 100;
JOIN:
    shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    """
    out = np.zeros(32, np.uint32)
    assert _run1(body, out) == []
    t = np.arange(32)
    own = np.where(t % 2 == 0, t * 100, t * 10)
    assert np.array_equal(out, own[t ^ 1])


def test_out_of_bounds_store_is_fatal_with_address_and_buffer() -> None:
    body = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    """
    out = np.zeros(8, np.uint32)
    res = emulate(_kernel(body), "k", 1, 32, [out])
    assert not res.ok
    (d,) = res.fatal
    assert d.kind == "out-of-bounds" and d.line > 0 and "past its 32 bytes" in d.message
    assert d.details["buffer"].startswith("arg0") and d.details["offset"] == 32


def test_shared_memory_read_before_write_is_reported() -> None:
    body = """
    .shared .align 4 .b8 buf[128];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, buf;
    add.s32 %r4, %r3, %r2;
    ld.shared.u32 %r5, [%r4];
    st.shared.u32 [%r4], %r1;
    """
    out = np.zeros(1, np.uint32)
    res = emulate(_kernel(body), "k", 1, 32, [out])
    kinds = [d.kind for d in res.diagnostics]
    assert kinds == ["uninitialized-shared"]
    assert res.ok  # a finding, not a fault
