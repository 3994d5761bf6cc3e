"""What a check guarantees about sizes, as properties over generated specs and seeds: residues
modulo every power of two up to the kernel's tile, sizes above the sweep's with a buffer past 2^24
elements, derived symbols varied on their own, all inside the contract (docs/spec.md, "What a
check guarantees")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from porter.gate.plan import (
    LARGE_ELEMENTS,
    large_sizes,
    lowest_with_residue,
    plan_cases,
    unannounced_sizes,
    with_residue,
)
from porter.gate.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
PROPERTY = settings(max_examples=40, deadline=None)


@PROPERTY
@given(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([16, 64, 256]), st.integers(1, 10**6))
def test_every_residue_the_lattice_allows_is_drawn_with_equal_chance(step, tile, value) -> None:
    rng = np.random.default_rng(value)
    drawn = [with_residue(rng, value * step, step, tile) for _ in range(40 * tile // step)]
    assert all(d % step == 0 and d >= step for d in drawn)
    # the large case keeps its drawn symbol alone until this bound, not one draw, passes 2^16
    assert min(drawn) >= lowest_with_residue(value * step, step, tile)
    counts = np.bincount([d % tile // step for d in drawn], minlength=tile // step)
    assert (counts > 0).all()  # every class modulo the tile, so modulo every power of two below it


def elementwise_spec(step: int, largest: int, require: str = "") -> object:
    data = {"kernel": {"entry": "k", **({"require": [require]} if require else {})},
            "sizes": {"n": largest, "ld": "n"},
            "sweep": [{"n": step}, {"n": 3 * step, "ld": "n + 8"}, {"n": largest}],
            "params": [{"name": "x", "kind": "buffer", "dtype": "f32", "shape": ["n"]},
                       {"name": "y", "kind": "buffer", "dtype": "f32", "shape": ["ld"], "role": "out"}],
            "launch": {"grid": ["ceil_div(ld, 256)"], "block": [256]}}
    return parse_spec(data, base_dir=ROOT, source="gen.toml")


@PROPERTY
@given(st.sampled_from([1, 2, 8]), st.sampled_from([1000, 4096, 100000]), st.integers(0, 2**48))
def test_the_large_case_passes_2_24_elements_above_the_listed_sizes_inside_the_contract(step, largest, seed) -> None:
    spec = elementwise_spec(step, largest * step, f"n % {step} == 0")
    sizes = large_sizes(spec, seed)
    assert sizes is not None and sizes["n"] >= 2 * largest * step and sizes["n"] % step == 0
    assert max(sizes["n"], sizes["ld"]) > LARGE_ELEMENTS
    plan = plan_cases(spec, (seed, seed + 1))
    assert [c.why for c in plan].count("large") == 1


@PROPERTY
@given(st.integers(0, 2**48))
def test_a_derived_symbol_the_sweep_sets_is_varied_on_its_own_across_checks(seed) -> None:
    spec = elementwise_spec(8, 4096)
    drawn = [unannounced_sizes(spec, seed + k) for k in range(12)]
    assert all(d is not None and d["ld"] >= d["n"] and d["n"] % 8 == 0 for d in drawn)
    assert any(d["ld"] != d["n"] for d in drawn)


def test_the_examples_plans_reach_every_size_class_and_stay_bounded() -> None:
    for name in ("vector_add", "softmax", "gemm_bf16"):
        spec = load_spec(ROOT / "examples" / name / "porter.toml")
        large = [large_sizes(spec, seed) for seed in range(6)]
        assert all(s is not None for s in large), name
        for sizes in large:
            buffers = [p for p in spec.params if p.kind == "buffer"]
            assert any(np.prod(spec.shape(p, sizes)) > LARGE_ELEMENTS for p in buffers), (name, sizes)
            assert sum(spec.buffer_bytes(p, sizes) for p in buffers) <= 2 << 30
        residues = {unannounced_sizes(spec, seed)[next(iter(spec.sizes))] % 8 for seed in range(64)}
        assert len(residues) > 1, name


_EXAMPLE_SPECS = sorted(p for p in (ROOT / "examples").glob("*/porter.toml"))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_EXAMPLE_SPECS), st.integers(0, 2**40), st.booleans())
def test_drawn_size_sets_keep_every_symbol_on_the_lattice_the_sweep_implies(path, seed, thorough) -> None:
    """A leading dimension every listed set keeps a multiple of 8 (``ldb = "N"``, with ``round_up(N, 8)``
    where N is odd) stays one in every drawn set: the large GEMM case once drew N = 3388652 with
    ldb = N, out of the kernel's contract, and the honest kernel failed on the H200."""
    spec = load_spec(path)
    sets = [*spec.size_sets(), spec.default_sizes()]
    steps = {name: int(np.gcd.reduce([s[name] for s in sets])) for name in spec.sizes}
    for drawn in (unannounced_sizes(spec, seed), large_sizes(spec, seed, thorough=thorough)):
        if drawn is not None:
            assert all(drawn[name] % step == 0 for name, step in steps.items()), (drawn, steps)


