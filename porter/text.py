"""Text that others control, made safe to show: in a Markdown code fence (a pull request's
comment, a model's prompt) and on a terminal."""

from __future__ import annotations

import re


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks inside ``text``, so that nothing in it
    can close the fence and write Markdown of its own."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def plain(data: bytes | str, limit: int = 300) -> str:
    """``data`` as printable ASCII: every other byte (a control character, an escape sequence's
    ESC, a byte past 0x7E) and the backslash written as ``\\xNN``, cut to ``limit`` characters
    with ``...`` after. For strings a kernel wrote into memory (an assert's message, a printf)."""
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else bytes(data)
    shown = "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in raw)
    return shown if len(shown) <= limit else shown[:limit] + "..."
