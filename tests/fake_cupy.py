"""A stand-in for CuPy on the CPU, for tests of the GPU worker's bookkeeping where no GPU is.

Device arrays are NumPy arrays with CuPy's ``get``/``set`` and a ``data.ptr`` (their host
address); kernels are Python functions registered by entry name (:func:`module_with`), which reach
the buffers they are handed as pointers through :func:`at`. porter's own support kernels (the
shared-memory scrub, the digest) are played here too. What this cannot show (the driver, real
kernels, timing) the ``gpu`` tests show on the H200; what it shows is that the worker puts the
right bytes in the right places: initial states, padding, zero steps, sequences, digests, held
outputs.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

__version__ = "fake"


class ndarray(np.ndarray):  # CuPy's name
    def __new__(cls, shape: Any, dtype: Any = float, memptr: Any = None) -> ndarray:
        """As CuPy's: an array of its own, or (``memptr``) a view of memory that is already there."""
        if memptr is None:
            return np.ndarray.__new__(cls, shape, dtype)
        count = int(np.prod(shape))
        return at(memptr.ptr, count, dtype).reshape(shape).view(cls)

    @property
    def data(self) -> Any:  # type: ignore[override]
        return _Pointer(self.__array_interface__["data"][0])

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:  # what marks a device array
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False), "version": 3}

    def get(self, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return np.array(self).view(np.ndarray)
        out[...] = np.asarray(self).view(np.ndarray)
        return out

    def set(self, host: np.ndarray) -> None:
        self[...] = np.asarray(host).reshape(self.shape)


class _Pointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def copy_from_host_async(self, src: int, nbytes: int, stream: Any) -> None:
        ctypes.memmove(self.ptr, src, nbytes)


def _device(a: Any) -> ndarray:
    return np.asarray(a).view(ndarray)


def asarray(a: Any, dtype: Any = None) -> ndarray:
    return _device(np.array(a, dtype=dtype))


def empty(shape: Any, dtype: Any = float) -> ndarray:
    return _device(np.empty(shape, dtype=dtype))


def zeros(shape: Any, dtype: Any = float) -> ndarray:
    return _device(np.zeros(shape, dtype=dtype))


def concatenate(arrays: Any) -> ndarray:
    return _device(np.concatenate(arrays))


def ascontiguousarray(a: Any) -> ndarray:
    return _device(np.ascontiguousarray(a))


flatnonzero, count_nonzero = np.flatnonzero, np.count_nonzero
abs, isnan, isinf, isfinite, where, dtype = np.abs, np.isnan, np.isinf, np.isfinite, np.where, np.dtype  # CuPy's names
sort, stack = np.sort, np.stack  # CuPy's too (a reduction's scale; a summary's figures read back at once)
uint8, uint16, uint32, uint64, int32 = np.uint8, np.uint16, np.uint32, np.uint64, np.int32
float16, float32, float64 = np.float16, np.float32, np.float64


class _RandomState:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed % 2**32)

    def randint(self, lo: int, hi: int, size: int, dtype: Any) -> ndarray:
        return _device(self.rng.randint(lo, hi, size=size).astype(dtype))


random = SimpleNamespace(RandomState=_RandomState)


def at(pointer: int, count: int, dtype: Any) -> np.ndarray:
    """The ``count`` elements of ``dtype`` a kernel's pointer argument points at."""
    nbytes = count * np.dtype(dtype).itemsize
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(int(pointer)))[:nbytes]
    return raw.view(dtype)


class _Function:
    def __init__(self, body: Callable[..., None], local_size_bytes: int = 0) -> None:
        self.body = body
        self.max_dynamic_shared_size_bytes = 48 * 1024
        self.local_size_bytes = local_size_bytes
        self.launches = 0

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...],
                 shared_mem: int = 0) -> None:
        self.launches += 1
        self.body(grid, block, *args)


def _scrub(grid: Any, block: Any, *args: Any) -> None:
    pass


# Local memory: each thread slot's window (LIMITS["stack"] bytes), as the hardware keeps it: what a
# kernel body wrote in a slot (through local_window) is there for the next kernel in that slot, until
# porter's scrub writes over it. Slots are kept as kernels touch them.
LOCAL: dict[int, bytearray] = {}
SHARED_GPU = {"on": False}  # other work holds SMs: porter's local scrub cannot have them all at once


def local_window(slot: int) -> bytearray:
    """The window of thread slot ``slot`` (random bytes until a kernel writes it)."""
    return LOCAL.setdefault(slot, bytearray(np.random.default_rng().integers(0, 256, LIMITS["stack"], np.uint8)))


