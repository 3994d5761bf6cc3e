"""One GPU shared by several worker processes: correctness runs side by side, timing alone.

A :class:`GpuLease` is a readers-writer lock on one GPU. Correctness jobs (the cases of a check)
take it shared: several candidates' cases may run on the GPU at once, since what they compare is
outputs, not time. Timing and profiling take it exclusively: no other candidate's kernels run on
that GPU while one is timed (or watched by ncu or compute-sanitizer), so the ratios against the
source and the library are those of a quiet GPU. A waiting exclusive holder goes first: new shared
holders wait behind it, so timing is never starved by a stream of cases.

:class:`LeasedRunner` is the runner a pool hands to one check: it takes its GPU's lease around
every job it sends (exclusive for ``time``, shared for the rest), and offers ``exclusive()`` for
the launches outside the worker (:func:`porter.gate.runner.client.exclusive`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from porter.gate.runner.client import DeviceInfo, GpuRunner, exclusive
from porter.gate.runner.protocol import EXCLUSIVE_OPS, Job, Reply


@dataclass(frozen=True)
class Window:
    """One holding of a lease: by whom, how (shared or exclusive), from when to when (monotonic s)."""

    holder: str
    exclusive: bool
    start: float
    end: float


class GpuLease:
    """A writer-preferring readers-writer lock on one GPU; ``windows`` records every holding when
    ``record`` is set (for tests and the throughput benchmark)."""

    def __init__(self, name: str = "gpu", *, record: bool = False) -> None:
        self.name = name
        self.record = record
        self.windows: list[Window] = []
        self._cond = threading.Condition()
        self._readers = 0
        self._owner: int | None = None  # the thread that holds it exclusively, if one does
        self._waiting_writers = 0

    def _held_here(self) -> bool:
        """Whether this thread holds the lease exclusively: then it takes it again, shared or
        exclusive, at once (a check's timing runs at several size sets inside one holding)."""
        with self._cond:
            return self._owner == threading.get_ident()

    @contextmanager
    def shared(self, holder: str = "") -> Iterator[None]:
        if self._held_here():
            yield
            return
        with self._cond:
            while self._owner is not None or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        with self._held(holder, exclusive=False):
            yield

    @contextmanager
    def exclusive(self, holder: str = "") -> Iterator[None]:
        if self._held_here():
            yield
            return
        with self._cond:
            self._waiting_writers += 1
            try:
                while self._owner is not None or self._readers:
                    self._cond.wait()
            finally:
                self._waiting_writers -= 1
            self._owner = threading.get_ident()
        with self._held(holder, exclusive=True):
            yield

    @contextmanager
    def _held(self, holder: str, *, exclusive: bool) -> Iterator[None]:
        """The holding itself, once taken: timed, and let go (the window noted, waiters woken)."""
        start = time.monotonic()
        try:
            yield
        finally:
            end = time.monotonic()
            with self._cond:
                if exclusive:
                    self._owner = None
                else:
                    self._readers -= 1
                if self.record:
                    self.windows.append(Window(holder, exclusive, start, end))
                self._cond.notify_all()


def overlaps(windows: list[Window]) -> list[tuple[Window, Window]]:
    """Pairs of windows that overlap in time where at least one is exclusive: none, if the lease held."""
    found = []
    ordered = sorted(windows, key=lambda w: w.start)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b.start >= a.end:
                break
            if a.exclusive or b.exclusive:
                found.append((a, b))
    return found


class LeasedRunner:
    """A pool slot's runner as one check sees it: every job under its GPU's lease."""

    def __init__(self, runner: GpuRunner, lease: GpuLease, holder: str = "") -> None:
        self.runner = runner
        self.lease = lease
        self.holder = holder

    @property
    def info(self) -> DeviceInfo | None:
        return self.runner.info

    @property
    def restarts(self) -> int:
        return self.runner.restarts

    def start(self) -> DeviceInfo:
        with self.lease.shared(self.holder):  # a new CUDA context is GPU work too
            return self.runner.start()

    def call(self, job: Job, timeout_s: float) -> Reply:
        hold = self.lease.exclusive if job.op in EXCLUSIVE_OPS else self.lease.shared
        with hold(self.holder):
            return self.runner.call(job, timeout_s)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self.lease.exclusive(self.holder), exclusive(self.runner):  # the pool's lease, then the machine's
            yield

    def close(self) -> None:
        """The pool owns the worker: a check's end does not stop it."""
