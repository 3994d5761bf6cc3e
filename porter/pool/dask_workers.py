"""``porter worker``: this machine's GPUs offered to a dask.distributed cluster.

One dask worker per GPU (one thread each: a GPU runs one candidate's gate at a time, so timing
has it alone), all in this process. Each advertises, as dask resources, every target whose cubins
load on its GPU (an H200, sm_90, offers ``sm_90=1`` and ``sm_90a=1``); a cluster check asks for
its target's resource, so it runs only where that target is. Each worker owns one porter GPU
runner (:class:`porter.gate.runner.Runner`, the usual worker process that owns the CUDA context:
a candidate that hangs or faults takes down that process, never the dask worker), started on the
first candidate and kept between candidates, and runs the whole gate there: ptxas, the cases, the
comparison and the timing (:func:`check_remote`). The Verdict goes back as JSON data
(:func:`porter.jsonable.to_jsonable`), never as a pickled object.

This module needs ``distributed`` (the ``cluster`` extra); porter imports it only for the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from distributed import Worker, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from porter.errors import EnvironmentProblem
from porter.gate.runner.client import DeviceInfo, GpuRunner, Runner, started
from porter.jsonable import to_jsonable
from porter.pool.bundle import Bundle, options_at, unpack

PLUGIN = "porter-gpu"


def offered_targets(device_arch: str) -> list[str]:
    """Every target porter knows whose cubins load on a GPU of ``device_arch``: what its worker offers."""
    from porter.ptx.arch import cubin_runs_on, load_profiles

    return sorted(name for name in load_profiles() if cubin_runs_on(name, device_arch))


class PorterGpu(WorkerPlugin):
    """The plugin that gives one dask worker its GPU: the runner (started once, kept), the toolchain."""

    name = PLUGIN

    def __init__(self, runner: GpuRunner, device: DeviceInfo) -> None:
        self.runner = runner
        self.device = device
        self._toolchain: Any = None

    @property
    def toolchain(self) -> Any:
        if self._toolchain is None:
            from porter.ptx.toolchain import find_toolchain

            self._toolchain = find_toolchain()
            self._toolchain.require("ptxas")
        return self._toolchain

    def teardown(self, worker: Any) -> None:
        self.runner.close()


def porter_gpu(worker: Any) -> PorterGpu:
    """The porter GPU of a dask worker that ``porter worker`` started; a worker started otherwise
    (``dask worker --resources sm_90a=1``) has none, and says how to start one that has."""
    gpu = worker.plugins.get(PLUGIN)
    if not isinstance(gpu, PorterGpu):
        raise EnvironmentProblem(f"the dask worker {worker.name} ({worker.address}) was not started by `porter "
                                 "worker`, so it has no porter GPU runner to check on: stop it and start `porter "
                                 "worker --scheduler ADDRESS` on that machine instead")
    return gpu


def check_remote(bundle: Bundle) -> dict[str, Any]:
    """One candidate's gate on this dask worker's GPU; the Verdict as JSON data."""
    from porter.gate.check import run_check
    from porter.gate.spec import load_spec

    gpu = porter_gpu(get_worker())
    spec_folder, job_folder = unpack(bundle)
    spec = load_spec(spec_folder / bundle.spec)
    verdict = run_check(job_folder / bundle.candidate, spec, options_at(bundle, job_folder),
                        toolchain=gpu.toolchain, runner=gpu.runner)
    return to_jsonable(replace(verdict, kernel=bundle.name or verdict.kernel))


@dataclass(frozen=True)
class Gpu:
    """One GPU as a worker offers it."""

    index: int
    runner: GpuRunner
    info: DeviceInfo

    @property
    def resources(self) -> dict[str, float]:
        return dict.fromkeys(offered_targets(self.info.arch), 1.0)


def local_gpus(factory: Callable[[int], GpuRunner] = lambda i: Runner(device=i)) -> list[Gpu]:
    """This machine's GPUs, each with its started runner (the first worker says how many there are).
    A worker that cannot start is one line, exit 3; the ones started before it are closed."""
    first = factory(0)
    gpus = [Gpu(0, first, started(first, "worker"))]
    try:
        for index in range(1, gpus[0].info.device_count):
            runner = factory(index)
            gpus.append(Gpu(index, runner, started(runner, "worker", gpu=f"GPU {index}")))
    except EnvironmentProblem:
        for gpu in gpus:
            gpu.runner.close()
        raise
    return gpus


class WorkerGroup:
    """One dask worker per GPU, connected to ``scheduler``, on an event loop of their own (a thread
    for :meth:`start`, the caller's for :meth:`run`)."""

    def __init__(self, scheduler: str, gpus: Sequence[Gpu], *, name: str | None = None,
                 death_timeout_s: float = 10.0) -> None:
        self.scheduler = scheduler
        self.gpus = list(gpus)
        self.name = name or socket.gethostname()
        self.death_timeout_s = death_timeout_s
        self.workers: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    async def _main(self) -> None:
        logging.getLogger("distributed").setLevel(logging.WARNING)
        self._stop = asyncio.Event()
        try:
            for gpu in self.gpus:
                worker = Worker(self.scheduler, nthreads=1, resources=gpu.resources, name=f"{self.name}-gpu{gpu.index}",
                                plugins=(PorterGpu(gpu.runner, gpu.info),), memory_limit=0, dashboard=False,
                                death_timeout=self.death_timeout_s)
                await worker
                self.workers.append(worker)
        except BaseException as err:  # the scheduler does not answer, or refuses
            self._error = err
            await self._close()
            self._ready.set()
            return
        self._ready.set()
        waits = [asyncio.ensure_future(w.finished()) for w in self.workers]
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait([stop, *waits], return_when=asyncio.FIRST_COMPLETED)
        await self._close()

    async def _close(self) -> None:
        for worker in self.workers:
            if worker.status.name not in ("closed", "closing"):
                await worker.close(reason="porter worker stopped")

    def _problem(self) -> EnvironmentProblem:
        return EnvironmentProblem(f"porter worker: the dask scheduler at {self.scheduler} did not accept the "
                                  f"workers ({type(self._error).__name__}: {self._error})")

    def run(self) -> None:
        """Serve until the workers close or the process is interrupted."""
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self._main())
        if self._error is not None:
            raise self._problem()

    def start(self) -> WorkerGroup:
        """Serve in a thread of this process; returns once the workers have joined the scheduler."""
        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._main())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="porter-workers", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._problem()
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)
        for gpu in self.gpus:
            gpu.runner.close()

    def describe(self) -> str:
        return "; ".join(f"{self.name}-gpu{g.index}: {g.info.name} ({g.info.arch}), offers "
                         f"{', '.join(f'{r}=1' for r in g.resources)}" for g in self.gpus)
