"""Mechanical retargeting: rewrite the ``.target`` and ``.version`` lines and nothing else.

:func:`fit_to_ptxas` is the same rewrite for the ptxas in use: a ``.version`` it does not accept,
lowered where nothing in the module needs it.

The module is parsed first, so the two lines are found by the parser (a ``.target`` inside a
comment is never touched) and a malformed module is refused with its line number. Every other
byte, line endings included, is returned unchanged.
"""

from __future__ import annotations

import re

from porter.errors import EnvironmentProblem, InputError
from porter.ptx.arch import negotiate_version
from porter.ptx.isa import IsaSupport
from porter.ptx.model import PtxModule
from porter.ptx.parser import parse_ptx

_VERSION_RE = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})")
_SM_OPTION_RE = re.compile(r"(?<![\w$%.])sm_[0-9]+[a-z]?(?![\w$.])")
# The parser counts lines with exactly these breaks, so line N here is line N there.
_LINE_BREAK_RE = re.compile(r"(\r\n|\r|\n)")


def version_tuple(version: str) -> tuple[int, int]:
    """``"8.0" -> (8, 0)``, for comparing PTX ISA versions (``"8.10" > "8.9"``)."""
    m = _VERSION_RE.fullmatch(version.strip()) if isinstance(version, str) else None
    if m is None:
        raise InputError(f"bad PTX version {version!r} (expected e.g. '8.0')")
    return int(m.group(1)), int(m.group(2))


def retarget(
    text: str,
    target: str,
    *,
    version: str | None = None,
    min_version: str | None = None,
    filename: str = "<ptx>",
) -> str:
    """Point a PTX module at ``target`` (``sm_100a``) and, if asked, another ``.version``.

    The ``sm_`` option of ``.target`` is replaced; other options (``texmode_independent``,
    ``debug``) stay. ``version`` sets ``.version`` exactly (it may lower it); ``min_version``
    only ever raises it. Asking for a ``version`` below ``min_version`` is an error.
    """
    if not isinstance(target, str) or not _SM_OPTION_RE.fullmatch(target):
        raise InputError(f"bad target {target!r} (expected e.g. 'sm_90a')")
    wanted = version_tuple(version) if version is not None else None
    floor = version_tuple(min_version) if min_version is not None else None
    if wanted is not None and floor is not None and wanted < floor:
        raise InputError(f"version {version} is below the minimum {min_version}")
    module = parse_ptx(text, filename=filename)
    current = version_tuple(module.version)
    new = wanted if wanted is not None else max(current, floor or current)

    # parts alternates line text and its line break: [line1, "\n", line2, "\r\n", ...]
    parts = _LINE_BREAK_RE.split(text)
    if new != current:
        i = 2 * (module.version_line - 1)
        parts[i] = _replace_after(parts[i], ".version", _VERSION_RE, f"{new[0]}.{new[1]}", filename)
    i = 2 * (module.target_line - 1)
    parts[i] = _replace_after(parts[i], ".target", _SM_OPTION_RE, target, filename)
    return "".join(parts)


def _replace_after(line: str, directive: str, pattern: re.Pattern[str], new: str, filename: str) -> str:
    """Replace the first ``pattern`` match after ``directive`` in ``line``, keeping all else."""
    start = line.find(directive)
    m = pattern.search(line, start + len(directive)) if start >= 0 else None
    if m is None:  # only when a /* */ comment splits the directive over two lines
        raise InputError(f"{filename}: cannot rewrite {directive} in {line.strip()!r}")
    return line[: m.start()] + new + line[m.end() :]


def fit_to_ptxas(module: PtxModule, isa: IsaSupport | None, *, filename: str = "<ptx>") -> tuple[str, str]:
    """The module's text as the ptxas of ``isa`` takes it, and a note when that changed it.

    For a kernel porter runs but does not judge (a port's source, a reference): a ``.version``
    newer than ptxas accepts is lowered to the newest it does when nothing in the module needs more
    (:func:`porter.ptx.arch.negotiate_version`); when something does, EnvironmentProblem names it,
    its line, the PTX ISA it needs and the CUDA release that brings it. Anything else is unchanged.
    """
    if isa is None or isa.accepts(module.version):
        return module.text, ""
    choice = negotiate_version(module, None, isa)
    if choice.problem:
        raise EnvironmentProblem(f"{filename}: {choice.problem}")
    return retarget(module.text, module.arch, version=choice.version, filename=filename), choice.note
