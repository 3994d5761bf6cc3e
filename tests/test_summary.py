"""Outputs judged on the device (#32): the summary (porter.gate.summary) is compare()'s verdict and
figures for every input, a passing one makes compare()'s check, and a check judged on the (fake)
device gives the verdict of one judged on the host, a failing case's localization included."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from conftest import small_vector_add

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.compare import compare, passing_check
from porter.gate.options import default_judge
from porter.gate.runner.fake import FakeGpu
from porter.gate.runner.hold import decoder, elements
from porter.gate.spec import load_spec
from porter.gate.summary import OutputSummary, reference_warnings, summarize

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, -2.2e-308, 1e-310, 1e308, -1.7e308, 3.4e38, 65504.0,
           65520.0, 1.0, -1.0, 1.5, 1e-3, 2.0**-24]
_values = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(-10, 10))
_FLOATS = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
_tolerance = st.sampled_from([0.0, 1e-6, 1e-3, 0.05, 1.0])


def _fields(s: OutputSummary) -> dict[str, Any]:
    return {k: v for k, v in s.__dict__.items() if k != "rel_l2"}


def _same_l2(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b)) or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-12 * max(abs(a), abs(b)))


def _check_fields(s: OutputSummary, out: np.ndarray, ref: np.ndarray, atol: float, rtol: float,
                  limit: float | None) -> None:
    """``s`` agrees with compare() on ``out`` and ``ref``: every field, rel L2 to 1e-12, warnings too."""
    c = compare("out", out, ref, atol=atol, rtol=rtol, limit=limit)
    assert (s.passed, s.mismatches, s.total, s.nan_count, s.inf_count, s.ref_nan_count, s.unjudged) == (
        c.passed, c.mismatches, c.total, c.nan_count, c.inf_count, c.ref_nan_count, c.unjudged)
    assert (s.max_abs_err, s.max_rel_err) == (c.max_abs_err, c.max_rel_err)
    assert _same_l2(s.rel_l2, c.rel_l2), (s.rel_l2, c.rel_l2)
    assert s.warnings == c.warnings == reference_warnings(np, ref, atol, rtol)
    assert (s.shape, s.dtype, s.atol, s.rtol) == (c.shape, c.dtype, c.atol, c.rtol)


def _oracle_mismatches(o: np.ndarray, r: np.ndarray, atol: float, rtol: float, limit: float | None) -> int:
    """The rule written out element by element, independently of porter's code."""
    bad = 0
    for x, y in zip(o.astype(np.float64).tolist(), r.astype(np.float64).tolist(), strict=True):
        if limit is not None and not abs(y) <= limit:
            continue
        d = abs(x - y)
        ok = (math.isfinite(d) and d <= atol + rtol * abs(y)) or x == y or (math.isnan(x) and math.isnan(y))
        bad += not ok
    return bad


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(0, 40), out_type=st.sampled_from(sorted(_FLOATS)),
       ref_type=st.sampled_from(["float32", "float64"]), atol=_tolerance, rtol=_tolerance,
       limited=st.booleans(), chunk=st.integers(1, 9))
def test_a_summary_is_compares_verdict_and_figures_for_every_float_input(
        data: st.DataObject, n: int, out_type: str, ref_type: str, atol: float, rtol: float, limited: bool,
        chunk: int) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.asarray(data.draw(st.lists(_values, min_size=n, max_size=n)), dtype=np.float64).astype(ref_type)
        near = [data.draw(st.one_of(_values, st.just(float(r)), st.just(float(r) * (1 + 1e-4)))) for r in ref]
        out = np.asarray(near, dtype=np.float64).astype(_FLOATS[out_type])
    limit = float(ml_dtypes.finfo(_FLOATS[out_type]).max) if limited else None
    s = summarize(np, out.reshape(-1), ref.reshape(-1), atol=atol, rtol=rtol, limit=limit, exact=False,
                  shape=out.shape, dtype=str(out.dtype), chunk=chunk)
    _check_fields(s, out, ref, atol, rtol, limit)
    assert s.mismatches == _oracle_mismatches(out, ref, atol, rtol, limit)
    if ref_type == "float32":  # as the worker sends a float32 reference: its bits, decoded on the device
        from porter.gate.runner.hold import float32_as_float64

        as_bits = summarize(np, out.reshape(-1), ref.reshape(-1).view(np.uint32), atol=atol, rtol=rtol, limit=limit,
                            exact=False, shape=out.shape, dtype=str(out.dtype), chunk=chunk,
                            reference=lambda bits: float32_as_float64(np, bits))
        assert as_bits == s or (as_bits.mismatches == s.mismatches and math.isnan(s.rel_l2))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 30), dtype=st.sampled_from(["int8", "int32", "int64", "uint16"]),
       chunk=st.integers(1, 9))
def test_integer_outputs_are_compared_exactly_and_a_difference_counts_at_least_one(
        data: st.DataObject, n: int, dtype: str, chunk: int) -> None:
    info = np.iinfo(dtype)
    ints = st.integers(int(info.min), int(info.max))
    ref = np.asarray(data.draw(st.lists(ints, min_size=n, max_size=n)), dtype=dtype)
    out = ref.copy()
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=3)):
        out[i] = data.draw(ints)
    s = summarize(np, out, ref, atol=0.0, rtol=0.0, limit=None, exact=True, shape=out.shape, dtype=str(out.dtype),
                  chunk=chunk)
    _check_fields(s, out, ref, 0.0, 0.0, None)
    assert s.mismatches == int(np.count_nonzero(out != ref))
    if s.mismatches:
        assert s.max_abs_err >= 1.0  # int64 values 1 apart round alike in float64


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 40), name=st.sampled_from(["bf16", "f16", "e4m3", "e5m2"]),
       chunk=st.integers(1, 9))
