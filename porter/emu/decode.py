"""Decode PTX functions into what the emulator executes: operands, labels and declarations.

porter's parser (:mod:`porter.ptx.parser`) gives the entries and functions, their parameters and
every instruction with its opcode, guard, line and operand strings; it drops labels and
declarations, which execution needs. This module reads those from the text between a function's
braces (labels become instruction indices, ``.param`` variables declared for calls become
slots) and from the module level (``.extern .shared`` for dynamic shared memory,
``.global``/``.const`` variables with their initialisers), and turns each operand string into a
small typed value (:class:`Reg`, :class:`Imm`, :class:`Addr` ...). An operand it cannot read
makes its instruction one that reports itself unsupported when reached
(:attr:`Op.problem`); :mod:`porter.emu.calls` links an entry and the functions it calls into
one :class:`Program`.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from porter.ptx.model import Entry, Instruction, Param, PtxModule


class DecodeError(ValueError):
    """An operand or declaration the emulator cannot read (names the PTX line)."""


@dataclass(frozen=True)
class Reg:
    name: str
    negate: bool = False  # `!%p1` as a predicate source


@dataclass(frozen=True)
class Imm:
    """An integer immediate, or a float immediate as its bits (``0f3F800000`` -> 0x3F800000)."""

    value: int
    is_float_bits: bool = False
    width: int = 0  # 32 or 64 for float bit immediates


@dataclass(frozen=True)
class FloatLit:
    """A decimal float literal (``1.0``): rare in generated PTX, kept as a Python float."""

    value: float


@dataclass(frozen=True)
class Special:
    """A special register: ``%tid.x``, ``%laneid``, ``%cluster_ctarank`` ..."""

    name: str


@dataclass(frozen=True)
class Sym:
    """A variable or parameter name, with an optional byte offset (``smem+1024``)."""

    name: str
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    items: tuple[Operand, ...]


@dataclass(frozen=True)
class Addr:
    """``[base+offset]``: base a register, a symbol or nothing (an absolute address)."""

    base: Reg | Sym | None
    offset: int = 0


@dataclass(frozen=True)
class TensorAddr:
    """``[map, {c0, c1}]``: a tensor map and box coordinates (cp.async.bulk.tensor)."""

    base: Reg | Sym
    coords: tuple[Operand, ...]


@dataclass(frozen=True)
class PredPair:
    """``%p1|%p2``: setp's second, complementary destination."""

    first: Reg
    second: Reg


@dataclass(frozen=True)
class Sink:
    """``_``: a destination whose value is discarded."""


Operand = Reg | Imm | FloatLit | Special | Sym | Vec | Addr | TensorAddr | PredPair | Sink


@dataclass(frozen=True)
class Variable:
    """A ``.shared``/``.local``/``.global``/``.const`` variable; ``size`` None for ``name[]``."""

    name: str
    space: str  # "shared" | "local" | "global" | "const"
    align: int
    size: int | None
    init: bytes = b""
    line: int = 0


@dataclass(frozen=True)
class Op:
    """One decoded instruction: ``opcode`` split into ``parts`` at the dots."""

    index: int
    line: int
    opcode: str
    parts: tuple[str, ...]
    guard: Reg | None
    operands: tuple[Operand, ...]
    text: str  # the instruction as written, for messages
    # Why the emulator cannot run this instruction (an operand it cannot read, a call it cannot
    # inline): an 'unsupported' diagnostic at its line when it is reached. Empty when it can.
    problem: str = ""


@dataclass
class Function:
    """One ``.entry`` or ``.func`` body as written: its names not yet renamed for a call site."""

    entry: Entry
    ops: list[Op]
    labels: dict[str, int]
    registers: dict[str, str]
    variables: dict[str, Variable]  # declared in the body: .local depots, .shared ...
    slots: dict[str, Variable]  # `.param` variables declared in the body: arguments and results of its calls


@dataclass
class Program:
    """An entry ready to run: its instructions, label targets, registers and variables."""

    entry: Entry
    ops: list[Op]
    labels: dict[str, int]
    registers: dict[str, str]  # name -> declared type (".b32", ".pred" ...)
    variables: dict[str, Variable]
    params: tuple[Param, ...]
    arch: str
    module: PtxModule = field(repr=False)


