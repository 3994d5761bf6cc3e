"""What a kernel's own instructions say about its parameters, read off the PTX without running it.

For every pointer parameter: which loads, stores and atomics its address reaches (followed from
``ld.param`` through ``cvta``, moves and address arithmetic to ``ld.global``/``st.global``/``atom``/
``red``/``cp.async``/``wmma.load``/``wmma.store`` and generic accesses), how wide its elements are
(the constant an index is scaled by before it is added to the pointer: ``mul.wide.s32 %rd8, %r31, 2``
or ``shl.b64 %rd7, %rd6, 1`` means 2-byte elements), and what type the values have where the code
shows it: a conversion (``cvt.f32.bf16`` of a loaded value, ``cvt.rn.f16x2.f32`` of a stored one),
typed arithmetic on them, a typed access (``ld.global.f32``, ``red.global.add.f32``,
``wmma.load.a...global.bf16``), or an mma that consumes them. For every scalar: whether it is
compared with something (a size bound) or scales an address (a stride).

It is a flow-insensitive forward analysis over register names, so loops and redefinitions are
unions; it never claims more than it saw. What it cannot follow (values that pass through shared
memory on their way to or from global memory, a pointer handed to a call or split into halves) it
leaves unknown, and says so. The kernel-wide types of each width (the 2-byte float types its cvt,
arithmetic and tensor-core instructions name) are kept apart, for the caller to use as a weaker hint.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from porter.ptx.model import Entry, Instruction, Param, PtxModule

_REG_RE = re.compile(r"%[A-Za-z_$][\w$]*")
_IMM_RE = re.compile(r"-?(?:0[xX][0-9A-Fa-f]+|[0-9]+)")

# Opcode modifiers that name a type, and the spec dtype each means for the element it touches.
_TYPE_WORDS = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2",
                         "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "b8", "b16", "b32", "b64"})
_DTYPE_OF = {"f16": "f16", "f16x2": "f16", "bf16": "bf16", "bf16x2": "bf16", "f32": "f32", "tf32": "f32",
             "f64": "f64", "e4m3": "e4m3", "e4m3x2": "e4m3", "e5m2": "e5m2", "e5m2x2": "e5m2", "s8": "i8",
             "s16": "i16", "s32": "i32", "s64": "i64", "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64"}
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "e4m3": 1, "e5m2": 1, "i8": 1, "i16": 2, "i32": 4,
               "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8}
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "e4m3", "e5m2"})

# Instructions through which a register still holds (an offset from) the same pointer.
_POINTER_OPS = frozenset({"mov", "cvta", "add", "sub", "mad", "selp", "and", "or"})
# Arithmetic whose type modifier is the type of its operands (compare, select and convert aside).
_ARITH = frozenset({"add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "abs", "neg", "sqrt", "rsqrt",
                    "rcp", "ex2", "lg2", "sin", "cos", "tanh", "setp", "set", "selp", "copysign", "testp"})
_NO_DEST = frozenset({"st", "red", "cp", "bar", "barrier", "bra", "ret", "exit", "trap", "membar", "fence",
                      "prefetch", "prefetchu", "call", "stmatrix", "griddepcontrol", "discard", "applypriority",
                      "nanosleep", "pmevent", "brkpt"})
_IGNORED_ACCESS = frozenset({"prefetch", "prefetchu", "applypriority", "discard", "createpolicy"})
_SCALAR_OPS = frozenset({"mov", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "selp", "min", "max", "div",
                         "rem", "and", "or", "neg", "abs"})
_MAX_HOPS = 4  # how far a scalar's value is followed before its uses stop counting as its own


@dataclass(frozen=True)
class Evidence:
    """One instruction that says something, as ``line``: ``what`` (``"cvt.f32.bf16"``)."""

    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.what} (line {self.line})"


@dataclass(frozen=True)
class PointerFacts:
    """What the entry does through one pointer parameter."""

    index: int  # position in the entry's parameter list
    name: str
    loads: tuple[int, ...] = ()  # lines that read through it
    stores: tuple[int, ...] = ()  # lines that write through it
    atomics: tuple[int, ...] = ()  # lines that read-modify-write through it (atom, red, cp.reduce)
    escapes: tuple[Evidence, ...] = ()  # where it leaves what this analysis follows (a call, a split)
    element_bytes: int | None = None  # from the scale of the offsets added to it
    scale_evidence: Evidence | None = None
    dtypes: tuple[tuple[str, Evidence], ...] = ()  # (dtype, where the code shows it), in file order

    @property
    def touched(self) -> bool:
        return bool(self.loads or self.stores or self.atomics)

    @property
    def role(self) -> str | None:
        """in (only read), out (only written), inout (both, or atomics); None when untouched or
        when it escapes (what happens to it past a call is unknown)."""
        if self.escapes or not self.touched:
            return None
        if self.atomics or (self.loads and self.stores):
            return "inout"
        return "out" if self.stores else "in"

    @property
    def conflicts(self) -> tuple[tuple[str, Evidence], ...]:
        """Evidence for other types than :attr:`dtype` of the same width (the first of each)."""
        best = self.dtype
        if best is None:
            return ()
        seen: dict[str, Evidence] = {}
        for d, e in self.dtypes:
            if d != best[0] and DTYPE_BYTES[d] == DTYPE_BYTES[best[0]]:
                seen.setdefault(d, e)
        return tuple(seen.items())

    @property
    def dtype(self) -> tuple[str, Evidence] | None:
        """The type the code shows for this pointer's elements: the most frequent one that fits
        the element width (first seen on a tie), or None."""
        fitting = [(d, e) for d, e in self.dtypes
                   if self.element_bytes is None or DTYPE_BYTES[d] == self.element_bytes]
        if not fitting:
            return None
        counts: dict[str, int] = defaultdict(int)
        for d, _ in fitting:
            counts[d] += 1
        best = max(counts.values())
        return next((d, e) for d, e in fitting if counts[d] == best)


@dataclass(frozen=True)
class ScalarFacts:
    """Where one scalar parameter's value goes (followed a few instructions deep)."""

    index: int
    name: str
    read: bool  # an ld.param reads it at all
    compared: Evidence | None = None  # first setp it reaches: a size the kernel bounds an index by
    scales: tuple[tuple[str, Evidence], ...] = ()  # (pointer param, first address it scales)


