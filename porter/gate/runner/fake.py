"""Fakes of the GPU worker, for tests on machines without a GPU.

:func:`serve` is a worker body for :class:`porter.gate.runner.Runner` (``Runner(target=serve)``): it
speaks the real worker's pipe protocol and acts out what a candidate can do to a worker, so that
the parent's timeout, kill and restart logic runs on any machine. The act is the ``entry`` of an
:class:`~porter.gate.runner.protocol.OutputsJob` (:func:`act` makes one); every reply is an
:class:`~porter.gate.runner.protocol.OutputsReply` whose outputs hold the worker's ``pid`` and the
job's sizes:

- ``echo`` (and any other job, a timing job included): replies at once;
- ``hang``: never replies (a kernel that does not finish);
- ``die``: the process exits at once with code 7 (a crash that takes the worker down);
- ``sticky``: replies with a sticky CUDA error (the context is poisoned) and exits;
- ``fault``: replies with an ordinary, non-sticky error and keeps serving;
- ``array``: replies with ``array``, ``arange(n)`` of the job's ``values`` as dtype, parked as the
  real worker parks large arrays;
- ``digest_key``: replies with ``key``, the worker's digest key (:mod:`porter.gate.runner.digestkey`),
  which it has from the environment its parent spawned it with;
- ``environ``: replies with ``names``, the names of the worker's environment variables
  (:mod:`porter.gate.runner.sealed` keeps the provider's keys from it).

A device index below 0 makes the start-up fail, as on a machine without a usable GPU; the variable
``PORTER_FAKE_GPU_PCI`` gives the fake GPU a PCI address, so that its parent takes the GPU's lock
across processes (:mod:`porter.gate.runner.gpulock`).
:class:`InProcessRunner` is a :class:`porter.gate.runner.GpuRunner` with no process at all: each
job type is answered by a function of the job, for tests of the code that talks to a runner.
:class:`FakeGpu` simulates a whole GPU that computes the spec's reference (for pool and cluster
tests, and CPU measurements).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from porter.gate.runner import rounds
from porter.gate.runner.client import DeviceInfo, WorkerFault
from porter.gate.runner.digestkey import digest_key
from porter.gate.runner.protocol import (
    CaseJob,
    CaseReply,
    Contender,
    Job,
    OutputsJob,
    OutputsReply,
    RepeatJob,
    RepeatReply,
    Reply,
    TimeJob,
    TimeReply,
)
from porter.gate.runner.transfer import Parking, parking_directory
from porter.gate.summary import summarize_output

FAKE_DEVICE = DeviceInfo(name="Fake GPU", arch="sm_90", compute_capability="9.0", sm_count=132, l2_bytes=50 << 20,
                         max_shared_optin=232448, driver="13.0", runtime="13.0", cupy="none")


def act(name: str, dtype: str = "", **sizes: int) -> OutputsJob:
    """A job for the fake worker of :func:`serve` to act out (see the module docstring)."""
    return OutputsJob(cubin=b"", entry=name, spec_path="", sizes=dict(sizes), seed=0, values=dtype)


def serve(conn: Any, device: int) -> None:
    """A fake worker's loop (see the module docstring)."""
    if device < 0:
        conn.send({"ok": False, "error": "no usable GPU: the fake worker was told there is none"})
        return
    with Parking(parking_directory()) as parking:
        # A PCI address makes the parent take the GPU's lock across processes, as for a real GPU.
        device_info = {**FAKE_DEVICE.__dict__, "pci": os.environ.get("PORTER_FAKE_GPU_PCI", "")}
        conn.send({"ok": True, "device": device_info, "parking": parking.directory})
        for job in _jobs(conn):
            name = job.entry if isinstance(job, OutputsJob) else "echo"
            sizes = job.sizes
            if name == "hang":
                time.sleep(3600)
            elif name == "die":
                os._exit(7)
            elif name == "sticky":
                conn.send({"ok": False, "error": "CUDARuntimeError: cudaErrorIllegalAddress", "sticky": True,
                           "kind": "fault"})
            elif name == "fault":
                conn.send({"ok": False, "error": "ValueError: bad launch", "sticky": False, "kind": "fault"})
            elif name == "array":
                array = np.arange(sizes["n"]).astype(job.values if isinstance(job, OutputsJob) else "f4")
                conn.send({"ok": True, "reply": parking.park(OutputsReply({"array": array}))})
            elif name == "environ":
                conn.send({"ok": True, "reply": OutputsReply({"names": np.asarray(sorted(os.environ))})})
            elif name == "digest_key":
                key = np.asarray(digest_key(), dtype=np.uint64)
                conn.send({"ok": True, "reply": OutputsReply({"key": key})})
            else:
                outputs = {"pid": np.asarray(os.getpid()), **{k: np.asarray(v) for k, v in sizes.items()}}
                conn.send({"ok": True, "reply": OutputsReply(outputs)})


