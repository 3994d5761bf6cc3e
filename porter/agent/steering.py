"""Steering a port between rounds: the small protocol the session asks after each candidate.

After a candidate has been verified (and the session would go on), it asks its :class:`Steering`
what to do next, showing a :class:`RoundView` (the candidate, its record, the text it replaced, the
best so far and the spend). The answer is a :class:`Steer`:

- ``continue``: go on as the session would;
- ``hint``: go on, with a line from the developer added to the model's next prompt (and recorded);
- ``edit``: the developer's own text of the candidate, verified by the gate as the next candidate
  (origin ``edit``) and shown to the model, whose later edits apply to it;
- ``accept``: end now; the port's result is its best candidate, judged as always (accepting a
  failed candidate does not make it pass);
- ``stop``: end now without accepting: no review branch, and the run can be resumed.

:class:`Unsteered`, the default, always continues: a session without a person watching.
The terminal implementation is :class:`porter.cli.steer.TerminalSteering`. Everything here is pure.
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Protocol

from porter.agent.llm import SpendRecord
from porter.agent.runs import CandidateRecord
from porter.text import fence_for


class Action(str, enum.Enum):
    CONTINUE = "continue"
    HINT = "hint"
    EDIT = "edit"
    ACCEPT = "accept"
    STOP = "stop"


@dataclass(frozen=True)
class Steer:
    """What to do after a candidate; ``text`` is the hint, or the edited candidate."""

    action: Action
    text: str = ""


CONTINUE = Steer(Action.CONTINUE)


@dataclass(frozen=True)
class RoundView:
    """What a steering sees after one candidate."""

    run_id: str
    record: CandidateRecord
    text: str
    previous_text: str  # the text before it: the candidate before, or the source for the first
    previous_label: str  # "candidate 2", "source"
    best: CandidateRecord
    spend: SpendRecord

    @property
    def diff(self) -> str:
        return candidate_diff(self.previous_text, self.text, self.previous_label, f"candidate {self.record.index}")


class Steering(Protocol):
    """Asked after each verified candidate when the session would go on."""

    def after_candidate(self, view: RoundView) -> Steer: ...


class Unsteered:
    """No person at the wheel: the session goes on as it would."""

    def after_candidate(self, view: RoundView) -> Steer:
        return CONTINUE


def candidate_diff(before: str, after: str, before_label: str, after_label: str) -> str:
    """A unified diff between two kernels' texts ("" when they are the same)."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=before_label, tofile=after_label, n=2)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def hint_note(hint: str) -> str:
    """How a developer's hint reads in the model's prompt."""
    return f"A hint from the developer watching this port (take it into account):\n{hint.strip()}"


def edit_note(index: int, text: str, feedback: str) -> str:
    """How a developer's edit reads in the model's prompt: the edited kernel, then porter's verdict on it."""
    fence = fence_for(text)
    return (f"The developer edited the kernel by hand; porter checked the edit as candidate {index}. "
            f"Your next edits apply to this text:\n{fence}ptx\n{text}\n{fence}\n\n{feedback}")


def add_note(messages: list[dict[str, str]], note: str) -> list[dict[str, str]]:
    """``messages`` with ``note`` for the model: joined to the last message when that is the user's
    (two user messages in a row are refused by some providers), else as a new user message."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], {"role": "user", "content": f"{last['content']}\n\n{note}"}]
    return [*messages, {"role": "user", "content": note}]
