"""Errors about a file, said without the file's content (for ``porter mcp``).

porter's parsers quote what they could not read (``expected a PTX directive, got 'sk-...'``). In
the owner's terminal that is right: the owner reads their own file. Over MCP it is not: a caller
could name a file that holds a key (an ``.env`` in the repository) as a kernel or a spec and read
it back a token at a time in the errors. So over MCP an error from reading a file keeps the file,
the line, and the kind of problem, and nothing else: the kind is the first of the parser's own
content-free phrases (:class:`FileKind`) the message starts with, given back from this module's
copy of it; whatever followed (a quoted token, a value, a name from the file) is dropped. The
CLI keeps its full messages: there the reader is the file's owner.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from porter.errors import PorterError

_LINE = re.compile(r":(\d+)(?=: )")  # "FILE:12: problem"
_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")  # tomllib's location, digits only
_OS_REASON = r"[A-Za-z ]+"  # an OS error's strerror ("Permission denied"), never the file's bytes
_NOT_QUOTED = " (porter mcp does not quote files; porter's CLI in a terminal says more)"


@dataclass(frozen=True)
class FileKind:
    """A kind of file porter parses: what to call one it cannot read, and the problems its parser
    names in words of its own: ``phrases`` as written, ``patterns`` (regular expressions whose
    only variable parts are digits or an OS error's words), each matched at the problem's start."""

    unreadable: str  # "not PTX porter can parse"
    phrases: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    def problems(self) -> Iterator[str]:
        yield from (re.escape(p) for p in self.phrases)
        yield from self.patterns


PTX = FileKind("not PTX porter can parse", phrases=(
    "no such file", "is a folder, not a PTX file", "empty file, no PTX",
    "not PTX text (contains NUL bytes; binary file?)", "no .version directive (is this PTX?)",
    "no .target directive", "unterminated /* comment", "unterminated string", "unbalanced '{'",
    "unbalanced '}'", "unexpected '{' outside a function body", "expected a PTX directive",
    "expected an instruction", "expected ';'", "duplicate .version", "duplicate .target", "bad .version",
    "bad .target", "bad .address_size", "bad predicate guard", "bad parameter", "bad .entry name",
    "bad .func name", "expected .param", "expected ',' or ')' in parameter list", "parameter has two types",
), patterns=(rf"cannot read: {_OS_REASON}",))

SPEC = FileKind("not a porter spec porter can load", phrases=(
    "no such file", "spec file not found", "not UTF-8 text", "TOML syntax error",
    "no spec (porter.toml beside the kernel)",
    "no spec (porter.toml in its folder or any folder above it in the repository)",
), patterns=(rf"cannot read the spec \({_OS_REASON}\)", r"\d+ things? left to fill in \(its todo list\)"))

GOLDEN = FileKind("not golden outputs porter can read", phrases=(
    "not a golden folder (no manifest.json; make one with `porter record`)", "not valid JSON",
    "holds no cases", "a case needs sizes, seed and file", "golden outputs missing",
))

RUN_RECORD = FileKind("not a run record porter can read", phrases=(
    "unreadable run record (not a JSON object)", "unreadable run record",
))

NCU_CSV = FileKind("not an ncu export porter can read", phrases=(
    "not an `ncu --csv --page details` export (no Metric Name/Value columns)",
), patterns=(rf"cannot read: {_OS_REASON}",))


def describe(message: str, labels: tuple[str, ...], kind: FileKind) -> str:
    """``message`` (an error from reading a file named by one of ``labels``) without the file's
    content: ``LABEL[:LINE]: PROBLEM``, PROBLEM one of ``kind``'s phrases or its ``unreadable``."""
    label = next((lb for lb in sorted(labels, key=len, reverse=True) if message.startswith(f"{lb}:")), None)
    if label is None:
        return f"{labels[0]}: {kind.unreadable}{_NOT_QUOTED}"
    rest = message[len(label):]
    line = _LINE.match(rest)
    problem = rest[line.end() if line else 0:].removeprefix(": ")
    where = f"{label}:{line.group(1)}" if line else label
    for problem_re in kind.problems():
        if (said := re.match(problem_re, problem)) is not None:
            at = _TOML_AT.search(problem)
            return f"{where}: {said.group(0)}" + (f" at line {at.group(1)}, column {at.group(2)}" if at else "")
    return f"{where}: {kind.unreadable}{_NOT_QUOTED}"


@contextmanager
def reading(kind: FileKind, *paths: Path | str) -> Iterator[None]:
    """Around code that reads ``paths``: porter's errors come out content-free (same exit code).
    Each path is a label twice over, whole and by name: porter's messages use either."""
    labels = tuple(dict.fromkeys(label for p in paths for label in (str(p), Path(p).name) if label))
    try:
        yield
    except PorterError as err:
        said = PorterError(describe(str(err), labels, kind))
        said.exit_code = err.exit_code
        raise said from None
