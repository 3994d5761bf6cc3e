"""The GPU's lock across processes: porter processes sharing a GPU run cases side by side and time
alone, and a waiting timing run is not starved by a stream of cases."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from porter.gate.runner import Runner
from porter.gate.runner.fake import act, serve
from porter.gate.runner.gpulock import GpuLock
from porter.gate.runner.protocol import TimeJob

START_S = 4.0  # after this, every process of a plan has started and waits for its moment


def _hold(directory: str, kind: str, seconds: float, at: float, log: str) -> None:
    time.sleep(max(0.0, at - time.monotonic()))  # the system's monotonic clock: one for every process
    lock = GpuLock("0000:1b:00.0", directory)
    with getattr(lock, kind)():
        start = time.monotonic()
        time.sleep(seconds)
        end = time.monotonic()
    with open(log, "a") as f:
        f.write(f"{kind} {start} {end}\n")


def _windows(log: Path) -> list[tuple[str, float, float]]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return sorted(((k, float(a), float(b)) for k, a, b in rows), key=lambda w: w[1])


def _run(tmp_path: Path, plan: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    log = tmp_path / "log"
    ctx = mp.get_context("spawn")
    # Each process asks at its delay after one moment far enough ahead for every process to have
    # started, not after its own start: a spawned process takes a second or more to start on a
    # loaded machine, which reordered the asks.
    epoch = time.monotonic() + START_S
    procs = [ctx.Process(target=_hold, args=(str(tmp_path), kind, seconds, epoch + delay, str(log)))
             for kind, seconds, delay in plan]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return _windows(log)


def _overlap(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_shared_holders_overlap_and_an_exclusive_one_overlaps_nobody(tmp_path: Path) -> None:
    windows = _run(tmp_path, [("shared", 1.0, 0.0), ("shared", 1.0, 0.0), ("exclusive", 0.5, 0.3),
                              ("shared", 0.5, 0.6)])
    shared = [w for w in windows if w[0] == "shared"]
    alone = next(w for w in windows if w[0] == "exclusive")
    assert _overlap(shared[0], shared[1])  # correctness runs side by side
    assert not any(_overlap(alone, w) for w in windows if w is not alone)


def test_a_waiting_timing_run_goes_before_cases_that_came_after_it(tmp_path: Path) -> None:
    # A case holds the GPU; timing asks at 0.3 s; another case asks at 0.6 s, while the first still runs.
    windows = _run(tmp_path, [("shared", 1.5, 0.0), ("exclusive", 0.3, 0.3), ("shared", 0.3, 0.6)])
    first, alone, late = (next(w for w in windows if w[0] == "shared")), \
        next(w for w in windows if w[0] == "exclusive"), windows[-1]
    assert late[0] == "shared" and late is not first
    assert alone[1] >= first[2] - 0.05 and late[1] >= alone[2] - 0.05


@pytest.fixture
def fake_gpu_on_a_bus(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("PORTER_FAKE_GPU_PCI", "0000:1b:00.0")
    monkeypatch.setenv("PORTER_LOCK_DIR", str(tmp_path))
    return tmp_path


def test_a_runner_waits_for_another_process_timing_on_its_gpu(fake_gpu_on_a_bus: Path) -> None:
    log = fake_gpu_on_a_bus / "log"
    other = mp.get_context("spawn").Process(target=_hold, args=(str(fake_gpu_on_a_bus), "exclusive", 1.5, 0.0,
                                                               str(log)))
    with Runner(target=serve, startup_timeout_s=60) as runner:
        runner.start()
        other.start()
        time.sleep(0.5)  # the other process is timing now
        runner.call(act("echo"), 30)
        answered = time.monotonic()
        other.join(30)
    held = _windows(log)[0]
    assert answered >= held[2] - 0.05  # the case waited until the timing run let go


def test_inside_exclusive_a_runner_s_own_jobs_do_not_wait_for_itself(fake_gpu_on_a_bus: Path) -> None:
    with Runner(target=serve, startup_timeout_s=60) as runner, runner.exclusive():
        timing = TimeJob(spec_path="", sizes={}, seeds=(0,), contenders=())
        assert runner.call(timing, 10) and runner.call(act("echo"), 10)


def test_a_lock_folder_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    from porter.errors import InputError

    with pytest.raises(InputError, match=r"cannot open the GPU's lock file in .*missing.*PORTER_LOCK_DIR"):
        GpuLock("0000:1b:00.0", str(tmp_path / "missing"))