_GEMMS = [ROOT / "examples" / name / "porter.toml" for name in ("gemm_bf16", "triton_matmul")]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_GEMMS), st.integers(0, 2**40))
@example(_GEMMS[0], 1174)  # M = 65627 by itself, then redrawn at 65479 as N grew
def test_a_large_gemm_case_takes_its_drawn_dimension_past_2_16_and_grows_the_others_before_it_grows_on(path, seed) -> None:
    """The large case passes its mark with one symbol above the sweep's, by itself past 2^16 (a
    16-bit count wraps there: K = 32768 once went unchecked) and at most 4 times that: where it
    alone would need millions (K = 3.8M with M = 1 and N = 8, one CTA for 0.1 s a launch), the
    symbols sharing a buffer with it grow, up to the sweep's largest. Its FLOPs stay bounded."""
    from porter.gate.plan import FLOPS_FACTOR, LONG_EXTENT, free_symbols_of

    spec = load_spec(path)
    sizes = large_sizes(spec, seed)
    assert sizes is not None
    free = {k: v for k, v in free_symbols_of(spec).items() if isinstance(spec.sizes[k], int)}
    grown = [name for name, (_, hi, _) in free.items() if sizes[name] > hi]
    assert len(grown) == 1 and LONG_EXTENT < sizes[grown[0]] <= 4 * LONG_EXTENT, sizes
    buffers = [p for p in spec.params if p.kind == "buffer"]
    assert any(np.prod(spec.shape(p, sizes)) > LARGE_ELEMENTS for p in buffers), sizes
    assert (spec.flops(sizes) or 0) <= FLOPS_FACTOR * max(spec.flops(s) or 0 for s in spec.size_sets())


@pytest.mark.parametrize("name", ["attention_fwd", "attention_bwd"])
def test_where_a_symbol_past_2_16_leaves_no_room_its_partners_grow_first_and_reach_the_mark(name) -> None:
    """Attention's FLOPs grow with S x S: with H at 65536 the sequence has no room left, and the
    buffers stay below the mark. The large case then grows the partners right after the first
    draw, so a check that draws H still passes 2^24 elements (S and D grown, H in the hundreds)."""
    from porter.gate.plan import LONG_EXTENT

    spec = load_spec(ROOT / "examples" / name / "porter.toml")
    buffers = [p for p in spec.params if p.kind == "buffer"]
    hi = max(s["H"] for s in spec.size_sets())
    drawing_h = [s for s in (large_sizes(spec, seed) for seed in range(40)) if s is not None and s["H"] > hi]
    marked = [s for s in drawing_h if any(np.prod(spec.shape(p, s)) > LARGE_ELEMENTS for p in buffers)]
    assert drawing_h and marked, drawing_h[:3]
    assert all(s["S"] > 1 and s["H"] < LONG_EXTENT for s in marked), marked[:3]


def test_the_seeds_of_the_16_bit_count_attack_draw_its_large_case_along_k_past_2_16() -> None:
    """tests/data/attacks' ``gemm_k16_count`` (a k loop to ``K & 0xFFFF``) is caught only by a large
    case that draws K: its manifest's seeds must keep drawing one, or its GPU test proves nothing."""
    from porter._toml import tomllib
    from porter.gate.plan import LONG_EXTENT

    manifest = tomllib.loads((ROOT / "tests" / "data" / "attacks" / "manifest.toml").read_text())
    attack = next(a for a in manifest["attack"] if a["name"] == "gemm_k16_count")
    spec = load_spec(ROOT / attack["spec"] / "porter.toml")
    sizes = large_sizes(spec, attack["options"]["seeds"][0])
    assert sizes is not None and sizes["K"] > LONG_EXTENT and sizes["K"] % (1 << 16), sizes
