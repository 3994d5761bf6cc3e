"""The parent's side of the GPU worker on a CPU: timeouts, kills and restarts against a fake worker."""

from __future__ import annotations

import time

import numpy as np
import pytest

from porter.gate.runner import GpuRunner, Runner, WorkerFault
from porter.gate.runner.fake import FAKE_DEVICE, InProcessRunner, act, serve
from porter.gate.runner.protocol import OutputsReply


def _pid(runner: GpuRunner) -> int:
    """The pid of the fake worker that answers (see porter.gate.runner.fake.serve)."""
    reply = runner.call(act("echo"), 30)
    assert isinstance(reply, OutputsReply)
    return int(reply.outputs["pid"])


@pytest.fixture
def runner():
    with Runner(target=serve, startup_timeout_s=60) as r:
        yield r


def test_a_job_is_answered_and_the_device_known(runner: Runner) -> None:
    assert runner.start() == FAKE_DEVICE
    first = runner.call(act("echo", value=3), 30)
    assert isinstance(first, OutputsReply) and first.outputs["value"] == 3
    assert _pid(runner) == first.outputs["pid"] and runner.restarts == 0


def test_a_hung_job_is_killed_after_its_timeout_and_the_next_job_gets_a_new_worker(runner: Runner) -> None:
    before = _pid(runner)
    start = time.monotonic()
    with pytest.raises(WorkerFault) as fault:
        runner.call(act("hang"), 1.0)
    assert fault.value.kind == "timeout" and "the worker was killed" in str(fault.value)
    assert time.monotonic() - start < 10 and runner.restarts == 1
    assert _pid(runner) != before


def test_a_worker_that_dies_is_reported_and_restarted(runner: Runner) -> None:
    before = _pid(runner)
    with pytest.raises(WorkerFault) as fault:
        runner.call(act("die"), 30)
    assert fault.value.kind == "died" and "exit code 7" in str(fault.value) and runner.restarts == 1
    assert _pid(runner) != before


def test_a_sticky_error_restarts_the_worker_and_an_ordinary_one_does_not(runner: Runner) -> None:
    before = _pid(runner)
    with pytest.raises(WorkerFault) as ordinary:
        runner.call(act("fault"), 30)
    assert ordinary.value.kind == "fault" and runner.restarts == 0
    assert _pid(runner) == before
    with pytest.raises(WorkerFault, match="IllegalAddress"):
        runner.call(act("sticky"), 30)
    assert runner.restarts == 1 and _pid(runner) != before


def test_a_worker_that_cannot_start_is_unavailable() -> None:
    with Runner(target=serve, device=-1) as r, pytest.raises(WorkerFault) as fault:
        r.start()
    assert fault.value.kind == "unavailable" and "no usable GPU" in str(fault.value)


def test_close_ends_the_worker(runner: Runner) -> None:
    _pid(runner)
    proc = runner._proc
    runner.close()
    assert runner._proc is None and not proc.is_alive()


def test_the_in_process_fake_is_a_runner() -> None:
    answer = OutputsReply({"x": np.ones(1)})
    fake: GpuRunner = InProcessRunner({"outputs": lambda job: answer})
    assert fake.call(act("echo"), 1) is answer and fake.info == FAKE_DEVICE
    assert isinstance(InProcessRunner({}, device=None), InProcessRunner)
    with pytest.raises(WorkerFault):
        InProcessRunner({}, device=None).start()


def test_the_gate_fails_a_candidate_whose_case_hangs_with_the_runners_reason(toolchain) -> None:
    """The gate on a CPU, through the in-process runner: a case that times out fails the candidate
    for that reason and stops the sweep there."""
    from pathlib import Path

    from porter.gate.check import CheckOptions, run_check
    from porter.gate.spec import load_spec

    def hang(job):
        raise WorkerFault("no answer after 1 s while case: the kernel did not finish", kind="timeout")

    example = Path(__file__).resolve().parent.parent / "examples" / "vector_add"
    fake = InProcessRunner({"case": hang})
    verdict = run_check(example / "kernel.ptx", load_spec(example / "porter.toml"), CheckOptions(case_timeout_s=1),
                        toolchain=toolchain, runner=fake)
    assert verdict.status == "failed" and fake.calls == ["case"] and fake.restarts == 1
    assert verdict.gate("equivalence").status == "failed" and verdict.gate("timing") is None
    assert verdict.cases[-1].fault.startswith("no answer after 1 s") and "timeout" in verdict.cases[-1].reason


