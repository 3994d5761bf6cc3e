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
Small arrays stay pageable (pinning costs more than it saves there), and so does any array where
pinning fails. ``PORTER_PINNED=0`` turns it off (for comparison: tools/bench_gate.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

PINNED_MIN_BYTES = 1 << 20  # smaller arrays stay pageable

# (count, dtype) -> a flat, writable, uninitialised host array
Empty = Callable[[int, Any], np.ndarray]


def enabled() -> bool:
    return os.environ.get("PORTER_PINNED", "1") != "0"


def host_empty(cp: Any) -> Empty:
    """An allocator of flat host arrays, page-locked where they are large (see the module)."""

    def empty(count: int, dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(count) * dtype.itemsize
        if nbytes < PINNED_MIN_BYTES or not enabled():
            return np.empty(int(count), dtype)
        try:
            memory = cp.cuda.alloc_pinned_memory(nbytes)
        except Exception:  # page-locked memory exhausted, or none on this machine: pageable
            return np.empty(int(count), dtype)
        return np.frombuffer(memory, dtype, int(count))

    return empty


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
        cp.get_pinned_memory_pool().free_all_blocks()
