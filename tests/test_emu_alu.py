"""porter.emu instruction semantics, one small kernel per family, against values worked out by hand
(or NumPy) from the PTX ISA's definitions."""

from __future__ import annotations

import numpy as np

from porter.emu import emulate


def _run(body: str, out_words: int, threads: int = 32, extra: str = "") -> np.ndarray:
    ptx = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<16>;
    .reg .b16 %rs<16>;
    .reg .b32 %r<64>;
    .reg .f32 %f<32>;
    .reg .b64 %rd<16>;
    {extra}
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
{body}
}}
"""
    out = np.zeros((threads, out_words), np.uint32)
    res = emulate(ptx, "k", 1, threads, [out])
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    return out


def _store(slots: list[str], words: int) -> str:
    """Store registers ``slots`` to out[tid][i]."""
    lines = [f"    mul.wide.u32 %rd2, %r0, {4 * words};", "    add.s64 %rd3, %rd1, %rd2;"]
    lines += [f"    st.global.b32 [%rd3+{4 * i}], {reg};" for i, reg in enumerate(slots)]
    return "\n".join(lines)


def test_bit_instructions() -> None:
    body = """
    mov.u32 %r1, 0x12345678;
    mov.u32 %r2, 0x9ABCDEF0;
    prmt.b32 %r3, %r1, %r2, 0x7531;
    bfe.u32 %r4, %r1, 4, 8;
    bfe.s32 %r5, %r2, 28, 4;
    bfi.b32 %r6, 0xF, %r1, 8, 4;
    shf.l.wrap.b32 %r7, %r1, %r2, 8;
    shf.r.clamp.b32 %r8, %r1, %r2, 40;
    popc.b32 %r9, %r2;
    clz.b32 %r10, %r1;
    brev.b32 %r11, %r1;
    shl.b32 %r12, %r1, 33;
    shr.s32 %r13, %r2, 40;
    mul.hi.u32 %r14, %r1, %r2;
    mul.hi.s32 %r15, %r1, %r2;
""" + _store([f"%r{i}" for i in range(3, 16)], 13)
    out = _run(body, 13, threads=1)[0]
    a, b = 0x12345678, 0x9ABCDEF0
    src = (b << 32) | a
    prmt = sum(((src >> (8 * ((0x7531 >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))
    sign_nibble = (b >> 28) & 0xF
    expected = [
        prmt, (a >> 4) & 0xFF, (sign_nibble - 16) & 0xFFFFFFFF if sign_nibble & 8 else sign_nibble,
        (a & ~0xF00) | 0xF00, ((src << 8) >> 32) & 0xFFFFFFFF, b, bin(b).count("1"), 3,
        int(f"{a:032b}"[::-1], 2), 0, 0xFFFFFFFF, (a * b) >> 32,
        ((a * (b - (1 << 32))) >> 32) & 0xFFFFFFFF,
    ]
    assert [int(x) for x in out] == expected


def test_integer_division_conversion_and_compare() -> None:
    body = """
    mov.u32 %r1, -7;
    div.s32 %r2, %r1, 2;
    rem.s32 %r3, %r1, 2;
    div.u32 %r4, %r1, 2;
    mov.f32 %f1, 0fC0300000;
    cvt.rzi.s32.f32 %r5, %f1;
    cvt.rni.s32.f32 %r6, %f1;
    cvt.rmi.s32.f32 %r7, %f1;
    mov.f32 %f2, 0f7FC00000;
    cvt.rzi.s32.f32 %r8, %f2;
    mov.f32 %f3, 0f4F800000;
    cvt.rzi.u32.f32 %r9, %f3;
    setp.lt.f32 %p1, %f2, %f1;
    setp.ltu.f32 %p2, %f2, %f1;
    selp.u32 %r10, 1, 0, %p1;
    selp.u32 %r11, 1, 0, %p2;
    max.f32 %f4, %f2, %f1;
    mov.b32 %r12, %f4;
    cvt.u16.u32 %rs1, %r1;
    cvt.s32.s16 %r13, %rs1;
    cvt.rn.f16.f32 %rs2, %f1;
    cvt.u32.u16 %r14, %rs2;
