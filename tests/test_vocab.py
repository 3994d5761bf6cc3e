"""The spec vocabulary for real kernels, on the CPU: the size contract, [values], padded buffers,
derived inputs, hot loops of several kernels, outputs declared nondeterministic, and tolerances
that grow atol alone with a reduction.

The hot loop of tests/data/vocab (three real kernels, compiled by nvcc, assembled here by ptxas)
runs through the whole gate on a fake device (tests/fake_cupy.py) whose kernels are played in
NumPy (tests/vocab_kernels.py): what the worker writes around a launch, and what the gate makes
of it, is the real code. tests/test_vocab_gpu.py runs the same kernels on the H200.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fake_cupy
import numpy as np
import pytest
import vocab_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.compare import compare
from porter.gate.elementwise import judge_everywhere
from porter.gate.inputs import MIX_MAX, make_args
from porter.gate.plan import Case, plan_cases, skipped_unannounced, unannounced_sizes
from porter.gate.runner.fake import InProcessRunner
from porter.gate.runner.hold import HeldOutput, decoder, elements
from porter.gate.runner.jobs import job_case, job_repeat, job_time
from porter.gate.runner.padding import Padding
from porter.gate.runner.protocol import RepeatReply, TimeJob, TimeReply
from porter.gate.runner.state import WorkerState
from porter.gate.spec import check_against_module, declared_spec, load_spec
from porter.gate.timing import timed_outputs_problems
from porter.gate.verdict import Verdict, size_label
from porter.ptx import read_ptx

ROOT = Path(__file__).resolve().parent.parent
VOCAB = ROOT / "tests" / "data" / "vocab"
VECTOR_ADD = ROOT / "examples" / "vector_add"


def vocab_with(tmp_path: Path, old: str, new: str, *, count: int = 1) -> Path:
    """A copy of tests/data/vocab whose porter.toml has ``old`` replaced by ``new``."""
    folder = tmp_path / "vocab"
    if not folder.exists():
        shutil.copytree(VOCAB, folder)
    text = (folder / "porter.toml").read_text()
    assert old in text, old
    (folder / "porter.toml").write_text(text.replace(old, new, count))
    return folder / "porter.toml"


def refused(tmp_path: Path, old: str, new: str) -> str:
    with pytest.raises(InputError) as err:
        load_spec(vocab_with(tmp_path, old, new))
    message = str(err.value)
    assert "\n" not in message
    return message


# --- the size contract ---------------------------------------------------------------------------

def test_a_sweep_entry_or_sizes_outside_the_contract_are_refused_with_the_rule_named(tmp_path: Path) -> None:
    message = refused(tmp_path, "R = 33\nC = 100", "R = 33\nC = 102")
    assert message == ("porter.toml: sweep[1]: kernel.require[0]: the size contract 'C % 4 == 0' does not hold "
                       "(C=102)")
    assert "kernel.require[0]" in refused(tmp_path / "b", "C = 1024", "C = 1022")
    assert "unknown size symbol 'D'" in refused(tmp_path / "c", '"C % 4 == 0"', '"D == 64"')


def test_a_time_at_outside_the_contract_is_refused_before_any_work() -> None:
    spec = load_spec(VOCAB / "porter.toml")
    assert spec.timing_sizes({"C": 2048})["ldx"] == 2052
    with pytest.raises(InputError, match=r"--time-at C=1022: kernel.require\[0\]: the size contract 'C % 4 == 0'"):
        spec.timing_sizes({"C": 1022})
    r = subprocess.run([sys.executable, "-m", "porter", "check", str(VOCAB / "pipeline.ptx"), "--time-at", "C=1022"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "'C % 4 == 0' does not hold (C=1022)" in r.stderr


def test_the_unannounced_size_set_is_drawn_inside_the_contract(tmp_path: Path) -> None:
    spec = load_spec(vocab_with(tmp_path, '"C % 4 == 0"', '"C % 4 == 0", "R % 3 != 2"'))
    drawn = [unannounced_sizes(spec, seed) for seed in range(30)]
    assert all(d is not None and d["C"] % 4 == 0 and d["R"] % 3 != 2 for d in drawn)
    assert skipped_unannounced(spec, plan_cases(spec, (1, 2))) == ""


def test_a_contract_no_draw_can_meet_skips_the_unannounced_set_and_says_so(tmp_path: Path) -> None:
    listed_only = ("(R == 1) * (C == 4) + (R == 33) * (C == 100) + (R == 300) * (C == 516) + (R == 1000) * (C == 256)"
                   " + (R == 4096) * (C == 1024)")
    spec = load_spec(vocab_with(tmp_path, '"C % 4 == 0"', f'"C % 4 == 0", "{listed_only}"'))
    plan = plan_cases(spec, (1, 2))
    assert not [c for c in plan if c.why == "unannounced"]
    assert "inside the sweep's ranges and kernel.require" in skipped_unannounced(spec, plan)


# --- values that are not sizes, and float scalars in the kernel's dtype ------------------------------

def test_values_are_typed_drawn_per_case_and_never_sizes() -> None:
    spec = load_spec(VOCAB / "porter.toml")
    sizes = spec.size_sets()[1]
    assert "amp" not in sizes and "amp" not in size_label(sizes)
    drawn = [make_args(spec, sizes, seed) for seed in range(8)]
    amps = {float(a["amp"]) for a in drawn}
    assert len(amps) == 8 and all(0.5 <= amp < 2.0 for amp in amps)
    for args in drawn:
        assert isinstance(args["amp"], np.float32) and isinstance(args["eps"], np.float32)
        assert args["eps"] == np.float32(float(args["amp"]) / 8)  # a scalar's value reads the value
        bulk = np.sort(np.abs(args["X"]).reshape(-1))[:-MIX_MAX]  # less porter's sparse mixture (inputs.py)
        assert bulk.max() <= args["amp"]  # and so does a fill


def test_float_scalars_reach_the_reference_as_the_kernel_gets_them(tmp_path: Path) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    alpha = make_args(spec, {"n": 8}, 3)["alpha"]
    assert isinstance(alpha, np.float32)
    fixed = tmp_path / "va"
    shutil.copytree(VECTOR_ADD, fixed)
    text = (fixed / "porter.toml").read_text().replace("range = [-2.0, 2.0]", "value = 0.1")
    (fixed / "porter.toml").write_text(text)
    value = make_args(load_spec(fixed / "porter.toml"), {"n": 8}, 3)["alpha"]
    assert isinstance(value, np.float32) and value == np.float32(0.1) and float(value) != 0.1


def test_bad_values_are_refused_with_their_key(tmp_path: Path) -> None:
    assert "values.C: is also a size symbol: a value is not a size" in refused(tmp_path, "amp = {", "C = {")
    assert "values.amp.range: needs lo < hi" in refused(tmp_path / "b", "range = [0.5, 2.0]", "range = [2.0, 0.5]")
    assert "values.amp.dtype is missing" in refused(tmp_path / "c", '{ dtype = "f32", range', "{ range")
    assert "unknown size symbol 'amp'" in refused(tmp_path / "d", 'bytes = "4 * R"', 'bytes = "4 * R * amp"')


# --- padded buffers ---------------------------------------------------------------------------------

def test_a_padded_buffer_is_a_view_in_padding_that_must_come_back_unchanged() -> None:
    layout = Padding.of((3, 6), (3, 4), 4)
    assert layout == Padding(rows=3, pitch=24, width=16, itemsize=4) and Padding.of((3, 4), (3, 4), 4) is None
    pattern = np.arange(72, dtype=np.uint8)
    view = np.full(48, 0xEE, dtype=np.uint8)
    whole = layout.image(np, view, pattern)
    assert np.array_equal(layout.view(np, whole), view)
    assert np.array_equal(whole.reshape(3, 24)[:, 16:], pattern.reshape(3, 24)[:, 16:])
    assert layout.changes(np, whole, pattern, "Y", 6) == ""
    whole.reshape(3, 24)[1, 20] ^= 1  # row 1, element 5: in the padding
    said = layout.changes(np, whole, pattern, "Y", 6)
    assert "Y: 1 bytes of its padding changed" in said and "row 1, column 5" in said
    layout.fill_view(whole, 0)
    assert not layout.view(np, whole).any() and layout.changes(np, whole, pattern, "Y", 6) != ""


def test_ld_is_checked_and_widens_the_memory_not_the_view(tmp_path: Path) -> None:
    spec = load_spec(VOCAB / "porter.toml")
    sizes = spec.size_sets()[1]
    assert spec.shape("Y", sizes) == (33, 100) and spec.memory_shape("Y", sizes) == (33, 108)
    assert make_args(spec, sizes, 1)["X"].shape == (33, 100)  # the reference sees the view
    assert "params[0].ld: 1023 is less than the shape's last extent (1024)" in refused(
        tmp_path, 'ldx = "C + 4"', 'ldx = "C - 1"')
    assert "params[1].ld: pads rows: it needs a shape of 2 or more axes" in refused(
        tmp_path / "b", 'shape = ["C"]\n', 'shape = ["C"]\nld = "C"\n')


# --- derived inputs ---------------------------------------------------------------------------------

def test_a_derived_input_is_computed_from_the_drawn_ones_in_its_dtype() -> None:
    spec = load_spec(VOCAB / "porter.toml")
    args = make_args(spec, spec.size_sets()[2], 9)
    assert args["mean"].dtype == np.float32
    assert np.allclose(args["mean"], args["X"].astype(np.float64).mean(axis=1), rtol=1e-6)
    assert [c.name for c in spec.value_cases()] == ["wide"] and "mean" not in spec.value_case("wide").fills


def test_bad_derived_inputs_are_refused(tmp_path: Path) -> None:
    assert "a derived input is computed by its derive function, not filled" in refused(
        tmp_path, 'derive = "row_mean"', 'derive = "row_mean"\nfill = "uniform(0, 1)"')
    assert "the param's role must be in" in refused(tmp_path / "b", 'ld = "ldy"', 'ld = "ldy"\nderive = "row_mean"')
    assert "'nope.py' not found" in refused(tmp_path / "c", '"row_mean"', '"nope.py:row_mean"')
    other = vocab_with(tmp_path / "d", '"row_mean"', '"other.py:means"')
    (other.parent / "other.py").write_text("def means(args, sizes):\n    return {'mu': args['X'].mean(axis=1)}\n")
    spec = load_spec(other)
    with pytest.raises(InputError, match=r"derive other.py:means returned no 'mean' \(it returned: mu\)"):
        make_args(spec, spec.size_sets()[0], 1)


# --- a hot loop of several kernels -----------------------------------------------------------------

def test_a_sequence_names_its_kernels_and_checks_each_against_the_ptx(tmp_path: Path) -> None:
    spec = load_spec(VOCAB / "porter.toml")
    assert [s.describe() for s in spec.sequence()] == ["rn_delta", "rn_center", "zero S", "rn_colsum"]
    assert spec.entries == ("rn_delta", "rn_center", "rn_colsum") and spec.entry == "rn_delta"
    assert check_against_module(spec, read_ptx(VOCAB / "pipeline.ptx")) == []
    swapped = load_spec(vocab_with(tmp_path, 'args = ["X", "W", "delta", "R", "C", "ldx"]',
                                   'args = ["X", "W", "delta", "R", "C"]'))
    assert check_against_module(swapped, read_ptx(VOCAB / "pipeline.ptx")) == [
        "kernels[0] passes 5 params but .entry rn_delta has 6"]
    fused = check_against_module(spec, read_ptx(VOCAB / "pipeline_fused.ptx"))
    assert fused[0].startswith("kernels[0]: no .entry 'rn_delta' in the module (entries: rn_fused, rn_colsum)")


def test_bad_sequences_are_refused_with_their_key(tmp_path: Path) -> None:
    assert "not a param (did you mean 'delta'? " in refused(tmp_path, '"W", "delta", "R"', '"W", "deltas", "R"')
    assert "kernels[2].zero[0]: must name an out or inout buffer (got 'X')" in refused(
        tmp_path / "b", 'zero = ["S"]', 'zero = ["X"]')
    assert "give [launch] for one kernel or [[kernels]] for a sequence, not both" in refused(
        tmp_path / "c", "[reference]", "[launch]\ngrid = [1]\nblock = [1]\n\n[reference]")
    assert "names the hot loop by one of its entries" in refused(tmp_path / "d", 'entry = "rn_delta"  ', 'entry = "x"  ')
    assert "kernels[1].grid[1]: must be at most 65535 (got 70000)" in refused(
        tmp_path / "e", 'grid = ["ceil_div(C, 256)", "R"]', 'grid = ["ceil_div(C, 256)", "R + 70000 - R"]')


def test_a_port_brings_its_own_sequence_and_may_not_use_porter_launch_for_it(tmp_path: Path) -> None:
    spec = load_spec(VOCAB / "porter.toml")
    fused, directive = declared_spec(spec, (VOCAB / "pipeline_fused.ptx").read_text(), source="fused.ptx")
    assert directive is not None and [s.describe() for s in fused.sequence()] == ["rn_fused", "zero S", "rn_colsum"]
    assert fused.entry == "rn_fused" and check_against_module(fused, read_ptx(VOCAB / "pipeline_fused.ptx")) == []
    with pytest.raises(InputError, match="declared with porter-kernel lines"):
        declared_spec(spec, '// porter-launch: grid = [1], block = [32]\n', source="c.ptx")
    with pytest.raises(InputError, match=r"c.ptx: porter-kernel\[0\].args\[0\]: not a param"):
        declared_spec(spec, '// porter-kernel: entry = "k", grid = [1], block = [32], args = ["Q"]\n', source="c.ptx")
    # a one-kernel spec's port may split it, and add scratch for what passes between its kernels
    va = load_spec(VECTOR_ADD / "porter.toml")
    split, _ = declared_spec(va, '// porter-param: name = "tmp", kind = "scratch", bytes = "4*n"\n'
                             '// porter-kernel: entry = "a", grid = ["ceil_div(n, 256)"], block = [256], args = ["x", "tmp"]\n'
                             '// porter-kernel: entry = "b", grid = ["ceil_div(n, 256)"], block = [256], '
                             'args = ["tmp", "y", "out", "alpha", "n"]\n', source="s.ptx")
    assert split.entries == ("a", "b") and split.param("tmp").kind == "scratch"
    with pytest.raises(InputError, match="only tensormap params"):
        declared_spec(va, '// porter-param: name = "extra", kind = "buffer", dtype = "f32", shape = ["n"]\n',
                      source="s.ptx")


# --- outputs declared nondeterministic ---------------------------------------------------------------

def test_deterministic_false_is_for_float_outputs_only(tmp_path: Path) -> None:
    assert "false is for float outputs" in refused(tmp_path, 'derive = "row_mean"', 'derive = "row_mean"\n'
                                                    "deterministic = false")
    assert "must be true or false" in refused(tmp_path / "b", "deterministic = false                  #", 'deterministic = "no"  #')


def test_held_outputs_count_what_is_outside_the_tolerance_as_compare_does() -> None:
    ref = np.array([0.0, 1.0, -2.0, np.inf, np.nan, 1e30, 5.0])
    out = np.array([1e-5, 1.0001, -2.0, np.inf, np.nan, 1e30, np.nan])
    ok = judge_everywhere(np, out, ref, 1e-4, 1e-3)[0]
    assert ok.tolist() == [True, True, True, True, True, True, False]
    check = compare("S", out, ref, atol=1e-4, rtol=1e-3)
    assert check.mismatches == int((~ok).sum()) == 1
    assert HeldOutput(ref, 1e-4, 1e-3).outside(np, out) == 1
    from porter.gate.dtypes import DTYPES

    bf16 = np.array([1.5, -2.0, 3.0], dtype=DTYPES["bf16"].numpy)
    assert decoder(np, DTYPES["bf16"], {})(elements(bf16.view(np.uint8), DTYPES["bf16"])).tolist() == [1.5, -2.0, 3.0]


def test_a_timed_launch_of_a_held_output_names_it_and_its_count() -> None:
    key = Case({"n": 8}, 1).key()
    reply = TimeReply(names=["candidate"], times_ms=[[1.0] * 3], digests=[[7, 0, 7, 0, 7, 12]],
                      outputs_per_launch=2, guards=[[]], seeds=[1])
    problems = timed_outputs_problems(reply, RepeatReply(digests=[], guards=[]), [key], {key: [7, 0]}, "n=8",
                                      ("Y", "S"), ("S",))
    assert problems == ["1 of 3 timed launches at n=8 left outputs that differ from the verified launch (first: "
                        "launch 3, in S (12 elements outside the reference's tolerance)): the kernel did not do the "
                        "verified work on every launch (skipped, cached or changed it when called again)"]


# --- the whole gate on the hot loop, on a fake device ------------------------------------------------

def _gate(toolchain: Any, kernel: str, variant: str = "", spec_path: Path = VOCAB / "porter.toml", *,
          skip_when_timed: bool = False, **options: Any) -> Verdict:
    bodies = vocab_kernels.kernels(variant)
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS.update(bodies)
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)

    def timed(job: TimeJob) -> TimeReply:
        bodies["rn_colsum"].skipping = skip_when_timed or bodies["rn_colsum"].skipping
        return job_time(state, job)

    runner = InProcessRunner({"case": lambda job: job_case(state, job), "time": timed,
                              "repeat": lambda job: job_repeat(state, job)})
    try:
        return run_check(VOCAB / kernel, load_spec(spec_path), CheckOptions(**options), toolchain=toolchain,
                         runner=runner)
    finally:
        state.close()


def test_the_hot_loop_passes_checked_and_timed_as_a_whole(toolchain) -> None:
    verdict = _gate(toolchain, "pipeline.ptx")
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith("3 kernels in sequence (rn_delta, rn_center, rn_colsum)")
    assert verdict.gate("timing").status == "passed"
    # 4 sweep size sets x 2 seeds, the timed x 2 seeds, the unannounced, the large, one near the
    # timed set (timed beside it), the wide
    assert len(verdict.cases) == 14
    assert len({t.sizes for t in verdict.timings}) == 2


def test_a_port_that_fuses_two_kernels_passes(toolchain) -> None:
    verdict = _gate(toolchain, "pipeline_fused.ptx")
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith("2 kernels in sequence (rn_fused, rn_colsum)")


def test_a_kernel_that_writes_the_padding_fails(toolchain) -> None:
    verdict = _gate(toolchain, "pipeline_writes_padding.ptx", "writes_padding", timing=False)
    assert verdict.status == "failed"
    assert "out-of-bounds write: Y:" in verdict.reason and "of its padding changed" in verdict.reason


def test_an_atomics_output_that_skips_work_fails_though_it_is_not_held_bit_for_bit(toolchain) -> None:
    verdict = _gate(toolchain, "pipeline_skips_work.ptx", "skips_work", timing=False)
    assert verdict.status == "failed" and "S:" in verdict.reason and "elements wrong" in verdict.reason
    assert "nondeterministic" not in verdict.reason


def test_declared_nondeterminism_is_what_lets_the_atomics_pass(toolchain, tmp_path: Path) -> None:
    strict = vocab_with(tmp_path, "deterministic = false                  #", "deterministic = true  #")
    verdict = _gate(toolchain, "pipeline.ptx", spec_path=strict, timing=False)
    assert verdict.status == "failed" and "nondeterministic: S:" in verdict.reason


def test_a_held_output_that_goes_wrong_when_timed_fails_the_timing(toolchain) -> None:
    verdict = _gate(toolchain, "pipeline.ptx", skip_when_timed=True)
    assert verdict.gate("equivalence").status == "passed"
    timing = verdict.gate("timing")
    assert timing.status == "failed" and "in S (" in timing.summary and "outside the reference's tolerance" in timing.summary


# --- fuzzed: the vocabulary's parser takes any value anywhere ----------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
                     st.text(max_size=12), st.sampled_from(["R", "C % 4 == 0", "amp", "row_mean", "S", "X"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                       max_leaves=8)


def _mutated(data: Any, draw: Any) -> Any:
    """``data`` with one value somewhere inside it (a table's key or an array's entry) replaced."""
    if isinstance(data, dict) and data and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(data)))
        return {**data, key: _mutated(data[key], draw)}
    if isinstance(data, list) and data and draw(st.booleans()):
        index = draw(st.integers(0, len(data) - 1))
        return [*data[:index], _mutated(data[index], draw), *data[index + 1:]]
    return draw(_values)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_vocabulary_spec_with_any_value_anywhere_loads_or_says_why_in_one_line(data) -> None:
    from porter._toml import tomllib
    from porter.gate.spec import parse_spec

    spec = tomllib.loads((VOCAB / "porter.toml").read_text())
    try:
        parse_spec(_mutated(spec, data.draw), base_dir=VOCAB, source="fuzz.toml")
    except InputError as err:
        assert "\n" not in str(err) and str(err).startswith("fuzz.toml")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), min_size=1, max_size=3))
def test_porter_kernel_lines_take_any_text(bodies: list[str]) -> None:
    text = "".join(f"// porter-kernel:{body}\n" for body in bodies)
    try:
        declared_spec(load_spec(VOCAB / "porter.toml"), text, source="k.ptx")
    except InputError as err:
        assert "\n" not in str(err) and str(err).startswith("k.ptx")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 5), st.sampled_from([1, 2, 4, 8]), st.data())
def test_a_padding_layout_keeps_the_view_and_sees_any_byte_of_the_padding(rows, width, extra, itemsize, data):
    layout = Padding.of((rows, width + extra), (rows, width), itemsize)
    if extra == 0:
        assert layout is None
        return
    assert layout is not None
    rng = np.random.default_rng(rows * 100 + width)
    pattern = rng.integers(0, 256, rows * (width + extra) * itemsize, dtype=np.uint8)
    view = rng.integers(0, 256, rows * width * itemsize, dtype=np.uint8)
    whole = layout.image(np, view, pattern)
    assert np.array_equal(layout.view(np, whole), view) and layout.changes(np, whole, pattern, "B", width + extra) == ""
    row, column = data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, width + extra - 1))
    whole.reshape(rows, -1)[row, column * itemsize] ^= 0x01
    said = layout.changes(np, whole, pattern, "B", width + extra)
    assert (said != "") == (column >= width)
    if said:
        assert f"first at row {row}, column {column}" in said
