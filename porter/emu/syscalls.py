"""The two system calls nvcc emits: ``vprintf`` (``printf``) and ``__assertfail`` (``assert``).

They are extern ``.func`` declarations without a body, called like any device function: the
caller stores the arguments in its ``.param`` slots (local bytes after :mod:`porter.emu.calls`)
and ``call``s. ``vprintf(format, args)`` appends each calling thread's text to the launch's
``printed`` (in thread order within the group that calls it) and returns what CUDA's ``printf``
returns (see :mod:`porter.emu.printf`); ``__assertfail(message, file, line, function, charSize)``
stops the launch with an ``assert`` diagnostic carrying the message, file and line, as a failed
``assert`` stops a GPU launch. Strings are read through the generic address space, wherever
they live (the module's ``$str`` globals, a local buffer, shared or constant memory).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from porter.emu.access import load, locate, shared_target, store
from porter.emu.calls import CallSite, call_site
from porter.emu.context import Context, Exec, builder
from porter.emu.decode import Op, Operand, Sym
from porter.emu.diagnostics import Diagnostic, EmuTrap
from porter.emu.memory import CONST_WINDOW, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOWS
from porter.emu.printf import render
from porter.emu.state import Cta
from porter.text import plain

SlotReader = Callable[[Cta, np.ndarray], np.ndarray]


@builder("call")
def _call(op: Op, ctx: Context) -> Exec:
    site = call_site(op)
    name = site.target.name if isinstance(site.target, Sym) else ""
    if name == "vprintf" and len(site.args) == 2 and len(site.returns) <= 1:
        return _vprintf(op, ctx, site)
    if name == "__assertfail" and len(site.args) == 5:
        return _assertfail(op, ctx, site)
    raise ValueError(f"call to {name or 'an unknown target'}")  # compile_op: unsupported when reached


def _slot(op: Op, ctx: Context, operand: Operand, width: int) -> SlotReader:
    """Each thread's value in a call slot (``width`` bytes, unsigned)."""
    addr = ctx.address(operand, "local")
    line = op.line

    def read(cta: Cta, idx: np.ndarray) -> np.ndarray:
        raw = load(cta, "local", addr(cta, idx), width, idx, line)
        return np.ascontiguousarray(raw).view(f"<u{width}").reshape(-1)

    return read


def _out_of_bounds(cta: Cta, line: int, message: str, address: int) -> EmuTrap:
    return EmuTrap(Diagnostic("out-of-bounds", line, message, cta.ctaid, True, {"address": address}))


def _region(cta: Cta, address: int, thread: int, line: int) -> np.ndarray:
    """The bytes from a generic address to the end of the buffer or window it falls in."""
    window = address >> 40
    if window == SHARED_WINDOW >> 40:
        target, offs = shared_target(cta, np.array([address - SHARED_WINDOW], np.uint64), 1, line, cluster=True)
        return target.smem[int(offs[0]):]
    if window not in WINDOWS:
        buf, offs = locate(cta.launch.memory, np.array([address], np.uint64), 1, cta, line)
        return buf.data[int(offs[0]):]
    spaces = {LOCAL_WINDOW >> 40: (LOCAL_WINDOW, cta.local[thread]),
              PARAM_WINDOW >> 40: (PARAM_WINDOW, cta.launch.param_bytes),
              CONST_WINDOW >> 40: (CONST_WINDOW, cta.launch.const_bytes)}
    base, data = spaces.get(window, (0, np.zeros(0, np.uint8)))
    if not 0 <= address - base < data.size:
        raise _out_of_bounds(cta, line, f"read at 0x{address:x} is in no buffer or state space", address)
    return data[address - base :]


def _string(cta: Cta, address: int, thread: int, line: int) -> bytes:
    """The NUL-terminated string at a generic address."""
    if address == 0:
        return b"(null)"
    data = _region(cta, address, thread, line)
    for start in range(0, data.size, 4096):
        zeros = np.flatnonzero(data[start : start + 4096] == 0)
        if zeros.size:
            return data[: start + int(zeros[0])].tobytes()
    raise _out_of_bounds(cta, line, f"string at 0x{address:x} not terminated before the end of its buffer", address)


class _Arguments:
    """printf's argument buffer, read in order, each argument aligned to its size."""

    def __init__(self, cta: Cta, address: int, thread: int, line: int) -> None:
        self.cta, self.address, self.thread, self.line = cta, address, thread, line
        self.data: np.ndarray | None = None
        self.pos = 0

    def fetch(self, size: int) -> int:
        if self.data is None:
            self.data = _region(self.cta, self.address, self.thread, self.line)
        self.pos = (self.pos + size - 1) // size * size
        if self.pos + size > self.data.size:
            raise _out_of_bounds(self.cta, self.line, f"printf reads an argument at 0x{self.address + self.pos:x}, "
                                 "past the end of its argument buffer", self.address + self.pos)
        value = int.from_bytes(self.data[self.pos : self.pos + size].tobytes(), "little")
        self.pos += size
        return value


def _vprintf(op: Op, ctx: Context, site: CallSite) -> Exec:
    fmt, buf = _slot(op, ctx, site.args[0], 8), _slot(op, ctx, site.args[1], 8)
    result = ctx.address(site.returns[0], "local") if site.returns else None
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> None:
        formats, buffers = fmt(cta, idx), buf(cta, idx)
        counts = np.empty(idx.size, np.int32)
        for i, thread in enumerate(idx.tolist()):
            counts[i] = _print(cta, int(formats[i]), int(buffers[i]), thread, line)
        if result is not None:
            store(cta, "local", result(cta, idx), counts.view(np.uint8).reshape(idx.size, 4), idx, line)

    return run


def _print(cta: Cta, fmt: int, buffer: int, thread: int, line: int) -> int:
    """One thread's printf: its text appended to the launch's, the count printf returns."""
    if fmt == 0:
        return -1
    args = _Arguments(cta, buffer, thread, line)
    printed = render(_string(cta, fmt, thread, line), args.fetch, lambda a: _string(cta, a, thread, line))
    cta.launch.printed.append(printed.text.decode("utf-8", "replace"))
    for directive in printed.unformatted:
        cta.launch.findings.add(Diagnostic("unsupported", line, f"printf conversion {directive!r} not emulated "
                                           "(printed as written)", cta.ctaid, False))
    return printed.args


def _assertfail(op: Op, ctx: Context, site: CallSite) -> Exec:
    message, file, function = (_slot(op, ctx, site.args[i], 8) for i in (0, 1, 3))
    source_line = _slot(op, ctx, site.args[2], 4)
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> None:
        thread = int(idx[0])
        # The kernel wrote these strings: shown as printable ASCII, so that they read as its words
        # wherever the diagnostic goes (a terminal, a pull request's comment, a model's prompt).
        msg, src, fn = (plain(_string(cta, int(r(cta, idx)[0]), thread, line)) for r in (message, file, function))
        number = int(source_line(cta, idx)[0])
        tid = tuple(int(t[thread]) for t in cta.tid)
        block = ",".join(map(str, cta.ctaid))
        text = (f"{src}:{number}: {fn}: block: [{block}], thread: [{','.join(map(str, tid))}] "
                f"Assertion `{msg}` failed.")
        raise EmuTrap(Diagnostic("assert", line, text, cta.ctaid, True,
                                 {"message": msg, "file": src, "line": number, "function": fn, "thread": tid,
                                  "threads": int(idx.size)}))

    return run
