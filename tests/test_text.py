"""porter.text: what a kernel or a model wrote, shown where it cannot pass for porter's own words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from porter.text import fence_for, plain


@given(st.text())
def test_nothing_inside_closes_its_fence(text: str) -> None:
    fence = fence_for(text)
    block = f"{fence}text\n{text}\n{fence}"
    # The first line that is a run of at least len(fence) backticks alone closes the block: only the last may.
    closers = [i for i, line in enumerate(block.split("\n")[1:], start=1)
               if line.strip().startswith(fence) and not line.strip().strip("`")]
    assert closers == [block.count("\n")]


@given(st.binary(max_size=400))
def test_plain_is_printable_ascii_and_says_every_byte(data: bytes) -> None:
    shown = plain(data, limit=10_000)
    assert all(0x20 <= ord(c) < 0x7F for c in shown)
    assert shown.encode().decode("unicode_escape").encode("latin-1") == data


def test_plain_cuts_long_text_and_escapes_a_terminal_sequence() -> None:
    assert plain(b"\x1b[2J" + b"a" * 10, limit=8) == "\\x1b[2Ja..."
