"""Link an entry and the device functions it calls into one :class:`Program`, by inlining.

Each ``call`` to a ``.func`` with a body in the module is replaced, at decode time, by a copy of
the callee's instructions made for that call site: its registers, labels, local variables and
call slots renamed with the site's suffix (``%r1@3``), its parameter and return-value names bound
to the caller's ``.param`` variables, and each ``ret`` turned into a branch to the instruction
after the copy (a guarded call is first a branch around it). Every ``.param`` variable a body
declares for its calls becomes a per-thread local variable (a *slot*), and ``ld.param`` /
``st.param`` on slots and in callees become local loads and stores, so scalars, vectors and byte
arrays passed by value are bytes of local memory. Each inlined copy has its own slots and its
own ``__local_depot``, so no callee's frame overlaps its caller's.

Why inlining and not a call stack: the scheduler runs one flat instruction list and reconverges
divergent threads at the lowest PC; with each callee copied in place, a call under divergence,
a callee's early ``ret`` and a call in a loop reconverge exactly as the same code written
inline would, without per-thread return addresses. The cost is code size, bounded by
:data:`MAX_INLINED`; recursion cannot be inlined and is declined.

What is not inlined stays a ``call`` whose :attr:`Op.problem` says why, an ``unsupported``
diagnostic at its line when it is reached: recursion (a function already being inlined further
up), a call through a register, a function without a body (other than the system calls
``vprintf`` and ``__assertfail``, which :mod:`porter.emu.syscalls` runs), a call whose
arguments do not match the callee, calls nested deeper than :data:`MAX_DEPTH`, or a callee that
would take the inlined instructions past :data:`MAX_INLINED`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from porter.emu.decode import (
    Addr,
    Function,
    Op,
    Operand,
    Program,
    Reg,
    Sym,
    Variable,
    Vec,
    map_operand,
    module_lines,
    module_variables,
    read_function,
)
from porter.ptx.model import PtxModule

MAX_INLINED = 100_000  # instructions copied from callees into one program
MAX_DEPTH = 64  # calls nested in calls
SYSTEM_CALLS = frozenset({"vprintf", "__assertfail"})
# A function's address (``mov.u64 %rd1, fn``, for a call through a register) lies in a window no
# load or store resolves: 16 bytes apart, in the module's order of functions.
FUNCTION_WINDOW = 0x0C << 40


@dataclass(frozen=True)
class CallSite:
    """A ``call``'s operands: ``call (returns), target, (args)``."""

    returns: tuple[Operand, ...]
    target: Operand | None
    args: tuple[Operand, ...]


def call_site(op: Op) -> CallSite:
    ops = op.operands
    returns: tuple[Operand, ...] = ()
    if len(ops) > 1 and isinstance(ops[0], Vec):
        returns, ops = ops[0].items, ops[1:]
    args = ops[1].items if len(ops) > 1 and isinstance(ops[1], Vec) else ()
    return CallSite(returns, ops[0] if ops else None, args)


@dataclass(frozen=True)
class _Names:
    """How one inlined copy renames what its function declares and binds its parameters."""

    suffix: str  # "" in the entry, "@N" in the Nth inlined call
    own: frozenset[str]  # labels, local variables and slots of the function
    binds: dict[str, str]  # parameter and return-value names -> the caller's slots

    def reg(self, r: Reg) -> Reg:
        return Reg(r.name + self.suffix, r.negate) if self.suffix else r

    def sym(self, name: str) -> str:
        if name in self.binds:
            return self.binds[name]
        return name + self.suffix if name in self.own else name

    def operand(self, o: Operand) -> Operand:
        return map_operand(o, self.reg, lambda s: Sym(self.sym(s.name), s.offset))


@dataclass(frozen=True)
class _Frame:
    fn: Function
    names: _Names
    end: str | None  # the label after the inlined copy, where `ret` goes (None in the entry)
    stack: tuple[str, ...]  # the functions being inlined, outermost first


