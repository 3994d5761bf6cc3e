"""A tolerant, single-pass PTX reader that keeps what porting needs.

It is not a validator (ptxas is): it reads the module header, every ``.entry``/``.func``
with its parameters and performance directives, and the opcode, predicate and line of every
instruction. Operands are not interpreted. Whatever it cannot make sense of raises
:class:`~porter.errors.InputError` naming the file and line; no other exception escapes.

The text is cut into tokens by one regular expression (strings and comments are tokens too,
so ``//`` inside a string is not a comment), and the tokens are grouped into statements.
A statement ends at ``;``, except the directives PTX ends at the end of the line
(``.version``, ``.target``, ``.address_size``, ``.loc``, ``.file``). A ``{`` that follows part
of a statement is an operand brace (``{%r1, %r2}``, ``= {1, 2}``); one that starts a statement
opens a scope; one after an ``.entry``/``.func``/``.section`` header opens its body.
Lines are 1-based and counted at ``\n``, ``\r\n`` and a lone ``\r``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from porter.errors import InputError
from porter.ptx.model import Directive, Entry, Instruction, Param, PtxModule

_TOKEN_RE = re.compile(
    r"""
      (?P<nl>\n)
    | (?P<ws>[ \t\r\f\v]+)
    | (?P<word>[A-Za-z0-9_$%.](?:[A-Za-z0-9_$%.]|::)*)
    | (?P<str>"(?:[^"\\\n]|\\[^\n])*")
    | (?P<lc>//[^\n]*)
    | (?P<bc>/\*.*?\*/)
    | (?P<open_bc>/\*)
    | (?P<open_str>")
    | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)

# Directives that PTX terminates with the end of the line instead of a ';'.
_LINE_DIRECTIVES = frozenset({".version", ".target", ".address_size", ".loc", ".file"})
_LINKAGE = frozenset({".visible", ".weak", ".extern", ".common"})
_STATE_SPACES = frozenset({".global", ".shared", ".const", ".local"})
_IDENT_RE = re.compile(r"[A-Za-z_$%][A-Za-z0-9_$]*")
_OPCODE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.:]*")
_INT_RE = re.compile(r"[0-9]{1,18}")
_VERSION_RE = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}")
_SM_RE = re.compile(r"sm_[0-9]+[a-z]?")
_MARKER_RE = re.compile(r"//\s*(begin inline asm|end inline asm|callseq\b)")

_Token = tuple[int, str]  # (1-based line, text)


def parse_ptx(text: str, *, filename: str = "<ptx>") -> PtxModule:
    """Parse PTX source text into a :class:`PtxModule`; raise InputError on anything malformed."""
    if not isinstance(text, str):
        raise InputError(f"{filename}: expected PTX text, got {type(text).__name__}")
    if "\x00" in text:
        raise InputError(f"{filename}: not PTX text (contains NUL bytes; binary file?)")
    if not text.strip():
        raise InputError(f"{filename}: empty file, no PTX")
    return _Parser(text, filename).run()


@dataclass
class _Scope:
    line: int
    inline_asm: bool  # False for the body itself and for nvcc's `{ // callseq N` call blocks


@dataclass
class _Body:
    """The entry or function whose body is being read."""

    header: _Header
    scopes: list[_Scope]
    instructions: list[Instruction] = field(default_factory=list)
    asm_marker_open: bool = False  # between `// begin inline asm` and `// end inline asm`

    @property
    def in_inline_asm(self) -> bool:
        return self.asm_marker_open or any(s.inline_asm for s in self.scopes[1:])


@dataclass
class _Header:
    name: str
    kind: str
    line: int
    visible: bool
    params: tuple[Param, ...]
    returns: tuple[Param, ...]
    directives: tuple[Directive, ...]


