"""Host arrays in page-locked (pinned) memory, for what the worker copies to the device again and
again: a case's inputs (uploaded as the pristine image, then once a run for the integrity check,
and by a reference that computes on the GPU) and its reference (uploaded once a run for the
judgement, which may not keep it on the device while a candidate runs). From pageable memory the
driver stages every copy through a buffer of its own; from pinned memory the copy engine reads
the array directly. On the H100 (2026-12-06) these uploads were the worker's largest single cost
of a GEMM check, about 0.3 s of 1.76 s.

Pinned blocks come from CuPy's pinned pool, which reuses a freed block for a request of its size
(the sweep's size sets recur check after check); :func:`release_idle` hands the pool's unused
blocks back to the driver, so page-locked memory no array uses does not pile up across checks.
Small arrays stay pageable (pinning costs more than it saves there), and so does any array past
:data:`PINNED_MAX_BYTES` of live pinned arrays (page-locked memory is taken from the whole
machine) and any array where pinning fails: at worst the worker copies as it did before.
``PORTER_PINNED=0`` turns it off (for comparison: tools/bench_gate.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

PINNED_MIN_BYTES = 1 << 20  # smaller arrays stay pageable
PINNED_MAX_BYTES = 4 << 30  # live pinned arrays of a worker, at most (inputs kept: 1 GiB; references)

_live = [0]  # bytes of the pinned arrays alive now
_counting = threading.Lock()

# (count, dtype) -> a flat, writable, uninitialised host array
Empty = Callable[[int, Any], np.ndarray]


def enabled() -> bool:
    return os.environ.get("PORTER_PINNED", "1") != "0"


def host_empty(cp: Any) -> Empty:
    """An allocator of flat host arrays, page-locked where they are large (see the module)."""

    def empty(count: int, dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(count) * dtype.itemsize
        if nbytes < PINNED_MIN_BYTES or not enabled() or not _take(nbytes):
            return np.empty(int(count), dtype)
        try:
            array = np.frombuffer(cp.cuda.alloc_pinned_memory(nbytes), dtype, int(count))
        except Exception:  # page-locked memory exhausted, or none on this machine: pageable
            _give_back(nbytes)
            return np.empty(int(count), dtype)
        weakref.finalize(array, _give_back, nbytes)  # its views keep it, and the block, alive
        return array

    return empty


def _take(nbytes: int) -> bool:
    with _counting:
        if _live[0] + nbytes > PINNED_MAX_BYTES:
            return False
        _live[0] += nbytes
        return True


def _give_back(nbytes: int) -> None:
    with _counting:
        _live[0] -= nbytes


def live_bytes() -> int:
    """Bytes of the pinned arrays :func:`host_empty` made that are still alive."""
    return _live[0]


def pinned_copy(cp: Any, array: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``array`` (cast to ``dtype`` as ``astype`` casts, if given) in a host array of
    :func:`host_empty`'s, of its shape."""
    target = np.dtype(dtype) if dtype is not None else array.dtype
    out = host_empty(cp)(array.size, target).reshape(array.shape)
    np.copyto(out, array, casting="unsafe")
    return out


def release_idle(cp: Any) -> None:
    """Hand the pinned pool's unused blocks back to the driver (a check's start: what the last
    check freed and this one has not reused)."""
    if enabled():
        with contextlib.suppress(Exception):  # no pinned pool here: nothing is held
            cp.get_pinned_memory_pool().free_all_blocks()
