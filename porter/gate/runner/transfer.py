"""Large arrays from the worker to the parent through shared memory rather than the pipe.

A case at the GEMM's timed size replies with about 100 MB (the output, once per distinct run, and
the reference). Through the pipe that is a pickle, some thousands of 64 KiB writes and reads, each
a context switch, and an unpickle: about 0.5 s on a two-core machine. Parked in a file on a RAM
file system (``/dev/shm``) it is one copy in the worker and a mapping in the parent.

The worker writes each array of at least :data:`PARK_BYTES` into its parking directory and sends a
:class:`Parked` handle in its place; the parent maps the file copy-on-write (what it reads is the
worker's bytes, what it writes stays its own) and unlinks it at once, so a file outlives its reply
only when the parent dies first. The parent removes the directory with the worker, and the worker
removes it when it ends on its own (the parent's end of the pipe closed: the parent was killed). A
worker killed outright (``timeout`` signals the whole process group; SIGTERM is left to kill a
worker stuck in a hung kernel at once) leaves its directory, which is named after its pid: the next
worker to start removes the directories of workers no longer alive. Where there is no RAM file
system, the worker parks nothing and everything crosses the pipe as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import numpy as np

PARK_BYTES = 1 << 20
_RAM_FS = "/dev/shm"


@dataclass(frozen=True)
class Parked:
    """An array the worker left in a file: where, and how to read it back. ``kept``: the sender
    keeps the file for the next job that sends the same array (the receiver maps it and leaves it)."""

    path: str
    dtype: np.dtype
    shape: tuple[int, ...]
    kept: bool = False


_PREFIX = "porter-worker-"


def parking_directory() -> str | None:
    """A fresh directory on the RAM file system for this worker (named after its pid), or None
    where there is none. Directories that dead workers left are removed first."""
    if not os.path.isdir(_RAM_FS) or not os.access(_RAM_FS, os.W_OK):
        return None
    remove_orphans(_RAM_FS)
    try:
        return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=_RAM_FS)
    except OSError:
        return None


def remove_orphans(folder: str) -> list[str]:
    """Remove the parking directories in ``folder`` whose worker is no longer alive; their paths."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            pid = entry.name[len(_PREFIX):].split("-", 1)[0]
            if not entry.name.startswith(_PREFIX) or not pid.isdigit() or process_alive(int(pid)):
                continue
            remove_parking(entry.path)
            removed.append(entry.path)
    return removed


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, and someone else's
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Parking:
    """Replaces large arrays in a reply (the worker's side) or a job (the parent's, ``prefix``
    ``job-``: a held reference for a worker that judges on the device) by handles on files it
    writes in the worker's directory; the other side's :func:`unpark` reads and unlinks them.

    With ``keep_bytes``, files are kept for arrays sent again (up to that many bytes, the oldest
    let go first): a port run's held references go with every candidate's cases, the same arrays
    each time, so each is written once for the worker rather than once a candidate (at 4096^2,
    64 MB a case). An array is known by its identity, which the parking holds on to (the caller
    hands over arrays it no longer changes: :class:`porter.gate.references.ReferenceCache`'s are
    read-only); the receiver maps a kept file and leaves it."""

    def __init__(self, directory: str | None, prefix: str = "", keep_bytes: int = 0) -> None:
        self.directory = directory
        self.prefix = prefix
        self.keep_bytes = keep_bytes
        self._names = itertools.count()
        self._kept: dict[int, tuple[np.ndarray, Parked]] = {}  # id(array) -> (the array, its file)

    def __enter__(self) -> Parking:
        return self

    def __exit__(self, *exc: object) -> None:
        remove_parking(self.directory)

    def park(self, obj: Any) -> Any:
        if self.directory is None:
            return obj
        if isinstance(obj, np.ndarray) and obj.nbytes >= PARK_BYTES and not obj.dtype.hasobject:
            kept = self._kept.get(id(obj))
            if kept is not None and kept[0] is obj:
                return kept[1]
            path = os.path.join(self.directory, f"{self.prefix}{next(self._names)}.bin")
            try:
                np.ascontiguousarray(obj).tofile(path)
            except OSError:  # the RAM file system is full: this one crosses the pipe
                with contextlib.suppress(OSError):
                    os.unlink(path)
                return obj
            keep = obj.nbytes <= self.keep_bytes
            parked = Parked(path, obj.dtype, tuple(obj.shape), kept=keep)
            if keep:
                self._keep(obj, parked)
            return parked
        if isinstance(obj, dict):
            return {k: self.park(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.park(v) for v in obj)
        if is_dataclass(obj) and not isinstance(obj, type):  # a reply (protocol.py): its fields
            return replace(obj, **{f.name: self.park(getattr(obj, f.name)) for f in fields(obj) if f.init})
        return obj

    def _keep(self, array: np.ndarray, parked: Parked) -> None:
        self._kept[id(array)] = (array, parked)
        held = sum(a.nbytes for a, _ in self._kept.values())
        while held > self.keep_bytes:
            oldest, (old, old_parked) = next(iter(self._kept.items()))
            del self._kept[oldest]
            held -= old.nbytes
            with contextlib.suppress(OSError):
                os.unlink(old_parked.path)


def unpark(obj: Any) -> Any:
    """The receiving side: every handle in a reply or job replaced by its array (the file is
    unlinked, unless the sender keeps it)."""
    if isinstance(obj, Parked):
        try:
            array = np.memmap(obj.path, dtype=obj.dtype, mode="c", shape=obj.shape)
        finally:
            if not obj.kept:
                os.unlink(obj.path)
        return array.view(np.ndarray)
    if isinstance(obj, dict):
        return {k: unpark(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unpark(v) for v in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        return replace(obj, **{f.name: unpark(getattr(obj, f.name)) for f in fields(obj) if f.init})
    return obj


def remove_parking(directory: str | None) -> None:
    """The worker's directory and whatever a reply that never arrived left in it."""
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