class _Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.stmt: list[_Token] = []
        self.operand_depth = 0
        self.operand_line = 0  # line of the outermost open operand brace
        self.body: _Body | None = None
        self.section: list[int] = []  # open-brace lines inside a skipped `.section { ... }`
        self.entries: list[Entry] = []
        self.version: _Token | None = None
        self.target: tuple[int, tuple[str, ...]] | None = None
        self.address_size = 32  # the PTX default when `.address_size` is absent

    def error(self, line: int, message: str) -> InputError:
        return InputError(f"{self.filename}:{line}: {message}")

    def run(self) -> PtxModule:
        normalized = self.text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        line = 1
        for m in _TOKEN_RE.finditer(normalized):
            kind = m.lastgroup
            if kind == "nl":
                if self.stmt and self.stmt[0][1] in _LINE_DIRECTIVES:
                    self.end_statement()
                line += 1
            elif kind == "lc":
                self.comment(m.group(), line)
            elif kind == "bc":
                line += m.group().count("\n")
            elif kind == "open_bc":
                raise self.error(line, "unterminated /* comment")
            elif kind == "open_str":
                raise self.error(line, "unterminated string")
            elif kind != "ws":
                self.token(line, m.group())
        self.finish(line)
        return self.module()

    # -- tokens -> statements -------------------------------------------------------------

    def comment(self, text: str, line: int) -> None:
        """nvcc and Triton mark inline asm and call blocks with comments; nothing else is kept."""
        body = self.body
        m = _MARKER_RE.match(text)
        if body is None or m is None:
            return
        marker = m.group(1)
        if marker == "begin inline asm":
            body.asm_marker_open = True
        elif marker == "end inline asm":
            body.asm_marker_open = False
        elif body.scopes[-1].line == line and len(body.scopes) > 1 and not self.stmt:
            body.scopes[-1].inline_asm = False

    def token(self, line: int, tok: str) -> None:
        if self.section:
            if tok == "{":
                self.section.append(line)
            elif tok == "}":
                self.section.pop()
            return
        if self.operand_depth:
            if tok == ";":
                raise self.error(self.operand_line, "unbalanced '{'")
            self.operand_depth += (tok == "{") - (tok == "}")
            self.stmt.append((line, tok))
        elif tok == ";":
            if self.stmt:
                self.end_statement()
        elif tok == "{":
            self.open_brace(line)
        elif tok == "}":
            self.close_brace(line)
        elif tok == ":" and len(self.stmt) == 1 and _IDENT_RE.fullmatch(self.stmt[0][1]):
            self.stmt.clear()  # a label: `$L__BB0_1:`
        else:
            if not self.stmt and self.body is None and not tok.startswith("."):
                raise self.error(line, f"expected a PTX directive, got {_show(tok)}")
            self.stmt.append((line, tok))

    def open_brace(self, line: int) -> None:
        if self.stmt and not (self.body is None and _header_kind(self.stmt)):
            self.operand_depth, self.operand_line = 1, line
            self.stmt.append((line, "{"))
        elif self.body is not None:
            self.body.scopes.append(_Scope(line, inline_asm=True))
        elif not self.stmt:
            raise self.error(line, "unexpected '{' outside a function body")
        elif _header_kind(self.stmt) == ".section":
            self.stmt.clear()
            self.section.append(line)
        else:
            header = _HeaderReader(self.stmt, self.filename).read()
            self.stmt.clear()
            self.body = _Body(header, [_Scope(line, inline_asm=False)])

    def close_brace(self, line: int) -> None:
        if self.stmt:
            raise self.error(line, f"expected ';' before '}}' (statement at line {self.stmt[0][0]})")
        body = self.body
        if body is None:
            raise self.error(line, "unbalanced '}'")
        body.scopes.pop()
        if not body.scopes:
            h = body.header
            self.entries.append(
                Entry(
                    name=h.name,
                    kind=h.kind,
                    line=h.line,
                    end_line=line,
                    params=h.params,
                    directives=h.directives,
                    instructions=tuple(body.instructions),
                    visible=h.visible,
                    returns=h.returns,
                )
            )
            self.body = None

    def finish(self, line: int) -> None:
        if self.operand_depth:
            raise self.error(self.operand_line, "unbalanced '{'")
        if self.section:
            raise self.error(self.section[0], "unbalanced '{' (unterminated .section)")
        if self.stmt:
            if self.stmt[0][1] not in _LINE_DIRECTIVES:
                raise self.error(self.stmt[0][0], f"expected ';' after {_show(self.stmt[-1][1])}")
            self.end_statement()
        if self.body is not None:
            raise self.error(self.body.scopes[-1].line, "unbalanced '{' (missing '}' before end of file)")

    # -- statements ------------------------------------------------------------------------

    def end_statement(self) -> None:
        stmt, self.stmt = self.stmt, []
        if self.body is not None:
            self.body_statement(self.body, stmt)
        else:
            self.module_statement(stmt)

    def module_statement(self, stmt: list[_Token]) -> None:
        line, first = stmt[0]
        args = [tok for _, tok in stmt[1:]]
        if first == ".version":
            if self.version is not None:
                raise self.error(line, f"duplicate .version (first at line {self.version[0]})")
            if len(args) != 1 or not _VERSION_RE.fullmatch(args[0]):
                raise self.error(line, "bad .version (expected e.g. '.version 8.0')")
            self.version = (line, args[0])
        elif first == ".target":
            if self.target is not None:
                raise self.error(line, f"duplicate .target (first at line {self.target[0]})")
            options = tuple(args[0::2])
            separators_ok = all(sep == "," for sep in args[1::2]) and len(args) % 2 == 1
            if not args or not separators_ok or not all(_IDENT_RE.fullmatch(o) for o in options):
                raise self.error(line, "bad .target (expected e.g. '.target sm_90a')")
            if not any(_SM_RE.fullmatch(o) for o in options):
                raise self.error(line, "bad .target (no sm_XX architecture)")
            self.target = (line, options)
        elif first == ".address_size":
            if len(args) != 1 or args[0] not in ("32", "64"):
                raise self.error(line, "bad .address_size (expected 32 or 64)")
            self.address_size = int(args[0])
        # Anything else is a declaration (globals, extern functions, prototypes, .file): accepted.

    def body_statement(self, body: _Body, stmt: list[_Token]) -> None:
        line, first = stmt[0]
        if first.startswith("."):
            return  # .reg/.shared/.local/.param declarations, .loc, .pragma
        predicate = None
        rest = stmt
        if first == "@":  # guard: `@%p1`, `@!%p1`
            at = 2 if len(stmt) > 1 and stmt[1][1] == "!" else 1
            reg = stmt[at][1] if at < len(stmt) else ""
            if not _IDENT_RE.fullmatch(reg):
                raise self.error(line, f"bad predicate guard before {_show(reg or ';')}")
            predicate = "@!" + reg if at == 2 else "@" + reg
            rest = stmt[at + 1 :]
        if not rest or not _OPCODE_RE.fullmatch(rest[0][1]):
            got = rest[0][1] if rest else ";"
            raise self.error(rest[0][0] if rest else line, f"expected an instruction, got {_show(got)}")
        body.instructions.append(
            Instruction(
                line=rest[0][0], opcode=rest[0][1], predicate=predicate, in_inline_asm=body.in_inline_asm,
                operands=_operands(rest[1:]),
            )
        )

    def module(self) -> PtxModule:
        if self.version is None:
            raise InputError(f"{self.filename}: no .version directive (is this PTX?)")
        if self.target is None:
            raise InputError(f"{self.filename}: no .target directive")
        return PtxModule(
            version=self.version[1],
            target=self.target[1],
            address_size=self.address_size,
            entries=tuple(self.entries),
            version_line=self.version[0],
            target_line=self.target[0],
            text=self.text,
        )


