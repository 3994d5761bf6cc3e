"""A lone candidate's cases split over its GPU's free workers (porter.gate.lanes): every case runs
once, on one worker; the cases whose inputs are timed and the timing stay on the check's own
worker; timing still has the GPU alone; a fault in any worker stops every lane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import candidates
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate.check import CheckOptions, run_check
from porter.gate.lanes import split, staggered
from porter.gate.references import ReferenceCache
from porter.gate.runner.client import WorkerFault
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec
from porter.pool.lease import overlaps
from porter.pool.local import LocalPool
from porter.pool.verifier import CheckJob


@settings(max_examples=300, deadline=None)
@given(costs=st.lists(st.integers(1, 1 << 30), max_size=40), lanes=st.integers(1, 4), data=st.data())
def test_every_case_lands_in_one_lane_the_kept_ones_in_the_first(costs: list[int], lanes: int, data: Any) -> None:
    kept = data.draw(st.sets(st.integers(0, max(0, len(costs) - 1)), max_size=len(costs))) if costs else set()
    dealt = split(costs, lanes, sorted(kept))
    assert len(dealt) == lanes and sorted(i for lane in dealt for i in lane) == list(range(len(costs)))
    assert kept <= set(dealt[0]) and all(lane == sorted(lane) for lane in dealt)
    if not kept and costs:  # largest first onto the least loaded: no lane more than one case above another
        loads = [sum(costs[i] for i in lane) for lane in dealt]
        assert max(loads) - min(loads) <= max(costs)


@settings(max_examples=300, deadline=None)
@given(groups=st.lists(st.integers(0, 3), max_size=30), start=st.integers(0, 50), data=st.data())
def test_a_staggered_order_keeps_every_case_and_each_size_sets_cases_together(groups: list[int], start: int,
                                                                               data: Any) -> None:
    """Whatever a check starts at, it runs the same cases, and the cases of one size set (a run of
    equal groups in its order) still follow each other, in their order: consecutive calls on the
    same buffers with new data stay consecutive."""
    indices = sorted(data.draw(st.sets(st.integers(0, max(0, len(groups) - 1)), max_size=len(groups)))) if groups else []
    order = staggered(indices, groups, start)
    assert sorted(order) == indices
    runs = []
    for index in indices:
        if runs and groups[runs[-1][-1]] == groups[index]:
            runs[-1].append(index)
        else:
            runs.append([index])
    for run in runs:
        at = order.index(run[0])
        assert order[at:at + len(run)] == run
    assert staggered(indices, groups, 0) == indices
    if runs:
        assert order[0] == runs[start % len(runs)][0]


def _job(tmp_path: Path) -> CheckJob:
    path = candidates(tmp_path, 1)[0]
    spec = load_spec(tmp_path / "porter.toml")
    return CheckJob(path, spec, CheckOptions(seeds=(11, 12), speed_baseline=tmp_path / "kernel.ptx"))


def test_a_lone_candidate_runs_its_cases_on_both_workers_and_times_on_its_own(toolchain, tmp_path: Path) -> None:
    gpu = FakeGpu(case_s=0.03, time_s=0.1)
    pool = LocalPool(toolchain, devices=[0], per_gpu=2, runner_factory=lambda d: gpu.runner(), record=True)
    try:
        (verdict,) = pool.verify([_job(tmp_path)])
    finally:
        pool.close()
    assert verdict.status == "passed", verdict.reason
    cases = [e for e in gpu.log if e[0] == "case"]
    assert len(cases) == len(verdict.cases)  # each case once
    assert {e[3] for e in cases} == {1, 2}
    assert any(a[3] != b[3] and a[1] < b[2] and b[1] < a[2] for a in cases for b in cases)  # side by side
    timed = [e for e in gpu.log if e[0] == "time"]
    assert timed and {e[3] for e in timed} == {1}
    for t in timed:
        assert not [e for e in gpu.log if e is not t and e[1] < t[2] and t[1] < e[2]]
    assert not overlaps(pool.leases[0].windows)


class _Faulting:
    """A runner whose worker faults at its ``after + 1``-th case."""

    def __init__(self, inner: Any, after: int) -> None:
        self.inner, self.after, self.cases = inner, after, 0
        self.restarts = 0

    @property
    def info(self) -> Any:
        return self.inner.info

    def start(self) -> Any:
        return self.inner.start()

    def call(self, job: Any, timeout_s: float) -> Any:
        if job.op == "case":
            self.cases += 1
            if self.cases > self.after:
                raise WorkerFault("CUDARuntimeError: cudaErrorIllegalAddress", kind="fault")
        return self.inner.call(job, timeout_s)

    def close(self) -> None:
        self.inner.close()


class _Recording(_Faulting):
    """A runner that notes the sizes of every case it is sent, in order."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, after=1 << 30)
        self.sizes: list[dict[str, int]] = []

    def call(self, job: Any, timeout_s: float) -> Any:
        if job.op == "case":
            self.sizes.append(dict(job.sizes))
        return super().call(job, timeout_s)


