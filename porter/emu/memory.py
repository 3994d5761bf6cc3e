"""The address spaces and every plain load and store: global, shared, local, param, const.

Addresses are laid out so that a generic address says its space by its bits [40,48):

- global buffers: each alone in a 64 GiB slot (``GLOBAL_BASE + (slot << 36)``), so that an access
  past either end is caught and names the buffer; the slot and the buffer's start inside it (a
  multiple of 256 bytes, what cudaMalloc guarantees, and no more) are drawn per launch, so that no
  pointer value or distance between buffers tells a kernel it runs in the emulator;
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

GLOBAL_BASE = 1 << 44
SLOT_SHIFT = 36
SHARED_WINDOW = 0x08 << 40
LOCAL_WINDOW = 0x09 << 40
PARAM_WINDOW = 0x0A << 40
CONST_WINDOW = 0x0B << 40
RANK_SHIFT = 24
SHARED_OFFSET_MASK = (1 << RANK_SHIFT) - 1
SHARED_START = 1024  # first shared byte a kernel can own (the H200 reports 0x400 for the first variable)


@dataclass
class Buffer:
    """A global allocation: an argument array (seen through its bytes) or a module variable."""

    name: str
    data: np.ndarray  # uint8, 1-D, a view of the caller's array where it is contiguous
    base: int


SLOTS = 240  # slots below 2^48: a 48-bit virtual address, as a GPU's pointers are
START_ALIGN = 256
START_SPAN = 1 << 30  # a buffer starts in the first GiB of its slot


class GlobalMemory:
    """Every global allocation of one launch, found from an address by its slot.

    ``rng`` draws the places (seeded from emulate()'s ``seed``, so that a layout can be replayed)."""

    def __init__(self, rng: random.Random) -> None:
        self.buffers: list[Buffer] = []
        self._rng = rng
        self._slots = self._rng.sample(range(SLOTS), SLOTS)
        self._by_slot: dict[int, Buffer] = {}

    def add(self, name: str, data: np.ndarray, align: int = START_ALIGN) -> int:
        if len(self.buffers) == SLOTS:
            raise ValueError(f"more than {SLOTS} global buffers")
        slot = self._slots[len(self.buffers)]
        step = max(align, START_ALIGN)
        base = GLOBAL_BASE + (slot << SLOT_SHIFT) + step * self._rng.randrange(START_SPAN // step)
        buffer = Buffer(name, data, base)
        self.buffers.append(buffer)
        self._by_slot[slot] = buffer
        return base

    def in_slot(self, slot: int) -> Buffer | None:
        """The buffer whose slot is ``slot``, if any."""
        return self._by_slot.get(slot)
