"""Padded buffers (a spec's ``shape`` plus ``ld``): the view in memory, and the padding around it.

A buffer whose rows are ``ld`` elements apart holds ``rows x ld`` elements in memory, of which the
kernel's view is the first ``shape[-1]`` of every row. Before each launch the padding holds a
random pattern (new per buffer, size set and seed) and the view holds what any buffer would: the
inputs, the poison or the random initial state. After each launch the padding must be exactly the
pattern: a kernel that writes past the end of a row, or rounds its stores up to a tile, fails.

The functions take the array module (``xp``: CuPy in the worker, NumPy in the tests) and work on
flat ``uint8`` arrays, so they serve every dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Padding:
    """One padded buffer's layout in bytes: ``rows`` rows of ``pitch`` bytes, the first ``width``
    of each in the view."""

    rows: int
    pitch: int
    width: int
    itemsize: int

    @classmethod
    def of(cls, memory_shape: tuple[int, ...], view_shape: tuple[int, ...], itemsize: int) -> Padding | None:
        """The layout, or None when the rows are not padded (``ld`` equal to the last extent)."""
        if memory_shape == view_shape:
            return None
        return cls(math.prod(memory_shape[:-1]), memory_shape[-1] * itemsize, view_shape[-1] * itemsize, itemsize)

    @property
    def view_bytes(self) -> int:
        return self.rows * self.width

    def view(self, xp: Any, memory: Any) -> Any:
        """The view's bytes of a whole buffer, contiguous (a copy)."""
        return xp.ascontiguousarray(memory.reshape(self.rows, self.pitch)[:, : self.width]).reshape(-1)

    def image(self, xp: Any, view: Any, pattern: Any) -> Any:
        """A whole buffer: ``pattern`` (the padding) with ``view`` (contiguous view bytes) in it."""
        whole = pattern.copy()
        whole.reshape(self.rows, self.pitch)[:, : self.width] = view.reshape(self.rows, self.width)
        return whole

    def fill_view(self, memory: Any, value: int) -> None:
        """Set every byte of the view to ``value`` (a zero step), leaving the padding alone."""
        memory.reshape(self.rows, self.pitch)[:, : self.width] = value

    def _differs(self, memory: Any, pattern: Any) -> Any:
        """Per padding byte, whether ``memory`` differs from ``pattern`` there (rows x padding bytes)."""
        return memory.reshape(self.rows, self.pitch)[:, self.width:] != pattern.reshape(self.rows, self.pitch)[:, self.width:]

    def changed_count(self, xp: Any, memory: Any, pattern: Any) -> Any:
        """How many padding bytes of ``memory`` differ from ``pattern`` (a 0-d array: no sync)."""
        return xp.count_nonzero(self._differs(memory, pattern))

    def changes(self, xp: Any, memory: Any, pattern: Any, name: str, ld: int) -> str:
        """The padding bytes of ``memory`` that differ from ``pattern``, described, or ''."""
        bad = xp.flatnonzero(self._differs(memory, pattern))
        if not bad.size:
            return ""
        first = int(bad[0])
        span = self.pitch - self.width
        row, column = divmod(first, span)
        column = (self.width + column) // self.itemsize
        return (f"{name}: {int(bad.size)} bytes of its padding changed (the elements between the view's "
                f"{self.width // self.itemsize} columns and ld = {ld}; first at row {row}, column {column}): "
                "elements outside the shape must come back unchanged")
