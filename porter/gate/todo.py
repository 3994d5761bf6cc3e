"""A spec's ``todo``: what is left to fill in, as data porter can refuse on.

``porter spec`` writes every guess it makes into a top-level list of key paths, each with a
comment saying what to decide::

    todo = [
        "sizes",            # the size symbols: their default values, and [[sweep]] entries
        "params[0].shape",  # its shape over the size symbols, row-major
        "launch.grid",      # blocks along x, y, z over the size symbols
        "reference",        # what the outputs should be
    ]

Every command that runs a kernel against a spec (check, port, record, profile, ci, bench) loads
it through :func:`porter.gate.spec.load_spec`, which refuses a spec whose list is not empty, with
the list (exit 2). Deleting an item is the user saying "done": porter cannot tell a fixed value from
a kept guess, so the list, not the ``TODO`` comments, is what counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from porter.errors import InputError

TODO_KEY = "todo"


def render_todo(items: Sequence[tuple[str, str]]) -> str:
    """The ``todo = [...]`` text, one item a line with its comment (an empty list when none)."""
    if not items:
        return f"{TODO_KEY} = []"
    width = max(len(json.dumps(path)) for path, _ in items) + 1
    lines = [f"{TODO_KEY} = ["]
    lines += [f"    {(json.dumps(path) + ','):<{width}}  # {why}" for path, why in items]
    lines.append("]")
    return "\n".join(lines)


def pending(data: Mapping[str, Any], source: str) -> tuple[str, ...]:
    """The spec's unresolved todo items (() when it has none); one line on a malformed list."""
    raw = data.get(TODO_KEY, [])
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise InputError(f"{source}: {TODO_KEY}: must be a list of strings, the things left to fill in "
                         f"(got {raw!r:.60})")
    return tuple(item.strip() for item in raw if item.strip())


def refusal(items: Sequence[str], source: str) -> InputError:
    """Why a spec with todo items left cannot be run against."""
    n = len(items)
    return InputError(f"{source}: {n} thing{'s' if n != 1 else ''} left to fill in (its todo list): "
                      f"{', '.join(items)}. Fill each in and delete it from `{TODO_KEY}` (porter spec "
                      "wrote them as guesses; see docs/spec.md#porter-spec)")