def _scrub_local(grid: Any, block: Any, key: Any, arrived: Any, target: Any, missed: Any, *, frame: int) -> None:
    """porter's local scrub: each of its threads writes random bytes through its frame, which lies at
    the top of its slot's window; on a shared GPU half its blocks run without the others beside them."""
    threads = int(grid[0]) * int(block[0])
    rng = np.random.default_rng(int(key))
    for slot, window in LOCAL.items():
        if slot < threads:
            top = min(frame, len(window))
            window[len(window) - top:] = rng.integers(0, 256, top, np.uint8).tobytes()
    arrived[0] += np.uint64(grid[0])
    if SHARED_GPU["on"]:
        missed[0] += np.uint32(int(grid[0]) // 2)


def _digest(grid: Any, block: Any, data: Any, n: Any, out: Any, slot: Any, key: Any) -> None:
    """The keyed digest's stand-in: a hash of the key and the bytes (equal bytes, equal digests;
    another key, another digest), added into ``out[slot]``."""
    keyed = int(key).to_bytes(8, "little") + np.asarray(data).tobytes()
    word = int.from_bytes(hashlib.sha256(keyed).digest()[:8], "little")
    out[int(slot)] = np.uint64((int(out[int(slot)]) + word) % 2**64)


def _fill_random(grid: Any, block: Any, out: Any, n: Any, key: Any) -> None:
    """The random fill's stand-in: the same bytes for the same key."""
    out[: int(n)] = np.random.default_rng(int(key)).integers(0, 256, int(n), dtype=np.uint8)


KERNELS: dict[str, Callable[..., None]] = {}  # entry -> body(grid, block, *args), for the next module loaded
# The module variables of the last candidate module loaded, by name (its bytes): what its kernels'
# bodies read and write, where a real kernel would address them.
GLOBALS: dict[str, np.ndarray] = {}


class RawModule:
    """porter's support module (``code=``), or a candidate's (``path=``): its kernels are the
    bodies in :data:`KERNELS` when it is loaded, its variables those the cubin at ``path`` declares
    (porter reads them off the ELF), zeroed, in :data:`GLOBALS`."""

    def __init__(self, *, code: str | None = None, path: str | None = None, options: tuple[str, ...] = ()) -> None:
        from porter.gate.runner.cubin import module_globals

        # the local scrub's frame: the words its source is compiled for, as NVRTC makes it
        frame = 4 * sum(int(o.split("=")[1].rstrip("u")) for o in options if o.startswith("-DPORTER_LOCAL_WORDS="))
        bodies = ({"porter_scrub_shared": _scrub, "porter_digest": _digest, "porter_fill_random": _fill_random,
                   "porter_scrub_local": functools.partial(_scrub_local, frame=frame)}
                  if code is not None else dict(KERNELS))
        self.functions = {name: _Function(body, frame if name == "porter_scrub_local" else 0)
                          for name, body in bodies.items()}
        self.globals = {} if path is None else {
            var.name: np.zeros(max(var.size, 1), np.uint8) for var in module_globals(Path(path).read_bytes())}
        if path is not None:
            GLOBALS.clear()
            GLOBALS.update(self.globals)

    def get_global(self, name: str) -> _Pointer:
        return _Pointer(self.globals[name].ctypes.data)

    def get_function(self, name: str) -> _Function:
        if name not in self.functions:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name})")
        return self.functions[name]


class _Event:
    def record(self) -> None:
        pass


class _Device:
    id = 0

    def __init__(self, index: int = 0) -> None:
        self.attributes = {"L2CacheSize": 1 << 20, "MaxSharedMemoryPerBlockOptin": 227 << 10,
                           "MultiProcessorCount": 4, "MaxThreadsPerMultiProcessor": 2048}

    def synchronize(self) -> None:
        pass

    def use(self) -> None:
        pass


cuda = SimpleNamespace(Device=_Device, Event=_Event, get_elapsed_time=lambda start, end: 1.0)


class _MemoryPool:
    """CuPy's pool, where nothing is allocated through it: the arrays here are NumPy's."""

    def malloc(self, nbytes: int) -> Any:
        raise AssertionError("the fake device allocates no device memory")

    def free_all_blocks(self) -> None:
        pass

    def total_bytes(self) -> int:
        return 0


@contextmanager
def _using_allocator(allocator: Any) -> Iterator[None]:
    yield


class _PinnedPool:
    def free_all_blocks(self) -> None:
        pass


def get_pinned_memory_pool() -> _PinnedPool:
    return _PinnedPool()


cuda.alloc_pinned_memory = bytearray  # host memory the arrays are made in, as CuPy's pinned blocks
cuda.MemoryPool = _MemoryPool
cuda.using_allocator = _using_allocator
# The context's local window a thread (cudaLimitStackSize), which a test may grow as a kernel's frame would.
LIMITS = {"stack": 1024}
cuda.runtime = SimpleNamespace(memsetAsync=lambda ptr, value, nbytes, stream: None,
                               memGetInfo=lambda: (1 << 36, 1 << 36), cudaLimitStackSize=0,
                               deviceGetLimit=lambda limit: LIMITS["stack"])
cuda.get_current_stream = lambda: SimpleNamespace(ptr=0, record=lambda: SimpleNamespace(done=True))
