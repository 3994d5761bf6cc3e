"""What a check guarantees about values, as properties: every element whose reference is finite in
the output's dtype is judged, the others are left out (never the whole case), and the inputs cover
the declared domain with no recognisable lattice (see docs/spec.md, "What a check guarantees")."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from porter.gate.compare import compare

PROPERTY = settings(max_examples=60, deadline=None)
LIMIT = float(np.finfo(np.float32).max)

refs = hnp.arrays(np.float64, st.integers(1, 300),
                  elements=st.one_of(st.floats(-1e3, 1e3), st.sampled_from([np.nan, np.inf, -np.inf, 1e39, -1e300])))


@PROPERTY
@given(refs, st.data())
def test_exactly_the_elements_whose_reference_is_finite_in_the_dtype_are_judged(ref: np.ndarray, data) -> None:
    inside = np.abs(ref) <= LIMIT
    out = np.where(inside, ref, data.draw(st.sampled_from([0.0, np.nan, np.inf, 5.0]))).astype(np.float32)
    wrong = data.draw(st.lists(st.integers(0, ref.size - 1), max_size=5, unique=True))
    for i in wrong:
        out[i] = np.float32(ref[i] + 10) if inside[i] else out[i]
    check = compare("y", out, ref, atol=1e-3, rtol=1e-3, limit=LIMIT)
    assert check.judged == int(inside.sum()) and check.unjudged == ref.size - check.judged
    assert check.mismatches == sum(1 for i in wrong if inside[i])
    assert check.passed == (check.mismatches == 0)


# --- the inputs: a mixture over the declared domain -------------------------------------------------

from pathlib import Path  # noqa: E402

from porter.gate.inputs import MAGNITUDE_TOP, make_args, specials  # noqa: E402
from porter.gate.plan import plan_cases  # noqa: E402
from porter.gate.spec import parse_spec  # noqa: E402

DOMAINS = {"real": ("real", False), "finite": ("real", True), "positive": ("positive", False),
           "nonnegative": ("nonnegative", True), "interval": ([-3.0, 5.0], True)}
FILLS = {"real": "uniform(-1, 1)", "finite": "normal(0.5, 2)", "positive": "uniform(0.5, 2)",
         "nonnegative": "uniform(0, 3)", "interval": "uniform(-1, 1)"}


def one_input_spec(dtype: str, domain: str, n: int = 4096, scalar: str = "") -> object:
    shape, finite = DOMAINS[domain]
    x = {"name": "x", "kind": "buffer", "dtype": dtype, "shape": ["n"], "fill": FILLS[domain], "domain": shape,
         "finite": finite}
    params = [x, {"name": "y", "kind": "buffer", "dtype": dtype, "shape": ["n"], "role": "out"}]
    if scalar:
        params.append({"name": "a", "kind": "scalar", "dtype": "f32", "value": 0.25, "const": scalar == "const"})
    data = {"kernel": {"entry": "k"}, "sizes": {"n": n}, "sweep": [{"n": 1}, {"n": 100}, {"n": n}],
            "params": params, "launch": {"grid": [1], "block": [32]}}
    return parse_spec(data, base_dir=Path(__file__).parent, source="gen.toml")


def _inside(x: np.ndarray, domain: str) -> np.ndarray:
    shape, finite = DOMAINS[domain]
    lo, hi = (shape if isinstance(shape, list) else [-np.inf if shape == "real" else 0.0, np.inf])
    ok = (x >= lo) & (x <= hi) | (np.isnan(x) & (not finite))
    return ok & ((x > 0) | np.isnan(x) | (shape != "positive")) & (np.isfinite(x) | (not finite))


@PROPERTY
@given(st.sampled_from(["f32", "f16", "bf16", "f64"]), st.sampled_from(list(DOMAINS)), st.integers(0, 2**48),
       st.sampled_from(["", "wide"]))
def test_every_input_stays_in_its_domain_and_spans_it_beyond_the_fill(dtype, domain, seed, values) -> None:
    spec = one_input_spec(dtype, domain)
    x = make_args(spec, {"n": 4096}, seed, values)["x"].astype(np.float64)
    assert _inside(x, domain).all()
    fill = spec.fill_of("x", values)
    a, b = spec.fill_bounds("x", {"n": 4096}, values=values)
    lo, hi = (a, b) if fill.kind == "uniform" else (a - 6 * b, a + 6 * b)
    with np.errstate(invalid="ignore"):
        beyond = ~((x >= lo) & (x <= hi)) | (np.abs(x) < 1e-30)
    assert np.count_nonzero(beyond) <= 8  # the sparse mixture; the rest is the case's fill


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["f32", "f16", "bf16"]), st.sampled_from(list(DOMAINS)))
def test_across_checks_every_special_value_and_magnitude_the_domain_holds_appears(dtype, domain) -> None:
    spec = one_input_spec(dtype, domain, n=1024)
    seen = np.concatenate([make_args(spec, {"n": 1024}, seed)["x"].astype(np.float64) for seed in range(80)])
    wanted = specials(spec.param("x").dtype, spec.param("x").domain).astype(np.float64)
    for value in wanted:
        hit = np.isnan(seen) if np.isnan(value) else (seen == value) & (np.signbit(seen) == np.signbit(value))
        assert hit.any(), (dtype, domain, value)
    finite = np.abs(seen[np.isfinite(seen) & (seen != 0)])
    top = min(float(spec.param("x").domain.hi), float(spec.param("x").dtype.max_finite), MAGNITUDE_TOP)
    assert finite.max() > top / 1e6 and finite.min() < 1e-6


@PROPERTY
@given(st.integers(0, 2**48), st.floats(-100, 100), st.floats(0.01, 100))
def test_float32_inputs_use_every_mantissa_bit(seed, a, width) -> None:
    data = {"kernel": {"entry": "k"}, "sizes": {"n": 20000},
            "params": [{"name": "x", "kind": "buffer", "dtype": "f32", "shape": ["n"],
                        "fill": f"uniform({a!r}, {a + width!r})"},
                       {"name": "y", "kind": "buffer", "dtype": "f32", "shape": ["n"], "role": "out"}],
            "launch": {"grid": [1], "block": [32]}}
    x = make_args(parse_spec(data, base_dir=Path(__file__).parent, source="g.toml"), {"n": 20000}, seed)["x"]
    low = x.view(np.uint32) & 1
    assert 0.4 < low.mean() < 0.6  # a lattice of 2^-k of the span leaves the low bits mostly 0
    near = np.abs(x) < width / 8  # where float32's grid is finer than 2^-23 of the span
    lattice = (x[near].astype(np.float64) - a) / width * 2.0**23
    assert near.sum() < 100 or np.mean(lattice == np.round(lattice)) < 0.5


@PROPERTY
@given(st.integers(0, 2**48))
def test_porter_widens_a_positive_fill_multiplicatively_inside_the_domain(seed) -> None:
    spec = one_input_spec("f32", "positive")
    wide = spec.value_case("wide").fills["x"]
    assert (wide.a, wide.b) == (0.5 / 4, 2 * 4)
    x = make_args(spec, {"n": 4096}, seed, "wide")["x"]
    assert (x > 0).all() or np.isnan(x).any()


@PROPERTY
@given(st.sampled_from(["", "const"]), st.integers(0, 2**40))
def test_a_fixed_float_scalar_is_perturbed_in_some_case_unless_const(const, seed) -> None:
    spec = one_input_spec("f32", "real", scalar=const or "fixed")
    plan = plan_cases(spec, (seed, seed + 1))
    seen = {float(make_args(spec, c.sizes, c.seed, c.values)["a"]) for c in plan}
    assert (seen == {0.25}) == (const == "const")
