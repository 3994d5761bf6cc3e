"""Turn a model's reply into the next candidate kernel: a whole file, or SEARCH/REPLACE edits.

A reply either carries the whole kernel in a fenced block, or edit blocks of the form::

    <<<<<<< SEARCH
    (lines copied exactly from the current kernel)
    =======
    (the lines that take their place)
    >>>>>>> REPLACE

A unified diff (``@@`` hunks, which models send unasked) is read as SEARCH/REPLACE blocks, one a
hunk, placed by its lines and never by its line numbers. When edits and a fenced kernel both
appear, the edits win: a model that sends edits and then quotes a snippet in a fence means the
edits. A reply with two different whole kernels (each with ``.version`` and ``.entry``) is refused:
which one is the new kernel is a guess porter does not make. Edits are all-or-nothing: every block must match exactly one place, or nothing is
applied and the error (written for the model) says, for each failing block, what went wrong and what
the kernel really holds there. A block that matches nowhere is shown the most similar lines of the
kernel with their numbers, so the model can copy them rather than guess again.

Matching is exact first, then whitespace-tolerant: lines are compared with leading and trailing
whitespace removed and inner runs of spaces and tabs collapsed (nvcc separates opcode and operands
with a tab that models often retype as spaces), and blank lines at the ends of a SEARCH section are
ignored. Nothing fuzzier is tried: an edit applied to a place the model did not mean is worse than
a rejected one. Line endings are normalised to ``\\n``.

Cost: each block scans the kernel's lines once or twice; only a failing block pays for the
nearest-lines search: one cheap similarity pass over the lines, then difflib on at most
:data:`_MAX_WINDOWS` candidate windows, :data:`_MAX_COMPARED_LINES` lines each.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

# The last three are the screen's (porter.agent.screen): a readable kernel that is not this port's.
ErrorKind = Literal["no-code", "truncated", "no-match", "ambiguous", "malformed", "header", "entry", "unreadable"]
EditMode = Literal["whole", "search-replace", "either"]

_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,})\s*([^`\s]*)[^`]*$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,})\s*$")
_PTX_MARK = re.compile(r"^\s*(?:\.\w+\s+)*\.(?:version|entry)\b", re.MULTILINE)
_ENTRY_MARK = re.compile(r"^\s*(?:\.\w+\s+)*\.entry\b", re.MULTILINE)
_VERSION_MARK = re.compile(r"^\s*\.version\b", re.MULTILINE)
_HUNK = re.compile(r"^@@ .*@@")

_MAX_WINDOWS = 40  # candidate windows scored with difflib when a SEARCH matches nowhere
# Lines compared per candidate window. Comparing line by line (not the window as one string) keeps
# difflib linear in the window: PTX is so repetitive that whole-text matching goes quadratic.
_MAX_COMPARED_LINES = 12
_MAX_SHOWN_LINES = 30  # of the nearest window, in the error
_MAX_LISTED = 8  # match positions listed for an ambiguous block

_EXAMPLE = """\
<<<<<<< SEARCH
	mov.u32 	%r4, %tid.x;
	shl.b32 	%r5, %r4, 2;
=======
	mov.u32 	%r4, %tid.x;
	shl.b32 	%r5, %r4, 3;
