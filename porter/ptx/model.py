"""The PTX module model: frozen dataclasses, produced by :func:`porter.ptx.parse_ptx`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Param:
    """One kernel parameter, e.g. ``.param .u64 .ptr .global .align 16 p`` or ``.param .align 64 .b8 t[128]``."""

    name: str
    type: str  # ".u64", ".b8", ".f32" ...
    line: int
    is_ptr: bool = False  # carries the .ptr attribute
    state_space: str | None = None  # ".global" / ".shared" ... after .ptr
    align: int | None = None
    array_size: int | None = None  # t[128] -> 128

    @property
    def size_bytes(self) -> int:
        width = int("".join(c for c in self.type if c.isdigit()) or "0") // 8
        return width * (self.array_size or 1)


@dataclass(frozen=True)
class Instruction:
    """One instruction: the full dotted opcode (``wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16``)."""

    line: int  # 1-based line in the module text
    opcode: str
    predicate: str | None = None  # "@%p1" / "@!%p1"
    # Inside an inline-asm `{ }` scope (nvcc/Triton emit these; nvcc's `{ // callseq` call blocks
    # excluded) or between the `// begin inline asm` / `// end inline asm` markers.
    in_inline_asm: bool = False
    # The operands as written, split at the top-level commas, each without blanks:
    # ``ld.global.v4.b32 { %r1, %r2 }, [ %rd8 + 0 ]`` -> ("{%r1,%r2}", "[%rd8+0]"). Not compared:
    # an instruction is its line, opcode and guard.
    operands: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def base(self) -> str:
        """The mnemonic without modifiers: ``wgmma`` for ``wgmma.fence.sync.aligned``."""
        return self.opcode.split(".", 1)[0]


@dataclass(frozen=True)
class Directive:
    """A performance directive on an entry: ``.maxntid 128, 1, 1`` -> Directive("maxntid", (128, 1, 1), line)."""

    name: str
    values: tuple[int, ...]
    line: int


@dataclass(frozen=True)
class Entry:
    """A ``.entry`` (kernel) or ``.func`` (device function) with its parameters and body."""

    name: str
    kind: str  # "entry" or "func"
    line: int  # line of the .entry/.func keyword
    end_line: int  # line of the closing brace
    params: tuple[Param, ...] = ()
    directives: tuple[Directive, ...] = ()
    instructions: tuple[Instruction, ...] = ()
    visible: bool = True
    returns: tuple[Param, ...] = ()  # a .func's return parameters: `.func (.param .b32 r) f(...)`

    def directive(self, name: str) -> Directive | None:
        return next((d for d in self.directives if d.name == name), None)


@dataclass(frozen=True)
class PtxModule:
    version: str  # "8.0"
    target: tuple[str, ...]  # (".target sm_90a" options) -> ("sm_90a",), maybe plus "texmode_independent"
    address_size: int
    entries: tuple[Entry, ...]  # kernels and device functions, in file order
    version_line: int
    target_line: int
    text: str = field(repr=False, default="")

    @property
    def arch(self) -> str:
        """The SM target (first ``sm_*`` option of ``.target``)."""
        return next((t for t in self.target if t.startswith("sm_")), self.target[0] if self.target else "")

    @property
    def kernels(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.kind == "entry")

    def entry(self, name: str) -> Entry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every entry and function, in file order."""
        for e in self.entries:
            yield from e.instructions
