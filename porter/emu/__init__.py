"""A functional PTX emulator: run a kernel on the CPU at small shapes and check what it computes.

Layer: between ``porter.ptx`` (which it uses to parse) and ``porter.gate`` (which calls it). The
API is :func:`emulate` (NumPy arrays, scalars and :class:`TensorMap` in, an :class:`EmuResult`
with the written buffers and :class:`Diagnostic` findings out). See docs/emulator.md.
"""

from porter.emu.args import ModuleGlobals, TensorMap
from porter.emu.diagnostics import Diagnostic
from porter.emu.run import EmuResult, emulate

__all__ = ["Diagnostic", "EmuResult", "ModuleGlobals", "TensorMap", "emulate"]
