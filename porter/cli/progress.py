"""Progress of a port as it runs: a live view in a terminal, plain lines in a log, JSON for machines.

Each view turns the session's events into output, in the words of :mod:`porter.report.progress`.
Views write to stderr, so stdout carries only the result (and only JSON with ``--json``).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from porter.jsonable import to_jsonable
from porter.report.progress import gates_line, progress_lines, spend_line


class PlainProgress:
    """One line per event: for logs and CI, where a live view would be noise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def _say(self, text: str) -> None:
        print(f"porter: {text}", file=self.stream, flush=True)

    def __call__(self, kind: str, **data: Any) -> None:
        for line in progress_lines(kind, data):
            self._say(line)


class LiveProgress(PlainProgress):
    """A terminal view: the same lines, plus a status line (round, candidate, gates, spend) kept live."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.status import Status

        super().__init__()
        self.console = Console(stderr=True)
        self.status: Status = self.console.status("starting")
        self.status.start()
        self.state: dict[str, str] = {"round": "0", "candidate": "-", "gates": "", "spend": ""}

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def __call__(self, kind: str, **data: Any) -> None:
        super().__call__(kind, **data)
        if kind == "checking":
            self.state["candidate"] = f"{data['index']} ({data['origin']})"
            self.state["gates"] = "checking..."
        elif kind == "verdict":
            self.state["gates"] = gates_line(data["verdict"])
        elif kind == "reply":
            self.state["round"] = str(data["round"])
            self.state["spend"] = spend_line(data["spend"])
        if kind in ("done", "interrupted"):
            self.status.stop()
            return
        s = self.state
        self.status.update(f"round {s['round']} | candidate {s['candidate']} | {s['gates']} | {s['spend']}")


class JsonProgress:
    """JSON lines on stderr, one per event (the result itself goes to stdout)."""

    def __call__(self, kind: str, **data: Any) -> None:
        print(json.dumps({"event": kind, **to_jsonable(data)}), file=sys.stderr, flush=True)


def make_progress(*, as_json: bool, live: bool = True) -> Any:
    """The view for this terminal; ``live=False`` keeps plain lines (a prompt between rounds and a
    live status line would overwrite each other)."""
    if as_json:
        return JsonProgress()
    return LiveProgress() if live and sys.stderr.isatty() else PlainProgress()
