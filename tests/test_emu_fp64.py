"""fma.rn.f64 rounds once: porter.emu.fp64.fma_f64 against exact rational arithmetic, on random
operands, on sums that cancel the product (where a twice-rounded a * b + c loses everything), on
products that fall exactly halfway between two doubles, and at the edges of the range."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from porter.emu.fp64 import fma_f64


def _exact(a: float, b: float, c: float) -> float:
    q = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _wrong(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[tuple[float, float, float]]:
    got = fma_f64(a, b, c)
    return [(x, y, z) for x, y, z, g in zip(a.tolist(), b.tolist(), c.tolist(), got.tolist(), strict=True)
            if _exact(x, y, z) != g]


def test_random_and_cancelling_operands_round_once() -> None:
    rng = np.random.default_rng(3)
    n = 20000
    a = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)
    b = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)
    near = -(a * b) * (1 + rng.standard_normal(n) * 2.0**-40)
    c = np.where(rng.random(n) < 0.5, near, rng.standard_normal(n) * 2.0 ** rng.integers(-80, 80, n))
    assert not _wrong(a, b, c)
    # the error of a product, which CUDA's double-precision functions are built on: never 0 here
    err = fma_f64(a, b, -(a * b))
    assert (err == np.array([_exact(x, y, -(x * y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)])).all()
    assert np.count_nonzero(err) > n // 2


def test_halfway_products_round_to_even_and_a_tiny_addend_breaks_the_tie() -> None:
    rng = np.random.default_rng(5)
    n = 20000
    a = (rng.integers(2**26, 2**27, n) | 1) * 2.0**-26  # 27-bit odd significands: 54-bit products
    b = (rng.integers(2**26, 2**27, n) | 1) * 2.0**-26
    c = np.choose(rng.integers(0, 4, n), [np.zeros(n), np.full(n, 2.0**-80), np.full(n, -(2.0**-80)),
                                          -np.floor(a * b)])
    assert not _wrong(a, b, c)


def test_edges_of_the_range() -> None:
    edges = [0.0, 1.0, -1.0, 1e-310, -5e-324, 2.2250738585072014e-308, 1e308, -1.7976931348623157e308, 3.0,
             1e-200, 1e200, 2.0**-537, 2.0**512, 1 + 2.0**-52, 1 - 2.0**-53]
    a, b, c = (g.ravel() for g in np.meshgrid(edges, edges, edges))
    got = fma_f64(a, b, c)
    want = np.array([_exact(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)])
    assert np.array_equal(got, want)
    # infinities and NaN as IEEE 754 says: inf * 0 is invalid, inf + -inf too
    special = fma_f64(np.array([np.inf, np.inf, 2.0, np.nan]), np.array([0.0, 1.0, 3.0, 1.0]),
                      np.array([1.0, -np.inf, np.inf, 0.0]))
    assert np.isnan(special[0]) and np.isnan(special[1]) and special[2] == np.inf and np.isnan(special[3])


def test_directed_modes_round_toward_their_side_and_overflow_as_ieee_says() -> None:
    """add/sub/mul/div/fma .rz/.rm/.rp of f64 (they ran as .rn before): the neighbours of 1/3,
    of 1 + 2^-60 and of -1 - 2^-60, and an overflow that only .rp (or .rm below) takes to infinity."""
    from porter.emu.fp64 import directed_f64

    third = 1 / 3  # below the exact third
    above = math.nextafter(third, 2)
    one = np.array([1.0])
    assert directed_f64("div", "rz", one, np.array([3.0]))[0] == third
    assert directed_f64("div", "rp", one, np.array([3.0]))[0] == above
    assert directed_f64("div", "rm", -one, np.array([3.0]))[0] == -above
    tiny = np.array([2.0**-60])
    assert directed_f64("add", "rp", one, tiny)[0] == math.nextafter(1.0, 2)
    assert directed_f64("add", "rz", one, tiny)[0] == 1.0
    assert directed_f64("sub", "rm", -one, tiny)[0] == math.nextafter(-1.0, -2)
    assert directed_f64("fma", "rp", one, one, tiny)[0] == math.nextafter(1.0, 2)
    big = np.array([np.finfo(np.float64).max])
    assert directed_f64("mul", "rz", big, np.array([2.0]))[0] == big[0]
    assert directed_f64("mul", "rp", big, np.array([2.0]))[0] == math.inf
    assert directed_f64("mul", "rm", -big, np.array([2.0]))[0] == -math.inf
    assert directed_f64("mul", "rp", -big, np.array([2.0]))[0] == -big[0]
    assert np.isnan(directed_f64("add", "rz", np.array([np.inf]), np.array([-np.inf]))[0])


def test_the_emulator_runs_f64_directed_modes() -> None:
    from porter.emu import emulate

    ptx = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .f64 %fd<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.f64 %fd1, 0d3FF0000000000000;
    mov.f64 %fd2, 0d4008000000000000;
    div.rp.f64 %fd3, %fd1, %fd2;
    div.rm.f64 %fd4, %fd1, %fd2;
    st.global.f64 [%rd2], %fd3;
    st.global.f64 [%rd2+8], %fd4;
    ret;
}
"""
    out = np.zeros(2, np.float64)
    assert emulate(ptx, "k", 1, 1, [out]).ok
    assert out.tolist() == [math.nextafter(1 / 3, 2), 1 / 3]
