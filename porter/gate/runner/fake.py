"""Fakes of the GPU worker, for tests on machines without a GPU.

:func:`serve` is a worker body for :class:`porter.gate.runner.Runner` (``Runner(target=serve)``): it
speaks the real worker's pipe protocol and acts out what a candidate can do to a worker, chosen by
the job's op, so that the parent's timeout, kill and restart logic runs on any machine:

- ``echo``: replies ``{"ok": True, "pid": ..., **payload}``;
- ``hang``: never replies (a kernel that does not finish);
- ``die``: the process exits at once with code 7 (a crash that takes the worker down);
- ``sticky``: replies with a sticky CUDA error (the context is poisoned) and exits;
- ``fault``: replies with an ordinary, non-sticky error and keeps serving.

A device index below 0 makes the start-up fail, as on a machine without a usable GPU.
:class:`InProcessRunner` is a :class:`porter.gate.runner.GpuRunner` with no process at all: each op is a
function of the payload, for tests of the code that talks to a runner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from porter.gate.runner.client import DeviceInfo, WorkerFault

FAKE_DEVICE = DeviceInfo(name="Fake GPU", arch="sm_90", compute_capability="9.0", sm_count=132, l2_bytes=50 << 20,
                         max_shared_optin=232448, driver="13.0", runtime="13.0", cupy="none")


def serve(conn: Any, device: int) -> None:
    """A fake worker's loop (see the module docstring)."""
    if device < 0:
        conn.send({"ok": False, "error": "no usable GPU: the fake worker was told there is none"})
        return
    conn.send({"ok": True, "device": FAKE_DEVICE.__dict__})
    for msg in _jobs(conn):
        op = msg.pop("op")
        if op == "hang":
            time.sleep(3600)
        elif op == "die":
            os._exit(7)
        elif op == "sticky":
            conn.send({"ok": False, "error": "CUDARuntimeError: cudaErrorIllegalAddress", "sticky": True,
                       "kind": "fault"})
            return
        elif op == "fault":
            conn.send({"ok": False, "error": "ValueError: bad launch", "sticky": False, "kind": "fault"})
        else:
            conn.send({"ok": True, "pid": os.getpid(), **msg})


def _jobs(conn: Any) -> Iterator[dict[str, Any]]:
    """The jobs sent, until an ``exit`` job or the pipe's end."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg.get("op") == "exit":
            return
        yield msg


class InProcessRunner:
    """A runner without a worker process: ``jobs`` maps an op to a function of the job's payload
    returning the reply's fields (raise :class:`WorkerFault` to act out a fault)."""

    def __init__(self, jobs: Mapping[str, Callable[..., dict[str, Any]]], *,
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

    def call(self, op: str, timeout_s: float, **payload: Any) -> dict[str, Any]:
        self.start()
        self.calls.append(op)
        try:
            return {"ok": True, **self.jobs[op](**payload)}
        except WorkerFault as fault:
            if fault.kind in ("timeout", "died"):
                self.restarts += 1
            raise

    def close(self) -> None:
        self.info = None