def test_bit_patterns_decoded_through_the_table_judge_as_the_dtype_itself(
        data: st.DataObject, n: int, name: str, chunk: int) -> None:
    """The worker reads an 8- or 16-bit float output as its bit patterns through a table (CuPy has
    no bf16 or fp8): every pattern, NaNs included, judges as compare() judges the dtype's array."""
    from porter.gate.dtypes import DTYPES

    dtype = DTYPES[name]
    words = {1: np.uint8, 2: np.uint16}[dtype.itemsize]
    top = 2 ** (8 * dtype.itemsize) - 1
    bits = np.asarray(data.draw(st.lists(st.integers(0, top), min_size=n, max_size=n)), dtype=words)
    out = bits.view(dtype.numpy)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = (out.astype(np.float64) * data.draw(st.sampled_from([1.0, 1.001, -1.0]))).astype(np.float32)
    limit = dtype.max_finite
    s = summarize(np, elements(bits.view(np.uint8), dtype), ref, atol=1e-3, rtol=1e-2, limit=limit, exact=False,
                  shape=out.shape, dtype=str(out.dtype), values=decoder(np, dtype, {}), chunk=chunk)
    _check_fields(s, out, ref, 1e-3, 1e-2, limit)


def test_a_passing_summary_makes_the_check_compare_makes() -> None:
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((64, 48)).astype(np.float32)
    out = (ref * (1 + 1e-5)).astype(np.float32)
    out[0, 0], ref[0, 0] = np.nan, np.nan
    c = compare("out", out, ref, atol=1e-4, rtol=1e-3, limit=float(np.finfo(np.float32).max))
    s = summarize(np, out.reshape(-1), ref.reshape(-1), atol=1e-4, rtol=1e-3, limit=float(np.finfo(np.float32).max),
                  exact=False, shape=out.shape, dtype="float32")
    assert c.passed and passing_check("out", s) == c
    with pytest.raises(ValueError, match="failing output"):
        passing_check("out", replace(s, passed=False, mismatches=1))


def test_the_judge_switch_defaults_to_the_device_and_refuses_a_typo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PORTER_JUDGE", raising=False)
    assert default_judge() == "device" and CheckOptions().judge == "device"
    monkeypatch.setenv("PORTER_JUDGE", "host")
    assert CheckOptions().judge == "host"
    monkeypatch.setenv("PORTER_JUDGE", "gpu")
    with pytest.raises(InputError, match="PORTER_JUDGE"):
        default_judge()


def _equivalence(verdict: Any) -> tuple[Any, ...]:
    gate = verdict.gate("equivalence")
    return verdict.status, gate.status, gate.summary, gate.details, tuple(
        (c.status, c.reason, c.outputs) for c in verdict.cases)


@pytest.mark.parametrize("marker", ["", "porter_fake_wrong"])
def test_a_check_judged_on_the_device_reaches_the_host_verdict(toolchain: Any, tmp_path: Path, marker: str) -> None:
    """Through the fake GPU, which answers a device-judged case as the worker does: the same
    statuses, figures and texts, and for a wrong candidate the host's localization."""
    kernel, spec_path = small_vector_add(tmp_path, marker=marker)
    spec = load_spec(spec_path)
    verdicts, summarised = {}, {}
    for judge in ("device", "host"):
        runner = FakeGpu().runner()
        replies: list[Any] = []
        call = runner.call
        runner.call = lambda job, timeout_s, call=call, replies=replies: replies.append(call(job, timeout_s)) or replies[-1]
        options = CheckOptions(seeds=(3, 4), arch="sm_90", timing=False, judge=judge)
        verdicts[judge] = run_check(kernel, spec, options, toolchain=toolchain, runner=runner)
        summarised[judge] = [bool(r.summaries) for r in replies]
    assert _equivalence(verdicts["device"]) == _equivalence(verdicts["host"])
    assert not any(summarised["host"]) and summarised["device"] and all(summarised["device"]) != bool(marker)
    if marker:
        failed = [o for c in verdicts["device"].cases for o in c.outputs if not o.passed]
        assert failed and all(o.localization is not None and o.first_bad for o in failed)
    else:
        assert verdicts["device"].gate("equivalence").status == "passed"


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_float32_read_by_its_bits_is_the_exact_float64(words: list[int]) -> None:
    """The device decoder's float32 path (no cast that could flush a subnormal) gives every float32
    bit pattern the float64 value NumPy's exact cast gives it (NaN for NaN)."""
    from porter.gate.runner.hold import float32_as_float64

    values = np.asarray(words, dtype=np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        exact = values.astype(np.float64)
    got = float32_as_float64(np, values)
    assert got.dtype == np.float64
    same = ~np.isnan(exact)
    assert np.array_equal(got[same].view(np.uint64), exact[same].view(np.uint64))
    assert np.array_equal(np.isnan(got), np.isnan(exact))
