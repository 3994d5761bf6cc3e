"""Progress of a port as it runs: a live view in a terminal, plain lines in a log, JSON for machines.

The session emits events (``start``, ``warning``, ``checking``, ``verdict``, ``reply``,
``no-candidate`` (a reply that gives none), ``format-error`` (a round that gave none), ``hint``,
``edit``, ``done``, ``interrupted``); each view turns them into output. Views write to stderr, so
stdout carries only the result (and only JSON with ``--json``).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from porter.jsonable import to_jsonable


def _gates(verdict: Any) -> str:
    return "  ".join(f"{g.name}:{g.status}" for g in verdict.gates)


def _round(data: dict[str, Any]) -> str:
    """``round R``, and ``sample k of N`` when each round asks the model for several (--candidates)."""
    samples = data.get("samples", 1)
    return f"round {data['round']}" + (f", sample {data['sample']} of {samples}" if samples > 1 else "")


def _spend(spend: dict[str, Any]) -> str:
    tokens = spend.get("prompt_tokens", 0) + spend.get("completion_tokens", 0)
    return f"{spend.get('rounds', 0)} rounds, {tokens} tokens, ${spend.get('usd', 0.0):.4f}"


class PlainProgress:
    """One line per event: for logs and CI, where a live view would be noise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def _say(self, text: str) -> None:
        print(f"porter: {text}", file=self.stream, flush=True)

    def __call__(self, kind: str, **data: Any) -> None:
        if kind == "start":
            model = data["model"] or "no model (retarget baseline only)"
            native = "required" if data["require_native"] else "not required"
            if data.get("changed"):  # the first line says so when the target is not the one asked for
                self._say(f"{data['changed']}: {data['reason']}")
            again = f"resumed after {data['resumed']} candidates; " if data.get("resumed") is not None else ""
            self._say(f"run {data['run_id']}: {again}{data['source_arch']} -> {data['target']} ({data['reason']}); "
                      f"native instructions {native}; model: {model}")
        elif kind == "warning":
            self._say(f"warning: {data['message']}")
        elif kind == "checking":
            self._say(f"candidate {data['index']} ({data['origin']}, round {data['round']}): checking")
        elif kind == "verdict":
            self._say(f"candidate {data['index']}: {data['status']}  [{_gates(data['verdict'])}]")
        elif kind == "reply":
            self._say(f"{_round(data)}: reply received ({data['tokens']} tokens; spent {_spend(data['spend'])})")
        elif kind == "no-candidate":
            self._say(f"{_round(data)}: no candidate ({data['error']}): {data['message']}")
        elif kind == "format-error":
            self._say(f"round {data['round']}: no candidate this round; the model is told why")
        elif kind == "hint":
            self._say(f"hint after candidate {data['after']} recorded; it goes into the next prompt")
        elif kind == "edit":
            self._say(f"your edit of candidate {data['after']} is candidate {data['index']}: checking it")
        elif kind == "done":
            result = data["result"]
            self._say(f"done: {result.outcome} - {result.stop_reason}")
        elif kind == "interrupted":
            result = data["result"]
            self._say(f"run {result.run_id} interrupted; its records are whole (best so far: {result.status}); "
                      f"`porter port --resume {result.run_id}` goes on from the last step")


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
            self.state["gates"] = _gates(data["verdict"])
        elif kind == "reply":
            self.state["round"] = str(data["round"])
            self.state["spend"] = _spend(data["spend"])
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
