"""Timing that stops when it knows (porter.gate.runner.rounds), and timed launches placed as checked ones.

The loop's schedule and stopping rule are pure and checked as properties; the worker's loop runs
on the fake device of tests/fake_cupy.py (which launches nothing, but shows which placement each
set's buffers were asked for), and the whole gate on the fake GPU (porter.gate.runner.fake), whose
launch times carry noise: low noise stops early, high noise runs to the cap, and a candidate slow
where its buffers lie as a program's is reported at that speed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import fake_cupy
from conftest import small_vector_add
from fake_cupy import at

from porter.gate import layout
from porter.gate.runner import jobs, rounds
from porter.gate.runner import state as worker_state
from porter.gate.runner.fake import FakeGpu
from porter.gate.runner.launch import Launch
from porter.gate.runner.protocol import CaseJob, Contender, Reference, TimeJob, TimeReply
from porter.gate.runner.state import WorkerState
from porter.gate.timing import timed_sets

VECTOR_ADD = Path(__file__).resolve().parents[1] / "examples" / "vector_add" / "porter.toml"


# --- the schedule, pure -----------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(sets=st.integers(1, 5), contenders=st.integers(1, 4), cycles=st.integers(1, 6))
def test_every_set_sees_every_contender_order_equally_often(sets: int, contenders: int, cycles: int) -> None:
    seen: dict[tuple[int, tuple[int, ...]], int] = {}
    for r in range(cycles * rounds.cycle(sets)):
        order = tuple(rounds.round_order(r, sets, contenders))
        assert sorted(order) == list(range(contenders))
        seen[(r % sets, order)] = seen.get((r % sets, order), 0) + 1
    assert set(seen.values()) == {cycles if contenders > 1 else 2 * cycles}


@settings(max_examples=300, deadline=None)
@given(sets=st.integers(1, 5), min_reps=st.integers(1, 50), max_reps=st.integers(1, 3000),
       budget_s=st.floats(0.0, 10.0), round_s=st.floats(1e-6, 1.0))
def test_batches_end_on_whole_cycles_grow_and_never_pass_the_cap(sets: int, min_reps: int, max_reps: int,
                                                                 budget_s: float, round_s: float) -> None:
    cap = rounds.rep_cap(budget_s, round_s, min_reps, max_reps, sets)
    step = rounds.cycle(sets)
    assert cap % step == 0 and cap >= min_reps
    done, totals = 0, []
    while done < cap:
        done = rounds.next_total(done, min_reps, cap, sets)
        totals.append(done)
    assert totals[0] >= min(min_reps, cap) and all(t % step == 0 for t in totals)
    assert totals == sorted(set(totals)) and totals[-1] == cap
    assert len(totals) <= 3 + 2 * np.log2(max(cap, 2))  # a synchronize per batch: their count is logarithmic


def _noisy(noise: float, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    base = [1.0, 2.0, 1.25]

    def run_batch(first: int, end: int) -> list[list[float]]:
        return [[b * float(np.exp(noise * rng.standard_normal())) for _ in range(first, end)] for b in base]

    return run_batch


@pytest.mark.parametrize("sets", [1, 2, 3])
def test_the_loop_stops_early_when_quiet_and_runs_to_the_cap_when_noisy(sets: int) -> None:
    cap = rounds.rep_cap(10.0, 1e-3, 10, 1000, sets)
    quiet = rounds.adaptive_rounds(_noisy(0.002), 3, sets, 10, cap, 0.01)
    assert len(quiet[0]) < 50 and rounds.within_target(quiet, sets, 0.01)
    noisy = rounds.adaptive_rounds(_noisy(0.3), 3, sets, 10, cap, 0.01)
    assert len(noisy[0]) == cap and not rounds.within_target(noisy, sets, 0.01)
    assert all(len(times) == len(noisy[0]) for times in noisy)


def test_should_stop_at_the_cap_or_once_every_median_on_every_set_is_known() -> None:
    quiet = [[1.0 + 0.001 * (k % 3) for k in range(24)]]
    assert rounds.should_stop(quiet, 2, 0.01, 24, 1000)
    # one set quiet, the other not: not yet known
    mixed = [[1.0 if r % 2 == 0 else 1.0 + (r % 7) for r in range(24)]]
    assert not rounds.should_stop(mixed, 2, 0.01, 24, 1000)
    assert rounds.should_stop(mixed, 2, 0.01, 24, 24)
    assert not rounds.should_stop([[1.0] * 10], 2, 0.01, 10, 1000)  # 5 a set: too few for an interval


@settings(max_examples=50, deadline=None)
@given(index=st.integers(0, 20))
def test_a_timed_set_lies_as_the_first_checked_run_or_as_a_programs_tensors(index: int) -> None:
    """Set 0 as a case's first run; every later set in the plain family, which the checked runs
    also draw, whatever family its seed's checked run drew (a speed only fenced layouts give is
    one no program sees)."""
    assert rounds.set_placing(index) == ("flush" if index == 0 else "plain")
    assert rounds.set_placing(0) == layout.run_placing(0)


@settings(max_examples=50, deadline=None)
@given(seeds=st.lists(st.integers(0, 2**40), min_size=1, max_size=4, unique=True))
def test_a_timing_run_times_both_placements(seeds: list[int]) -> None:
    slots = timed_sets(tuple(seeds))
    assert set(slots) == set(seeds) and len(slots) >= 2
    assert {rounds.set_placing(i) for i in range(len(slots))} == {"flush", "plain"}
    assert list(slots[:len(seeds)]) == seeds


# --- the worker, on the fake device -------------------------------------------------------------

def _vector_add(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
    count = int(n)
    at(out, count, np.float32)[:] = (np.float32(alpha) * at(x, count, np.float32)
                                     + at(y, count, np.float32)).astype(np.float32)


def test_the_worker_places_each_timed_set_as_the_checked_run_of_its_index(monkeypatch: pytest.MonkeyPatch) -> None:
    placed: list[tuple[str, int, str]] = []

    class Recorded(Launch):
        def __init__(self, state: Any, spec: Any, sizes: dict[str, int], host_args: dict[str, Any], seed: int,
                     placing: str = "flush") -> None:
            placed.append((where, seed, placing))
            super().__init__(state, spec, sizes, host_args, seed, placing)

    monkeypatch.setattr(jobs, "Launch", Recorded)
    monkeypatch.setattr(worker_state, "Launch", Recorded)
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS["vector_add"] = _vector_add
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    sizes = {"n": 1000}
    try:
        where = "case"
        for seed in (21, 22):
            jobs.job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(VECTOR_ADD), sizes=sizes,
                                         seed=seed, reference=Reference("python", path=str(VECTOR_ADD.parent / "ref.py"),
                                                                        function="vector_add")))
        where = "time"
        reply = jobs.job_time(state, TimeJob(spec_path=str(VECTOR_ADD), sizes=sizes, seeds=(21, 22),
                                             contenders=(Contender("candidate", "kernel", cubin=b"fake",
                                                                   entry="vector_add"),), budget_s=0.0, min_reps=4))
    finally:
        state.close()
    checked = [placing for what, _, placing in placed if what == "case"]
    timed = [(seed, placing) for what, seed, placing in placed if what == "time"]
    assert checked[:2] == ["flush", "drawn"]  # the first case's two runs (the second case rebinds them)
    assert timed == [(21, "flush"), (22, "plain")]  # the second set as a program's tensors lie
    assert isinstance(reply, TimeReply) and len(reply.times_ms[0]) == 4  # fake events: no noise, one cycle


# --- the gate, on the fake GPU ------------------------------------------------------------------

def _time(gpu: FakeGpu, spec_path: Path, seeds: tuple[int, ...], cubin: bytes = b"") -> TimeReply:
    job = TimeJob(spec_path=str(spec_path), sizes={"n": 1000}, seeds=seeds, budget_s=1.0,
                  contenders=(Contender("candidate", "kernel", cubin=cubin), Contender("source", "kernel")))
    reply = gpu.runner().call(job, 60.0)
    assert isinstance(reply, TimeReply)
    return reply


def test_the_fake_gpu_stops_early_when_quiet_and_runs_to_the_cap_when_noisy(tmp_path: Path) -> None:
    _, spec_path = small_vector_add(tmp_path)
    quiet = _time(FakeGpu(time_noise=0.001), spec_path, (1, 2))
    cap = rounds.rep_cap(1.0, 3e-3, 20, 1000, 2)
    assert len(quiet.times_ms[0]) < 50
    noisy = _time(FakeGpu(time_noise=0.3), spec_path, (1, 2))
    assert len(noisy.times_ms[0]) == cap
    for reply in (quiet, noisy):  # one digest per output per launch, on set r % 2
        assert all(len(d or []) == len(reply.times_ms[0]) for d in reply.digests)


def test_a_candidate_slow_where_its_buffers_lie_as_a_programs_is_reported_at_that_speed(toolchain, tmp_path: Path) -> None:
    from porter.gate.check import run_check
    from porter.gate.options import CheckOptions
    from porter.gate.spec import load_spec

    source, _ = small_vector_add(tmp_path / "source")
    kernel, spec_path = small_vector_add(tmp_path / "slow", marker="porter_fake_slow_plain")
    verdict = run_check(kernel, load_spec(spec_path), CheckOptions(against=source, seeds=(3, 4)),
                        toolchain=toolchain, runner=FakeGpu().runner())
    assert verdict.status == "passed", verdict.reason
    # flush: 2.0 / 1.0; plain: 2.0 / 1.5. The headline is the plain set's, at every size set timed.
    assert verdict.speedup_vs_source == pytest.approx(2.0 / 1.5, rel=0.02)
    for t in (t for t in verdict.timings if t.name == "candidate"):
        assert t.median_ms == pytest.approx(1.5, rel=0.02) and len(t.set_medians_ms) == 2
        assert t.ci_low_ms is not None and t.ci_high_ms is not None and t.ci_low_ms <= t.median_ms <= t.ci_high_ms
    gate = verdict.gate("timing")
    assert gate is not None
    assert "±" in gate.summary and "(95% CI)" in gate.summary and "target reached" in gate.summary
    assert any("candidate's median per input set" in note and "plain" in note for note in gate.details)
    assert not any(note.startswith("source's median") for note in gate.details)
