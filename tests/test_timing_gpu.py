"""Timing on a real GPU: it stops when each median is known or at its cap, reports each median's
interval, and its input sets lie as the checked runs do (fenced reservations, the driver's page
granularity: what the fake device of tests/test_timing_rounds.py cannot show)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.gate.check import CheckOptions, run_check
from porter.gate.runner import rounds
from porter.gate.spec import load_spec

pytestmark = pytest.mark.gpu

VECTOR_ADD = Path(__file__).resolve().parent.parent / "examples" / "vector_add"


def test_timing_reports_each_median_with_its_interval_per_input_set(runner, toolchain) -> None:
    kernel = VECTOR_ADD / "kernel.ptx"
    verdict = run_check(kernel, load_spec(VECTOR_ADD / "porter.toml"), CheckOptions(against=kernel),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    gate = verdict.gate("timing")
    assert gate is not None and "(95% CI)" in gate.summary
    assert "target reached" in gate.summary or "stopped at the cap" in gate.summary
    for t in verdict.timings:
        assert len(t.set_medians_ms) == 2 and t.median_ms == max(t.set_medians_ms)
        assert t.count % rounds.cycle(2) == 0 and t.count <= 1000
        assert t.ci_low_ms is not None and t.ci_high_ms is not None and t.ci_low_ms <= t.median_ms <= t.ci_high_ms
    # The same kernel against itself, interleaved, in the same layouts: the ratio stays near 1.
    assert verdict.speedup_vs_source is not None and 0.9 < verdict.speedup_vs_source < 1.1


@pytest.mark.parametrize("index", [0, 1])
def test_a_timed_set_lies_as_the_first_checked_run_or_as_a_programs_tensors(index: int, tmp_path: Path) -> None:
    import cupy as cp

    from porter.gate.runner.launch import Launch
    from porter.gate.runner.state import WorkerState

    state = WorkerState(cp, folder=tmp_path)
    spec = load_spec(VECTOR_ADD / "porter.toml")
    sizes, seed = {"n": 4097}, 12
    args = state.inputs(spec, sizes, seed)
    checked = state.case_launch(spec, sizes, args, seed, (b"k", "vector_add", ""), index)
    timed = Launch(state, spec, sizes, args, seed, rounds.set_placing(index))
    try:
        for name, buf in checked.buffers.items():
            other = timed.buffers[name]
            if index == 0:  # the first set lies as the first checked run, byte for byte
                assert (buf.lead, buf.raw.size, buf.nbytes) == (other.lead, other.raw.size, other.nbytes)
                assert (buf._fence is None) == (other._fence is None)
            else:  # the later sets as a program's tensors: plain, each start 256-byte aligned
                assert other._fence is None and other.nbytes == buf.nbytes
                assert other.kernel_ptr % 256 == 0
    finally:
        timed.release()
        state.drop_case_launch()
        state.close()
