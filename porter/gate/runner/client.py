"""The parent's side of the GPU worker: start it, send it jobs, survive whatever it does.

Each job waits for a reply with a timeout. A worker that does not answer in time is killed
(a hung kernel cannot be interrupted any other way); a worker that dies, or reports a sticky CUDA
error (illegal address, misaligned access: the context is unusable afterwards), is restarted on
the next job. Either way the caller gets a ``WorkerFault`` with a message for the verdict.

The gate, golden recording and the services talk to any :class:`GpuRunner`: :class:`Runner` is the
one that runs the real worker (:func:`porter.gate.runner.worker.serve`, which owns CUDA) in a child
process; its ``target`` is injectable, so that the CPU tests run this file's timeout, kill and
restart logic against a fake worker (:mod:`porter.gate.runner.fake`).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, cast, overload

from porter.errors import EnvironmentProblem
from porter.gate.runner import sealed
from porter.gate.runner.digestkey import digest_key
from porter.gate.runner.gpulock import GpuLock
from porter.gate.runner.protocol import (
    EXCLUSIVE_OPS,
    REPLY_TYPES,
    CaseJob,
    CaseReply,
    Job,
    OutputsJob,
    OutputsReply,
    RepeatJob,
    RepeatReply,
    Reply,
    TimeJob,
    TimeReply,
)
from porter.gate.runner.transfer import Parking, remove_parking, unpark

JOB_PARKING_KEEP_BYTES = 512 << 20  # held references kept parked for a worker's next jobs (RAM file system)


class WorkerFault(Exception):
    """The job did not complete: the kernel hung, faulted, or the worker died."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # "timeout" | "fault" | "died" | "unavailable"


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    arch: str  # "sm_90"
    compute_capability: str
    sm_count: int
    l2_bytes: int
    max_shared_optin: int
    driver: str  # "13.0" (CUDA driver API version)
    runtime: str
    cupy: str
    device_count: int = 1  # GPUs this worker's process sees (a pool starts one worker per GPU)
    index: int = 0  # this GPU's CUDA device index (as CUDA_VISIBLE_DEVICES shows them)
    pci: str = ""  # its PCI address (domain:bus:device), the same in every process; "" for a fake

    def describe(self) -> str:
        return f"{self.name} ({self.arch}), CUDA driver {self.driver}, CuPy {self.cupy}"


class GpuRunner(Protocol):
    """What the gate needs of a runner: start the worker (the device it owns), run one job with a
    timeout (raising :class:`WorkerFault`), close. ``restarts`` counts workers lost to faults."""

    @property
    def info(self) -> DeviceInfo | None: ...

    @property
    def restarts(self) -> int: ...

    def start(self) -> DeviceInfo: ...

    def call(self, job: Job, timeout_s: float) -> Reply: ...

    def close(self) -> None: ...


@overload
def run_job(runner: GpuRunner, job: CaseJob, timeout_s: float) -> CaseReply: ...
@overload
def run_job(runner: GpuRunner, job: TimeJob, timeout_s: float) -> TimeReply: ...
@overload
def run_job(runner: GpuRunner, job: RepeatJob, timeout_s: float) -> RepeatReply: ...
@overload
def run_job(runner: GpuRunner, job: OutputsJob, timeout_s: float) -> OutputsReply: ...
def run_job(runner: GpuRunner, job: Job, timeout_s: float) -> Reply:
    """``job`` on ``runner``, its reply of the type the job expects (another type is a fault)."""
    reply = runner.call(job, timeout_s)
    if not isinstance(reply, REPLY_TYPES[type(job)]):
        raise WorkerFault(f"the worker answered a {job.op} job with {type(reply).__name__}", kind="fault")
    return reply


# A worker's body: it gets its end of the pipe and the device index, answers the start-up message
# ({"ok": True, "device": {...}} or {"ok": False, "error": ...}), then one reply per job.
WorkerTarget = Callable[[Any, int], None]


