"""Device allocations fenced by unmapped address space, so that a stray access faults at any distance.

porter's guard bands catch writes just outside a buffer; a write a megabyte away would land in
whatever allocation happens to live there and go unseen. With the driver's virtual memory
management, each buffer gets its own reservation: ``[unmapped margin | mapped pages | unmapped
margin]``. The mapped pages hold the guard bands and the data; any access into a margin is an
illegal address (the kernel fails loudly, whatever the distance, up to the margin's size, which
is far larger than any buffer porter hands out). An input buffer is handed to the kernel through
a second, read-only mapping of the same memory, so a write to an input faults even when the
kernel restores it before it exits. Where the driver lacks VMM, :func:`available` says so and
the worker falls back to plain allocations (the verdict notes it).

The driver API is reached through ctypes on ``libcuda``, in the worker's thread, whose current
context is CuPy's (the primary context).
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

MARGIN_BYTES = 1 << 32  # 4 GiB of unmapped address space on each side of every buffer

_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ = 1  # CU_MEM_ACCESS_FLAGS_PROT_READ
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class _Location(ctypes.Structure):
    _fields_ = (("type", ctypes.c_int), ("id", ctypes.c_int))


class _AllocFlags(ctypes.Structure):
    _fields_ = (("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4))


class _AllocationProp(ctypes.Structure):
    _fields_ = (("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags))


class _AccessDesc(ctypes.Structure):
    _fields_ = (("location", _Location), ("flags", ctypes.c_int))


class IsolationError(RuntimeError):
    pass


@cache
def _driver() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def _check(code: int, what: str) -> None:
    if code != 0:
        name = ctypes.c_char_p()
        _driver().cuGetErrorName(code, ctypes.byref(name))
        raise IsolationError(f"{what} failed: {(name.value or b'CUresult ' + str(code).encode()).decode()}")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _PINNED
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


@cache
def granularity(device: int) -> int:
    size = ctypes.c_size_t()
    _check(_driver().cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(_prop(device)), 0),
           "cuMemGetAllocationGranularity")
    return int(size.value)


class IsolatedAllocation:
    """``size`` bytes of device memory (rounded up to the page granularity) in a reservation with
    an unmapped margin on each side. ``ptr`` is the first mapped byte. Free with :meth:`free`."""

    def __init__(self, size: int, device: int) -> None:
        lib = _driver()
        page = granularity(device)
        self.size = max(page, -(-size // page) * page)
        self.reserved = self.size + 2 * MARGIN_BYTES
        base = ctypes.c_uint64()
        _check(lib.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(self.reserved), ctypes.c_size_t(page),
                                       ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
        self.base = base.value
        self.ptr = self.base + MARGIN_BYTES
        self.handle = ctypes.c_uint64()
        try:
            _check(lib.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(self.size), ctypes.byref(_prop(device)),
                                   ctypes.c_uint64(0)), "cuMemCreate")
        except IsolationError:
            lib.cuMemAddressFree(ctypes.c_uint64(self.base), ctypes.c_size_t(self.reserved))
            raise
        _check(lib.cuMemMap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                            ctypes.c_uint64(0)), "cuMemMap")
        self.device = device
        self._aliases: list[tuple[int, int]] = []  # (reservation base, mapped pointer)
        self._set_access(self.ptr, _READ_WRITE)

    def _set_access(self, ptr: int, flags: int) -> None:
        access = _AccessDesc(_Location(_LOCATION_DEVICE, self.device), flags)
        _check(_driver().cuMemSetAccess(ctypes.c_uint64(ptr), ctypes.c_size_t(self.size), ctypes.byref(access),
                                        ctypes.c_size_t(1)), "cuMemSetAccess")

    def read_only_alias(self) -> int:
        """The same memory at a second address, fenced like the first, that kernels can only read:
        a kernel handed an input through it faults on any write, even one it undoes later."""
        lib = _driver()
        base = ctypes.c_uint64()
        _check(lib.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(self.reserved),
                                       ctypes.c_size_t(granularity(self.device)), ctypes.c_uint64(0),
                                       ctypes.c_uint64(0)), "cuMemAddressReserve")
        ptr = base.value + MARGIN_BYTES
        self._aliases.append((base.value, ptr))
        _check(lib.cuMemMap(ctypes.c_uint64(ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                            ctypes.c_uint64(0)), "cuMemMap")
        self._set_access(ptr, _READ)
        return ptr

    def free(self) -> None:
        lib = _driver()
        for base, ptr in self._aliases:
            lib.cuMemUnmap(ctypes.c_uint64(ptr), ctypes.c_size_t(self.size))
            lib.cuMemAddressFree(ctypes.c_uint64(base), ctypes.c_size_t(self.reserved))
        lib.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size))
        lib.cuMemRelease(self.handle)
        lib.cuMemAddressFree(ctypes.c_uint64(self.base), ctypes.c_size_t(self.reserved))


def available(device: int) -> str:
    """'' when isolated allocations work on this device, else why not."""
    try:
        probe = IsolatedAllocation(1, device)
        probe.read_only_alias()
        probe.free()
    except (OSError, AttributeError, IsolationError) as err:
        return f"no fenced allocations ({err}): out-of-bounds accesses far from a buffer may go unseen"
    return ""
