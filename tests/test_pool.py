"""The local pool on simulated GPUs (porter.gate.runner.fake.FakeGpu): a round's candidates run side
by side, timing never overlaps another candidate's work on the same GPU, the reference of each case
is computed once per port run, and a port's passing candidate is re-verified on fresh seeds."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import candidates, small_vector_add

from porter.gate.check import CheckOptions, run_check
from porter.gate.plan import plan_cases
from porter.gate.references import ReferenceCache
from porter.gate.runner.fake import FakeGpu
from porter.gate.runner.protocol import OutputsJob
from porter.gate.spec import load_spec
from porter.pool.lease import GpuLease, LeasedRunner, overlaps
from porter.pool.local import LocalPool
from porter.pool.verifier import CheckJob, RunnerVerifier


def jobs(paths: list[Path], spec_path: Path, seeds=(11, 12), references=None) -> list[CheckJob]:
    spec = load_spec(spec_path)
    options = CheckOptions(seeds=seeds, speed_baseline=spec_path.parent / "kernel.ptx")
    return [CheckJob(p, spec, options, references) for p in paths]


def test_a_round_runs_side_by_side_and_timing_has_the_gpu_alone(toolchain, tmp_path: Path) -> None:
    gpu = FakeGpu(case_s=0.03, time_s=0.15)
    paths = candidates(tmp_path, 6)
    pool = LocalPool(toolchain, devices=[0], per_gpu=3, runner_factory=lambda d: gpu.runner(), record=True)
    verdicts = pool.verify(jobs(paths, tmp_path / "porter.toml"))
    pool.close()
    assert [v.status for v in verdicts] == ["passed"] * 6, [v.reason for v in verdicts]
    assert [v.kernel for v in verdicts] == [str(p) for p in paths]  # one Verdict per job, in order
    log = gpu.log
    # Side by side: cases of different workers overlapped in time on the one GPU.
    cases = [e for e in log if e[0] == "case"]
    assert any(a[3] != b[3] and a[1] < b[2] and b[1] < a[2] for a in cases for b in cases)
    # Timing alone: no job of any other worker ran on the GPU while one was timed.
    timed = [e for e in log if e[0] == "time"]
    assert len(timed) == 2 * 6  # each candidate at [sizes] and at the size set its check drew
    for t in timed:
        others = [e for e in log if e is not t and e[1] < t[2] and t[1] < e[2]]
        assert not others, f"{t} overlapped {others}"
    assert pool.leases[0].windows and not overlaps(pool.leases[0].windows)


def test_without_the_lease_timing_overlaps_other_work(toolchain, tmp_path: Path) -> None:
    """The control for the test above: the same checks on bare runners do overlap timing."""
    gpu = FakeGpu(case_s=0.03, time_s=0.15)
    paths = candidates(tmp_path, 3)
    todo = jobs(paths, tmp_path / "porter.toml")
    threads = [threading.Thread(target=run_check, args=(j.candidate, j.spec, j.options),
                                kwargs={"toolchain": toolchain, "runner": gpu.runner()}) for j in todo]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    timed = [e for e in gpu.log if e[0] == "time"]
    assert any(e is not t and e[1] < t[2] and t[1] < e[2] for t in timed for e in gpu.log)


def test_the_pool_is_faster_than_one_candidate_after_another(toolchain, tmp_path: Path) -> None:
    paths = candidates(tmp_path, 4)
    todo = jobs(paths, tmp_path / "porter.toml")
    # Simulated GPU work that outweighs the CPU's (ptxas, comparisons) even on a busy 2-core machine.
    gpu = FakeGpu(case_s=0.2, time_s=0.1)
    start = time.perf_counter()
    RunnerVerifier(gpu.runner(), toolchain).verify(todo)
    sequential = time.perf_counter() - start
    pool = LocalPool(toolchain, devices=[0, 1], per_gpu=2, runner_factory=lambda d: FakeGpu(case_s=0.2, time_s=0.1).runner())
    start = time.perf_counter()
    verdicts = pool.verify(todo)
    pooled = time.perf_counter() - start
    assert all(v.status == "passed" for v in verdicts)
    assert pool.capacity == 4 and pool.gpus == 2
    assert pooled < 0.7 * sequential, (pooled, sequential)


def test_a_port_run_computes_each_reference_once(toolchain, tmp_path: Path) -> None:
    paths = candidates(tmp_path, 5)
    spec = load_spec(tmp_path / "porter.toml")
    planned = len(plan_cases(spec, (11, 12), timed=[spec.default_sizes()]))
    gpu = FakeGpu()
    cache = ReferenceCache()
    pool = LocalPool(toolchain, devices=[0], per_gpu=1, runner_factory=lambda d: gpu.runner())
    verdicts = pool.verify(jobs(paths, tmp_path / "porter.toml", references=cache))
    assert all(v.status == "passed" for v in verdicts)
    assert gpu.references == planned  # once per case, not once per case and candidate
    assert cache.stats.hits == 4 * planned
    # Without the run's cache every check asks for every reference again.
    again = FakeGpu()
    LocalPool(toolchain, devices=[0], per_gpu=1, runner_factory=lambda d: again.runner()).verify(
        jobs(paths, tmp_path / "porter.toml"))
    assert again.references == 5 * planned


def test_side_by_side_checks_compute_each_reference_once(toolchain, tmp_path: Path) -> None:
    """Three workers walk the same plan at once, each check of the run starting at another size
    set (porter.gate.lanes.staggered): every reference is computed once, by the first check to
    reach its case; a check that reaches a case while another computes it waits for it (and the
    staggered start makes that rarer than if all three walked in step)."""
    paths = candidates(tmp_path, 6)
    spec = load_spec(tmp_path / "porter.toml")
    planned = len(plan_cases(spec, (11, 12), timed=[spec.default_sizes()]))
    gpu = FakeGpu(case_s=0.02)
    cache = ReferenceCache()
    pool = LocalPool(toolchain, devices=[0], per_gpu=3, runner_factory=lambda d: gpu.runner())
    try:
        verdicts = pool.verify(jobs(paths, tmp_path / "porter.toml", references=cache))
    finally:
        pool.close()
    assert all(v.status == "passed" for v in verdicts)
    assert gpu.references == planned and cache.stats.misses == planned
    assert cache.stats.hits == 5 * planned


def test_a_reference_abandoned_by_its_check_is_computed_by_the_next() -> None:
    cache = ReferenceCache()
    key = ("python:ref", "porter.toml", 1, ((("n", 4),), 7, ""))
    assert cache.take(key, wait_s=5) is None  # this caller computes it
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(cache.take(key, wait_s=5)))
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive()  # waiting for the first caller
    cache.abandon(key)  # its case faulted
    waiter.join(5)
    assert got == [None] and cache.stats.misses == 2  # so the waiter computes it itself
    kept = cache.put(key, {"y": np.arange(3.0)})
    assert cache.take(key, wait_s=0)["y"] is kept["y"] and not kept["y"].flags.writeable


def test_a_held_reference_still_judges_a_wrong_candidate(toolchain, tmp_path: Path) -> None:
    kernel, spec_path = small_vector_add(tmp_path / "wrong", marker="porter_fake_wrong")
    right = candidates(tmp_path / "right", 1)[0]
    cache = ReferenceCache()
    pool = LocalPool(toolchain, devices=[0], per_gpu=1, runner_factory=lambda d: FakeGpu().runner())
    spec = load_spec(spec_path)
    options = CheckOptions(seeds=(3, 4), arch="sm_90")
    good, bad = pool.verify([CheckJob(right, spec, options, cache), CheckJob(kernel, spec, options, cache)])
    assert good.status == "passed" and bad.status == "failed"
    assert "elements wrong" in bad.reason and cache.stats.hits > 0


def test_the_lease_lets_readers_share_and_writers_wait() -> None:
    lease = GpuLease(record=True)
    inside = threading.Event()
    release = threading.Event()

    def reader() -> None:
        with lease.shared("r"):
            inside.set()
            release.wait(5)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait(5)
    got = []
    writer = threading.Thread(target=lambda: lease.exclusive("w").__enter__() or got.append(time.monotonic()))
    writer.start()
    time.sleep(0.1)
    assert not got  # the writer waits for the readers
    released = time.monotonic()
    release.set()
    writer.join(5)
    assert got and got[0] >= released


def test_the_exclusive_holder_takes_the_lease_again_and_others_wait_for_the_outer_holding() -> None:
    """A check times every size set inside one exclusive holding: its own jobs inside it go at
    once (shared or exclusive), another thread's wait until the outer holding ends, and the
    holding is one window."""
    lease = GpuLease(record=True)
    entered = []

    def another_check() -> None:
        with lease.shared("another check"):
            entered.append(1)

    with lease.exclusive("timing"):
        with lease.exclusive("size set 1"), lease.shared("a case of its own"):
            pass
        other = threading.Thread(target=another_check)
        other.start()
        time.sleep(0.1)
        with lease.exclusive("size set 2"):
            assert not entered  # another thread's case waits for the whole holding
    other.join(5)
    assert entered
    assert [(w.holder, w.exclusive) for w in lease.windows] == [("timing", True), ("another check", False)]
    assert not overlaps(lease.windows)


def test_a_leased_runner_takes_the_lease_for_its_jobs() -> None:
    lease = GpuLease(record=True)
    gpu = FakeGpu()
    runner = LeasedRunner(gpu.runner(), lease, holder="x")
    with pytest.raises(Exception, match="no job"):
        runner.call(OutputsJob(cubin=b"", entry="k", spec_path="", sizes={}, seed=0), 1.0)
    with runner.exclusive():
        pass
    assert [w.exclusive for w in lease.windows] == [False, True]


# --- the session: seeds, references, fresh-seed re-verification --------------------------------

def _session(toolchain, tmp_path: Path, kernel: Path, spec_path: Path, gpu: FakeGpu, *, seeds=(5, 6)):
    from porter.agent.session import PortRequest, PortSession

    request = PortRequest(kernel=kernel, spec=load_spec(spec_path), to_arch="sm_90", require_native=False,
                          check=replace(CheckOptions(), seeds=seeds), runs_root=tmp_path / "runs")
    pool = LocalPool(toolchain, devices=[0], per_gpu=2, runner_factory=lambda d: gpu.runner())
    return PortSession(request, toolchain=toolchain, model=None, verifier=pool).run()


def test_a_passing_port_is_re_verified_on_fresh_seeds(toolchain, tmp_path: Path) -> None:
    kernel, spec_path = small_vector_add(tmp_path / "k")
    result = _session(toolchain, tmp_path, kernel, spec_path, FakeGpu())
    assert result.status == "passed"
    verdict = result.best.verdict
    assert verdict.seeds and set(verdict.seeds).isdisjoint({5, 6})
    assert any("re-verified on fresh seeds" in w and "5, 6" in w for w in verdict.warnings)


def test_a_candidate_right_only_on_the_run_seeds_does_not_pass(toolchain, tmp_path: Path) -> None:
    kernel, spec_path = small_vector_add(tmp_path / "k", marker="porter_fake_tuned")
    result = _session(toolchain, tmp_path, kernel, spec_path, FakeGpu(tuned_seeds=(5, 6)))
    assert result.status != "passed"
    assert result.best.verdict.gate("equivalence").status == "failed"
    assert any("re-verified on fresh seeds" in w for w in result.best.verdict.warnings)


def test_a_tool_launch_goes_to_the_checked_workers_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from porter.gate.nsight import _child_env

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "CUDA_VISIBLE_DEVICES" not in _child_env(0)
    assert _child_env(1)["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert _child_env(1)["CUDA_VISIBLE_DEVICES"] == "5"
    assert _child_env(0)["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_without_a_gpu_the_pool_says_why_and_starts_no_worker_again(toolchain, tmp_path: Path) -> None:
    from porter.gate.runner.fake import InProcessRunner

    made = []

    def factory(device: int) -> InProcessRunner:
        made.append(device)
        return InProcessRunner({}, device=None)

    paths = candidates(tmp_path, 2)
    pool = LocalPool(toolchain, runner_factory=factory)
    verdicts = pool.verify(jobs(paths, tmp_path / "porter.toml"))
    assert [v.status for v in verdicts] == ["not run", "not run"]
    assert all("no usable GPU" in v.gate("equivalence").summary for v in verdicts)
    assert made == [0] and pool.capacity == 1 and pool.describe() == "no GPU"


def test_the_throughput_benchmark_runs_on_simulated_gpus_without_a_gpu(tmp_path: Path) -> None:
    """tools/bench_throughput.py --fake is the CPU check of the pool's overlap: it must run where
    there is no GPU (no CUDA driver is touched) and report no timing window overlapping other work."""
    small_vector_add(tmp_path / "example")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PORTER_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(root / "tools" / "bench_throughput.py"), "--fake", "--example",
                        str(tmp_path / "example"), "--candidates", "3", "--per-gpu", "2", "--no-sequential",
                        "--fake-case-s", "0.01", "--fake-time-s", "0.05", "--arch", "sm_90", "--rounds", "2"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    row = next(line for line in r.stdout.splitlines() if line.startswith("| pool | 1 | 2 |"))
    assert "3 passed" in row and row.rstrip().endswith("| 0 |"), row
    extra = next(line for line in r.stdout.splitlines() if "round_walls_s" in line)
    walls = [float(w) for w in extra.split("round_walls_s ")[1].split(",")[0].split()]
    assert len(walls) == 2  # the row's wall time is the median of the rounds asked for
    # ... and every round's verdicts over every round's seconds is reported beside it
    overall = float(extra.split("all_rounds_per_minute ")[1].split(",")[0])
    assert overall == pytest.approx(60 * 3 * 2 / sum(walls), rel=0.02)


class _TimedToolchain:
    """A toolchain whose assemblies are noted (candidate file name, start, end) as they run."""

    def __init__(self, inner) -> None:
        self.inner, self.calls, self.archs = inner, [], []

    def assemble(self, ptx, arch, **kwargs):
        start = time.monotonic()
        result = self.inner.assemble(ptx, arch, **kwargs)
        self.calls.append((kwargs.get("filename"), start, time.monotonic()))
        self.archs.append((arch, start, time.monotonic()))
        return result

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_next_candidates_are_assembled_while_the_gpu_works_on_one(toolchain, tmp_path: Path) -> None:
    """One worker, one candidate after another: each later candidate's ptxas run happens while the
    first candidate's check runs, not after it."""
    paths = candidates(tmp_path, 3)
    cache = tmp_path / "ptxas-cache"
    from porter.ptx.toolchain import find_toolchain

    timed = _TimedToolchain(find_toolchain({**os.environ, "PORTER_CACHE_DIR": str(cache)}))
    gpu = FakeGpu(case_s=0.15, time_s=0.05)
    verdicts = RunnerVerifier(gpu.runner(), timed).verify(jobs(paths, tmp_path / "porter.toml"))
    assert [v.status for v in verdicts] == ["passed"] * 3
    ahead: dict[str, float] = {}  # each later candidate's first assembly
    for name, start, _ in sorted(timed.calls, key=lambda call: call[1]):
        if name in ("cand1.ptx", "cand2.ptx"):
            ahead.setdefault(name, start)
    assert set(ahead) == {"cand1.ptx", "cand2.ptx"}
    cases = sorted((start, end) for op, start, end, _ in gpu.log if op == "case")
    first_candidate = cases[: len(cases) // 3]  # the first check's cases come first
    assert all(start < first_candidate[-1][1] for start in ahead.values()), (ahead, cases)


def test_a_kernel_the_gpu_cannot_load_as_built_is_assembled_for_it_beside_its_own_target(toolchain,
                                                                                         tmp_path: Path) -> None:
    """sm_80 PTX checked on a warm sm_90 worker: its assembly for sm_90 runs while the one for its
    own target does (two ptxas processes), and the check runs the sm_90 cubin."""
    from porter.ptx import retarget
    from porter.ptx.toolchain import find_toolchain

    kernel, spec_path = small_vector_add(tmp_path)
    path = tmp_path / "old.ptx"
    path.write_text(retarget(kernel.read_text(), "sm_80", min_version="7.8"))
    timed = _TimedToolchain(find_toolchain({**os.environ, "PORTER_CACHE_DIR": str(tmp_path / "ptxas-cache")}))
    runner = FakeGpu().runner()
    runner.start()
    verdict = run_check(path, load_spec(spec_path), CheckOptions(seeds=(3,), timing=False), toolchain=timed,
                        runner=runner)
    assert verdict.status == "passed", verdict.reason
    runs: dict[str, tuple[float, float]] = {}
    for arch, start, end in sorted(timed.archs, key=lambda run: run[1]):
        runs.setdefault(arch, (start, end))  # each arch's first: a later one finds ptxas' cache
    assert set(runs) == {"sm_80", "sm_90"}
    assert runs["sm_90"][0] < runs["sm_80"][1] and runs["sm_80"][0] < runs["sm_90"][1]  # side by side