class Runner:
    """A handle on one GPU worker process. Use as a context manager, or call ``close()``.

    ``target`` is the worker's body (default :func:`porter.gate.runner.worker.serve`); it must be a
    module-level function, since the child process is spawned."""

    def __init__(self, *, device: int = 0, startup_timeout_s: float = 180.0,
                 target: WorkerTarget | None = None) -> None:
        self.device = device
        self.startup_timeout_s = startup_timeout_s
        self.target = target
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self.info: DeviceInfo | None = None
        self.restarts = 0
        self._parking: str | None = None  # the worker's directory for large replies (see transfer)
        self._job_parking = Parking(None)  # large arrays of a job, parked in that directory
        self._lock: GpuLock | None = None  # the GPU's lock across processes (see gpulock)
        self._alone = 0  # depth of exclusive() blocks: jobs inside one take no lock of their own

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The worker process's id, while one runs."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> DeviceInfo:
        """Start the worker if it is not running; returns the device it owns."""
        if self._proc is not None and self._proc.is_alive():
            assert self.info is not None
            return self.info
        target = self.target
        if target is None:
            from porter.gate.runner import worker

            target = worker.serve
        digest_key()  # in this process's environment before the worker inherits it (as tool launches do)
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=target, args=(child, self.device), daemon=True)
        # started in an empty folder without the provider's keys: nothing of the folder porter runs
        # in (a pull request's checkout, in porter ci) is imported before the worker's own code
        self._ctx.set_executable(sealed.launcher())
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        reply = self._receive(self.startup_timeout_s, what="starting the GPU worker")
        if not reply.get("ok"):
            self._kill()
            raise WorkerFault(reply.get("error", "the GPU worker could not start"), kind="unavailable")
        self.info = DeviceInfo(**reply["device"])
        self._parking = reply.get("parking")
        self._job_parking = Parking(self._parking, prefix="job-", keep_bytes=JOB_PARKING_KEEP_BYTES)
        if self.info.pci and self._lock is None:
            self._lock = GpuLock(self.info.pci)
        return self.info

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            if self._proc.is_alive():
                self._conn.send({"op": "exit"})
                self._proc.join(5)
        except (OSError, EOFError, BrokenPipeError):
            pass
        self._kill()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The GPU to this runner alone, against every porter process on the machine, while the
        block runs (ncu and compute-sanitizer launches; see :func:`exclusive`)."""
        self.start()
        hold = self._lock.exclusive() if self._lock is not None and not self._alone else nullcontext()
        with hold:
            self._alone += 1
            try:
                yield
            finally:
                self._alone -= 1

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        remove_parking(self._parking)
        self._parking = None
        self._job_parking = Parking(None)

    # -- jobs ----------------------------------------------------------------------------------
    def call(self, job: Job, timeout_s: float) -> Reply:
        """Run one job in the worker. Raises WorkerFault if it hangs, faults or dies."""
        self.start()
        if self._lock is None or self._alone:
            hold: AbstractContextManager[object] = nullcontext()
        else:
            hold = self._lock.exclusive() if job.op in EXCLUSIVE_OPS else self._lock.shared()
        with hold:
            return self._call(job, timeout_s)

    def _call(self, job: Job, timeout_s: float) -> Reply:
        try:
            self._conn.send(self._job_parking.park(job))
        except (OSError, BrokenPipeError) as err:
            self._kill()
            raise WorkerFault(f"the GPU worker went away ({err})", kind="died") from err
        envelope = self._receive(timeout_s, what=job.op)
        if envelope.get("ok"):
            reply: Reply = envelope["reply"]
            return reply
        if envelope.get("sticky"):
            # The CUDA context is poisoned: every later call would fail the same way.
            self._kill()
            self.restarts += 1
        raise WorkerFault(envelope.get("error", "unknown worker error"), kind=envelope.get("kind", "fault"))

    def _receive(self, timeout_s: float, *, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                if self._conn.poll(max(0.0, min(remaining, 0.5))):
                    return cast(dict[str, Any], unpark(self._conn.recv()))  # a reply envelope
            except (EOFError, OSError):
                if self._proc is not None:
                    self._proc.join(5)  # the pipe closes before the process is reaped: wait for its exit code
                code = self._proc.exitcode if self._proc is not None else None
                self._kill()
                self.restarts += 1
                raise WorkerFault(f"the GPU worker died while {what} (exit code {code})", kind="died") from None
            if self._proc is not None and not self._proc.is_alive():
                code = self._proc.exitcode
                self._kill()
                self.restarts += 1
                raise WorkerFault(f"the GPU worker died while {what} (exit code {code})", kind="died")
            if remaining <= 0:
                self._kill()
                self.restarts += 1
                raise WorkerFault(
                    f"no answer after {timeout_s:.0f} s while {what}: the kernel did not finish "
                    "(a hang or an endless loop); the worker was killed",
                    kind="timeout",
                )


class Unavailable:
    """A runner that has no GPU to offer, and says why (``kind`` "unavailable"): where a check can only
    do what needs no GPU (no GPU here, or none of the target's on a cluster)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.info: DeviceInfo | None = None
        self.restarts = 0

    def start(self) -> DeviceInfo:
        raise WorkerFault(self.reason, kind="unavailable")

    def call(self, job: Job, timeout_s: float) -> Reply:
        raise WorkerFault(self.reason, kind="unavailable")

    def close(self) -> None:
        pass


def exclusive(runner: GpuRunner | None) -> AbstractContextManager[object]:
    """The runner's GPU to the caller alone while the block runs: for launches outside the worker
    (ncu, compute-sanitizer) that must not share the GPU, as timing does not. A :class:`Runner`
    holds its GPU's lock across processes exclusively; a pool's runner
    (:class:`porter.pool.lease.LeasedRunner`) its GPU's lease in the pool as well; a runner without
    either (a fake) has nothing to take."""
    hold = getattr(runner, "exclusive", None)
    return hold() if callable(hold) else nullcontext()


@contextmanager
def opened(factory: Callable[[], GpuRunner] | None) -> Iterator[GpuRunner | None]:
    """A runner from ``factory`` for the ``with`` block, closed when it ends (None without a
    factory: nothing runs on a GPU). The one place a runner's lifetime is written."""
    runner = factory() if factory is not None else None
    try:
        yield runner
    finally:
        if runner is not None:
            runner.close()


def started(runner: GpuRunner, command: str, *, gpu: str = "a GPU") -> DeviceInfo:
    """``runner`` started for ``porter COMMAND``, its device said. A worker that cannot start (no
    GPU, no CuPy, a driver it cannot use) is the machine's problem, not porter's: one line naming
    ``gpu``, exit 3, where a :class:`WorkerFault` would end as an internal error."""
    try:
        return runner.start()
    except WorkerFault as fault:
        raise EnvironmentProblem(f"porter {command} needs {gpu}: {fault}") from fault