def _jobs(conn: Any) -> Iterator[Job]:
    """The jobs sent, until an ``exit`` message or the pipe's end."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if not isinstance(msg, CaseJob | TimeJob | OutputsJob):
            return
        yield msg


class InProcessRunner:
    """A runner without a worker process: ``jobs`` maps a job's op to a function of the job that
    returns its reply (raise :class:`WorkerFault` to act out a fault)."""

    def __init__(self, jobs: Mapping[str, Callable[[Any], Reply]], *,
                 device: DeviceInfo | None = FAKE_DEVICE) -> None:
        self.jobs = dict(jobs)
        self.device = device
        self.info: DeviceInfo | None = None
        self.restarts = 0
        self.calls: list[str] = []

    def __enter__(self) -> InProcessRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> DeviceInfo:
        if self.device is None:
            raise WorkerFault("no usable GPU: none here", kind="unavailable")
        self.info = self.device
        return self.device

    def call(self, job: Job, timeout_s: float) -> Reply:
        self.start()
        self.calls.append(job.op)
        try:
            return self.jobs[job.op](job)
        except WorkerFault as fault:
            if fault.kind in ("timeout", "died"):
                self.restarts += 1
            raise

    def close(self) -> None:
        self.info = None


class FakeGpu:
    """A GPU simulated on the CPU, shared by the runners of one device (:meth:`runner`), for tests
    and CPU measurements of a pool or a cluster worker.

    A "kernel" computes the spec's Python reference exactly (cast to the outputs' dtypes), so every
    candidate is right, unless its cubin holds the bytes ``porter_fake_wrong`` (a candidate with a
    ``.global`` of that name), whose first output is off by one, or ``porter_fake_tuned``, right only
    on the seeds in ``tuned_seeds`` (a candidate tuned to the seeds it was shown). A case job takes ``case_s`` and a
    timing job ``time_s`` seconds of the simulated GPU; its launch times carry a relative noise of
    ``time_noise`` (see :meth:`_time`), so that the timing loop stops early or runs to its cap. Each job is logged as ``(op, start, end,
    runner)``; ``references`` counts the references computed (a ``held`` reference is not).
    ``die_first`` > 0 makes the process exit (code 17) at its first case jobs, counted in the file
    ``marker`` across processes: a worker that dies mid-candidate. A case job that asks to be
    judged on the device is answered as the worker answers it: summaries (NumPy standing in for
    CuPy in the same code) where every output passes, the outputs where one fails.
    """

    def __init__(self, *, arch: str = "sm_90a", name: str = "Fake GPU", case_s: float = 0.0, time_s: float = 0.0,
                 device_count: int = 1, die_first: int = 0, marker: str = "",
                 tuned_seeds: tuple[int, ...] = (), time_noise: float = 0.002) -> None:
        self.info = DeviceInfo(name=name, arch=arch.rstrip("af"), compute_capability="9.0", sm_count=132,
                               l2_bytes=50 << 20, max_shared_optin=232448, driver="13.0", runtime="13.0",
                               cupy="none", device_count=device_count)
        self.case_s, self.time_s = case_s, time_s
        self.die_first, self.marker = die_first, marker
        self.tuned_seeds = tuned_seeds
        self.time_noise = time_noise
        self.log: list[tuple[str, float, float, int]] = []
        self.references = 0
        self._lock = threading.Lock()
        self._outputs: dict[tuple[str, tuple[tuple[str, int], ...], int, str, bool], dict[str, np.ndarray]] = {}
        self._specs: dict[tuple[str, int], Any] = {}
        self._runners = 0

    def runner(self) -> FakeGpuRunner:
        with self._lock:
            self._runners += 1
            return FakeGpuRunner(self, self._runners)

    # -- what the simulated kernels compute -------------------------------------------------------
    def _spec(self, path: str) -> Any:
        from porter.gate.spec import load_spec

        key = (path, os.stat(path).st_mtime_ns)
        with self._lock:
            found = self._specs.get(key)
        if found is None:
            found = load_spec(Path(path))
            with self._lock:
                self._specs[key] = found
        return found

    def _reference(self, spec: Any, sizes: dict[str, int], seed: int, values: str) -> dict[str, np.ndarray]:
        from porter.gate.inputs import make_args
        from porter.gate.usercode import load_callable, on_host

        ref = spec.reference.callable
        args = make_args(spec, sizes, seed, values)
        result = load_callable(str(ref.path), ref.function)(args, dict(sizes))
        return {p.name: on_host(result[p.name]).astype(np.float64) for p in spec.outputs}

    def _kernel(self, spec: Any, sizes: dict[str, int], seed: int, values: str, wrong: bool) -> dict[str, np.ndarray]:
        key = (str(spec.path), tuple(sorted(sizes.items())), seed, values, wrong)
        with self._lock:
            found = self._outputs.get(key)
        if found is None:
            found = {p.name: ref.astype(p.dtype.numpy) for p, ref in
                     zip(spec.outputs, self._reference(spec, sizes, seed, values).values(), strict=True)}
            if wrong:
                first = spec.outputs[0].name
                found[first] = (found[first].astype(np.float64) + 1).astype(found[first].dtype)
            with self._lock:
                self._outputs[key] = found
        return found

    def _wrong(self, cubin: bytes, seed: int) -> bool:
        return b"porter_fake_wrong" in cubin or (b"porter_fake_tuned" in cubin and seed not in self.tuned_seeds)

    @staticmethod
    def _digests(outputs: dict[str, np.ndarray]) -> list[int]:
        return [int.from_bytes(hashlib.sha256(a.tobytes()).digest()[:7], "little") for a in outputs.values()]

    def _maybe_die(self) -> None:
        if self.die_first <= 0 or not self.marker:
            return
        path = Path(self.marker)
        deaths = int(path.read_text() or 0) if path.exists() else 0
        if deaths < self.die_first:
            path.write_text(str(deaths + 1))
            os._exit(17)

    def job(self, runner: int, job: Job) -> Reply:
        start = time.monotonic()
        try:
            if isinstance(job, CaseJob):
                return self._case(job)
            if isinstance(job, TimeJob):
                return self._time(job)
            if isinstance(job, RepeatJob):
                return self._repeat(job)
            raise WorkerFault(f"the fake GPU has no job {job.op!r}", kind="fault")
        finally:
            with self._lock:
                self.log.append((job.op, start, time.monotonic(), runner))

    def _case(self, job: CaseJob) -> CaseReply:
        self._maybe_die()
        spec = self._spec(job.spec_path)
        sizes, seed, values = job.sizes, job.seed, job.values
        outputs = self._kernel(spec, sizes, seed, values, self._wrong(job.cubin, seed))
        reference = None
        if job.reference.kind != "held":
            reference = self._reference(spec, sizes, seed, values)
            with self._lock:
                self.references += 1
        time.sleep(self.case_s)
        runs = len(job.initials)
        if job.judge == "device":  # every run alike: one summary each, made as the worker makes them
            held = job.reference.outputs if job.reference.kind == "held" else reference
            if held is None:
                raise WorkerFault("a held reference reached a case judged on the device without its arrays",
                                  kind="fault")
            found = {name: summarize_output(np, spec, name, sizes, values, out.reshape(-1),
                                            np.asarray(held[name]).reshape(-1))
                     for name, out in outputs.items()}
            if all(s.passed for s in found.values()):
                return CaseReply(outputs=[], initials=list(job.initials),
                                 reference=reference if job.send_reference else None, digests=self._digests(outputs),
                                 kernel_s=self.case_s, summaries=[found] * runs)
        return CaseReply(outputs=[outputs] + [None] * (runs - 1), initials=list(job.initials), reference=reference,
                         digests=self._digests(outputs), kernel_s=self.case_s)

    def _time(self, job: TimeJob) -> TimeReply:
        """Rounds run as the worker runs them (:func:`rounds.adaptive_rounds`), rotating through the
        job's input sets, each launch's time its contender's (candidate 1 ms, source 2 ms, library
        1.25 ms; 1.5 times that for a candidate holding ``porter_fake_slow_plain`` on a set placed
        as a program's tensors lie) times a log-normal noise of ``time_noise``, drawn from the job's seeds."""
        spec = self._spec(job.spec_path)
        names = [c.name for c in job.contenders]
        sets = len(job.seeds)
        base = {"candidate": 1.0, "source": 2.0, "library": 1.25}

        def ms(c: Contender, index: int) -> float:
            slow = b"porter_fake_slow_plain" in c.cubin and rounds.set_placing(index) != "flush"
            return base.get(c.name, 1.0) * (1.5 if slow else 1.0)

        rng = np.random.default_rng([*job.seeds, 1 + int(self.time_noise * 1e6)])

        def run_batch(first: int, end: int) -> list[list[float]]:
            return [[ms(c, r % sets) * float(np.exp(self.time_noise * rng.standard_normal())) for r in range(first, end)]
                    for c in job.contenders]

        round_s = sum(ms(c, 0) for c in job.contenders) / 1e3
        cap = rounds.rep_cap(job.budget_s, round_s, job.min_reps, job.max_reps, sets)
        times = rounds.adaptive_rounds(run_batch, len(names), sets, job.min_reps, cap, job.ci_target)
        reps = len(times[0]) if times else 0
        digests: list[list[int] | None] = []
        for c in job.contenders:
            if c.kind != "kernel":
                digests.append(None)
                continue
            per_set = [self._digests(self._kernel(spec, job.sizes, seed, "", self._wrong(c.cubin, seed)))
                       for seed in job.seeds]
            digests.append([d for r in range(reps) for d in per_set[r % sets]])
        time.sleep(self.time_s)
        return TimeReply(names=names, times_ms=times, digests=digests, outputs_per_launch=len(spec.outputs),
                         guards=[[] for _ in names], seeds=list(job.seeds))

    def _repeat(self, job: RepeatJob) -> RepeatReply:
        """Every launch in a row leaves what the candidate's launch on the seed leaves."""
        spec = self._spec(job.spec_path)
        c = job.candidate
        once = self._digests(self._kernel(spec, job.sizes, job.seed, "", self._wrong(c.cubin, job.seed)))
        return RepeatReply(digests=once * job.launches, guards=[])


class FakeGpuRunner:
    """A :class:`porter.gate.runner.GpuRunner` on a :class:`FakeGpu` (in this process)."""

    def __init__(self, gpu: FakeGpu, number: int) -> None:
        self.gpu = gpu
        self.number = number
        self.info: DeviceInfo | None = None
        self.restarts = 0

    def start(self) -> DeviceInfo:
        self.info = self.gpu.info
        return self.info

    def call(self, job: Job, timeout_s: float) -> Reply:
        self.start()
        return self.gpu.job(self.number, job)

    def close(self) -> None:
        self.info = None
