"""Host arrays in page-locked (pinned) memory, for what the worker copies to the device again and
again: a case's inputs (uploaded as the pristine image, and by a reference that computes on the
GPU) and its reference (uploaded for the judgement, which may not keep it on the device while a
candidate runs). From pageable memory the driver stages every copy through a buffer of its own;
from pinned memory the copy engine reads the array directly, through :func:`upload` (CuPy's
``asarray`` would copy it into a pinned buffer of its own first). On the H100 (2026-12-06) these
uploads were the worker's largest single cost of a GEMM check, about 0.3 s of 1.76 s. On the H200 (2026-12-06, 02:47 UTC) pinned memory took a
warm GEMM check from 1.93 s to 1.77 s (median, ``PORTER_PINNED=0`` against the default) and a port
run's later candidate from 1.43 s to 1.14 s.

Blocks are requested in size classes (eight to each doubling, so at most 1/8 larger than asked)
and a block no array uses any more is kept, up to :data:`IDLE_MAX_BYTES`, for the next request of
its class: the sweep's size sets recur check after check with new seeds, and pinning a block anew
costs about as much as the copy it saves (on the H200, 2026-12-06: 158 fresh blocks, 0.4 s over
four checks). A block past that cap goes back to CuPy's pinned pool, and :func:`release_idle`, at
a check's start, hands what that pool holds unused back to the driver: page-locked memory does not
pile up across checks. Small arrays stay pageable (pinning costs more than it saves there), and so
does any array past :data:`PINNED_MAX_BYTES` of live pinned arrays (page-locked memory is taken
from the whole machine) and any array where pinning fails: at worst the worker copies as it did
before. ``PORTER_PINNED=0`` turns it off (for comparison: tools/bench_gate.py).
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
IDLE_MAX_BYTES = 1 << 30  # blocks kept for reuse with no array in them, at most

_live = [0]  # bytes of the blocks pinned arrays use now
_in_flight: list[tuple[Any, np.ndarray]] = []  # (an event after an upload, its host array): kept alive until done
_idle: dict[int, list[Any]] = {}  # size class -> blocks kept for reuse
_idle_bytes = [0]
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
        if nbytes < PINNED_MIN_BYTES or not enabled():
            return np.empty(int(count), dtype)
        size = size_class(nbytes)
        if not _take(size):
            return np.empty(int(count), dtype)
        block = _reuse(size)
        if block is None:
            try:
                block = cp.cuda.alloc_pinned_memory(size)
            except Exception:  # page-locked memory exhausted, or none on this machine: pageable
                _give_back(size)
                return np.empty(int(count), dtype)
        array = np.frombuffer(block, dtype, int(count))
        weakref.finalize(array, _recycle, size, block)  # its views keep it, and the block, alive
        return array

    return empty


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to one of eight steps between two powers of two (4 KiB at least)."""
    step = max(1 << max(nbytes.bit_length() - 4, 0), 4096)
    return -(-nbytes // step) * step


def _take(nbytes: int) -> bool:
    with _counting:
        if _live[0] + nbytes > PINNED_MAX_BYTES:
            return False
        _live[0] += nbytes
        return True


def _give_back(nbytes: int) -> None:
    with _counting:
        _live[0] -= nbytes


def _reuse(size: int) -> Any:
    """A kept block of class ``size``, or None."""
    with _counting:
        kept = _idle.get(size)
        if not kept:
            return None
        _idle_bytes[0] -= size
        return kept.pop()


def _recycle(size: int, block: Any) -> None:
    """An array's block, its array gone: kept for reuse while under the cap, else left to CuPy's pool."""
    with _counting:
        _live[0] -= size
        if _idle_bytes[0] + size <= IDLE_MAX_BYTES:
            _idle.setdefault(size, []).append(block)
            _idle_bytes[0] += size


def live_bytes() -> int:
    """Bytes of the blocks that pinned arrays :func:`host_empty` made, still alive, use."""
    return _live[0]


def idle_bytes() -> int:
    """Bytes of the blocks kept for reuse."""
    return _idle_bytes[0]


def pinned_copy(cp: Any, array: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``array`` (cast to ``dtype`` as ``astype`` casts, if given) in a host array of
    :func:`host_empty`'s, of its shape."""
    target = np.dtype(dtype) if dtype is not None else array.dtype
    out = host_empty(cp)(array.size, target).reshape(array.shape)
    np.copyto(out, array, casting="unsafe")
    return out


def release_idle(cp: Any) -> None:
    """Hand CuPy's pinned pool's unused blocks back to the driver (a check's start): those past
    :data:`IDLE_MAX_BYTES` (the blocks kept for reuse are in use as far as that pool knows)."""
    if enabled():
        with contextlib.suppress(Exception):  # no pinned pool here: nothing is held
            cp.get_pinned_memory_pool().free_all_blocks()


def upload(cp: Any, host: np.ndarray) -> Any:
    """``host`` copied to a new device array on the current stream, with no copy on the host: CuPy's
    ``asarray`` first copies every array into a page-locked buffer of its own (a pinned one too, and
    a new size costs a page-locked allocation), where the copy engine can read one of
    :func:`host_empty`'s arrays directly. The host array is kept alive until its copy has
    completed (its block is not reused under the copy); from pageable memory the driver stages
    the copy itself."""
    host = np.ascontiguousarray(host)
    device = cp.empty(host.shape, dtype=host.dtype)
    if host.nbytes:
        stream = cp.cuda.get_current_stream()
        device.data.copy_from_host_async(host.ctypes.data, host.nbytes, stream)
        _in_flight[:] = [(event, array) for event, array in _in_flight if not event.done]
        _in_flight.append((stream.record(), host))
    return device