@dataclass(frozen=True)
class EntryFacts:
    entry: str
    pointers: tuple[PointerFacts, ...]
    scalars: tuple[ScalarFacts, ...]
    float_types: dict[int, tuple[tuple[str, Evidence], ...]]  # element bytes -> float types named, first seen each
    tensor_core: tuple[Evidence, ...]  # mma/wgmma/tcgen05 instructions (first of each opcode)
    dynamic_shared: Evidence | None  # the .extern .shared array the entry uses, if any


def is_pointer(param: Param) -> bool:
    """A pointer-sized integer parameter (``.u64``/``.b64``/``.s64`` or ``.ptr``), not a byte array."""
    return param.is_ptr or (param.type in (".u64", ".b64", ".s64") and not param.array_size)


def _regs(operand: str) -> list[str]:
    return _REG_RE.findall(operand)


def _types(opcode: str) -> list[str]:
    return [part for part in opcode.split(".")[1:] if part in _TYPE_WORDS]


def _immediate(operand: str) -> int | None:
    """An integer literal operand (``2``, ``0x10``), else None."""
    if not _IMM_RE.fullmatch(operand):
        return None
    return int(operand, 16) if "x" in operand.lower() else int(operand, 10)


def _spaces(opcode: str) -> list[str]:
    """The state spaces an opcode names, in order (``cp.async.cg.shared.global`` -> [shared, global])."""
    return [part.split("::", 1)[0] for part in opcode.split(".")[1:]
            if part.split("::", 1)[0] in ("global", "shared", "local", "param", "const")]


def _dests(ins: Instruction) -> list[str]:
    """The registers an instruction writes: its first operand, unless that is an address or it writes none."""
    if not ins.operands or ins.base in _NO_DEST or ins.operands[0].startswith("["):
        return []
    return _regs(ins.operands[0])


def _sources(ins: Instruction) -> list[str]:
    """The registers an instruction reads (an address operand's registers too)."""
    return [r for op in ins.operands[1 if _dests(ins) else 0:] for r in _regs(op)]


@dataclass(frozen=True)
class _Access:
    kind: str  # "load" | "store" | "atomic" | "tensor"
    address: str  # the operand holding the address
    values: tuple[str, ...]  # the registers loaded or stored