class _Linker:
    def __init__(self, module: PtxModule) -> None:
        self.module = module
        self.lines = module_lines(module)
        self.bodies = {e.name: e for e in module.entries if e.kind == "func"}
        self.read: dict[str, Function] = {}
        self.sizes: dict[str, int] = {}
        self.ops: list[Op] = []
        self.labels: dict[str, int] = {}
        self.registers: dict[str, str] = {}
        self.variables: dict[str, Variable] = {}
        self.sites = 0
        self.inlined = 0

    def function(self, name: str) -> Function | None:
        if name not in self.read and name in self.bodies:
            self.read[name] = read_function(self.module, self.bodies[name], self.lines)
        return self.read.get(name)

    # -- emitting ---------------------------------------------------------------------------

    def emit(self, op: Op, frame: _Frame, problem: str = "") -> None:
        if op.index != len(self.ops) or problem:
            op = dataclasses.replace(op, index=len(self.ops), problem=problem or op.problem)
        self.ops.append(op)
        if frame.end is not None:
            self.inlined += 1

    def body(self, frame: _Frame) -> None:
        """Emit one function's instructions and record its names under the frame's suffix."""
        fn, names = frame.fn, frame.names
        at: list[int] = []
        for op in fn.ops:
            at.append(len(self.ops))
            self.instruction(op, frame)
        at.append(len(self.ops))
        for label, i in fn.labels.items():
            self.labels[names.sym(label)] = at[i]
        for reg, type_ in fn.registers.items():
            self.registers[reg + names.suffix] = type_
        for var in fn.variables.values():
            name = names.sym(var.name) if var.space == "local" else var.name
            self.variables.setdefault(name, dataclasses.replace(var, name=name))
        for slot in fn.slots.values():
            name = names.sym(slot.name)
            self.variables[name] = dataclasses.replace(slot, name=name, space="local")

    def renamed(self, op: Op, frame: _Frame) -> Op:
        names = frame.names
        if not names.suffix and not names.binds:
            return op  # the entry's own names
        guard = names.reg(op.guard) if op.guard is not None else None
        return dataclasses.replace(op, guard=guard, operands=tuple(names.operand(o) for o in op.operands))

    def instruction(self, op: Op, frame: _Frame) -> None:
        if op.problem:
            self.emit(self.renamed(op, frame), frame)
        elif op.parts[0] == "call":
            self.call(op, frame)
        elif op.parts[0] == "ret" and frame.end is not None:
            self.emit(self.branch(op, frame, frame.end, negate=False), frame)
        else:
            self.emit(self.renamed(_param_space(op, frame), frame), frame)

    def branch(self, op: Op, frame: _Frame, label: str, *, negate: bool) -> Op:
        """``bra label`` under ``op``'s guard (or its negation), keeping ``op``'s line and text."""
        guard = frame.names.reg(op.guard) if op.guard is not None else None
        if guard is not None and negate:
            guard = Reg(guard.name, not guard.negate)
        return Op(0, op.line, "bra", ("bra",), guard, (Sym(label),), op.text)

    # -- calls ------------------------------------------------------------------------------

    def call(self, op: Op, frame: _Frame) -> None:
        site = call_site(op)
        callee = self.function(site.target.name) if isinstance(site.target, Sym) else None
        problem = self.refusal(site, callee, frame)
        if problem is not None or callee is None:
            self.emit(self.renamed(op, frame), frame, problem or "")
            return
        self.sites += 1
        suffix = f"@{self.sites}"
        end = f"$return{suffix}"
        if op.guard is not None:
            self.emit(self.branch(op, frame, end, negate=True), frame)
        entry = callee.entry
        binds = {p.name: frame.names.sym(_name(a)) for p, a in zip(entry.params, site.args, strict=True)}
        binds |= {p.name: frame.names.sym(_name(r)) for p, r in zip(entry.returns, site.returns, strict=True)}
        own = frozenset(callee.labels) | {v.name for v in callee.variables.values() if v.space == "local"}
        names = _Names(suffix, own | frozenset(callee.slots), binds)
        self.body(_Frame(callee, names, end, (*frame.stack, entry.name)))
        self.labels[end] = len(self.ops)

    def refusal(self, site: CallSite, callee: Function | None, frame: _Frame) -> str | None:
        """Why this call cannot be inlined, or None (a system call needs no inlining)."""
        if not isinstance(site.target, Sym):
            return "indirect call (through a register)" if site.target is not None else "call without a target"
        name = site.target.name
        if callee is None:
            return None if name in SYSTEM_CALLS else f"call to {name}, a function without a body in this module,"
        entry = callee.entry
        if name in frame.stack:
            return f"recursive call to {name} (" + " -> ".join((*frame.stack[1:], name)) + ")"
        if len(site.args) != len(entry.params) or len(site.returns) != len(entry.returns):
            return (f"call to {name} with {len(site.args)} argument(s) and {len(site.returns)} result(s) "
                    f"(it takes {len(entry.params)} and {len(entry.returns)})")
        if not all(_name(o) in frame.fn.slots for o in site.args + site.returns):
            return f"call to {name} whose arguments are not .param variables of the caller"
        if _register_params(self.lines, entry.line, callee):
            return f"call to {name}, whose parameters are .reg"
        if len(frame.stack) >= MAX_DEPTH:
            return f"call to {name} nested {MAX_DEPTH} calls deep"
        size = self.size(name, frame.stack)
        if self.inlined + size > MAX_INLINED:
            return (f"call to {name} ({size} instructions with its own calls inlined) past the limit of "
                    f"{MAX_INLINED} inlined instructions")
        return None

    def size(self, name: str, stack: tuple[str, ...]) -> int:
        """The instructions inlining ``name`` adds (a recursive call counted as one)."""
        if name in self.sizes:
            return self.sizes[name]
        fn = self.function(name)
        assert fn is not None
        total = 0
        for op in fn.ops:
            total += 1
            target = call_site(op).target if op.parts[0] == "call" and not op.problem else None
            inner = target.name if isinstance(target, Sym) else ""
            if inner in self.bodies and inner not in (*stack, name) and len(stack) < MAX_DEPTH:
                total += self.size(inner, (*stack, name))
        self.sizes[name] = total
        return total