_SPECIALS = re.compile(
    r"%(tid|ntid|ctaid|nctaid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid)(\.[xyz])?$"
    r"|%(laneid|warpid|nwarpid|smid|nsmid|gridid|cluster_ctarank|cluster_nctarank|is_explicit_cluster"
    r"|clock|clock64|globaltimer|lanemask_eq|lanemask_lt|lanemask_le|lanemask_gt|lanemask_ge"
    r"|dynamic_smem_size|total_smem_size|envreg\d+)$"
)
_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)U?$")
_FBITS = re.compile(r"0([fFdD])([0-9a-fA-F]+)$")
_FLOAT = re.compile(r"[+-]?[0-9]*\.[0-9]+([eE][+-]?[0-9]+)?$")
_NAME = re.compile(r"[A-Za-z_$%][A-Za-z0-9_$.]*$")
_LABEL = re.compile(r"^\s*([A-Za-z_$][A-Za-z0-9_$]*)\s*:")
_REG_DECL = re.compile(r"\.reg\s*((?:\.v\d\s+)?\.\w+)\s+([^;]+);")
_VAR_DECL = re.compile(
    r"(?P<ext>\.extern\s+)?(?:\.(?:visible|weak|common)\s+)?\.(?P<space>shared|local|global|const)(?:::\w+)?\s+"
    r"(?:\.align\s+(?P<align>\d+)\s+)?(?P<type>\.\w+)\s+(?P<name>[A-Za-z_$][\w$]*)"
    r"(?P<dims>(?:\[\d*\])*)\s*(?:=\s*(?P<init>\{[^;]*\}|[^;]+))?;"
)
_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    neg = t.startswith("-")
    t = t.lstrip("+-")
    if t.lower().startswith("0x"):
        v = int(t, 16)
    elif len(t) > 1 and t.startswith("0"):
        v = int(t, 8)
    else:
        v = int(t)
    return -v if neg else v


def type_bytes(type_: str) -> int:
    """Bytes of a PTX scalar type name (``.b32`` -> 4, ``.pred`` -> 1)."""
    digits = "".join(c for c in type_ if c.isdigit())
    return _TYPE_BYTES.get(digits, 1)


def _split_top(text: str, sep: str = ",") -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return [s.strip() for s in out]


def decode_operand(text: str) -> Operand:
    """One operand string (blanks already removed by the parser) as a typed value."""
    t = text.strip()
    if t == "_":
        return Sink()
    if t.startswith("{") and t.endswith("}"):
        return Vec(tuple(decode_operand(s) for s in _split_top(t[1:-1]) if s))
    if t.startswith("(") and t.endswith(")"):  # a call's return or argument list
        return Vec(tuple(decode_operand(s) for s in _split_top(t[1:-1]) if s))
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1]
        parts = _split_top(inner)
        if len(parts) == 2 and parts[1].startswith("{"):
            base = decode_operand(parts[0])
            coords = decode_operand(parts[1])
            if not isinstance(base, (Reg, Sym)) or not isinstance(coords, Vec):
                raise DecodeError(f"bad tensor map operand {parts[0]!r}")
            return TensorAddr(base, coords.items)
        return _address(inner)
    if "|" in t:
        a, b = t.split("|", 1)
        return PredPair(Reg(a), Reg(b))
    if t.startswith("!"):
        return Reg(t[1:], negate=True)
    if _SPECIALS.match(t):
        return Special(t[1:])
    m = _FBITS.match(t)
    if m:
        return Imm(int(m.group(2), 16), True, 32 if m.group(1) in "fF" else 64)
    if _INT.match(t):
        return Imm(parse_int(t))
    if _FLOAT.match(t):
        return FloatLit(float(t))
    if t.startswith("%"):
        return Reg(t)
    if "+" in t or "-" in t[1:]:
        name, off = _symbol_offset(t)
        return Sym(name, off)
    if _NAME.match(t):
        return Sym(t)
    raise DecodeError(f"cannot read operand {t!r}")


def _symbol_offset(t: str) -> tuple[str, int]:
    m = re.match(r"([^+-]+)((?:[+-]+[0-9xXa-fA-F]+)*)$", t)
    if not m:
        raise DecodeError(f"cannot read operand {t!r}")
    off = 0
    for sign, num in re.findall(r"([+-]+)([0-9xXa-fA-F]+)", m.group(2)):
        off += (-1 if sign.count("-") % 2 else 1) * parse_int(num)
    return m.group(1), off