def _access(ins: Instruction) -> _Access | None:
    """The global (or generic) memory access an instruction makes, if it makes one."""
    base, ops = ins.base, ins.operands
    if base in _IGNORED_ACCESS or not ops:
        return None
    spaces = _spaces(ins.opcode)
    if base == "cp":
        if len(ops) < 2 or "global" not in spaces:
            return None
        if ".tensor" in ins.opcode:
            return _Access("tensor", ops[1] if spaces[-1] == "global" else ops[0], ())
        if spaces[0] == "global":  # global destination
            return _Access("atomic" if ins.opcode.startswith("cp.reduce") else "store", ops[0], ())
        return _Access("load", ops[1], ())
    if spaces and "global" not in spaces:
        return None
    if base in ("ld", "ldu") and len(ops) >= 2:
        return _Access("load", ops[1], tuple(_regs(ops[0])))
    if base == "st" and len(ops) >= 2:
        return _Access("store", ops[0], tuple(r for op in ops[1:] for r in _regs(op)))
    if base == "atom" and len(ops) >= 2:
        return _Access("atomic", ops[1], tuple(r for op in ops[2:] for r in _regs(op)))
    if base == "red":
        return _Access("atomic", ops[0], tuple(r for op in ops[1:] for r in _regs(op)))
    if ins.opcode.startswith("wmma.load") and len(ops) >= 2:
        return _Access("load", ops[1], tuple(_regs(ops[0])))
    if ins.opcode.startswith("wmma.store"):
        return _Access("store", ops[0], tuple(r for op in ops[1:2] for r in _regs(op)))
    return None


def _value_type(ins: Instruction, *, consumer: bool) -> str | None:
    """The spec dtype an instruction gives the value it reads (``consumer``) or writes, from its
    type modifiers, or None (untyped ``.b32``, no type, or not a typed instruction)."""
    types = _types(ins.opcode)
    if not types:
        return None
    if ins.base == "cvt":  # cvt.rn.f16x2.f32: destination type, then source type
        if len(types) < 2 or not ({types[0][0], types[1][0]} - {"s", "u", "b"}):
            return None  # between two integer widths (cvt.u16.u32): moving bits, not naming a type
        word = types[1] if consumer else types[0]
    elif ins.base in ("mma", "wgmma") or ins.opcode.startswith("wmma.mma"):  # d, a, b[, c]
        word = types[1] if consumer and len(types) > 1 else types[0]
    elif ins.base in ("ld", "ldu", "st", "atom", "red", "setp", "set", "wmma") or ins.opcode.startswith("wmma."):
        word = types[-1]  # ld.global.nc.v4.f32, atom.global.add.u32, set.lt.u32.f32 (compares f32)
    elif ins.base in _ARITH:
        word = types[0]  # add.f32, fma.rn.f32, mul.wide.s32 (reads s32)
    else:
        return None
    return _DTYPE_OF.get(word) if word else None


def _float_widths(ins: Instruction) -> list[str]:
    """The float dtypes a typed instruction names (cvt both sides, arithmetic, mma A/B)."""
    types = _types(ins.opcode)
    if ins.base == "cvt":
        words = types[:2]
    elif ins.base in ("mma", "wgmma") or ins.opcode.startswith("wmma.mma"):
        words = types[1:3] if len(types) > 2 else types
    elif ins.base in _ARITH or ins.base in ("ld", "st", "atom", "red") or ins.opcode.startswith("wmma"):
        words = types[-1:] if ins.base in ("ld", "st") else types
    else:
        words = []
    return [d for w in words if (d := _DTYPE_OF.get(w)) in FLOAT_DTYPES]


