"""Output comparison: the pass rule, the metrics, and the sentences that localize a failure.

Each test checks what the agent reads (the pattern sentences and :func:`format_comparison`), not
only the fields behind them.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from porter.gate.compare import compare, compare_runs, format_comparison
from porter.gate.summary import reference_warnings

F32 = {"atol": 1e-5, "rtol": 1e-4}
BF16 = {"atol": 1e-2, "rtol": 2e-2}
EXACT = {"atol": 0.0, "rtol": 0.0}


def _ref(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _at(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def _patterns(c) -> str:
    assert c.localization is not None
    return "\n".join(c.localization.patterns)


# --------------------------------------------------------------------------------------------
# the pass rule


def test_identical_output_passes_with_zero_error() -> None:
    ref = _ref((64, 48))
    c = compare("C", ref.copy(), ref, **F32)
    assert c.passed and c.mismatches == 0 and c.localization is None and c.first_bad == ()
    assert (c.max_abs_err, c.max_rel_err, c.rel_l2) == (0.0, 0.0, 0.0)
    text = format_comparison(c)
    assert text.startswith("C: ok, (64, 48) float32: max abs err 0")
    assert "FAILED" not in text


def test_error_within_tolerance_passes_and_is_reported() -> None:
    ref = np.linspace(1.0, 2.0, 1000)
    out = ref * (1 + 5e-5)  # rtol 1e-4 allows it
    c = compare("y", out, ref, **F32)
    assert c.passed
    assert c.max_abs_err == pytest.approx(1e-4, rel=1e-3)
    assert c.max_rel_err == pytest.approx(5e-5, rel=1e-3)
    assert c.rel_l2 == pytest.approx(5e-5, rel=1e-3)
    assert "y: ok" in format_comparison(c)
    assert "max rel err 5e-05" in format_comparison(c)


def test_one_bad_element_is_found_with_its_index_and_values() -> None:
    ref = _ref((256, 256))
    out = ref.copy()
    out[3, 7] += 1.0
    c = compare("C", out, ref, **F32)
    assert not c.passed and c.mismatches == 1 and c.total == 65536
    assert c.first_bad[0].index == (3, 7)
    assert c.first_bad[0].got == pytest.approx(float(ref[3, 7]) + 1.0)
    assert c.localization is not None and c.localization.bad_region == ((3, 7), (3, 7))
    text = format_comparison(c)
    assert "C: FAILED, 1 of 65536 elements wrong" in text
    assert "in row 3, column 7" in text
    assert f"(3, 7) got {float(out[3, 7]):.6g}, expected {float(ref[3, 7]):.6g}" in text
    assert "only row 3 is bad" in text and "only column 7 is bad" in text


def test_first_bad_lists_the_first_elements_in_c_order_up_to_max_examples() -> None:
    ref = _ref((40, 40))
    out = ref.copy()
    out[::3, 5] = 9.0
    out[0, 30] = 9.0
    c = compare("C", out, ref, max_examples=3, **F32)
    assert [e.index for e in c.first_bad] == [(0, 5), (0, 30), (3, 5)]
    assert c.mismatches == 15


def test_nan_where_the_reference_has_none_fails_even_with_a_huge_tolerance() -> None:
    ref = _ref((10, 10))
    out = ref.copy()
    out[4, 4] = np.nan
    c = compare("C", out, ref, atol=1e30, rtol=1e30)
    assert not c.passed and c.mismatches == 1 and c.nan_count == 1
    assert "1 elements never written (still poison), in row 4, column 4" in _patterns(c)
    assert "out has 1 NaN" in format_comparison(c)


def test_nan_in_the_reference_matched_by_nan_passes_and_unmatched_fails() -> None:
    ref = np.array([1.0, np.nan, 3.0])
    c = compare("v", np.array([1.0, np.nan, 3.0]), ref, **EXACT)
    assert c.passed and c.ref_nan_count == 1 and c.nan_count == 1
    bad = compare("v", np.array([1.0, 2.0, 3.0]), ref, **EXACT)
    assert not bad.passed and bad.first_bad[0].index == (1,)
    assert "(1) got 2, expected nan" in format_comparison(bad)


def test_inf_must_match_exactly() -> None:
    ref = np.array([np.inf, -np.inf, 1.0, np.inf, np.inf])
    out = np.array([np.inf, -np.inf, 1.0, 1e300, -np.inf])
    c = compare("v", out, ref, atol=1e9, rtol=10.0)
    assert [e.index for e in c.first_bad] == [(3,), (4,)]
    assert c.inf_count == 3
    text = format_comparison(c)
    assert "2 of 5 elements wrong" in text
    assert "(3) got 1e+300, expected inf" in text and "(4) got -inf, expected inf" in text
    assert "out has 0 NaN, 3 Inf" in text
    assert compare("v", ref.copy(), ref, **EXACT).passed
    finite_out_inf_ref = compare("v", np.array([1.0, 2.0]), np.array([1.0, np.inf]), atol=1e9, rtol=1e9)
    assert not finite_out_inf_ref.passed


def test_integer_outputs_are_compared_exactly_even_beyond_float64_precision() -> None:
    ref = np.array([2**62, 7, -3], dtype=np.int64)
    out = ref.copy()
    out[0] += 1  # the same float64 as ref[0]
    c = compare("idx", out, ref, **EXACT)
    assert not c.passed and c.mismatches == 1
    assert c.first_bad[0].got == 2**62 + 1 and c.first_bad[0].expected == 2**62
    assert c.max_abs_err == 1.0
    assert "(0) got 4611686018427387905, expected 4611686018427387904" in format_comparison(c)
    assert compare("idx", ref.copy(), ref, **EXACT).passed
    assert compare("idx", np.arange(10, dtype=np.int32), np.arange(10, dtype=np.int64), **EXACT).passed


def test_zero_size_arrays_pass_with_a_warning() -> None:
    c = compare("C", np.zeros((0, 128), np.float32), np.zeros((0, 128), np.float32), **F32)
    assert c.passed and c.total == 0 and c.localization is None
    assert c.max_abs_err == 0.0 and c.rel_l2 == 0.0
    assert "warning: the reference is empty: nothing is compared" in format_comparison(c)


def test_scalar_outputs_compare() -> None:
    c = compare("sum", np.array(2.0), np.array(1.0), **EXACT)
    assert not c.passed and c.first_bad[0].index == ()
    assert "1 of 1 elements wrong, in the only element" in format_comparison(c)


def test_shape_mismatch_fails_and_says_so() -> None:
    c = compare("C", np.zeros((4, 6)), _ref((4, 5)), **F32)
    assert not c.passed and c.mismatches == 20 and c.localization is not None
    assert c.localization.summary == "out has shape (4, 6) but the reference has (4, 5) (24 vs 20 elements)"
    assert "FAILED" in format_comparison(c)


def test_shape_mismatch_recognises_a_transposed_output() -> None:
    ref = _ref((30, 20))
    c = compare("C", ref.T.copy(), ref, **F32)
    assert not c.passed
    assert "out holds the reference transposed" in c.localization.summary


def test_bf16_outputs_are_compared_as_their_float_values() -> None:
    ref = _ref((128, 96), seed=3)
    out = ref.astype(ml_dtypes.bfloat16)
    c = compare("C", out, ref, **BF16)
    assert c.passed and c.dtype == "bfloat16"
    assert 0 < c.max_abs_err <= 2**-8  # bf16 rounding of values in [-1, 1], nothing more
    assert "C: ok, (128, 96) bfloat16" in format_comparison(c)
    wrong = out.copy()
    wrong[17, 40] = ml_dtypes.bfloat16(4.0)
    c = compare("C", wrong, ref, **BF16)
    assert not c.passed and c.mismatches == 1
    assert c.first_bad[0].index == (17, 40) and c.first_bad[0].got == 4.0
    assert "(17, 40) got 4, expected" in format_comparison(c)


def test_tolerances_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="tolerances must be >= 0"):
        compare("C", np.zeros(3), np.zeros(3), atol=-1.0, rtol=0.0)


def test_a_tile_that_does_not_fit_the_output_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"tile \(1, 2, 3\) does not fit an output of shape \(4, 4\)"):
        compare("C", np.zeros((4, 4)), np.zeros((4, 4)), tile=(1, 2, 3), **EXACT)


# --------------------------------------------------------------------------------------------
# localization


def test_poison_in_the_last_partial_tile_row_is_never_written_on_the_ragged_edge() -> None:
    ref = _ref((1000, 999))
    out = ref.copy()
    out[896:, :] = np.nan  # the blocks of the last, partial tile row never stored
    c = compare("C", out, ref, tile=(128, 128), **F32)
    loc = c.localization
    assert loc is not None and not loc.tile_is_guess
    assert c.mismatches == 104 * 999 and c.nan_count == 104 * 999
    assert loc.bad_tile_count == 8 and loc.tile_count == 64
    assert loc.bad_tiles[:2] == ((7, 0), (7, 1))
    assert loc.bad_region == ((896, 0), (999, 998))
    assert loc.summary.splitlines() == [
        "103896 of 999000 elements wrong, in rows 896..999, columns 0..998",
        "103896 elements never written (still poison), in rows 896..999, columns 0..998, filling that box",
    ]
    text = format_comparison(c)
    assert "only the last, partial tile row is bad (rows 896..999 of 1000" in text
    assert "the 128×128 tile does not divide the shape): check the bounds at the ragged edge" in text
    assert "8 of 64 tiles of 128×128 bad: (7, 0), (7, 1), (7, 2)" in text
    assert "bad rows 896..999 only (104 of 1000)" in text


def test_poison_in_the_last_partial_tile_row_and_column() -> None:
    ref = _ref((1000, 999))
    out = ref.copy()
    out[896:, :] = np.nan
    out[:, 896:] = np.nan
    c = compare("C", out, ref, tile=(128, 128), **F32)
    assert c.localization is not None and c.localization.bad_tile_count == 15
    assert (
        "only the last, partial tile row and last, partial tile column are bad "
        "(rows 896..999 of 1000, columns 896..998 of 999;"
    ) in _patterns(c)


def test_wrong_values_confined_to_the_partial_tile_column() -> None:
    ref = _ref((256, 200))
    out = ref.copy()
    out[:, 130:] += 1.0
    c = compare("C", out, ref, tile=(128, 128), **F32)
    assert "only the last, partial tile column is bad (columns 128..199 of 200;" in _patterns(c)
    assert "never written" not in _patterns(c)
    assert "bad columns 130..199 only (70 of 200)" in _patterns(c)


def test_only_the_first_tile_bad() -> None:
    ref = _ref((256, 256))
    out = ref.copy()
    out[:64, :64] *= -3.0
    c = compare("C", out, ref, tile=(64, 64), **F32)
    assert c.localization is not None and c.localization.bad_tiles == ((0, 0),)
    assert "only the first tile (0, 0) is bad" in _patterns(c)
    assert "1 of 16 tiles of 64×64 bad: (0, 0)" in _patterns(c)
    assert "bad rows 0..63 only (64 of 256)" in _patterns(c)


def test_every_tile_bad_and_the_guessed_tile_is_labelled_a_guess() -> None:
    ref = _ref((256, 256))
    out = ref + np.random.default_rng(1).normal(0, 0.1, ref.shape).astype(np.float32)
    c = compare("C", out, ref, **F32)
    loc = c.localization
    assert loc is not None and loc.tile == (64, 64) and loc.tile_is_guess
    assert loc.bad_tile_count == loc.tile_count == 16
    assert (
        "every tile is bad (16 tiles of 64×64; the tile is a guess, pass tile= for the kernel's block tile)"
        in _patterns(c)
    )


def test_one_dimensional_outputs_guess_256_element_tiles() -> None:
    ref = _ref((1000,))
    out = ref.copy()
    out[800:] = 0.0
    c = compare("y", out, ref, **F32)
    loc = c.localization
    assert loc is not None and loc.tile == (256,) and loc.tile_is_guess
    assert loc.bad_tiles == ((3,),)
    assert "only the last, partial tile is bad (elements 768..999 of 1000;" in _patterns(c)
    assert "bad elements 800..999 only (200 of 1000)" in _patterns(c)


def test_a_shorter_tile_covers_the_trailing_axes_of_a_batched_output() -> None:
    ref = _ref((3, 100, 100))
    out = ref.copy()
    out[1, 64:, :] = np.nan
    c = compare("C", out, ref, tile=(64, 64), **F32)
    loc = c.localization
    assert loc is not None and loc.tile == (1, 64, 64)
    assert loc.bad_tiles == ((1, 1, 0), (1, 1, 1))
    assert "in the box (1, 64, 0)..(1, 99, 99), filling that box" in _patterns(c)


def test_output_doubled_everywhere_is_a_scale() -> None:
    ref = _ref((300, 200))
    c = compare("C", ref * 2, ref, **F32)
    assert c.localization is not None
    assert c.localization.summary.splitlines()[1] == (
        "out ≈ 2.000 × ref everywhere: a scale applied twice or an accumulation counted twice"
    )


@pytest.mark.parametrize(
    ("factor", "words"),
    [
        (0.5, "out ≈ 0.500 × ref everywhere: a wrong scale factor"),
        (-1.0, "out ≈ -1.000 × ref everywhere: the sign is flipped"),
    ],
)
def test_other_scales(factor: float, words: str) -> None:
    ref = _ref((64, 64))
    assert words in _patterns(compare("C", ref * factor, ref, **F32))


def test_output_off_by_a_constant_is_an_offset() -> None:
    ref = _ref((300, 200))
    c = compare("C", ref + 0.25, ref, **F32)
    assert "out ≈ ref + 0.25 everywhere: a constant offset" in _patterns(c)
    assert "×" not in c.localization.patterns[0]


def test_transposed_output() -> None:
    ref = _ref((128, 128))
    c = compare("C", np.ascontiguousarray(ref.T), ref, **F32)
    assert c.localization is not None
    assert c.localization.summary.splitlines()[1].startswith("out ≈ ref.T: rows and columns are swapped")


def test_rows_shifted_by_one() -> None:
    ref = _ref((200, 150))
    out = np.full_like(ref, np.nan)
    out[1:] = ref[:-1]  # row i holds row i-1; row 0 was never written
    c = compare("C", out, ref, **F32)
    text = _patterns(c)
    assert "out row i holds reference row i-1 (rows shifted by +1): an off-by-1 in the row index" in text
    assert "150 of the 29997 wrong elements never written (still poison), in row 0, columns 0..149" in text


def test_columns_shifted_back_by_two() -> None:
    ref = _ref((64, 300))
    c = compare("C", np.roll(ref, -2, axis=1), ref, **F32)
    assert "out column i holds reference column i+2 (columns shifted by -2)" in _patterns(c)


def test_constant_output() -> None:
    ref = _ref((100, 100))
    c = compare("C", np.full_like(ref, 3.0), ref, **F32)
    text = _patterns(c)
    assert text.startswith("out is constant 3 while the reference varies (")
    assert "one value is written everywhere" in text


def test_all_zero_output_is_called_constant_zero_once() -> None:
    ref = _ref((100, 100))
    c = compare("C", np.zeros_like(ref), ref, **F32)
    text = _patterns(c)
    assert text.startswith("out is constant 0 while the reference varies")
    assert "exactly 0" not in text


def test_wrong_elements_that_are_zero() -> None:
    ref = _ref((128, 128))
    out = ref.copy()
    out[:, 1::2] = 0.0
    c = compare("C", out, ref, **F32)
    text = _patterns(c)
    assert "all 8192 wrong written elements are exactly 0 where the reference is not" in text
    assert "bad columns: every 2nd column from 1 (1, 3, 5, ...; 64 of 128)" in text


def test_periodic_bad_row_blocks_and_scattered_ranges() -> None:
    ref = _ref((128, 64))
    out = ref.copy()
    for start in range(0, 128, 32):
        out[start : start + 8] += 1.0
    assert "bad rows: 8 of every 32, from 0 (0..7, 32..39, ...; 32 of 128)" in _patterns(
        compare("C", out, ref, **F32)
    )
    out = ref.copy()
    out[[2, 3, 10, 50, 51, 52, 90, 120]] += 1.0
    assert "bad rows: 2..3, 10, 50..52, 90, ... (8 of 128, in 5 ranges)" in _patterns(
        compare("C", out, ref, **F32)
    )


def test_a_single_wrong_element_is_not_taken_for_a_scale_or_offset() -> None:
    ref = _ref((16, 16))
    out = ref.copy()
    out[5, 5] = ref[5, 5] * 2
    text = _patterns(compare("C", out, ref, **F32))
    assert "everywhere" not in text and "shifted" not in text


# --------------------------------------------------------------------------------------------
# degenerate references


def test_reference_warnings() -> None:
    assert reference_warnings(np, np.full((8, 8), 2.5), 1e-5, 1e-4) == (
        "the reference is constant (2.5 everywhere): it cannot catch index, layout or race errors",
    )
    assert reference_warnings(np, np.zeros(10), 1e-5, 1e-4) == (
        "the reference is all zeros: a kernel that writes only zeros passes",
    )
    small = reference_warnings(np, np.linspace(-1e-3, 1e-3, 50), 1e-2, 2e-2)
    assert small == (
        "the reference is too small for its tolerance: max |ref| = 0.001 with atol 0.01, rtol 0.02: "
        "an all-zero output would pass",
    )
    mostly_small = np.full(100, 1e-4)
    mostly_small[:5] = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert reference_warnings(np, mostly_small, 1e-2, 2e-2) == (
        "95% of the reference (95 of 100) is within its tolerance of 0 (atol 0.01): a zero written there would pass",
    )
    nan = np.full(10, np.nan)
    assert reference_warnings(np, nan, 0, 0) == ("the reference is all NaN: only NaN placement is checked",)
    nan[:3] = [1.0, 2.0, 3.0]
    assert reference_warnings(np, nan, 0, 0) == (
        "the reference is 70% NaN (7 of 10): those elements only check that out is NaN there too",
    )
    assert reference_warnings(np, _ref((32, 32)), 1e-5, 1e-4) == ()


def test_degenerate_reference_warnings_reach_the_report() -> None:
    ref = np.zeros((4, 4), np.float32)
    c = compare("C", ref.copy(), ref, **F32)
    assert c.passed
    assert c.warnings == ("the reference is all zeros: a kernel that writes only zeros passes",)
    assert "warning: the reference is all zeros" in format_comparison(c)


# --------------------------------------------------------------------------------------------
# two runs of the same kernel


def test_compare_runs_identical_including_nan_is_none() -> None:
    a = _ref((64, 64))
    a[3, 3] = np.nan
    assert compare_runs(a, a.copy()) is None
    assert compare_runs(a.astype(ml_dtypes.bfloat16), a.astype(ml_dtypes.bfloat16)) is None
    assert compare_runs(np.arange(5), np.arange(5)) is None


def test_compare_runs_reports_count_and_first_difference() -> None:
    a = _ref((1024, 1024))
    b = a.copy()
    b[12, 5] = 0.5
    b[700, 3] = np.nan
    msg = compare_runs(a, b)
    assert msg == (
        "results differ between two identical runs in 2 of 1048576 elements "
        f"(first at (12, 5): {float(a[12, 5]):.6g} then 0.5): a race or a read of uninitialised memory"
    )


def test_compare_runs_sees_bit_differences_such_as_signed_zero() -> None:
    msg = compare_runs(np.array([0.0, 1.0]), np.array([-0.0, 1.0]))
    assert msg is not None and "in 1 of 2 elements (first at (0)" in msg


def test_compare_runs_with_different_shapes() -> None:
    msg = compare_runs(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))
    assert msg == "the two runs returned different outputs: (2, 3) float32 then (3, 2) float32"


# --------------------------------------------------------------------------------------------
# properties


_finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
_arrays = hnp.arrays(
    dtype=st.sampled_from([np.float32, np.float64]),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12),
    elements=_finite,
)
_tolerance = st.floats(0.0, 1e-2, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(x=_arrays, atol=_tolerance, rtol=_tolerance)
def test_an_output_equal_to_its_finite_reference_always_passes(
    x: np.ndarray, atol: float, rtol: float
) -> None:
    c = compare("x", x.copy(), x, atol=atol, rtol=rtol)
    assert c.passed and c.mismatches == 0 and c.max_abs_err == 0.0
    assert format_comparison(c).startswith("x: ok")


@settings(max_examples=150, deadline=None)
@given(x=_arrays, atol=_tolerance, rtol=_tolerance, data=st.data())
def test_one_element_beyond_tolerance_always_fails_and_is_listed_first(
    x: np.ndarray, atol: float, rtol: float, data: st.DataObject
) -> None:
    flat = data.draw(st.integers(0, x.size - 1), label="flat index")
    index = tuple(int(i) for i in np.unravel_index(flat, x.shape))
    sign = data.draw(st.sampled_from([-1.0, 1.0]), label="sign")
    out = x.copy()
    value = float(x[index])
    out[index] = value + sign * (2 * (atol + rtol * abs(value)) + 1.0)
    c = compare("x", out, x, atol=atol, rtol=rtol)
    assert not c.passed and c.mismatches == 1
    assert c.first_bad[0].index == index
    assert f"first wrong:\n    {_at(index)} got" in format_comparison(c)


def test_a_single_element_reference_is_not_called_constant() -> None:
    # A sweep's n = 1 case is constant by construction; only references of real size are flagged.
    assert reference_warnings(np, np.array([1.19]), atol=1e-5, rtol=1e-4) == ()
    assert any("constant" in w for w in reference_warnings(np, np.full(64, 1.19), atol=1e-5, rtol=1e-4))
