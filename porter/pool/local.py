"""The local pool: every GPU of this machine, several candidates verified side by side.

Each GPU gets ``per_gpu`` worker processes (slots), each one the usual :class:`Runner` that owns a
CUDA context on that GPU, so that a candidate which hangs or faults takes down its own worker only.
A round's candidates are checked in threads, one slot each: while one candidate's cases run on the
GPU, another's ptxas run, input draws and comparisons run on the CPU, and correctness cases of
different candidates share the GPU. A lone candidate (``porter check``, the candidate a port run
confirms) borrows its GPU's free slots too: its cases are split between them (see
:mod:`porter.gate.lanes`), its timing stays on its own. The candidates waiting for a slot are
assembled ahead. Timing (and ncu or compute-sanitizer) takes the GPU's
:class:`~porter.pool.lease.GpuLease` exclusively, so no other candidate's kernel runs on that GPU
while one is timed. Slots are handed out round-robin over the GPUs, and workers start on first use
(side by side, where a lone candidate borrows slots).

The number of GPUs comes from the first worker (CuPy's device count, in the worker process: the
parent never imports CuPy), unless ``devices`` is given.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from porter.gate.check import run_check
from porter.gate.runner.client import GpuRunner, Runner, Unavailable, WorkerFault
from porter.gate.verdict import Verdict
from porter.pool.lease import GpuLease, LeasedRunner
from porter.pool.verifier import CheckJob, prepared_ahead
from porter.ptx.toolchain import Toolchain

# Three workers a GPU: a round of 8 GEMM candidates reached 120 verdicts a minute with three and four
# on the H100s measured (README, #32), not with two; a lone check borrows the other two for its cases.
DEFAULT_PER_GPU = 3

RunnerFactory = Callable[[int], GpuRunner]


@dataclass
class Slot:
    device: int
    index: int  # among the GPU's slots
    runner: GpuRunner

    @property
    def name(self) -> str:
        return f"gpu{self.device}.{self.index}"


def default_runner_factory(device: int) -> GpuRunner:
    """A GPU worker on ``device``: each of the pool's slots has one unless the pool is given another
    ``runner_factory`` (a GPU double, in the tests)."""
    return Runner(device=device)


class LocalPool:
    """A :class:`~porter.pool.verifier.Verifier` over this machine's GPUs."""

    def __init__(self, toolchain: Toolchain, *, devices: Sequence[int] | None = None, per_gpu: int = DEFAULT_PER_GPU,
                 runner_factory: RunnerFactory | None = None, record: bool = False) -> None:
        if per_gpu < 1:
            raise ValueError("per_gpu must be at least 1")
        self.toolchain = toolchain
        self.per_gpu = per_gpu
        self.record = record
        self._factory = runner_factory or default_runner_factory
        self._devices = list(devices) if devices is not None else None
        self._slots: list[Slot] = []
        self._free: queue.Queue[Slot] = queue.Queue()
        self.leases: dict[int, GpuLease] = {}
        self._lock = threading.Lock()
        self._started = False

    # -- slots -----------------------------------------------------------------------------------
    def _ensure(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            first_device = self._devices[0] if self._devices else 0
            first = self._factory(first_device)
            devices = self._devices
            per_gpu = self.per_gpu
            if devices is None:
                try:
                    devices = list(range(max(1, first.start().device_count)))
                except WorkerFault as fault:
                    # No GPU here: one slot, whose checks say why without starting a worker again.
                    first.close()
                    first = Unavailable(str(fault))
                    devices, per_gpu = [first_device], 1
            for index in range(per_gpu):
                for device in devices:
                    runner = first if (device, index) == (first_device, 0) else self._factory(device)
                    slot = Slot(device, index, runner)
                    self._slots.append(slot)
                    self._free.put(slot)
                    self.leases.setdefault(device, GpuLease(f"gpu{device}", record=self.record))

    @property
    def gpus(self) -> int:
        self._ensure()
        return len(self.leases)

    @property
    def capacity(self) -> int:
        self._ensure()
        return len(self._slots)

    # -- verifying -------------------------------------------------------------------------------
    def _one(self, job: CheckJob, *, lend: bool = False) -> Verdict:
        slot = self._free.get()
        lent = self._idle_on(slot.device) if lend else []
        try:
            lease = self.leases[slot.device]
            runner = LeasedRunner(slot.runner, lease, holder=f"{slot.name}:{job.candidate.name}")
            helpers = [LeasedRunner(s.runner, lease, holder=f"{s.name}:{job.candidate.name}") for s in lent]
            return run_check(job.candidate, job.spec, job.options, toolchain=self.toolchain, runner=runner,
                             references=job.references, helpers=helpers)
        finally:
            for s in [*lent, slot]:
                self._free.put(s)

    def _idle_on(self, device: int) -> list[Slot]:
        """The free slots on ``device``, taken (the others left free)."""
        taken: list[Slot] = []
        others: list[Slot] = []
        while True:
            try:
                s = self._free.get_nowait()
            except queue.Empty:
                break
            (taken if s.device == device else others).append(s)
        for s in others:
            self._free.put(s)
        return taken

    def verify(self, jobs: Sequence[CheckJob]) -> list[Verdict]:
        self._ensure()
        if len(jobs) <= 1:  # a lone candidate's cases also go to its GPU's other slots
            return [self._one(job, lend=True) for job in jobs]
        slots = min(len(jobs), len(self._slots))
        with prepared_ahead(jobs, self.toolchain, skip=slots), \
                ThreadPoolExecutor(max_workers=slots, thread_name_prefix="porter-pool") as checks:
            futures = [checks.submit(self._one, job) for job in jobs]
            return [f.result() for f in futures]

    def describe(self) -> str:
        self._ensure()
        info = next((s.runner.info for s in self._slots if s.runner.info is not None), None)
        if info is None:
            return "no GPU"
        return f"{info.describe()}; local pool: {len(self.leases)} GPU(s) x {len(self._slots) // len(self.leases)} workers"

    def close(self) -> None:
        for slot in self._slots:
            slot.runner.close()