def _operands(tokens: list[_Token]) -> tuple[str, ...]:
    """An instruction's operand tokens, joined and split at the commas outside braces and brackets."""
    operands: list[str] = []
    current: list[str] = []
    depth = 0
    for _, tok in tokens:
        if tok == "," and depth == 0:
            operands.append("".join(current))
            current = []
            continue
        depth += (tok in "{[(") - (tok in "}])") if len(tok) == 1 else 0
        current.append(tok)
    if current:
        operands.append("".join(current))
    return tuple(operands)


def _header_kind(stmt: list[_Token]) -> str | None:
    """``.entry``/``.func``/``.section`` when the statement is such a header, else None."""
    for _, tok in stmt:
        if tok in (".entry", ".func", ".section"):
            return tok
        if tok not in _LINKAGE:
            return None
    return None


def _show(tok: str) -> str:
    return repr(tok if len(tok) <= 40 else tok[:40] + "...")


class _HeaderReader:
    """Reads ``[linkage] .entry|.func [(returns)] name [(params)] [directives]`` from tokens."""

    def __init__(self, tokens: list[_Token], filename: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.filename = filename

    def error(self, message: str) -> InputError:
        line = self.tokens[min(self.pos, len(self.tokens) - 1)][0]
        return InputError(f"{self.filename}:{line}: {message}")

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def next(self, what: str) -> _Token:
        if self.pos >= len(self.tokens):
            raise self.error(f"expected {what} before '{{'")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def number(self, what: str) -> int:
        _, tok = self.next(what)
        if not _INT_RE.fullmatch(tok):
            self.pos -= 1
            raise self.error(f"expected {what}, got {_show(tok)}")
        return int(tok)

    def read(self) -> _Header:
        linkage: set[str] = set()
        while self.peek() in _LINKAGE:
            linkage.add(self.next("linkage")[1])
        line, kind = self.next(".entry or .func")
        returns: tuple[Param, ...] = ()
        if kind == ".func" and self.peek() == "(":
            returns = self.param_list()
        _, name = self.next("a function name")
        if not _IDENT_RE.fullmatch(name):
            self.pos -= 1
            raise self.error(f"bad {kind} name {_show(name)}")
        params = self.param_list() if self.peek() == "(" else ()
        return _Header(
            name=name,
            kind=kind[1:],
            line=line,
            visible=bool(linkage & {".visible", ".weak"}),
            params=params,
            returns=returns,
            directives=self.directives(),
        )

    def param_list(self) -> tuple[Param, ...]:
        self.next("'('")
        params: list[Param] = []
        if self.peek() == ")":
            self.pos += 1
            return ()
        while True:
            params.append(self.param())
            _, tok = self.next("')'")
            if tok == ")":
                return tuple(params)
            if tok != ",":
                self.pos -= 1
                raise self.error(f"expected ',' or ')' in parameter list, got {_show(tok)}")

    def param(self) -> Param:
        line, kw = self.next(".param")
        if kw not in (".param", ".reg"):
            self.pos -= 1
            raise self.error(f"expected .param, got {_show(kw)}")
        type_: str | None = None
        is_ptr = False
        space: str | None = None
        align: int | None = None
        while (tok := self.peek()) is not None and tok.startswith("."):
            self.pos += 1
            if tok == ".align":
                align = self.number("an alignment after .align")
            elif tok == ".ptr":
                is_ptr = True
            elif tok.split("::", 1)[0] in _STATE_SPACES:
                space = tok
            elif type_ is None:
                type_ = tok
            else:
                self.pos -= 1
                raise self.error(f"parameter has two types: {type_} and {tok}")
        _, name = self.next("a parameter name")
        if type_ is None or not _IDENT_RE.fullmatch(name):
            self.pos -= 1
            raise self.error(f"bad parameter {_show(name)} (expected '.param .TYPE name')")
        array_size = None
        if self.peek() == "[":
            self.pos += 1
            array_size = self.number("an array size")
            if self.next("']'")[1] != "]":
                self.pos -= 1
                raise self.error(f"expected ']' after the array size of {name}")
        return Param(name, type_, line, is_ptr=is_ptr, state_space=space, align=align, array_size=array_size)

    def directives(self) -> tuple[Directive, ...]:
        """Performance directives between the parameter list and the body: ``.maxntid 256, 1, 1``."""
        found: list[Directive] = []
        while self.pos < len(self.tokens):
            line, tok = self.next("a directive")
            if not (tok.startswith(".") and _IDENT_RE.fullmatch(tok[1:])):
                self.pos -= 1
                raise self.error(f"unexpected {_show(tok)} before the function body")
            values: list[int] = []
            if (nxt := self.peek()) is not None and _INT_RE.fullmatch(nxt):
                values.append(self.number("a value"))
                while self.peek() == ",":
                    self.pos += 1
                    values.append(self.number(f"a value for {tok}"))
            found.append(Directive(tok[1:], tuple(values), line))
        return tuple(found)


def read_ptx(path: Path) -> PtxModule:
    """Read and parse a PTX file, with one-line errors for missing or unreadable files."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a PTX file")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from err
    return parse_ptx(text, filename=str(path))
