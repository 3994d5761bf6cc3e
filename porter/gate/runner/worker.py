"""The GPU worker: a child process that owns the CUDA context and runs untrusted kernels.

It receives typed jobs over a pipe (see ``client.Runner`` and ``protocol``) and answers each with
its typed reply. Everything that touches the GPU lives in this process, so the parent never
imports CuPy: this module is its loop; ``state``, ``launch``, ``memory`` and ``jobs`` hold the rest.

A candidate is treated as an adversary that would pass by remembering, recognising or skipping.
Every launch starts with its inputs uploaded afresh, its outputs set to an initial state (NaN
poison, or random finite values: each case runs under both), scratch random, and every SM's
shared memory and every thread's local memory overwritten with random words (a job whose
local-memory scrub could not hold the whole GPU fails, as porter's failure). Consecutive cases at the same sizes reuse the same
buffers with new data, and module ``.global`` variables carry from case to case, as in a program
that calls the kernel again and again; before every timed launch they are restored to their
load-time image. Where buffers lie is drawn per run from one family for every kind of launch
(:mod:`porter.gate.layout`); inputs are handed over read-only where fenced; random guard bytes
surround every buffer, and every buffer is scrubbed before it is freed,
so that no kernel can find another kernel's results (the reference's above all) in recycled
memory. Timed launches are digested, so that what was timed can be held to what was verified.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from porter.gate.runner.jobs import context_error, run
from porter.gate.runner.protocol import CaseJob, OutputsJob, RepeatJob, TimeJob
from porter.gate.runner.state import WorkerState
from porter.gate.runner.transfer import Parking, parking_directory, unpark
from porter.install import install_hint

PROFILE_ENV = "PORTER_WORKER_PROFILE"  # a folder: each job runs under cProfile (see _Profiler)

# CUDA errors that leave the context usable: the worker carries on after them. Any other CUDA
# error (illegal address, misaligned access, a trap) poisons the context: the worker must restart.
_NON_STICKY = {
    "CUDA_ERROR_INVALID_VALUE",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "CUDA_ERROR_NOT_FOUND",
    "CUDA_ERROR_INVALID_IMAGE",
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "CUDA_ERROR_INVALID_PTX",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
}


def _error_name(err: BaseException) -> str:
    text = str(err)
    for token in text.replace(":", " ").split():
        if token.startswith(("CUDA_ERROR_", "cudaError")):
            return token
    return ""


def is_sticky(err: BaseException) -> bool:
    name = _error_name(err)
    return bool(name) and name not in _NON_STICKY


def _device_info(cp: Any, device: int) -> dict[str, Any]:
    props = cp.cuda.runtime.getDeviceProperties(device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    major, minor = props["major"], props["minor"]
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    return {
        "name": name,
        "arch": f"sm_{major}{minor}",
        "compute_capability": f"{major}.{minor}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "max_shared_optin": int(props.get("sharedMemPerBlockOptin", 0)),
        "driver": f"{drv // 1000}.{drv % 1000 // 10}",
        "runtime": f"{rt // 1000}.{rt % 1000 // 10}",
        "cupy": cp.__version__,
        "device_count": int(cp.cuda.runtime.getDeviceCount()),
        "index": device,
        "pci": _pci_address(cp, device),
    }


def _pci_address(cp: Any, device: int) -> str:
    """The GPU's PCI address, or '' where CuPy cannot say (then no lock across processes is taken)."""
    try:
        return str(cp.cuda.Device(device).pci_bus_id)
    except Exception:
        return ""


def _no_gpu_message(err: BaseException) -> str:
    name = _error_name(err)
    if isinstance(err, ImportError):
        return f"no usable GPU: CuPy is not installed ({install_hint('cupy')})"
    if name == "cudaErrorInsufficientDriver":
        return "no usable GPU: no NVIDIA driver on this machine (or one older than this CuPy needs)"
    if name in ("cudaErrorNoDevice", "cudaErrorInvalidDevice"):
        return "no usable GPU: no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES)"
    return f"no usable GPU: {type(err).__name__}: {err}"


def serve(conn: Any, device: int) -> None:
    """The worker's loop: one job in, one reply out, until told to exit or the pipe closes."""
    import signal

    # Ctrl-C in the terminal reaches this process too; it is the parent's to act on (it records the
    # port as interrupted and closes this worker). A worker killed by it would make the candidate
    # it was running look as if it had crashed the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import cupy as cp

        cp.cuda.Device(device).use()
        cp.cuda.Device(device).synchronize()
        info = _device_info(cp, device)
    except Exception as err:  # no CuPy, no driver, no device
        conn.send({"ok": False, "error": _no_gpu_message(err)})
        return
    with Parking(parking_directory()) as parking:
        conn.send({"ok": True, "device": info, "parking": parking.directory})
        state = WorkerState(cp, folder=parking.directory)
        try:
            _serve_jobs(conn, state, parking)
        finally:
            state.close()


class _Profiler:
    """cProfile over each job when ``PORTER_WORKER_PROFILE`` names a folder, its statistics in
    ``job-<pid>-<n>.pstats`` there (n counts the worker's jobs from 0), so that
    ``tools/bench_gate.py --profile`` can add up the warm checks' jobs alone."""

    def __init__(self) -> None:
        self.folder = os.environ.get(PROFILE_ENV)
        self.jobs = 0

    def run(self, body: Callable[..., Any], *args: Any) -> Any:
        if not self.folder:
            return body(*args)
        import cProfile

        profile = cProfile.Profile()
        try:
            return profile.runcall(body, *args)
        finally:
            profile.dump_stats(os.path.join(self.folder, f"job-{os.getpid()}-{self.jobs:05d}.pstats"))
            self.jobs += 1


def _serve_jobs(conn: Any, state: WorkerState, parking: Parking) -> None:
    profiler = _Profiler()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if not isinstance(msg, CaseJob | TimeJob | RepeatJob | OutputsJob):  # {"op": "exit"}, or nothing porter sends
            return
        try:
            began = time.perf_counter()
            reply = profiler.run(run, state, unpark(msg))
            state.kernel_memory_held()
            # The job's own seconds: what a call took beyond them is the transfer (tools/bench_gate.py).
            reply = replace(reply, worker_s=time.perf_counter() - began)
            conn.send({"ok": True, "reply": parking.park(reply)})
        except Exception as err:
            # A library's error (cuRAND's, cuBLAS's) may stand in front of the context's own: a
            # context a kernel poisoned answers every later call with its error, so ask it.
            context = context_error(state.cp)
            text = f"{type(err).__name__}: {err}"
            if context is not None and _error_name(context) not in text:
                text += f" (the device then: {type(context).__name__}: {context})"
            sticky = is_sticky(err) or (context is not None and is_sticky(context))
            conn.send({"ok": False, "error": text, "sticky": sticky, "kind": "fault"})
            if sticky:
                return