>>>>>>> REPLACE"""

_WHOLE_HELP = (
    "Send the complete new kernel in one ```ptx block: every line from `.version` to the last closing "
    "brace. Do not abbreviate (no `// ... unchanged ...`): the block replaces the file as it is."
)
_EDITS_HELP = (
    "Send SEARCH/REPLACE blocks, each like this:\n\n"
    f"{_EXAMPLE}\n\n"
    "- SEARCH holds whole lines copied exactly from the current kernel, in order, and enough of them "
    "to match exactly one place. REPLACE holds the lines that take their place (empty to delete them).\n"
    "- To insert lines, SEARCH for the line they follow and repeat it at the top of REPLACE.\n"
    "- Blocks apply in order, each to the result of the ones before it. If any block fails to match, "
    "none is applied.\n"
    "- Keep each block small: the lines that change plus a line or two that make the place unique."
)


def format_instructions(mode: EditMode) -> str:
    """How the model must write its reply, for the prompt and for format errors: one format's
    instructions alone (``whole``, ``search-replace``), or the choice of both (``either``)."""
    if mode != "either":
        return FORMATS[mode].instructions
    return (
        "Either:\n\n1. "
        + WHOLE.help
        + "\n\n2. Or, for changes to a few places, "
        + SEARCH_REPLACE.help[0].lower()
        + SEARCH_REPLACE.help[1:]
        + "\n\nUse one of the two forms and put no other code in the reply."
    )


@dataclass(frozen=True)
class EditOutcome:
    """What a reply did to the kernel.

    ``text`` is the new kernel when ``ok``, else the current one unchanged (nothing was applied).
    ``kind`` is None when the reply held neither a kernel nor edits. ``error`` is written for the
    model, to be sent back to it (see :func:`porter.agent.feedback.format_error_feedback`).
    """

    ok: bool
    text: str
    kind: Literal["whole", "edits"] | None
    applied: int = 0
    error: str = ""
    error_kind: ErrorKind | None = None


@dataclass(frozen=True)
class _Block:
    search: tuple[str, ...]
    replace: tuple[str, ...]


@dataclass(frozen=True)
class _Fence:
    info: str
    text: str
    closed: bool


@dataclass(frozen=True)
class EditFormat:
    """One way a model may write its reply: what it is told (``help``, and ``instructions`` when it
    is the only form asked for), how porter recognises a reply in it, and how it is applied."""

    name: str  # "whole" | "search-replace": the agent's edit_format
    kind: Literal["whole", "edits"]  # what EditOutcome.kind calls a reply in this form
    help: str
    instructions: str
    recognises: Callable[[Sequence[str]], bool]  # the reply's lines
    apply: Callable[[str, Sequence[str]], EditOutcome]  # (current kernel, the reply's lines)


def apply_reply(current: str, reply: str, *, truncated: bool = False) -> EditOutcome:
    """Apply a model's reply to ``current``; ``truncated`` is True when the API stopped it at the token limit.
    The first format (in :data:`RECOGNITION_ORDER`) that recognises the reply applies it."""
    current = _lf(current)
    lines = _lf(reply).split("\n")
    form = next(f for f in RECOGNITION_ORDER if f.recognises(lines))
    if truncated:
        return _fail(
            current,
            form.kind,
            "truncated",
            "Your reply was cut off at the output token limit, so it cannot be used. Send a shorter reply: "
            "SEARCH/REPLACE blocks for just the lines that change.",
        )
    return form.apply(current, lines)


# --- whole files ------------------------------------------------------------------------------


def _whole(current: str, reply_lines: Sequence[str]) -> EditOutcome:
    reply = "\n".join(reply_lines)
    fences = _fences(reply_lines)
    candidates = [f for f in fences if f.info.lower() == "ptx" or _PTX_MARK.search(f.text)]
    if not candidates:
        if _ENTRY_MARK.search(reply):
            return _fail(
                current,
                None,
                "malformed",
                "Your reply holds PTX outside a code block. " + format_instructions("either"),
            )
        return _fail(
            current,
            None,
            "no-code",
            "Your reply holds no kernel and no edits. " + format_instructions("either"),
        )
    if not candidates[-1].closed:
        return _fail(
            current,
            "whole",
            "truncated",
            "Your reply ends inside an unclosed ```ptx block: it was cut off. Send the complete kernel, or "
            "SEARCH/REPLACE blocks for just the lines that change if the kernel is long.",
        )
    kernels = [f for f in candidates if _ENTRY_MARK.search(f.text)]
    if not kernels:
        return _fail(
            current,
            "whole",
            "malformed",
            "The ```ptx block in your reply is not a whole kernel (it has no `.entry`). "
            + format_instructions("either"),
        )
    whole = list(dict.fromkeys(f.text for f in kernels if _VERSION_MARK.search(f.text)))
    if len(whole) > 1:
        return _fail(
            current,
            "whole",
            "malformed",
            f"Your reply holds {len(whole)} different complete kernels (code blocks with `.version` and "
            "`.entry`), so porter cannot tell which one is the new kernel. Send exactly one ```ptx block with the "
            "whole new kernel; quote other code only in small pieces, or not at all.",
        )
    # The largest kernel is the new file (a reply may quote a small piece first); ties go to the last.
    chosen = max(reversed(kernels), key=lambda f: len(f.text))
    depth = _open_braces(chosen.text)
    if depth > 0:
        return _fail(
            current,
            "whole",
            "truncated",
            f"The kernel in your reply leaves {depth} brace(s) `{{` unclosed: it looks cut off. Send the "
            "complete kernel, or SEARCH/REPLACE blocks for just the lines that change.",
        )
    text = chosen.text if chosen.text.endswith("\n") else chosen.text + "\n"
    return EditOutcome(ok=True, text=text, kind="whole")


def _fences(lines: Sequence[str]) -> list[_Fence]:
    """Every fenced code block (backticks only), the last one unclosed if the reply ends inside it."""
    fences: list[_Fence] = []
    opened: tuple[int, str] | None = None  # (fence length, info string)
    body: list[str] = []
    for line in lines:
        if opened is None:
            match = _FENCE_OPEN.match(line)
            if match:
                opened, body = (len(match.group(1)), match.group(2)), []
            continue
        close = _FENCE_CLOSE.match(line)
        if close and len(close.group(1)) >= opened[0]:
            fences.append(_Fence(opened[1], "\n".join(body), closed=True))
            opened = None
        else:
            body.append(line)
    if opened is not None:
        fences.append(_Fence(opened[1], "\n".join(body), closed=False))
    return fences


def _open_braces(text: str) -> int:
    """Braces opened and not closed by the end of ``text``, outside comments and string literals."""
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == '"':
            end = text.find('"', i + 1)
            i = n if end < 0 else end + 1
        else:
            depth += (c == "{") - (c == "}")
            i += 1
    return depth


# --- SEARCH/REPLACE ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wording:
    """How the messages of one edit form name its parts."""

    block: str  # "SEARCH/REPLACE block"
    search: str  # "SEARCH section": the lines that locate a block
    empty: str  # what to do about a block with nothing to locate it by


_BLOCK_WORDS = _Wording(
    "SEARCH/REPLACE block", "SEARCH section",
    "Every block must SEARCH for existing lines; to insert, SEARCH for the line the new lines follow and repeat "
    "it in REPLACE.",
)
_HUNK_WORDS = _Wording(
    "hunk", "context and '-' lines",
    "porter places a hunk by its lines, not by its line numbers: give it a line or two of unchanged context "
    "(lines starting with a space) around the '+' lines.",
)


def _apply_edits(current: str, reply_lines: Sequence[str]) -> EditOutcome:
    blocks = _parse_blocks(reply_lines)
    if isinstance(blocks, tuple):
        return _fail(current, "edits", *blocks)
    return _apply_blocks(current, blocks, _BLOCK_WORDS)


def _apply_blocks(current: str, blocks: Sequence[_Block], words: _Wording) -> EditOutcome:
    """Apply every block, in order, or none (see the module docstring)."""
    empty = [i for i, b in enumerate(blocks, 1) if not any(line.strip() for line in b.search)]
    if empty:
        return _fail(
            current,
            "edits",
            "malformed",
            f"{words.block} {empty[0]} has an empty {words.search}. {words.empty}",
        )
    lines = current.split("\n")
    normal = [_norm(line) for line in lines]
    problems: list[tuple[ErrorKind, str]] = []
    shifted = False  # an earlier block changed the line count, so numbers differ from the kernel as sent
    for index, block in enumerate(blocks, 1):
        starts, width = _locate(lines, normal, block.search)
        if len(starts) == 1:
            at = starts[0]
            lines[at : at + width] = block.replace
            normal[at : at + width] = [_norm(line) for line in block.replace]
            shifted = shifted or width != len(block.replace)
            continue
        where = f"{words.block} {index} of {len(blocks)}"
        numbering = " (line numbers after the blocks before it)" if shifted else ""
        if starts:
            listed = ", ".join(str(s + 1) for s in starts[:_MAX_LISTED])
            more = f" and {len(starts) - _MAX_LISTED} more" if len(starts) > _MAX_LISTED else ""
            problems.append(
                (
                    "ambiguous",
                    f"{where} matches {len(starts)} places, starting at lines {listed}{more}{numbering}. "
                    "Add lines around it so that it matches exactly one.",
                )
            )
        else:
            problems.append(("no-match", _no_match(where, numbering, block, lines, normal, words)))
    if problems:
        message = "\n\n".join(text for _, text in problems)
        what = words.block.split()[-1]
        return _fail(
            current, "edits", problems[0][0], message + f"\n\nNo {what} was applied: resend all of them."
        )
    return EditOutcome(ok=True, text="\n".join(lines), kind="edits", applied=len(blocks))


def _parse_blocks(lines: Sequence[str]) -> list[_Block] | tuple[ErrorKind, str]:
    """The blocks in reply order, or why they cannot be read: (error kind, message for the model)."""
    blocks: list[_Block] = []
    state: Literal["out", "search", "replace"] = "out"
    search: list[str] = []
    replace: list[str] = []
    start = 0
    for number, line in enumerate(lines, 1):
        is_search, is_divider, is_replace = _SEARCH.match(line), _DIVIDER.match(line), _REPLACE.match(line)
        if state == "out":
            if is_search:
                state, search, start = "search", [], number
            elif is_replace:
                return _malformed(
                    f"line {number} of your reply has `>>>>>>> REPLACE` without a block before it."
                )
            # anything else outside a block (prose, fences, a markdown rule) is ignored
        elif state == "search":
            if is_divider:
                state, replace = "replace", []
            elif is_search or is_replace:
                return _malformed(
                    f"the block opened at line {start} of your reply has no `=======` line between its "
                    "SEARCH and REPLACE sections."
                )
            else:
                search.append(line)
        elif is_replace:
            blocks.append(_Block(tuple(search), tuple(replace)))
            state = "out"
        elif is_search or is_divider:
            return _malformed(
                f"the block opened at line {start} of your reply is not closed by `>>>>>>> REPLACE` "
                f"before line {number}."
            )
        else:
            replace.append(line)
    if state != "out":
        return (
            "truncated",
            f"Your reply ends inside the SEARCH/REPLACE block opened at line {start}: it was cut off, or the "
            "block lacks its `>>>>>>> REPLACE` line. Send complete blocks (fewer or smaller ones if the reply "
            "is long).",
        )
    return blocks


# --- unified diffs ---------------------------------------------------------------------------


def _apply_diff(current: str, reply_lines: Sequence[str]) -> EditOutcome:
    """A unified diff, read as SEARCH/REPLACE blocks: each hunk's context and '-' lines are what it
    replaces, its context and '+' lines what takes their place. Line numbers are not trusted
    (models rarely count right): a hunk is placed by its lines, as a SEARCH block is."""
    hunks = _parse_hunks(reply_lines)
    if isinstance(hunks, str):
        return _fail(current, "edits", "malformed", hunks)
    return _apply_blocks(current, hunks, _HUNK_WORDS)


def _parse_hunks(lines: Sequence[str]) -> list[_Block] | str:
    """The hunks in reply order, or why they cannot be read (a message for the model). A hunk ends
    at the first line that is not context, '-' or '+' (a fence, a file header, prose)."""
    hunks: list[tuple[list[str], list[str]]] = []
    inside = False
    for line in lines:
        if _HUNK.match(line):
            hunks.append(([], []))
            inside = True
            continue
        if not inside or line.startswith("\\"):  # "\ No newline at end of file"
            continue
        if line.startswith(("--- ", "+++ ")) or (line and line[0] not in " +-"):
            inside = False
            continue
        old, new = hunks[-1]
        body = line[1:]
        if line[:1] != "+":
            old.append(body)
        if line[:1] != "-":
            new.append(body)
    if not any(old or new for old, new in hunks):
        return ("Your reply's diff has no hunk lines under its `@@` headers. " + _DIFF_HELP)
    return [_Block(*_trim_blank_context(old, new)) for old, new in hunks]


def _trim_blank_context(old: list[str], new: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Blank lines that end both sides of a hunk are the gap before the reply's next paragraph, not context."""
    while old and new and not old[-1].strip() and not new[-1].strip():
        old, new = old[:-1], new[:-1]
    return tuple(old), tuple(new)


