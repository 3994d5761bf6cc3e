"""tools/bench_gate.py's phase clock is a runner the gate takes as it takes porter's own: a check
through it (and through helper lanes wrapped the same way) runs to its verdict, and every job
lands in the phase of its kind. The benchmark itself needs a GPU; this runs on the simulated one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import candidates

from porter.gate.check import CheckOptions, run_check
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent


def _bench_gate():
    spec = importlib.util.spec_from_file_location("bench_gate", ROOT / "tools" / "bench_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_check_through_the_phase_clocks_reaches_its_verdict(toolchain, tmp_path: Path) -> None:
    bench = _bench_gate()
    path = candidates(tmp_path, 1)[0]
    spec = load_spec(tmp_path / "porter.toml")
    gpu = FakeGpu()
    own, helper = bench.PhaseClock(gpu.runner(), spec), bench.PhaseClock(gpu.runner(), spec)
    own.start()  # warm, as the benchmark's checks after the first
    verdict = run_check(path, spec, CheckOptions(seeds=(5, 6), speed_baseline=tmp_path / "kernel.ptx"),
                        toolchain=toolchain, runner=own, helpers=[helper])
    assert verdict.status == "passed", verdict.reason
    phases, beside = own.take(), helper.take()
    assert {"time", "sweep cases"} <= set(phases) and "sweep cases" in beside
    cases = [line for clock in (own, helper) for line in clock.jobs if not line.startswith(("time ", "repeat "))]
    assert len(cases) == len(verdict.cases)  # every case once, in one clock or the other
    # timing and the launches in a row after it on the check's own
    assert not [line for line in helper.jobs if line.startswith(("time ", "repeat "))]
    assert "repeat" in phases


def test_a_do_bench_process_gives_a_median_for_each_window_in_order(monkeypatch) -> None:
    """The do_bench process (a GPU's, here a stand-in printing as it does) is told its windows and
    reports a median for each; a line short of one is a failure, not a shifted table."""
    bench = _bench_gate()
    echo = 'import sys; print("warming up"); print("DO_BENCH_MS", *(len(w) for w in sys.argv[3:]))'
    monkeypatch.setattr(bench, "DO_BENCH", echo)
    # the headline first, do_bench left to its own defaults; then the second of launches
    assert bench.do_bench_ms(ROOT) == (len("default"), len("100,1000"))
    assert list(bench.DO_BENCH_WINDOWS.values()) == [None, (100, 1000)]
    monkeypatch.setattr(bench, "DO_BENCH", 'print("DO_BENCH_MS 0.4557")')
    with pytest.raises(SystemExit, match="do_bench failed"):
        bench.do_bench_ms(ROOT)
    monkeypatch.setattr(bench, "DO_BENCH", 'import sys; sys.exit("no GPU")')
    with pytest.raises(SystemExit, match="do_bench failed"):
        bench.do_bench_ms(ROOT)
