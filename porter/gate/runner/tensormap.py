"""TMA descriptors (CUtensorMap) for tensormap params, encoded by the CUDA driver.

CuPy does not wrap ``cuTensorMapEncodeTiled``, so it is called through ctypes on the driver
library that CuPy already loaded. The driver writes the 128 bytes into host memory that must be
64-byte aligned (as a CUtensorMap is declared); NumPy aligns an allocation to 16 bytes at most, so
the buffer is cut out of a larger one at a 64-byte boundary (:func:`aligned_tensormap`). The result
travels to the kernel by value as a NumPy structured scalar, which CuPy passes into a
``.param .align 64 .b8 name[128]`` unchanged.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import numpy as np

from porter.gate.spec import TensorMapGeometry

# CUtensorMapDataType values (cuda.h); dtypes without their own enum move as raw bits.
_DATA_TYPES = {"u8": 0, "u16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
_RAW_BITS = {1: 0, 2: 1, 4: 2, 8: 4}
_SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}  # CUtensorMapSwizzle
_L2_PROMOTION_128B = 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
_INTERLEAVE_NONE = 0
_OOB_FILL_ZEROS = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: reads outside the extents give zeros
TENSORMAP_DTYPE = np.dtype([("bytes", np.uint64, (16,))])
TENSORMAP_ALIGN = 64  # bytes: the driver's requirement on a CUtensorMap's address


class TensorMapError(RuntimeError):
    """The driver refused a tensor map (its CUresult name and the values that were given)."""


@cache
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    return lib


def _error_name(lib: Any, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {code}"


def aligned_tensormap() -> np.ndarray:
    """A zeroed CUtensorMap (a 0-d array of :data:`TENSORMAP_DTYPE`) whose data starts at a 64-byte
    boundary by construction: a view into a buffer one alignment larger, which it keeps alive."""
    raw = np.zeros(TENSORMAP_DTYPE.itemsize + TENSORMAP_ALIGN - 1, np.uint8)
    start = -raw.ctypes.data % TENSORMAP_ALIGN
    return raw[start:start + TENSORMAP_DTYPE.itemsize].view(TENSORMAP_DTYPE).reshape(())


def encode_tiled(address: int, dtype_name: str, itemsize: int, geometry: TensorMapGeometry) -> np.void:
    """The CUtensorMap of a tiled copy over ``geometry`` (outer-to-inner) at device ``address``."""
    lib = _driver()
    rank = len(geometry.dims)
    dims = (ctypes.c_uint64 * rank)(*reversed(geometry.dims))  # the driver counts from the inner axis
    strides = (ctypes.c_uint64 * max(rank - 1, 1))(*reversed(geometry.strides))
    box = (ctypes.c_uint32 * rank)(*reversed(geometry.box))
    element_strides = (ctypes.c_uint32 * rank)(*([1] * rank))
    out = aligned_tensormap()
    code = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(out.ctypes.data), _DATA_TYPES.get(dtype_name, _RAW_BITS[itemsize]), rank,
        ctypes.c_void_p(address), dims, strides, box, element_strides, _INTERLEAVE_NONE,
        _SWIZZLE[geometry.swizzle], _L2_PROMOTION_128B, _OOB_FILL_ZEROS)
    if code != 0:
        raise TensorMapError(f"cuTensorMapEncodeTiled refused {geometry} at 0x{address:x}: {_error_name(lib, code)}")
    # numpy's stub says out[()] is an array; on a 0-d array of a structured dtype it is the np.void
    return out[()]  # type: ignore[return-value]