def _malformed(problem: str) -> tuple[ErrorKind, str]:
    return "malformed", f"Malformed SEARCH/REPLACE: {problem}\n\n{_EDITS_HELP}"


def _locate(lines: list[str], normal: list[str], search: Sequence[str]) -> tuple[list[int], int]:
    """Where ``search`` matches (0-based starts) and how many kernel lines a match covers."""
    exact = _find(lines, list(search))
    if exact:
        return exact, len(search)
    wanted = [_norm(line) for line in search]
    while wanted and not wanted[0]:
        wanted.pop(0)
    while wanted and not wanted[-1]:
        wanted.pop()
    return _find(normal, wanted), len(wanted)


def _find(haystack: list[str], needle: list[str]) -> list[int]:
    """Start of every occurrence of ``needle`` as consecutive items of ``haystack``."""
    if not needle:
        return []
    first, width = needle[0], len(needle)
    found: list[int] = []
    i = -1
    while True:
        try:
            i = haystack.index(first, i + 1)
        except ValueError:
            return found
        if haystack[i : i + width] == needle:
            found.append(i)


def _norm(line: str) -> str:
    return " ".join(line.split())


def _no_match(where: str, numbering: str, block: _Block, lines: list[str], normal: list[str],
              words: _Wording) -> str:
    first = next(line for line in block.search if line.strip())
    message = (
        f"{where} matches nothing in the current kernel. It begins:\n    {first.strip()}"
    )
    wanted = [_norm(line) for line in block.search if line.strip()]
    start = _nearest(normal, wanted)
    if start is None:
        return message + "\nThe kernel is empty."
    end = min(len(lines), start + max(1, len(wanted)))
    shown = range(start, min(end, start + _MAX_SHOWN_LINES))
    width = len(str(shown[-1] + 1))
    listing = "\n".join(f"  {n + 1:>{width}} | {lines[n]}" for n in shown)
    if end > shown[-1] + 1:
        listing += f"\n  ... ({end - shown[-1] - 1} more lines)"
    return (
        f"{message}\nThe most similar lines of the kernel are {start + 1}-{end}{numbering}:\n{listing}\n"
        f"Copy the {words.search} exactly from the kernel (whole lines, in order)."
    )


