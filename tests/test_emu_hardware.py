"""What the H100 calibration of 2026-12-05 (tools/emu_calibrate.py; docs/emulator.md, "Calibration")
found the emulator doing otherwise than the hardware, one test per finding: the bits of a NaN
result, the sign of an exact zero sum under ``.rm``, and the order of the f64 ``mma.sync``'s
sums. Each fails on the emulator of before the run."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from porter.emu import emulate
from porter.emu.fp import add_f32, canonical_nan, fma_f32
from porter.emu.fp64 import directed_f64
from porter.emu.tensorcore import hardware_sum_bound

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _f32_kernel(body: str) -> str:
    return HEAD + f"""
.visible .entry k(.param .u64 x, .param .u64 y, .param .u64 out)
{{
    .reg .f32 %f<16>;
    .reg .b64 %rd<8>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.f32 %f1, [%rd5];
    ld.global.f32 %f2, [%rd6];
    mul.wide.u32 %rd4, %r1, 32;
    add.s64 %rd7, %rd3, %rd4;
{body}
}}
"""


OPS = ["sqrt.rn.f32 %f3, %f1;", "div.rn.f32 %f3, %f1, %f2;", "add.rm.f32 %f3, %f1, %f2;",
       "fma.rn.f32 %f3, %f1, %f2, %f1;", "mul.rz.f32 %f3, %f1, %f2;", "rcp.rn.f32 %f3, %f2;",
       "min.NaN.f32 %f3, %f1, %f2;", "sqrt.approx.f32 %f3, %f1;"]


def _run_ops(x: list[float], y: list[float]) -> np.ndarray:
    body = "\n".join(f"    {op}\n    st.global.f32 [%rd7+{4 * i}], %f3;" for i, op in enumerate(OPS))
    out = np.zeros((len(x), len(OPS)), np.uint32)
    res = emulate(_f32_kernel(body), "k", 1, len(x), [np.array(x, np.float32), np.array(y, np.float32), out])
    assert res.ok, [str(d) for d in res.diagnostics]
    return out


def test_a_nan_result_of_f32_arithmetic_is_the_gpus_canonical_nan() -> None:
    """On the H100, sqrt.rn.f32 of -1 (and every other NaN the float_edges ``arith`` case makes:
    0/0, inf - inf, 0 * inf, a NaN operand) wrote 0x7FFFFFFF; NumPy gives 0xFFC00000 for the square
    root of a negative on x86 and 0x7FC00000 for the rest, and so did the emulator."""
    nan = float("nan")
    out = _run_ops([-1.0, 0.0, np.inf, nan, 1.0], [2.0, 0.0, -np.inf, 1.0, nan])
    for row, words in zip(([0, 7], [1], [1, 2, 3], [0, 1, 2, 3, 4, 6, 7], [1, 2, 3, 4, 5, 6]), out, strict=True):
        f = words.view(np.float32)
        assert np.isnan(f).sum() == len(row) and all(np.isnan(f[row])), (words, row)
        assert all(words[row] == 0x7FFFFFFF), [hex(w) for w in words]
    # a NaN that is only moved or converted keeps its bits (the GPU's cvt.f32.f64 kept NumPy's)
    quiet = np.array([0x7FC00000, 0xFFC00001], np.uint32).view(np.float32)
    assert canonical_nan(quiet).view(np.uint32).tolist() == [0x7FFFFFFF, 0x7FFFFFFF]
    assert canonical_nan(np.array([np.nan])).view(np.uint64)[0] == np.array([np.nan]).view(np.uint64)[0]


def test_an_exact_zero_sum_rounded_down_is_minus_zero() -> None:
    """IEEE 754 6.3: x + (-x) is +0 in every rounding mode but roundTowardNegative, where it is -0
    (unless both addends are +0). The H100 gave -0 for add.rm.f32 of 0.5 + -0.5; the emulator
    and the corpus model gave +0."""
    out = _run_ops([-0.5, 0.6378177, 0.0, 0.0, -0.0, 2.0], [0.5, -0.6378177, 0.0, -0.0, -0.0, -1.0])
    add_rm = out[:, 2]
    assert [hex(w) for w in add_rm] == ["0x80000000", "0x80000000", "0x0", "0x80000000", "0x80000000",
                                       "0x3f800000"]
    x, y = np.array([1.5, 0.0, 3.0], np.float32), np.array([-1.5, 0.0, 1.0], np.float32)
    assert np.signbit(add_f32(x, y, "rm")).tolist() == [True, False, False]
    assert not np.signbit(add_f32(x, y, "rz")).any() and not np.signbit(add_f32(x, y, "rp")).any()
    # fma: a * b + c exactly zero
    assert np.signbit(fma_f32(np.float32(2), np.float32(3), np.float32(-6), "rm"))
    assert not np.signbit(fma_f32(np.float32(2), np.float32(3), np.float32(-6), "rn"))
    # f64, worked out with rationals
    assert np.signbit(directed_f64("add", "rm", np.array([0.1]), np.array([-0.1])))[0]
    assert np.signbit(directed_f64("sub", "rm", np.array([0.1]), np.array([0.1])))[0]
    assert np.signbit(directed_f64("fma", "rm", np.array([0.5]), np.array([4.0]), np.array([-2.0])))[0]
    assert not np.signbit(directed_f64("add", "rm", np.array([0.0]), np.array([0.0])))[0]
    assert not np.signbit(directed_f64("add", "rz", np.array([0.1]), np.array([-0.1])))[0]


MMA_F64 = HEAD.replace("sm_90", "sm_80") + """
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d)
{
    .reg .f64 %fd<8>;
    .reg .b64 %rd<16>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u64 %rd4, [d];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd1, %rd5;
    add.s64 %rd7, %rd2, %rd5;
    ld.global.f64 %fd1, [%rd6];
    ld.global.f64 %fd2, [%rd7];
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd8, %rd3, %rd5;
    add.s64 %rd9, %rd4, %rd5;
    ld.global.f64 %fd3, [%rd8];
    ld.global.f64 %fd4, [%rd8+8];
    mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%fd5, %fd6}, {%fd1}, {%fd2}, {%fd3, %fd4};
    st.global.f64 [%rd9], %fd5;
    st.global.f64 [%rd9+8], %fd6;
}
"""


def test_f64_mma_is_a_chain_of_fmas_in_k_order() -> None:
    """m8n8k4 f64 on the H100 matched fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))) in
    every element of the corpus case, where a float64 matmul plus c (the emulator's way) differed
    in 6 of 128. Lane l holds A[l / 4][l % 4] and B[l % 4][l / 4]; C and D rows l / 4, columns
    2 (l % 4) and 2 (l % 4) + 1. Here one row has terms whose fmas in k order differ from their
    sum rounded once and from a matmul's float64 sum."""
    a = np.ones((8, 4))
    b = np.ones((4, 8))
    c = np.zeros((8, 8))
    # row 0, column 0: 2^60 + 1 - 2^60 + 1 with c = 0.5: fmas in order give 0.5 -> 2^60 -> 2^60 -> 0 -> 1
    a[0] = [2.0**60, 1.0, -(2.0**60), 1.0]
    b[:, 0] = 1.0
    c[0, 0] = 0.5
    lanes = np.arange(32)
    a_frag = a[lanes // 4, lanes % 4]
    b_frag = b[lanes % 4, lanes // 4]
    c_frag = np.stack([c[lanes // 4, 2 * (lanes % 4)], c[lanes // 4, 2 * (lanes % 4) + 1]], axis=1).reshape(-1)
    d = np.zeros(64)
    res = emulate(MMA_F64, "k", 1, 32, [a_frag, b_frag, c_frag, d])
    assert res.ok, [str(x) for x in res.diagnostics]
    got = np.zeros((8, 8))
    got[lanes // 4, 2 * (lanes % 4)] = d.reshape(32, 2)[:, 0]
    got[lanes // 4, 2 * (lanes % 4) + 1] = d.reshape(32, 2)[:, 1]
    want = np.zeros((8, 8))
    for i, j in np.ndindex(want.shape):
        acc = float(c[i, j])
        for k in range(4):
            acc = float(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) + Fraction(acc))
        want[i, j] = acc
    assert got[0, 0] == 1.0 == want[0, 0]  # exact: 2.5; summed in order, then plus c: 1.5
    assert np.array_equal(got, want)


def test_the_hardware_sum_bound_is_gamma_n_of_the_truncation_unit() -> None:
    m = np.array([1.0, 1000.0])
    u = 2.0**-23
    assert np.allclose(hardware_sum_bound(m, 9, 24), m * 9 * u / (1 - 9 * u))
    u = 2.0**-13
    assert np.allclose(hardware_sum_bound(m, 33, 14), m * 33 * u / (1 - 33 * u))
