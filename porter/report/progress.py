"""The words of a port's progress: each event the session emits as the lines a person reads.

The session emits events (``start``, ``warning``, ``checking``, ``verdict``, ``reply``,
``no-candidate`` (a reply that gives none), ``format-error`` (a round that gave none), ``hint``,
``edit``, ``done``, ``interrupted``). The terminal's views (:mod:`porter.cli.progress`) and the MCP
server's progress notifications say the same lines, so they are written once, here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from porter.agent.llm import SpendRecord


def gates_line(verdict: Any) -> str:
    """A verdict's gates as ``name:status`` pairs."""
    return "  ".join(f"{g.name}:{g.status}" for g in verdict.gates)


def spend_line(spend: SpendRecord) -> str:
    """A spend record as ``R rounds, T tokens, $D``."""
    return spend.line()


def _round(data: Mapping[str, Any]) -> str:
    """``round R``, and ``sample k of N`` when each round asks the model for several (--candidates)."""
    samples = data.get("samples", 1)
    return f"round {data['round']}" + (f", sample {data['sample']} of {samples}" if samples > 1 else "")


def _start(data: Mapping[str, Any]) -> list[str]:
    """The run's first line; before it, when the target is not the one asked for, the line saying so."""
    model = data["model"] or "no model (retarget baseline only)"
    native = "required" if data["require_native"] else "not required"
    changed = [f"{data['changed']}: {data['reason']}"] if data.get("changed") else []
    again = f"resumed after {data['resumed']} candidates; " if data.get("resumed") is not None else ""
    return [*changed, f"run {data['run_id']}: {again}{data['source_arch']} -> {data['target']} ({data['reason']}); "
                      f"native instructions {native}; model: {model}"]


def progress_lines(kind: str, data: Mapping[str, Any]) -> list[str]:
    """What a person is told of one event (nothing for an event they need not see)."""
    match kind:
        case "start":
            return _start(data)
        case "warning":
            return [f"warning: {data['message']}"]
        case "checking":
            return [f"candidate {data['index']} ({data['origin']}, round {data['round']}): checking"]
        case "verdict":
            return [f"candidate {data['index']}: {data['status']}  [{gates_line(data['verdict'])}]"]
        case "reply":
            return [f"{_round(data)}: reply received ({data['tokens']} tokens; spent {spend_line(data['spend'])})"]
        case "no-candidate":
            return [f"{_round(data)}: no candidate ({data['error']}): {data['message']}"]
        case "format-error":
            return [f"round {data['round']}: no candidate this round; the model is told why"]
        case "hint":
            return [f"hint after candidate {data['after']} recorded; it goes into the next prompt"]
        case "edit":
            return [f"your edit of candidate {data['after']} is candidate {data['index']}: checking it"]
        case "done":
            return [f"done: {data['result'].outcome} - {data['result'].stop_reason}"]
        case "interrupted":
            result = data["result"]
            return [f"run {result.run_id} interrupted; its records are whole (best so far: {result.status}); "
                    f"`porter port --resume {result.run_id}` goes on from the last step"]
    return []