def _nearest(normal: list[str], wanted: list[str]) -> int | None:
    """Start of the kernel window most similar to ``wanted`` (normalised lines), by difflib's ratio.

    Candidates come from two cheap scans: windows holding the most of the wanted lines verbatim,
    and windows aligned on the lines most like the first wanted line. Only those are scored.
    """
    n = len(normal)
    if n == 0 or not wanted:
        return None
    width = min(len(wanted), n)
    last = n - width
    wanted_set = set(wanted)
    prefix = [0]
    for line in normal:
        prefix.append(prefix[-1] + (line in wanted_set))
    hits = [(prefix[i + width] - prefix[i], i) for i in range(last + 1)]
    starts = {i for score, i in heapq.nlargest(_MAX_WINDOWS // 2, hits) if score}
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted[0])
    quick = []
    for i, line in enumerate(normal):
        matcher.set_seq1(line)
        quick.append((matcher.quick_ratio(), -i))
    for _, negative in heapq.nlargest(_MAX_WINDOWS // 2, quick):
        starts.add(min(max(0, -negative), last))
    compared = min(width, _MAX_COMPARED_LINES)
    line_matchers = [difflib.SequenceMatcher(None, "", line, autojunk=False) for line in wanted[:compared]]

    def score(start: int) -> tuple[float, int]:
        total = 0.0
        for k, line_matcher in enumerate(line_matchers):
            line_matcher.set_seq1(normal[start + k])
            total += line_matcher.ratio()
        return total, -start

    return max(starts, key=score)


def _fail(
    current: str, kind: Literal["whole", "edits"] | None, error_kind: ErrorKind, error: str
) -> EditOutcome:
    return EditOutcome(ok=False, text=current, kind=kind, error=error, error_kind=error_kind)


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


_DIFF_HELP = (
    "A unified diff is read hunk by hunk: lines starting with a space are unchanged context, '-' lines are "
    "removed, '+' lines added; every hunk starts with an `@@ ... @@` line and needs context or '-' lines that "
    "match the current kernel exactly. SEARCH/REPLACE blocks or the whole kernel are the forms porter asks for."
)

WHOLE = EditFormat(
    "whole", "whole", _WHOLE_HELP, _WHOLE_HELP + " Put no other code block in the reply.",
    recognises=lambda lines: True, apply=_whole,
)
SEARCH_REPLACE = EditFormat(
    "search-replace", "edits", _EDITS_HELP,
    _EDITS_HELP + "\n\nThe kernel is long: send SEARCH/REPLACE blocks, not the whole file. Put no other code "
    "in the reply.",
    recognises=lambda lines: any(_SEARCH.match(line) for line in lines), apply=_apply_edits,
)
# Read when a model sends one, never asked for (agents choose between the two forms above).
UNIFIED_DIFF = EditFormat(
    "unified-diff", "edits", _DIFF_HELP, _DIFF_HELP,
    recognises=lambda lines: any(_HUNK.match(line) for line in lines), apply=_apply_diff,
)
FORMATS: dict[str, EditFormat] = {f.name: f for f in (WHOLE, SEARCH_REPLACE)}
# When both appear, the edits win (see the module docstring); a reply in neither form is judged as
# a whole file, whose errors say what is missing.
RECOGNITION_ORDER: tuple[EditFormat, ...] = (SEARCH_REPLACE, UNIFIED_DIFF, WHOLE)
