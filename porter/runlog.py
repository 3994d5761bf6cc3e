"""Recorded runs: every port writes ``.porter/runs/<id>/`` as it goes, so a crash loses nothing.

Layout of one run::

    config.json                 what was asked (kernel, spec, archs, model, budget, agent)
    messages/NNN-<role>.md      every prompt and reply, in order
    candidates/NN.ptx           every candidate (00 is the mechanical retarget baseline)
    candidates/NN.json          its verdict, origin, round and the feedback sent back
    spend.json                  tokens, cost and time so far (rewritten after each call)
    result.json                 status word, stop reason, best candidate (written last)

``porter runs`` lists runs, ``porter replay`` re-verifies their candidates on this machine, and
``porter export --format sft`` turns repairs into chat-format fine-tuning pairs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porter.errors import InputError
from porter.jsonable import to_jsonable

RUNS = Path(".porter") / "runs"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def new_run_id(kernel: Path) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{kernel.stem}-{secrets.token_hex(2)}"


class RunLog:
    """Writes one run's records. Every method writes through to disk before it returns."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.id = run_id
        self.dir = root / run_id
        self.dir.mkdir(parents=True, exist_ok=False)
        self._messages = 0

    def write_json(self, name: str, data: Any) -> None:
        _write_atomic(self.dir / name, json.dumps(to_jsonable(data), indent=2) + "\n")

    def message(self, role: str, content: str) -> None:
        self._messages += 1
        _write_atomic(self.dir / "messages" / f"{self._messages:03d}-{role}.md", content)

    def candidate(self, index: int, text: str) -> Path:
        """Save a candidate before it is checked (a crash while checking still leaves it on disk)."""
        path = self.dir / "candidates" / f"{index:02d}.ptx"
        _write_atomic(path, text)
        return path

    def candidate_record(self, index: int, record: dict[str, Any]) -> None:
        self.write_json(f"candidates/{index:02d}.json", record)


@dataclass(frozen=True)
class RunSummary:
    id: str
    path: Path
    kernel: str
    target: str
    model: str
    status: str  # the result's status word, or "incomplete" when result.json is missing
    stop_reason: str
    candidates: int


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: unreadable run record ({err})") from err


def list_runs(root: Path) -> list[RunSummary]:
    if not root.is_dir():
        return []
    runs = []
    for folder in sorted(p for p in root.iterdir() if (p / "config.json").is_file()):
        config = _read_json(folder / "config.json")
        result = _read_json(folder / "result.json") if (folder / "result.json").is_file() else {}
        runs.append(RunSummary(
            id=folder.name, path=folder, kernel=config.get("kernel", "?"), target=config.get("target", "?"),
            model=config.get("model") or "none", status=result.get("status", "incomplete"),
            stop_reason=result.get("stop_reason", ""),
            candidates=len(list((folder / "candidates").glob("*.ptx"))),
        ))
    return runs


def find_run(root: Path, ref: str) -> Path:
    """A run by id, unique id prefix, or path."""
    as_path = Path(ref)
    if (as_path / "config.json").is_file():
        return as_path
    matches = [r.path for r in list_runs(root) if r.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(f"no run {ref!r} under {root} (see `porter runs`)")
    raise InputError(f"{ref!r} matches {len(matches)} runs: give more of the id")


def candidates(run: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(index, PTX text, record) of every candidate of a run, in order."""
    for ptx in sorted((run / "candidates").glob("*.ptx")):
        record_path = ptx.with_suffix(".json")
        record = _read_json(record_path) if record_path.is_file() else {}
        yield int(ptx.stem), ptx.read_text(), record


def rank(record: dict[str, Any]) -> int:
    """How far a candidate got: 3 passed, 2 correct but not native or not run on the target, 1 assembled, 0 not."""
    verdict = record.get("verdict") or {}
    gates = {g["name"]: g["status"] for g in verdict.get("gates", [])}
    if record.get("passes"):
        return 3
    if gates.get("equivalence") == "passed" or (gates.get("assemble") == "passed" and verdict.get("status") == "not run"):
        return 2
    return 1 if gates.get("assemble") == "passed" else 0


def repair_pairs(run: Path) -> Iterator[dict[str, Any]]:
    """Chat-format training pairs: a failing candidate and its feedback -> the next, better candidate."""
    prompt = _read_json(run / "prompt.json") if (run / "prompt.json").is_file() else []
    system = next((m["content"] for m in prompt if m["role"] == "system"), "")
    task = next((m["content"] for m in prompt if m["role"] == "user"), "")
    items = [(i, text, rec) for i, text, rec in candidates(run) if rec]
    for pos, (_, text, record) in enumerate(items):
        if record.get("passes") or not record.get("feedback"):
            continue
        better = next((later for later in items[pos + 1:] if rank(later[2]) > rank(record)), None)
        if better is None:
            continue
        user = (f"{task}\n\nCurrent candidate:\n```ptx\n{text}\n```\n\nFeedback from porter's verifier:\n"
                f"{record['feedback']}\n\nReply with the corrected kernel.")
        yield {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                            {"role": "assistant", "content": f"```ptx\n{better[1]}\n```"}],
               "metadata": {"run": run.name, "from": record.get("index"), "to": better[2].get("index"),
                            "from_rank": rank(record), "to_rank": rank(better[2])}}
