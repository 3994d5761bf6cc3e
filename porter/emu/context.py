"""What instruction builders share: operand readers and writers, outcomes, the registry.

Each instruction becomes ``fn(cta, idx) -> outcome``: ``idx`` holds the indices of the threads
that run it (the guard already applied), ``outcome`` is None (go on) or one of the control values
below. Operand access is compiled too: :meth:`Context.read` gives a function that returns an
operand's values for ``idx`` as the instruction's type, :meth:`Context.write` one that stores.

Instruction families register a builder for a dotted opcode prefix with :func:`builder`
(``"cp.async.bulk"`` wins over ``"cp"``); :mod:`porter.emu.compile` imports the families.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.emu import ptxtypes
from porter.emu.decode import (
    Addr,
    FloatLit,
    Imm,
    Op,
    Operand,
    PredPair,
    Program,
    Reg,
    Sink,
    Special,
    Sym,
    Vec,
)
from porter.emu.diagnostics import Diagnostic, EmuTrap
from porter.emu.memory import LOCAL_WINDOW, PARAM_WINDOW, RANK_SHIFT
from porter.emu.state import Cta, Launch

Exec = Callable[[Cta, np.ndarray], Any]
Reader = Callable[[Cta, np.ndarray], Any]
Writer = Callable[[Cta, np.ndarray, Any], None]


@dataclass(frozen=True)
class Jump:
    """All threads that ran the instruction continue at ``target``."""

    target: int


@dataclass(frozen=True)
class Exit:
    """The threads that ran the instruction have exited."""


@dataclass(frozen=True)
class Wait:
    """``waiting`` (thread indices) cannot go on yet; the others go on.

    With ``ready`` None the instruction is tried again once some other state changed (a pure
    check such as ``mbarrier.try_wait``). With ``ready`` the instruction's effect has happened
    (an arrival); the threads go on past it as soon as ``ready()`` is true.
    """

    waiting: np.ndarray
    reason: Callable[[], str]
    ready: Callable[[], bool] | None = None
    kind: str = "wait"
    line: int = 0  # the instruction that waits, when the group has already moved past it (a Yield)


@dataclass(frozen=True)
class Yield:
    """Go on past the instruction, but only once some other state has changed (a failed poll:
    ``mbarrier.test_wait``, ``try_wait`` under the per-warp schedules, ``nanosleep``). A thread
    that polls forever while nothing else can run is reported as a deadlock with ``reason``."""

    reason: Callable[[], str]


_BUILDERS: dict[str, Callable[[Op, Context], Exec]] = {}


def find_builder(parts: tuple[str, ...]) -> Callable[[Op, Context], Exec] | None:
    """The builder registered for the longest dotted prefix of an opcode."""
    for n in range(len(parts), 0, -1):
        found = _BUILDERS.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


def builder(*bases: str) -> Callable[[Callable[[Op, Context], Exec]], Callable[[Op, Context], Exec]]:
    """Register a builder for instructions whose mnemonic (first dotted part) is one of ``bases``."""

    def wrap(fn: Callable[[Op, Context], Exec]) -> Callable[[Op, Context], Exec]:
        for b in bases:
            _BUILDERS[b] = fn
        return fn

    return wrap


def trap(cta: Cta, op: Op, kind: str, message: str, **details: Any) -> EmuTrap:
    return EmuTrap(Diagnostic(kind, op.line, message, cta.ctaid, True, dict(details)))


def unsupported(op: Op, what: str = "") -> Exec:
    """An executor that stops the launch with an 'unsupported' diagnostic when it is reached."""

    def run(cta: Cta, idx: np.ndarray) -> None:
        raise trap(cta, op, "unsupported", f"{what or 'instruction'} not emulated: {op.text}")

    return run


def _special(name: str) -> Reader:
    def tid(axis: int) -> Reader:
        return lambda cta, idx: cta.tid[axis][idx]

    def const(fn: Callable[[Cta], int]) -> Reader:
        return lambda cta, idx: np.full(idx.size, fn(cta), np.uint32)

    axes = {"x": 0, "y": 1, "z": 2}
    base, _, axis = name.partition(".")
    a = axes.get(axis, 0)
    if base == "tid":
        return tid(a)
    if base == "ntid":
        return const(lambda c: c.launch.block[a])
    if base == "ctaid":
        return const(lambda c: c.ctaid[a])
    if base == "nctaid":
        return const(lambda c: c.launch.grid[a])
    if base == "cluster_ctaid":
        return const(lambda c: c.ctaid[a] % c.launch.cluster[a])
    if base == "cluster_nctaid":
        return const(lambda c: c.launch.cluster[a])
    if base == "clusterid":
        return const(lambda c: c.ctaid[a] // c.launch.cluster[a])
    if base == "nclusterid":
        return const(lambda c: c.launch.grid[a] // c.launch.cluster[a])
    if base == "cluster_ctarank":
        return const(lambda c: c.rank)
    if base == "cluster_nctarank":
        return const(lambda c: int(np.prod(c.launch.cluster)))
    if base == "is_explicit_cluster":
        return const(lambda c: int(np.prod(c.launch.cluster) > 1))
    if base == "laneid":
        return lambda cta, idx: (idx % 32).astype(np.uint32)
    if base == "warpid":
        return lambda cta, idx: (idx // 32).astype(np.uint32)
    if base == "nwarpid":
        return const(lambda c: (c.nthreads + 31) // 32)
    if base == "dynamic_smem_size":
        return const(lambda c: c.launch.dynamic_smem)
    if base == "total_smem_size":
        return const(lambda c: c.launch.shared_size)
    if base.startswith("lanemask_"):
        rel = base[len("lanemask_"):]

        def mask(cta: Cta, idx: np.ndarray) -> np.ndarray:
            lane = (idx % 32).astype(np.uint64)
            one = np.uint64(1)
            below = (one << lane) - one
            at = one << lane
            m = {"eq": at, "lt": below, "le": below | at, "gt": ~(below | at), "ge": ~below}[rel]
            return (m & np.uint64(0xFFFFFFFF)).astype(np.uint32)

        return mask
    if base in ("clock", "clock64", "globaltimer"):
        return lambda cta, idx: np.full(idx.size, cta.launch.steps, np.uint64 if base != "clock" else np.uint32)
    if base == "smid":
        return const(lambda c: c.smid)
    if base == "nsmid":
        return const(lambda c: c.launch.sm_count)
    if base == "gridid":  # a launch's 64-bit id: drawn, as nothing fixes it
        return lambda cta, idx: np.full(idx.size, cta.launch.grid_id, np.uint64)
    return const(lambda c: 0)  # %envreg*


class Context:
    """What builders need: the program, the launch's symbol table and operand compilers."""

    def __init__(self, program: Program, launch: Launch) -> None:
        self.program = program
        self.launch = launch

    def target(self, op: Op, operand: Operand) -> int:
        if isinstance(operand, Sym) and operand.name in self.program.labels:
            return self.program.labels[operand.name]
        raise ValueError(f"branch target {operand!r} is not a label")  # compile_op: unsupported when reached

    def symbol(self, name: str) -> Callable[[Cta], int]:
        """A symbol's address in its own state space (shared ones carry the CTA's rank)."""
        launch = self.launch
        if name in launch.shared_layout:
            off = launch.shared_layout[name]
            return lambda cta: (cta.rank << RANK_SHIFT) | off
        if name in launch.symbols:
            value = launch.symbols[name]
            return lambda cta: value
        raise KeyError(name)

    def read(self, operand: Operand, t: str) -> Reader:
        """A reader of ``operand`` as PTX type ``t`` (without the dot)."""
        dt = ptxtypes.dtype(t)
        if isinstance(operand, Reg):
            name = operand.name
            if t == "pred":
                if operand.negate:
                    return lambda cta, idx: ~cta.reg(name, np.dtype(bool))[idx].astype(bool)
                return lambda cta, idx: cta.reg(name, np.dtype(bool))[idx].astype(bool)
            store = ptxtypes.storage("." + t) if name not in self.program.registers else None
            return lambda cta, idx: ptxtypes.as_type(cta.reg(name, store)[idx], t)
        if isinstance(operand, Imm):
            v: np.ndarray | np.generic  # a NumPy scalar; mypy types the [()] of an array as an array
            if operand.is_float_bits:
                raw = np.array(operand.value, np.uint32 if operand.width == 32 else np.uint64)
                val = raw.view(np.float32 if operand.width == 32 else np.float64)
                v = val.astype(dt)[()] if ptxtypes.kind(t) == "f" else raw.astype(dt)[()]
            elif t == "pred":
                v = np.bool_(operand.value != 0)
            elif ptxtypes.kind(t) == "f":
                v = dt.type(operand.value)
            else:
                w = ptxtypes.width(t)
                v = np.array(operand.value & ((1 << w) - 1), ptxtypes.UNSIGNED[w]).view(dt)[()]
            return lambda cta, idx: v
        if isinstance(operand, FloatLit):
            fv = dt.type(operand.value)
            return lambda cta, idx: fv
        if isinstance(operand, Special):
            sp = _special(operand.name)
            return lambda cta, idx: ptxtypes.as_type(np.asarray(sp(cta, idx)), t)
        if isinstance(operand, Sym):
            if operand.name in self.program.labels:
                raise KeyError(operand.name)
            addr = self.symbol(operand.name)
            off = operand.offset
            w = ptxtypes.width(t)
            return lambda cta, idx: np.full(idx.size, (addr(cta) + off) & ((1 << w) - 1),
                                            ptxtypes.UNSIGNED[w]).view(dt)
        raise ValueError(f"cannot read {operand!r}")

    def write(self, operand: Operand, t: str) -> Writer:
        """A writer of values of type ``t`` into a register operand (``_`` discards)."""
        if isinstance(operand, Sink):
            return lambda cta, idx, v: None
        if not isinstance(operand, Reg):
            raise ValueError(f"cannot write {operand!r}")
        name = operand.name
        decl = self.program.registers.get(name)
        store = ptxtypes.storage(decl) if decl else ptxtypes.storage("." + t)

        def write(cta: Cta, idx: np.ndarray, values: Any) -> None:
            cta.reg(name, store)[idx] = ptxtypes.to_storage(values, t, store)

        return write

    def address(self, operand: Operand, space: str) -> Reader:
        """An address operand (``[reg+off]``, ``[sym+off]``, ``[imm]``) as uint64 addresses in ``space``."""
        if isinstance(operand, (Reg, Sym)):
            operand = Addr(operand, 0)
        if not isinstance(operand, Addr):
            raise ValueError(f"not an address: {operand!r}")
        off = operand.offset
        base = operand.base
        if base is None:
            return lambda cta, idx: np.full(idx.size, off, np.uint64)
        if isinstance(base, Reg):
            name = base.name

            def reg_addr(cta: Cta, idx: np.ndarray) -> np.ndarray:
                raw = cta.reg(name)[idx]
                if space == "param" and raw.dtype.itemsize < 8:
                    raw = raw.astype(np.uint64) + np.uint64(PARAM_WINDOW)
                return raw.astype(np.uint64) + np.uint64(off & 0xFFFFFFFFFFFFFFFF)

            return reg_addr
        if base.name in self.launch.shared_layout:
            sym = self.symbol(base.name)
            return lambda cta, idx: np.full(idx.size, sym(cta) + off + base.offset, np.uint64)
        if base.name not in self.launch.symbols:
            raise ValueError(f"unknown symbol {base.name!r}")
        value = self.launch.symbols[base.name] + off + base.offset
        if space == "local" and value < LOCAL_WINDOW:
            value += LOCAL_WINDOW
        return lambda cta, idx: np.full(idx.size, value, np.uint64)

    def vector(self, operand: Operand) -> tuple[Operand, ...]:
        return operand.items if isinstance(operand, Vec) else (operand,)


