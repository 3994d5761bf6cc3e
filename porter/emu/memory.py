"""The address spaces and every plain load and store: global, shared, local, param, const.

Addresses are laid out so that a generic address says its space by its bits [40,48):

- global buffer i: ``GLOBAL_BASE + (i << 36)`` + byte offset (each buffer alone in a 64 GiB slot,
  so that an access past its end is caught and names the buffer);
- shared: the ``.shared`` address is ``rank << 24 | offset`` (as the H200 showed for clusters:
  the CTA's rank in bits 24 and up, see the async-tensor-core reference §6), data starting at
  offset 1024; its generic address is ``SHARED_WINDOW`` + that;
- local, param and const: ``*_WINDOW`` + offset, the same value in the generic and the specific
  space (``cvta`` is the identity for them).

The loads and stores themselves are in :mod:`porter.emu.access`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GLOBAL_BASE = 1 << 44
SLOT_SHIFT = 36
SHARED_WINDOW = 0x08 << 40
LOCAL_WINDOW = 0x09 << 40
PARAM_WINDOW = 0x0A << 40
CONST_WINDOW = 0x0B << 40
RANK_SHIFT = 24
SHARED_OFFSET_MASK = (1 << RANK_SHIFT) - 1
SHARED_START = 1024  # first shared byte a kernel can own (the H200 reports 0x400 for the first variable)
SHARED_POISON = 0x5C  # what unwritten shared memory holds


@dataclass
class Buffer:
    """A global allocation: an argument array (seen through its bytes) or a module variable."""

    name: str
    data: np.ndarray  # uint8, 1-D, a view of the caller's array where it is contiguous
    base: int


class GlobalMemory:
    """Every global allocation of one launch, found from an address by its slot."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    def add(self, name: str, data: np.ndarray) -> int:
        base = GLOBAL_BASE + (len(self.buffers) << SLOT_SHIFT)
        self.buffers.append(Buffer(name, data, base))
        return base
