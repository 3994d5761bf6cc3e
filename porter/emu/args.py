"""A kernel's arguments as the emulator takes them, and their layout in the address spaces.

An argument is, in the entry's parameter order:

- a NumPy array for a pointer parameter: a global buffer, read and written in place (through
  its bytes; a non-contiguous array is copied and the copy is returned in ``EmuResult.buffers``);
- ``None`` for a null pointer;
- a number or NumPy scalar for a scalar parameter (converted to the parameter's type);
- a :class:`TensorMap` for a ``.param .align 64 .b8 name[128]`` CUtensorMap parameter.

The CUtensorMap's 128 bytes are opaque (the async-tensor-core reference §5.1): the emulator
keeps the encode parameters and recognises the parameter's address when a TMA names it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from porter.emu.decode import Program, type_bytes
from porter.emu.memory import CONST_WINDOW, PARAM_WINDOW, START_ALIGN, Buffer, GlobalMemory

SWIZZLE_SPANS = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


@dataclass(frozen=True)
class TensorMap:
    """The values ``cuTensorMapEncodeTiled`` takes, outer to inner (as porter's spec writes them).

    ``buffer`` is the index, in the argument list, of the array the map describes; ``strides``
    are in bytes, one per outer dimension; ``box`` in elements; ``oob_nan`` selects the
    NAN_REQUEST_ZERO_FMA fill (0x7FF7 for 16-bit floats) instead of zeros.
    """

    buffer: int
    itemsize: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str = "none"
    oob_nan: bool = False
    element_strides: tuple[int, ...] = ()

    @classmethod
    def from_geometry(cls, buffer: int, itemsize: int, geometry: Any) -> TensorMap:
        """From any object with porter's TensorMapGeometry fields (dims, strides, box, swizzle)."""
        return cls(buffer, itemsize, tuple(geometry.dims), tuple(geometry.strides), tuple(geometry.box),
                   geometry.swizzle)


@dataclass
class Layout:
    """Where the arguments went: global buffers, the param bytes, tensor maps by param offset."""

    memory: GlobalMemory
    param_bytes: np.ndarray
    symbols: dict[str, int]
    tensormaps: dict[int, tuple[TensorMap, int]]  # param offset -> (map, base address of its buffer)
    arrays: dict[int, np.ndarray]  # argument index -> the array whose bytes the kernel sees
    copies: set[int]  # argument indices whose array is a copy (non-contiguous input)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def lay_out(program: Program, args: list[Any], memory: GlobalMemory, aligns: Mapping[int, int] | None = None,
            read_only: Collection[int] = (), names: Mapping[int, str] | None = None) -> Layout:
    """The arguments' places: each array a global buffer in ``memory`` (placed by its draws, see
    :class:`~porter.emu.memory.GlobalMemory`, at a multiple of the larger of its ``aligns`` entry and
    its pointer's ``.ptr .align``; read-only where its index is in ``read_only``; named in findings
    by ``names``, else by its index and PTX name), the param space's bytes and symbols, tensor maps."""
    params = program.params
    if len(args) != len(params):
        raise ValueError(f"{program.entry.name} takes {len(params)} arguments, got {len(args)}")
    arrays: dict[int, np.ndarray] = {}
    copies: set[int] = set()
    bases: dict[int, int] = {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            arr = a if a.flags.c_contiguous and a.flags.writeable else np.ascontiguousarray(a).copy()
            if arr is not a:
                copies.add(i)
            arrays[i] = arr
            align = max((aligns or {}).get(i, START_ALIGN), (params[i].align or 1) if params[i].is_ptr else 1)
            name = (names or {}).get(i, f"arg{i} ({params[i].name})")
            bases[i] = memory.add(name, arr.reshape(-1).view(np.uint8), align,
                                  read_only=i in read_only).base
    offset = 0
    param_bytes = bytearray()
    symbols: dict[str, int] = {}
    tensormaps: dict[int, tuple[TensorMap, int]] = {}
    for i, (p, a) in enumerate(zip(params, args, strict=True)):
        size = p.size_bytes
        # `.ptr .align N` is the pointee's alignment; the parameter itself aligns to its type.
        own = max(1, type_bytes(p.type))
        offset = _align(offset, max(own, p.align or 1) if not p.is_ptr else own)
        param_bytes.extend(b"\0" * (offset - len(param_bytes)))
        symbols[p.name] = PARAM_WINDOW + offset
        if isinstance(a, TensorMap):
            if a.buffer not in bases:
                raise ValueError(f"tensor map argument {i} names argument {a.buffer}, which is not an array")
            tensormaps[offset] = (a, bases[a.buffer])
            raw = b"TMAP" + i.to_bytes(4, "little")
            param_bytes.extend(raw + b"\0" * (size - len(raw)))
        elif isinstance(a, np.ndarray) or a is None:
            param_bytes.extend((bases[i] if a is not None else 0).to_bytes(size, "little"))
        else:
            param_bytes.extend(_scalar_bytes(p.type, a, size))
        offset += size
    return Layout(memory, np.frombuffer(bytes(param_bytes) or b"\0", np.uint8).copy(), symbols, tensormaps, arrays,
                  copies)


def _scalar_bytes(type_: str, value: Any, size: int) -> bytes:
    t = type_.lstrip(".")
    v = np.asarray(value)
    if t.startswith("f") and v.dtype.kind != "f" and v.dtype.itemsize == size and v.dtype.kind in "ui":
        return v.tobytes()  # raw bits of a float (a 16-bit float handed over as uint16)
    if t.startswith("f"):
        dtype = {2: np.float16, 4: np.float32, 8: np.float64}[size]
        return np.asarray(value, dtype).tobytes()
    if v.dtype.kind == "f":
        raise ValueError(f"a float value {value!r} for an integer parameter of type {type_}")
    return (int(value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


@dataclass
class ModuleGlobals:
    """A loaded module's ``.global`` variables, kept from launch to launch as a GPU keeps a module's:
    the same bytes (what one launch leaves, the next reads) at the same addresses. Without one, each
    launch starts from the variables' initializers, as a freshly loaded module does; with one, a
    kernel that latches state in a variable at its first launch (an argument, a "launched before"
    flag) is seen doing so at the later ones. Its buffers are placed before a launch's arguments."""

    buffers: dict[str, Buffer] = field(default_factory=dict)

    def copy(self) -> ModuleGlobals:
        """The same variables, their bytes copied (another schedule of the same launch starts from them)."""
        return ModuleGlobals({k: replace(b, data=b.data.copy()) for k, b in self.buffers.items()})


def lay_out_globals(program: Program, memory: GlobalMemory, symbols: dict[str, int],
                    module: ModuleGlobals | None = None) -> np.ndarray:
    """Module ``.global`` variables as buffers (those ``module`` holds where it placed them, already in
    ``memory``; the others new, and kept in ``module``) and ``.const`` ones in the const window; the
    const bytes."""
    const = bytearray()
    for var in program.variables.values():
        if var.space == "global":
            size = max(var.size or 0, len(var.init), 1)
            kept = module.buffers.get(var.name) if module is not None else None
            if kept is not None and kept.data.size != size:
                raise ValueError(f"module variable {var.name} is {kept.data.size} bytes, declared {size}: another module")
            if kept is None:
                data = np.zeros(size, np.uint8)
                data[: len(var.init)] = np.frombuffer(var.init, np.uint8)
                kept = memory.add(var.name, data, var.align)
                if module is not None:
                    module.buffers[var.name] = kept
            symbols[var.name] = kept.base
        elif var.space == "const":
            start = _align(len(const), var.align)
            const.extend(b"\0" * (start - len(const)))
            symbols[var.name] = CONST_WINDOW + start
            body = var.init.ljust(var.size or 0, b"\0")
            const.extend(body)
    return np.frombuffer(bytes(const) or b"\0", np.uint8).copy()