def type_suffix(op: Op) -> str:
    """The instruction's operand type: its last dotted part that names a type (``s32`` ...)."""
    for part in reversed(op.parts):
        if _is_type(part):
            return part
    return "b32"


def _is_type(part: str) -> bool:
    return part in _TYPES


_TYPES = frozenset(
    ["pred", "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16", "f32", "f64", "bf16", "f16x2", "bf16x2", "tf32", "e4m3x2", "e5m2x2"])


def types_of(op: Op) -> list[str]:
    return [p for p in op.parts[1:] if _is_type(p)]


def pred_pair_writers(ctx: Context, operand: Operand) -> tuple[Writer, Writer | None]:
    if isinstance(operand, PredPair):
        return ctx.write(operand.first, "pred"), ctx.write(operand.second, "pred")
    return ctx.write(operand, "pred"), None


BoolOp = Callable[[np.ndarray, np.ndarray], np.ndarray]
_BOOL_OPS: dict[str, BoolOp] = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def bool_op(op: Op, ctx: Context) -> tuple[BoolOp, Reader] | None:
    """setp's and set's optional ``.and``/``.or``/``.xor``: how a comparison's outcome t is
    combined with the predicate c (the fourth operand), and c's reader; None without one. (setp's
    second destination q is ``BoolOp(!t, c)``, PTX ISA setp.)"""
    name = next((p for p in op.parts[2:] if p in _BOOL_OPS), None)
    return None if name is None else (_BOOL_OPS[name], ctx.read(op.operands[3], "pred"))