def _address(inner: str) -> Addr:
    inner = inner.strip()
    if _INT.match(inner):
        return Addr(None, parse_int(inner))
    name, off = _symbol_offset(inner) if ("+" in inner or "-" in inner[1:]) else (inner, 0)
    base: Reg | Sym = Reg(name) if name.startswith("%") else Sym(name)
    return Addr(base, off)


def _float_init(type_: str, values: list[str]) -> bytes:
    fmt = {"f32": "<f", "f64": "<d"}.get(type_[1:])
    out = bytearray()
    size = type_bytes(type_)
    for v in values:
        if fmt and not _FBITS.match(v) and not _INT.match(v):
            out += struct.pack(fmt, float(v))
            continue
        m = _FBITS.match(v)
        n = int(m.group(2), 16) if m else parse_int(v)
        out += (n & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return bytes(out)


def _variables(lines: list[str], first: int, last: int, *, inside: bool) -> dict[str, Variable]:
    """Variable declarations on lines [first, last] (module level: lines outside every entry)."""
    found: dict[str, Variable] = {}
    chunk = "\n".join(lines[first - 1 : last])
    for m in _VAR_DECL.finditer(chunk):
        line = first + chunk.count("\n", 0, m.start())
        if not inside and m.group("space") == "local":
            continue
        elem = type_bytes(m.group("type"))
        dims = re.findall(r"\[(\d*)\]", m.group("dims"))
        if dims and "" in dims:
            size = None
        else:
            size = elem
            for d in dims:
                size *= int(d)
        init = b""
        if m.group("init"):
            raw = m.group("init").strip().strip("{}")
            values = [v.strip() for v in raw.replace("\n", " ").split(",") if v.strip()]
            if all(_INT.match(v) or _FBITS.match(v) or _FLOAT.match(v) for v in values):
                init = _float_init(m.group("type"), values)
        align = int(m.group("align") or elem)
        found[m.group("name")] = Variable(m.group("name"), m.group("space"), align, size, init, line)
    return found


def _declarations(body: str) -> list[tuple[str, str]]:
    """(name, type) of every register ``.reg`` declares in ``body``, ranges expanded, in order."""
    found: list[tuple[str, str]] = []
    for m in _REG_DECL.finditer(body):
        type_ = m.group(1).split()[-1]
        for item in m.group(2).split(","):
            item = item.strip()
            rng = re.match(r"([%\w$]+)<(\d+)>$", item)
            if rng:
                found.extend((f"{rng.group(1)}{i}", type_) for i in range(int(rng.group(2))))
            elif item:
                found.append((item, type_))
    return found


def _registers(body: str) -> dict[str, str]:
    regs: dict[str, str] = {}
    for name, type_ in _declarations(body):
        regs.setdefault(name, type_)
    return regs


def _op(index: int, ins: Instruction) -> Op:
    guard = None
    if ins.predicate:
        neg = ins.predicate.startswith("@!")
        guard = Reg(ins.predicate.lstrip("@!"), negate=neg)
    text = f"{ins.predicate + ' ' if ins.predicate else ''}{ins.opcode} {', '.join(ins.operands)}".strip()
    parts = tuple(ins.opcode.split("."))
    try:
        operands = tuple(decode_operand(o) for o in ins.operands)
    except ValueError as err:  # DecodeError, or a number the PTX grammar allows and Python does not read
        return Op(index, ins.line, ins.opcode, parts, guard, (), text, f"operand form ({err})")
    return Op(index, ins.line, ins.opcode, parts, guard, operands, text)


def _resolve(o: Operand, regs: dict[str, str]) -> Operand:
    """Names declared as registers without a ``%`` (inline asm's ``.reg .pred p;``) become registers."""
    if isinstance(o, Sym) and o.name in regs and o.offset == 0:
        return Reg(o.name)
    if isinstance(o, Vec):
        return Vec(tuple(_resolve(i, regs) for i in o.items))
    if isinstance(o, Addr) and isinstance(o.base, Sym) and o.base.name in regs:
        return Addr(Reg(o.base.name), o.offset + o.base.offset)
    if isinstance(o, TensorAddr):
        base = _resolve(o.base, regs)
        assert isinstance(base, (Reg, Sym))
        return TensorAddr(base, tuple(_resolve(c, regs) for c in o.coords))
    if isinstance(o, PredPair):
        return PredPair(Reg(o.first.name), Reg(o.second.name))
    return o


def _with_registers(op: Op, regs: dict[str, str]) -> Op:
    operands = tuple(_resolve(o, regs) for o in op.operands)
    return Op(op.index, op.line, op.opcode, op.parts, op.guard, operands, op.text, op.problem)


_SLOT_DECL = re.compile(r"\.param\s+(?:\.align\s+(?P<align>\d+)\s+)?(?P<type>\.\w+)\s+(?P<name>[A-Za-z_$][\w$]*)"
                        r"(?:\[(?P<count>\d+)\])?\s*;")


def _slots(body: str) -> dict[str, Variable]:
    """The ``.param`` variables a body declares for its calls; a name declared in several call
    blocks (nvcc's ``param0`` in every ``{ // callseq N``) gets the largest size and alignment."""
    found: dict[str, Variable] = {}
    for m in _SLOT_DECL.finditer(body):
        elem = type_bytes(m.group("type"))
        size = elem * int(m.group("count") or 1)
        align = int(m.group("align") or elem)
        old = found.get(m.group("name"))
        if old is not None:
            size, align = max(size, old.size or 0), max(align, old.align)
        found[m.group("name")] = Variable(m.group("name"), "param", align, size)
    return found


_SCOPE_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|[\n{};:]|[^\n{};:"/]+|.', re.DOTALL)


@dataclass
class _Scope:
    parent: int | None
    registers: dict[str, str]  # declared in this scope: name -> type


class _ScopeReader:
    """The ``{ }`` scopes of a function body, read from its text: each scope's ``.reg``
    declarations, and the scope of every instruction statement, by line (in order within a line).

    nvcc and inline asm open scopes that declare registers of their own, at times with the names
    of the function's (``{ .reg .u32 %r1, ...; madc.hi.cc.u32 %r1, ... }`` in the double-precision
    sin); those are other registers, and writing them must not change the function's."""

    def __init__(self, text: str, line: int) -> None:
        self.text, self.line = text, line
        self.scopes = [_Scope(None, {})]
        self.stack = [0]
        self.starts: dict[int, list[int]] = {}
        self.stmt: list[str] = []
        self.stmt_line = line
        self.depth = 0  # operand braces open in the statement

    def read(self) -> None:
        for m in _SCOPE_TOKEN.finditer(self.text):
            tok = m.group()
            if not self.stack:
                return
            if tok.startswith("/*"):
                self.line += tok.count("\n")
            elif not tok.startswith("//"):
                self.token(tok)

    def token(self, tok: str) -> None:
        if tok == "\n":
            if self.stmt and "".join(self.stmt).lstrip().startswith((".loc", ".file")):
                self.end()
            self.line += 1
            return
        if not self.stmt and (tok in "{}" or tok.isspace()):
            if tok == "{":
                self.scopes.append(_Scope(self.stack[-1], {}))
                self.stack.append(len(self.scopes) - 1)
            elif tok == "}":
                self.stack.pop()
            return
        if not self.stmt:
            self.stmt_line = self.line
        self.stmt.append(tok)
        if tok in ("{", "}"):
            self.depth += 1 if tok == "{" else -1
        elif tok == ";" and self.depth <= 0:
            self.end()
        elif tok == ":" and _LABEL.match("".join(self.stmt)):
            self.stmt, self.depth = [], 0

    def end(self) -> None:
        text = "".join(self.stmt).strip()
        self.stmt, self.depth = [], 0
        scope = self.stack[-1]
        if text.startswith(".reg"):
            self.scopes[scope].registers.update(_registers(text if text.endswith(";") else text + ";"))
        elif not text.startswith("."):
            self.starts.setdefault(self.stmt_line, []).append(scope)

    def renames(self) -> list[dict[str, str]]:
        """Per scope, the registers its instructions name under another name: those declared
        in an inner scope with the name of an outer one (``%r1`` -> ``%r1^3``)."""
        out: list[dict[str, str]] = []
        for k, scope in enumerate(self.scopes):
            inherited = dict(out[scope.parent]) if scope.parent is not None else {}
            for name in scope.registers:
                if scope.parent is not None and self.declared_above(scope.parent, name):
                    inherited[name] = f"{name}^{k}"
                else:
                    inherited.pop(name, None)
            out.append(inherited)
        return out

    def declared_above(self, k: int | None, name: str) -> bool:
        while k is not None:
            if name in self.scopes[k].registers:
                return True
            k = self.scopes[k].parent
        return False


def _scoped(ops: list[Op], registers: dict[str, str], body: str, line: int) -> list[Op]:
    """``ops`` with the registers of inner scopes that shadow outer ones renamed (and declared)."""
    names = [name for name, _ in _declarations(body)]
    if len(set(names)) == len(names):
        return ops  # no name declared twice: no scope shadows another
    reader = _ScopeReader(body, line)
    reader.read()
    renames = reader.renames()
    if not any(renames):
        return ops
    for k, scope in enumerate(reader.scopes):
        for name, new in renames[k].items():
            if name in scope.registers:
                registers[new] = scope.registers[name]
    seen: dict[int, int] = {}
    out = []
    for op in ops:
        j = seen.get(op.line, 0)
        seen[op.line] = j + 1
        scopes = reader.starts.get(op.line, [0])
        table = renames[scopes[min(j, len(scopes) - 1)]]
        out.append(_renamed(op, table) if table else op)
    return out


def map_operand(o: Operand, reg: Callable[[Reg], Reg], sym: Callable[[Sym], Sym] | None = None) -> Operand:
    """``o`` with every register in it (inside vectors, addresses, tensor coordinates and
    predicate pairs too) replaced by ``reg(r)`` and, when ``sym`` is given, every symbol by ``sym(s)``."""
    def base(b: Reg | Sym) -> Reg | Sym:
        return reg(b) if isinstance(b, Reg) else sym(b) if sym is not None else b

    if isinstance(o, (Reg, Sym)):
        return base(o)
    if isinstance(o, Vec):
        return Vec(tuple(map_operand(i, reg, sym) for i in o.items))
    if isinstance(o, Addr):
        return Addr(None if o.base is None else base(o.base), o.offset)
    if isinstance(o, TensorAddr):
        return TensorAddr(base(o.base), tuple(map_operand(c, reg, sym) for c in o.coords))
    if isinstance(o, PredPair):
        return PredPair(reg(o.first), reg(o.second))
    return o


def _renamed(op: Op, table: dict[str, str]) -> Op:
    def reg(r: Reg) -> Reg:
        return Reg(table[r.name], r.negate) if r.name in table else r

    guard = reg(op.guard) if op.guard is not None else None
    operands = tuple(map_operand(o, reg) for o in op.operands)
    return Op(op.index, op.line, op.opcode, op.parts, guard, operands, op.text, op.problem)


def module_lines(module: PtxModule) -> list[str]:
    return module.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def read_function(module: PtxModule, ent: Entry, lines: list[str]) -> Function:
    """The body of one ``.entry`` or ``.func``: instructions, labels, registers, declarations."""
    ops = [_op(i, ins) for i, ins in enumerate(ent.instructions)]
    op_lines = [op.line for op in ops]
    labels: dict[str, int] = {}
    for lineno in range(ent.line, ent.end_line + 1):
        m = _LABEL.match(lines[lineno - 1])
        if m and not lines[lineno - 1].lstrip().startswith("//"):
            labels[m.group(1)] = bisect.bisect_left(op_lines, lineno)
    body = "\n".join(lines[ent.line - 1 : ent.end_line])
    registers = _registers(body)
    ops = [_with_registers(op, registers) for op in ops]
    brace = body.find("{")  # past the header, whose parameters are no call's
    ops = _scoped(ops, registers, body[brace + 1 :], ent.line + body.count("\n", 0, brace))
    variables = _variables(lines, ent.line, ent.end_line, inside=True)
    slots = _slots(body[brace:])
    return Function(ent, ops, labels, registers, variables, slots)


def module_variables(module: PtxModule, lines: list[str]) -> dict[str, Variable]:
    """The variables declared outside every entry and function body."""
    variables: dict[str, Variable] = {}
    spans = sorted((e.line, e.end_line) for e in module.entries)
    start = 1
    for lo, hi in spans:
        if lo > start:
            variables.update(_variables(lines, start, lo - 1, inside=False))
        start = hi + 1
    variables.update(_variables(lines, start, len(lines), inside=False))
    return variables