def _array(runner: Runner, n: int, dtype: str) -> np.ndarray:
    reply = runner.call(act("array", dtype, n=n), 30)
    assert isinstance(reply, OutputsReply)
    return reply.outputs["array"]


def _parked_files(runner: Runner) -> list[str]:
    import os

    directory = runner._parking
    return sorted(os.listdir(directory)) if directory and os.path.isdir(directory) else []


@pytest.mark.skipif(not __import__("os").path.isdir("/dev/shm"), reason="no RAM file system (/dev/shm) here")
def test_a_large_reply_arrives_whole_through_shared_memory_and_leaves_no_file(runner: Runner) -> None:
    import os

    runner.start()
    assert runner._parking and runner._parking.startswith("/dev/shm/")
    for dtype in ("float32", "uint16", "int64"):
        big = _array(runner, 3_000_000, dtype)
        assert big.dtype == np.dtype(dtype) and np.array_equal(big, np.arange(3_000_000).astype(dtype))
        assert _parked_files(runner) == []  # unlinked as soon as it was mapped
    big[0] = 7  # the parent's copy is its own to write
    small = _array(runner, 10, "float32")
    assert np.array_equal(small, np.arange(10, dtype=np.float32))
    directory = runner._parking
    runner.close()
    assert not os.path.exists(directory)


@pytest.mark.skipif(not __import__("os").path.isdir("/dev/shm"), reason="no RAM file system (/dev/shm) here")
def test_a_worker_that_dies_takes_its_shared_memory_directory_with_it(runner: Runner) -> None:
    import os

    runner.start()
    directory = runner._parking
    assert directory and os.path.isdir(directory)
    with pytest.raises(WorkerFault):
        runner.call(act("die"), 30)
    assert not os.path.exists(directory)
    assert _array(runner, 1 << 20, "float32")[-1] == (1 << 20) - 1


_PARENT = """
import sys, time
from porter.gate.runner import Runner
from porter.gate.runner.fake import serve
runner = Runner(target=serve, startup_timeout_s=60)
runner.start()
print(runner._parking, runner._proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not __import__("os").path.isdir("/dev/shm"), reason="no RAM file system (/dev/shm) here")
def test_a_killed_parent_leaves_no_shared_memory_directory_behind() -> None:
    """The parent killed outright (no cleanup of its own): the worker sees its pipe close and
    removes its directory as it ends."""
    import os
    import subprocess
    import sys

    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    directory, worker = parent.stdout.readline().split()
    assert os.path.isdir(directory)
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 20
    while os.path.exists(directory) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(directory)
    from porter.gate.runner.transfer import process_alive

    deadline = time.monotonic() + 20
    while process_alive(int(worker)) and time.monotonic() < deadline:  # it ended (a zombie at most)
        time.sleep(0.1)
    assert not process_alive(int(worker))


@pytest.mark.skipif(not __import__("os").path.isdir("/dev/shm"), reason="no RAM file system (/dev/shm) here")
def test_directories_of_dead_workers_go_when_the_next_worker_starts(tmp_path) -> None:
    """A worker killed with its process group (``timeout`` does that) leaves its directory; the
    next worker removes it, and leaves a live worker's alone."""
    import os
    import subprocess
    import sys

    from porter.gate.runner.transfer import remove_orphans

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"porter-worker-{gone.stdout.strip()}-abc"
    live = tmp_path / f"porter-worker-{os.getpid()}-def"
    other = tmp_path / "porter-worker-notapid"
    for folder in (dead, live, other):
        folder.mkdir()
    (dead / "0.npy").write_bytes(b"x" * 100)
    assert remove_orphans(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.is_dir() and other.is_dir()
    with Runner(target=serve, startup_timeout_s=60) as r:  # the real folder: its name carries the pid
        r.start()
        assert os.path.basename(r._parking).startswith(f"porter-worker-{r._proc.pid}-")