def test_the_checks_of_a_port_run_start_at_different_size_sets(toolchain, tmp_path: Path) -> None:
    """The second check of a run starts at the plan's second size set (the first one's cases come
    last), runs every case the first ran, and still runs the cases of one size set back to back."""
    job = _job(tmp_path)
    references = ReferenceCache()
    gpu = FakeGpu()
    first, second = _Recording(gpu.runner()), _Recording(gpu.runner())
    for runner in (first, second):
        verdict = run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=runner,
                            references=references)
        assert verdict.status == "passed", verdict.reason
    runs = [sizes for k, sizes in enumerate(first.sizes) if k == 0 or sizes != first.sizes[k - 1]]
    assert len(runs) > 2 and second.sizes[0] == runs[1]
    assert sorted(map(str, second.sizes)) == sorted(map(str, first.sizes))
    assert [sizes for k, sizes in enumerate(second.sizes) if k == 0 or sizes != second.sizes[k - 1]] == runs[1:] + runs[:1]


def test_a_fault_in_a_helper_fails_the_check_and_stops_the_other_lane(toolchain, tmp_path: Path) -> None:
    gpu = FakeGpu(case_s=0.05)
    job = _job(tmp_path)
    whole = FakeGpu()
    planned = len(run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=whole.runner()).cases)
    verdict = run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=gpu.runner(),
                        helpers=[_Faulting(gpu.runner(), after=1)])
    assert verdict.status == "failed" and "cudaErrorIllegalAddress" in verdict.reason
    ran = [e for e in gpu.log if e[0] == "case"]
    assert len(ran) < planned - 2  # the check's own lane stopped too, not only the helper's
    assert not [e for e in gpu.log if e[0] == "time"]


def test_a_helper_that_cannot_start_is_left_out(toolchain, tmp_path: Path) -> None:
    class NoStart(_Faulting):
        def start(self) -> Any:
            raise WorkerFault("no usable GPU", kind="unavailable")

    gpu = FakeGpu()
    job = _job(tmp_path)
    verdict = run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=gpu.runner(),
                        helpers=[NoStart(gpu.runner(), after=0)])
    assert verdict.status == "passed", verdict.reason
    assert {e[3] for e in gpu.log if e[0] == "case"} == {1}


def test_an_error_of_porters_own_in_a_helper_is_raised_and_stops_the_other_lane(toolchain, tmp_path: Path) -> None:
    class Broken(_Faulting):
        def call(self, job: Any, timeout_s: float) -> Any:
            if job.op == "case":
                raise RuntimeError("a bug in porter's own code")
            return self.inner.call(job, timeout_s)

    job = _job(tmp_path)
    planned = len(run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=FakeGpu().runner()).cases)
    gpu = FakeGpu(case_s=0.2)
    with pytest.raises(RuntimeError, match="a bug in porter's own code"):
        run_check(job.candidate, job.spec, job.options, toolchain=toolchain, runner=gpu.runner(),
                  helpers=[Broken(gpu.runner(), after=0)])
    assert len([e for e in gpu.log if e[0] == "case"]) <= 2 < planned // 2  # the own lane stopped at once
