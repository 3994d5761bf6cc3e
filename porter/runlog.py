"""Recorded runs: every port writes ``.porter/runs/<id>/`` as it goes, so a crash loses nothing.

Layout of one run::

    config.json                 what was asked (kernel, spec, archs, model, budget, agent)
    messages/NNN-<role>.md      every prompt and reply, in order
    candidates/NN.ptx           every candidate (00 is the mechanical retarget baseline)
    candidates/NN.json          its verdict, origin, round and the feedback sent back
    spend.json                  tokens, cost and time so far (rewritten after each call)
    result.json                 status word, stop reason, best candidate (written last)

``porter runs`` lists runs, ``porter replay`` re-verifies their candidates on this machine, and
``porter export --format sft`` turns repairs into chat-format fine-tuning pairs: by default only
towards candidates that passed on hardware.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
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


def new_run_id(entry: str, target: str) -> str:
    """``<UTC time>-<entry>-<target>-<4 hex>``: the entry, not the file name, tells runs apart
    (every Triton dump is ``kernel.ptx``)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{entry}-{target}").strip(".-")[:80] or "port"
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def ensure_runs_folder(root: Path) -> None:
    """Create the runs folder, ignoring itself: runs never show in ``git status``, while the rest of
    ``.porter/`` (config.toml, agents/) stays trackable."""
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        _write_atomic(ignore, "# porter's run records: local evidence, not source\n*\n")


class RunLog:
    """Writes one run's records. Every method writes through to disk before it returns."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.id = run_id
        ensure_runs_folder(root)
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


def passed_on_hardware(record: dict[str, Any]) -> bool:
    """The candidate passed every gate it was held to, measured on a GPU (not "not run" anywhere)."""
    verdict = record.get("verdict") or {}
    return bool(record.get("passes")) and verdict.get("status") == "passed"


def repair_pairs(run: Path, *, include_unverified: bool = False) -> Iterator[dict[str, Any]]:
    """Chat-format training pairs: a failing candidate and its feedback -> a later candidate that
    passed on hardware. With ``include_unverified``, a later candidate that only got further (it
    assembled where the earlier did not, or was correct but not native, or could not run here) may
    be the better side too, marked ``"verified": false`` in the metadata: a model trained on those
    learns what porter could not confirm. The metadata names the run, the model and both
    candidates' status words."""
    prompt = _read_json(run / "prompt.json") if (run / "prompt.json").is_file() else []
    config = _read_json(run / "config.json") if (run / "config.json").is_file() else {}
    system = next((m["content"] for m in prompt if m["role"] == "system"), "")
    task = next((m["content"] for m in prompt if m["role"] == "user"), "")
    items = [(i, text, rec) for i, text, rec in candidates(run) if rec]
    for pos, (_, text, record) in enumerate(items):
        if record.get("passes") or not record.get("feedback"):
            continue
        later = items[pos + 1:]
        better = next((c for c in later if passed_on_hardware(c[2])), None)
        if better is None and include_unverified:
            better = next((c for c in later if rank(c[2]) > rank(record)), None)
        if better is None:
            continue
        user = (f"{task}\n\nCurrent candidate:\n```ptx\n{text}\n```\n\nFeedback from porter's verifier:\n"
                f"{record['feedback']}\n\nReply with the corrected kernel.")
        yield {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                            {"role": "assistant", "content": f"```ptx\n{better[1]}\n```"}],
               "metadata": {"run": run.name, "model": config.get("model"), "target": config.get("target"),
                            "from": record.get("index"), "to": better[2].get("index"),
                            "from_status": record.get("status"), "to_status": better[2].get("status"),
                            "verified": passed_on_hardware(better[2]),
                            "from_rank": rank(record), "to_rank": rank(better[2])}}


def no_pairs_reason(run: Path, *, include_unverified: bool) -> str:
    """Why a run yields no repair pairs, in a few words."""
    records = [rec for _, _, rec in candidates(run) if rec]
    if not records:
        return "it has no candidate records"
    if not any(not r.get("passes") and r.get("feedback") for r in records):
        return "no candidate failed with feedback"
    if not include_unverified:
        return ("no later candidate passed on hardware (--include-unverified also pairs candidates that only got "
                "further, marked unverified)")
    return "no later candidate got further than a failing one"