""" + _store([f"%r{i}" for i in range(2, 15)], 13)
    out = _run(body, 13, threads=1)[0]
    expected = [(-3) & 0xFFFFFFFF, (-1) & 0xFFFFFFFF, (2**32 - 7) // 2, (-2) & 0xFFFFFFFF, (-3) & 0xFFFFFFFF,
                (-3) & 0xFFFFFFFF, 0, 0xFFFFFFFF, 0, 1, int(np.float32(-2.75).view(np.uint32)),
                (-7) & 0xFFFFFFFF, int(np.float16(-2.75).view(np.uint16))]
    assert [int(x) for x in out] == expected


def test_warp_vote_redux_shuffle_up_and_atomics() -> None:
    extra = ".shared .align 4 .b8 counter[8];"
    body = """
    and.b32 %r1, %r0, 3;
    setp.eq.u32 %p1, %r1, 0;
    vote.sync.ballot.b32 %r2, %p1, -1;
    vote.sync.any.pred %p2, %p1, -1;
    selp.u32 %r3, 1, 0, %p2;
    redux.sync.add.u32 %r4, %r0, -1;
    redux.sync.max.s32 %r5, %r1, -1;
    shfl.sync.up.b32 %r6|%p3, %r0, 3, 0, -1;
    selp.u32 %r7, 1, 0, %p3;
    mov.u32 %r8, counter;
    setp.eq.u32 %p4, %r0, 0;
    @%p4 st.shared.u32 [%r8], 0;
    bar.sync 0;
    atom.shared.add.u32 %r9, [%r8], 2;
    bar.sync 0;
    ld.shared.u32 %r10, [%r8];
    atom.shared.cas.b32 %r11, [%r8], 64, 5;
""" + _store(["%r2", "%r3", "%r4", "%r5", "%r6", "%r7", "%r9", "%r10", "%r11"], 9)
    out = _run(body, 9, extra=extra)
    t = np.arange(32)
    assert (out[:, 0] == 0x11111111).all() and (out[:, 1] == 1).all()
    assert (out[:, 2] == t.sum()).all() and (out[:, 3] == 3).all()
    assert np.array_equal(out[:, 4], np.where(t >= 3, t - 3, t)) and np.array_equal(out[:, 5], t >= 3)
    assert np.array_equal(np.sort(out[:, 6]), 2 * t)  # each thread saw the sum of those before it
    assert (out[:, 7] == 64).all()
    assert out[0, 8] == 64 and (out[1:, 8] == 5).all()  # thread 0's cas swapped 64 for 5


def test_cp_async_zero_fills_past_src_size_and_lands_at_wait() -> None:
    ptx = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 src)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 buf[64];
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [src];
    mov.u32 %r1, buf;
    mov.u32 %r9, 0;
    st.shared.v4.u32 [%r1], {%r9, %r9, %r9, %r9};
    cp.async.cg.shared.global [%r1], [%rd2], 16, 6;
    cp.async.commit_group;
    ld.shared.u32 %r2, [%r1];
    cp.async.wait_group 0;
    ld.shared.v4.u32 {%r3, %r4, %r5, %r6}, [%r1];
    st.global.v4.u32 [%rd1], {%r3, %r4, %r5, %r6};
    st.global.u32 [%rd1+16], %r2;
    ret;
}
"""
    src = np.arange(1, 17, dtype=np.uint8)
    out = np.full(5, 0xFFFFFFFF, np.uint32)
    res = emulate(ptx, "k", 1, 1, [out, src])
    assert res.ok, [str(d) for d in res.diagnostics]
    got = out[:4].view(np.uint8)
    assert np.array_equal(got[:6], src[:6]) and not got[6:].any()
    assert out[4] == 0  # before the wait the destination still held what was stored first


def test_setp_on_a_half_with_a_predicate_pair_combines_each_with_c() -> None:
    """PTX ISA setp: ``p = BoolOp(t, c)`` and ``q = BoolOp(!t, c)``, for f16 as for f32 (q is not
    the negation of p once c takes part)."""
    body = """
    mov.b16 %rs1, 0x3C00;
    mov.b16 %rs2, 0x4000;
    setp.eq.u32 %p3, %r0, 1;
    setp.gt.and.f16 %p1|%p2, %rs1, %rs2, %p3;
    setp.gt.or.f16 %p4|%p5, %rs1, %rs2, %p3;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 1, 0, %p2;
    selp.u32 %r3, 1, 0, %p4;
    selp.u32 %r4, 1, 0, %p5;
""" + _store(["%r1", "%r2", "%r3", "%r4"], 4)
    out = _run(body, 4, threads=2)
    # 1.0 > 2.0 is false: and gives (false, c), or gives (c, true)
    assert out.tolist() == [[0, 0, 0, 1], [0, 1, 1, 1]]