def _name(o: Operand) -> str:
    return o.name if isinstance(o, Sym) and o.offset == 0 else ""


def _register_params(lines: list[str], first: int, fn: Function) -> bool:
    """True when the function's header declares ``.reg`` parameters (which this linker does not bind)."""
    header = []
    for line in lines[first - 1 : fn.entry.end_line]:
        header.append(line.split("{", 1)[0])
        if "{" in line:
            break
    return re.search(r"\.reg\b", "\n".join(header)) is not None


def _param_space(op: Op, frame: _Frame) -> Op:
    """``ld.param``/``st.param`` on a call slot, or anywhere in a callee, as a local access."""
    if op.parts[0] not in ("ld", "st") or not any(p.startswith("param") for p in op.parts[1:]):
        return op
    slots = frame.fn.slots
    on_slot = any(isinstance(o, Addr) and isinstance(o.base, Sym) and o.base.name in slots for o in op.operands)
    if frame.end is None and not on_slot:
        return op  # the entry's own kernel parameters
    parts = tuple("local" if p.startswith("param") else p for p in op.parts)
    return dataclasses.replace(op, opcode=".".join(parts), parts=parts)


def function_addresses(module: PtxModule) -> dict[str, int]:
    """An address for each ``.func`` of the module, for the instructions that take one."""
    funcs = [e.name for e in module.entries if e.kind == "func"]
    return {name: FUNCTION_WINDOW + 16 * i for i, name in enumerate(funcs)}


def link(module: PtxModule, entry: str) -> Program:
    """The :class:`Program` of ``entry``: its instructions with every call it can inline inlined."""
    ent = module.entry(entry)
    linker = _Linker(module)
    root = read_function(module, ent, linker.lines)
    linker.body(_Frame(root, _Names("", frozenset(), {}), None, (ent.name,)))
    variables = module_variables(module, linker.lines)
    variables.update(linker.variables)
    return Program(ent, linker.ops, linker.labels, linker.registers, variables, ent.params, module.arch, module)
