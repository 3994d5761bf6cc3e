"""One GPU shared by several porter processes: correctness side by side, timing alone.

Two pre-merge jobs on one GPU host, or a developer's check beside a bot's, would otherwise time
their kernels while the other's run: each speed ratio would be measured against a busy GPU. A
:class:`GpuLock` is a readers-writer lock on one physical GPU, kept in two lock files that every
porter process on the machine opens (``flock``, which the kernel releases when a process dies).

Correctness jobs hold it shared; timing, ncu and compute-sanitizer hold it exclusively. A writer
waiting for the GPU goes first: it takes the *turnstile* file before waiting on the *GPU* file, and
every reader passes the turnstile on its way in, so no stream of cases starves a timing run.
The GPU is named by its PCI address, which ``CUDA_VISIBLE_DEVICES`` does not renumber.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from porter.errors import InputError

LOCK_DIR_ENV = "PORTER_LOCK_DIR"


def lock_directory() -> str:
    """Where the lock files live: one place for every process of every user on the machine."""
    return os.environ.get(LOCK_DIR_ENV) or "/tmp"


class GpuLock:
    """A writer-preferring readers-writer lock on one GPU across processes (see the module text).

    Each instance opens its own descriptors, so two instances in one process exclude each other
    as two processes do; one instance is used by one thread at a time."""

    def __init__(self, gpu: str, directory: str | None = None) -> None:
        name = re.sub(r"[^0-9A-Za-z]+", "-", gpu).strip("-")
        folder = directory or lock_directory()
        base = os.path.join(folder, f"porter-gpu-{name}")
        try:
            self._turnstile = _open(base + ".turnstile")
            self._gpu = _open(base + ".lock")
        except OSError as err:
            raise InputError(f"cannot open the GPU's lock file in {folder} ({err.strerror}): "
                             f"set {LOCK_DIR_ENV} to a folder every porter on this machine can write") from None

    def shared(self) -> AbstractContextManager[None]:
        return self._hold(fcntl.LOCK_SH)

    def exclusive(self) -> AbstractContextManager[None]:
        return self._hold(fcntl.LOCK_EX)

    @contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        # Through the turnstile: a reader passes behind any writer already waiting there; a writer
        # keeps it shut, so that no new reader comes in, until the GPU file is its own.
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._gpu, mode)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._gpu, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._turnstile, self._gpu):
            os.close(fd)


def _open(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):  # another user's porter on the same GPU must be able to take it too
        os.fchmod(fd, 0o666)
    return fd