class _Graph:
    """Definitions and uses of every register in one entry."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.defs: dict[str, list[Instruction]] = defaultdict(list)
        self.uses: dict[str, list[Instruction]] = defaultdict(list)
        for ins in entry.instructions:
            for r in _dests(ins):
                self.defs[r].append(ins)
            for r in dict.fromkeys(_sources(ins)):
                self.uses[r].append(ins)

    def param_loads(self, name: str) -> list[str]:
        """Registers an ``ld.param`` fills from the parameter ``name``."""
        found = []
        for ins in self.entry.instructions:
            if ins.opcode.startswith("ld.param") and len(ins.operands) >= 2 and \
                    ins.operands[1].strip("[]").split("+", 1)[0] == name:
                found += _regs(ins.operands[0])
        return found

    def pointer_regs(self, seeds: list[str]) -> set[str]:
        """Every register that holds (an offset from) the pointer the seed registers hold."""
        tainted = set(seeds)
        work = list(seeds)
        while work:
            reg = work.pop()
            for ins in self.uses[reg]:
                if ins.base in _POINTER_OPS and not (ins.base == "mov" and ins.operands and ins.operands[0].startswith("{")):
                    for d in _dests(ins):
                        if d not in tainted and d.startswith("%"):
                            tainted.add(d)
                            work.append(d)
        return tainted

    def scale_of(self, ins: Instruction, tainted: set[str]) -> tuple[int, Instruction] | None:
        """(constant, the instruction that applies it) when ``ins`` adds to a pointer an offset
        scaled by a constant: ``mad.wide.s32 %rd44, %r68, 2, %rd31``, or ``add.s64 %rd8, %rd2, %rd7``
        after ``shl.b64 %rd7, %rd6, 1``."""
        ops = ins.operands
        if ins.base == "mad" and len(ops) == 4 and set(_regs(ops[3])) & tainted:
            scale = _immediate(ops[2])
            return (scale, ins) if scale is not None else None
        if ins.base not in ("add", "sub") or len(ops) != 3:
            return None
        a, b = (set(_regs(op)) & tainted for op in ops[1:3])
        if bool(a) == bool(b):
            return None
        for reg in _regs(ops[2] if a else ops[1]):
            for d in self.defs.get(reg, []):
                found = self._scale_def(d)
                if found is not None:
                    return found
        return None

    def _scale_def(self, d: Instruction, depth: int = 0) -> tuple[int, Instruction] | None:
        ops = d.operands
        scale = None
        if d.base == "mul" and len(ops) == 3:
            scale = _immediate(ops[2])
            scale = scale if scale is not None else _immediate(ops[1])
        elif d.base == "shl" and len(ops) == 3:
            shift = _immediate(ops[2])
            scale = 1 << shift if shift is not None and 0 <= shift < 32 else None
        elif d.base == "mad" and len(ops) == 4:
            scale = _immediate(ops[2])
        elif d.base == "cvt" and depth == 0 and len(ops) == 2:
            for reg in _regs(ops[1]):
                for inner in self.defs.get(reg, []):
                    found = self._scale_def(inner, 1)
                    if found is not None:
                        return found
        return (scale, d) if scale is not None else None

    def consumer_types(self, values: tuple[str, ...]) -> list[tuple[str, Evidence]]:
        """Types that the instructions using loaded values give them (through moves and unpacking)."""
        return self._flow_types(values, consumers=True)

    def producer_types(self, values: tuple[str, ...]) -> list[tuple[str, Evidence]]:
        """Types that the instructions defining stored values give them (through moves and packing)."""
        return self._flow_types(values, consumers=False)

    def _flow_types(self, values: tuple[str, ...], *, consumers: bool) -> list[tuple[str, Evidence]]:
        """The walk of both: up to three moves away from ``values``, down to their uses
        (``consumers``) or up to their definitions, the types each instruction there implies."""
        found: list[tuple[str, Evidence]] = []
        seen = set(values)
        frontier = list(values)
        skip, said = (("st", "ld"), "loaded values used by") if consumers else (("ld", "ldmatrix"), "stored values made by")
        for _ in range(3):
            nxt = []
            for reg in frontier:
                for ins in (self.uses[reg] if consumers else self.defs.get(reg, [])):
                    if ins.base == "mov" and (reg in _sources(ins) if consumers else True):
                        step = _dests(ins) if consumers else _sources(ins)
                        nxt += [r for r in step if r not in seen]
                        seen.update(step)
                    elif ins.base not in skip and (t := _value_type(ins, consumer=consumers)) is not None:
                        found.append((t, Evidence(ins.line, f"{said} {ins.opcode}")))
            frontier = nxt
        return found

    def reaches(self, seeds: list[str]) -> list[tuple[Instruction, str]]:
        """(instruction, register) for every use of a value derived from the seeds within a few hops."""
        found = []
        seen = set(seeds)
        frontier = list(seeds)
        for _ in range(_MAX_HOPS):
            nxt = []
            for reg in frontier:
                for ins in self.uses[reg]:
                    found.append((ins, reg))
                    if ins.base in _SCALAR_OPS:
                        for d in _dests(ins):
                            if d not in seen:
                                seen.add(d)
                                nxt.append(d)
            frontier = nxt
        return found


def _pointer_facts(graph: _Graph, index: int, param: Param) -> tuple[PointerFacts, set[str]]:
    seeds = graph.param_loads(param.name)
    tainted = graph.pointer_regs(seeds)
    loads: list[int] = []
    stores: list[int] = []
    atomics: list[int] = []
    escapes: list[Evidence] = []
    dtypes: list[tuple[str, Evidence]] = []
    scales: list[tuple[int, Evidence]] = []
    widths: list[int] = []
    for ins in graph.entry.instructions:
        regs = {r for op in ins.operands for r in _regs(op)}
        if not regs & tainted:
            continue
        access = _access(ins)
        if access is not None and set(_regs(access.address)) & tainted:
            if access.kind == "tensor":
                escapes.append(Evidence(ins.line, f"{ins.opcode} (a tensor map)"))
                continue
            {"load": loads, "store": stores, "atomic": atomics}[access.kind].append(ins.line)
            own = _value_type(ins, consumer=True)
            if own is not None and (own in FLOAT_DTYPES or ins.base in ("atom", "red")):
                dtypes.append((own, Evidence(ins.line, ins.opcode)))
            if access.kind == "load":
                dtypes += graph.consumer_types(access.values)
            elif access.values:
                dtypes += graph.producer_types(access.values)
            types = _types(ins.opcode)
            if types and types[-1][-1].isdigit() and ins.base in ("ld", "st", "ldu"):
                widths.append(int(types[-1][1:]) // 8)
            continue
        if ins.base in ("st", "call") or (ins.base == "mov" and ins.operands and ins.operands[0].startswith("{")) \
                or ins.base == "tensormap":
            escapes.append(Evidence(ins.line, ins.opcode))
            continue
        scaled = graph.scale_of(ins, tainted)
        if scaled is not None:
            scale, by = scaled
            scales.append((scale, Evidence(by.line, f"{by.opcode} {', '.join(by.operands)}")))
    small = [(s, e) for s, e in scales if s in (1, 2, 4, 8)]
    element, evidence = None, None
    if small:
        element, evidence = min(small, key=lambda se: (se[0], se[1].line))
    elif widths:
        element = min(widths)
    facts = PointerFacts(index=index, name=param.name, loads=tuple(loads), stores=tuple(stores),
                         atomics=tuple(atomics), escapes=tuple(escapes), element_bytes=element,
                         scale_evidence=evidence, dtypes=tuple(dtypes))
    return facts, tainted


def _scalar_facts(graph: _Graph, index: int, param: Param, pointers: dict[str, set[str]]) -> ScalarFacts:
    seeds = graph.param_loads(param.name)
    compared = None
    scales: dict[str, Evidence] = {}
    for ins, reg in graph.reaches(seeds):
        if ins.base == "setp" and compared is None:
            compared = Evidence(ins.line, ins.opcode)
        for name, tainted in pointers.items():
            if name in scales:
                continue
            srcs = _sources(ins)
            if ins.base in ("add", "sub", "mad") and set(srcs) & tainted and reg not in tainted:
                scales[name] = Evidence(ins.line, ins.opcode)
    return ScalarFacts(index=index, name=param.name, read=bool(seeds), compared=compared,
                       scales=tuple(sorted(scales.items(), key=lambda item: item[1].line)))


def entry_facts(module: PtxModule, entry: Entry) -> EntryFacts:
    """Everything above for one entry of a parsed module."""
    graph = _Graph(entry)
    pointers: list[PointerFacts] = []
    tainted: dict[str, set[str]] = {}
    for index, param in enumerate(entry.params):
        if is_pointer(param):
            facts, regs = _pointer_facts(graph, index, param)
            pointers.append(facts)
            tainted[param.name] = regs
    scalars = tuple(_scalar_facts(graph, i, p, tainted) for i, p in enumerate(entry.params)
                    if not is_pointer(p) and not p.array_size)
    floats: dict[int, dict[str, Evidence]] = defaultdict(dict)
    tensor_core: dict[str, Evidence] = {}
    for ins in entry.instructions:
        for d in _float_widths(ins):
            floats[DTYPE_BYTES[d]].setdefault(d, Evidence(ins.line, ins.opcode))
        if (ins.base in ("mma", "wgmma", "tcgen05") and "mma" in ins.opcode) or ins.opcode.startswith("wmma.mma"):
            tensor_core.setdefault(ins.opcode, Evidence(ins.line, ins.opcode))
    return EntryFacts(entry=entry.name, pointers=tuple(pointers), scalars=scalars,
                      float_types={w: tuple(found.items()) for w, found in sorted(floats.items())},
                      tensor_core=tuple(tensor_core.values()), dynamic_shared=dynamic_shared_use(module, entry))


_EXTERN_SHARED = re.compile(r"^[ \t]*\.extern[ \t]+\.shared\b[^;\n]*?([A-Za-z_$%][\w$]*)[ \t]*\[[ \t]*\]", re.M)


def extern_shared(module: PtxModule) -> list[Evidence]:
    """Every ``.extern .shared NAME[]`` the module declares (dynamic shared memory), with its line."""
    return [Evidence(module.text.count("\n", 0, m.start()) + 1, m.group(1))
            for m in _EXTERN_SHARED.finditer(module.text)]


def dynamic_shared_use(module: PtxModule, entry: Entry) -> Evidence | None:
    """The extern shared array this entry refers to (its declaration), or None when it uses none."""
    for decl in extern_shared(module):
        name = re.compile(rf"(?<![\w$]){re.escape(decl.what)}(?![\w$])")
        if any(name.search(op) for ins in entry.instructions for op in ins.operands):
            return decl
    return None
