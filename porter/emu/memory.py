"""The address spaces and every plain load and store: global, shared, local, param, const.

Addresses are laid out so that a generic address says its space by its bits [40,48):

- global buffers: each alone in a 64 GiB slot of the 47-bit user address space (the address's bits
  [36,47) name it), so that an access past either end is caught and names the buffer. The slot and
  the buffer's start inside it are drawn per launch: half the slots where the CUDA driver maps
  device memory on Linux (bits [40,47) = 0x7f, as a GPU's pointers read: 0x7f5b0fe00000 on an H100),
  the rest anywhere outside the windows below; the start at any multiple of 16 bytes (the spec's
  contract: cudaMalloc's 256 is one draw in 16) that leaves the buffer inside its slot. So no bit
  of a pointer, or distance between two, is the same at every launch: a kernel that is right only
  for pointers of some fixed shape is wrong at some launch of the emulation gate;
- shared: the ``.shared`` address is ``rank << 24 | offset`` (as the H200 showed for clusters:
  the CTA's rank in bits 24 and up, see the async-tensor-core reference §6), data starting at
  offset 1024; its generic address is ``SHARED_WINDOW`` + that;
- local, param and const: ``*_WINDOW`` + offset, the same value in the generic and the specific
  space (``cvta`` is the identity for them).

The loads and stores themselves are in :mod:`porter.emu.access`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

SLOT_SHIFT = 36
SHARED_WINDOW = 0x08 << 40
LOCAL_WINDOW = 0x09 << 40
PARAM_WINDOW = 0x0A << 40
CONST_WINDOW = 0x0B << 40
RANK_SHIFT = 24
SHARED_OFFSET_MASK = (1 << RANK_SHIFT) - 1
SHARED_START = 1024  # first shared byte a kernel can own (the H200 reports 0x400 for the first variable)
WINDOWS = frozenset(w >> 40 for w in (SHARED_WINDOW, LOCAL_WINDOW, PARAM_WINDOW, CONST_WINDOW))


@dataclass
class Buffer:
    """A global allocation: an argument array (seen through its bytes) or a module variable."""

    name: str
    data: np.ndarray  # uint8, 1-D, a view of the caller's array where it is contiguous
    base: int
    read_only: bool = False  # an input the kernel may only read: a store to it is fatal, as on the GPU gate


SLOTS = 1 << (47 - SLOT_SHIFT)  # a 47-bit user address space, as a GPU's pointers are on Linux
_DRIVER_SLOTS = range(0x7F << 40 >> SLOT_SHIFT, 0x80 << 40 >> SLOT_SHIFT)
# not slot 0 (the null page), none holding a window's addresses
_OTHER_SLOTS = [s for s in range(1, SLOTS) if (s << SLOT_SHIFT) >> 40 not in WINDOWS and s not in _DRIVER_SLOTS]
START_ALIGN = 16


class GlobalMemory:
    """Every global allocation of one launch, found from an address by its slot.

    ``rng`` draws the places (seeded from emulate()'s ``seed``, so that a layout can be replayed)."""

    def __init__(self, rng: random.Random) -> None:
        self.buffers: list[Buffer] = []
        self._rng = rng
        self._by_slot: dict[int, Buffer] = {}

    def add(self, name: str, data: np.ndarray, align: int = START_ALIGN, *, read_only: bool = False) -> Buffer:
        """A new buffer over ``data`` at a drawn place (see the module's docstring)."""
        if len(self.buffers) == len(_DRIVER_SLOTS) + len(_OTHER_SLOTS):
            raise ValueError(f"more than {len(self.buffers)} global buffers")
        slot = self._free_slot()
        step = max(align, START_ALIGN)
        room = max(0, (1 << SLOT_SHIFT) - int(data.size)) // step
        buffer = Buffer(name, data, (slot << SLOT_SHIFT) + step * self._rng.randrange(room + 1), read_only)
        self.place(buffer)
        return buffer

    def place(self, buffer: Buffer) -> None:
        """``buffer`` where it already lies (a module variable keeps its address from launch to launch)."""
        slot = buffer.base >> SLOT_SHIFT
        if slot in self._by_slot:
            raise ValueError(f"{buffer.name} at 0x{buffer.base:x} is in the slot of {self._by_slot[slot].name}")
        self.buffers.append(buffer)
        self._by_slot[slot] = buffer

    def _free_slot(self) -> int:
        """A slot no buffer holds: among the driver's as often as among the others (add() checked
        that one is free; a launch holds a handful of buffers, so one comes at once)."""
        while True:
            slot = self._rng.choice(_DRIVER_SLOTS if self._rng.random() < 0.5 else _OTHER_SLOTS)
            if slot not in self._by_slot:
                return slot

    def in_slot(self, slot: int) -> Buffer | None:
        """The buffer whose slot is ``slot``, if any."""
        return self._by_slot.get(slot)

    def holding(self, address: int) -> Buffer | None:
        """The buffer whose slot ``address`` falls in, if any (the address may still be past its end)."""
        return self._by_slot.get(address >> SLOT_SHIFT) if address >= 0 else None