def test_cvt_to_halves_honours_satfinite_and_relu() -> None:
    """PTX ISA cvt: ``cvt.frnd2{.relu}{.satfinite}.{f16,bf16}{,x2}.f32``: with .satfinite a value
    past the largest finite one (an infinity included) gives that value with its sign; .relu a
    negative 0. Without them an overflow is infinity."""
    body = """
    mov.f32 %f1, 0f49742400;
    mov.f32 %f2, 0fFF800000;
    mov.f32 %f3, 0fC0000000;
    cvt.rn.satfinite.f16x2.f32 %r1, %f1, %f2;
    cvt.rn.satfinite.bf16x2.f32 %r2, %f2, %f1;
    cvt.rn.f16x2.f32 %r3, %f1, %f2;
    cvt.rn.satfinite.f16.f32 %rs1, %f1;
    cvt.rn.satfinite.bf16.f32 %rs2, %f2;
    cvt.rn.relu.f16.f32 %rs3, %f3;
    cvt.rn.relu.satfinite.f16.f32 %rs4, %f2;
    cvt.u32.u16 %r4, %rs1;
    cvt.u32.u16 %r5, %rs2;
    cvt.u32.u16 %r6, %rs3;
    cvt.u32.u16 %r7, %rs4;
""" + _store([f"%r{i}" for i in range(1, 8)], 7)
    out = _run(body, 7, threads=1)[0]
    # 1e6 is past f16's 65504 (0x7BFF), not past bf16's range (0x4974); -inf saturates to -MAX_NORM
    assert [int(x) for x in out] == [0x7BFFFBFF, 0xFF7F4974, 0x7C00FC00, 0x7BFF, 0xFF7F, 0, 0]


def test_cvt_to_a_half_rounds_once_from_f64_and_from_integers() -> None:
    """PTX ISA cvt rounds the exact source once: just past an f16 tie (1 + 2^-11 + 2^-40) .rn goes
    up, just under 1 + 2^-10 .rz goes down, and 2^24 + 2^16 + 1 (past a bf16 tie) goes up to
    bf16 0x4B81. Through float32 each would round twice (onto the tie, or up to 1 + 2^-10)."""
    body = """
    mov.b64 %fd1, 0d3FF0020000001000;
    mov.b64 %fd2, 0d3FF003FFFFFFF000;
    mov.u32 %r1, 16842753;
    cvt.rn.f16.f64 %rs1, %fd1;
    cvt.rz.f16.f64 %rs2, %fd2;
    cvt.rn.bf16.s32 %rs3, %r1;
    cvt.u32.u16 %r2, %rs1;
    cvt.u32.u16 %r3, %rs2;
    cvt.u32.u16 %r4, %rs3;
""" + _store(["%r2", "%r3", "%r4"], 3)
    out = _run(body, 3, threads=1, extra=".reg .f64 %fd<4>;")[0]
    assert [int(x) for x in out] == [0x3C01, 0x3C00, 0x4B81]


def test_int64_to_bf16_rounds_once_past_2_to_the_53() -> None:
    """2^60 + 2^52 + 1 lies just above a bf16 tie: rounded once it goes up; through float64 to
    nearest first it landed on the tie and went down to the even 2^60."""
    body = """
    mov.u64 %rd4, 1157425104234217473;
    cvt.rn.bf16.s64 %rs1, %rd4;
    cvt.rz.bf16.s64 %rs2, %rd4;
    cvt.u32.u16 %r1, %rs1;
    cvt.u32.u16 %r2, %rs2;
""" + _store(["%r1", "%r2"], 2)
    out = _run(body, 2, threads=1)[0]
    assert 2**60 + 2**52 + 1 == 1157425104234217473
    assert out.tolist() == [0x5D81, 0x5D80]  # 2^60 + 2^53, and 2^60 toward zero
