"""Recorded runs: every port writes ``.porter/runs/<id>/`` as it goes, so a crash loses nothing.

Layout of one run::

    config.json                 what was asked (kernel, spec, archs, model, budget, agent)
    messages/NNN-<role>.md      every prompt and reply, in order
    candidates/NN.ptx           every candidate (00 is the mechanical retarget baseline)
    candidates/NN.json          its verdict, origin, round and the feedback sent back
    spend.json                  tokens, cost and time so far (rewritten after each call)
    result.json                 status word, stop reason, best candidate and whether (and where: a GPU,
                                or the emulator) it was shown equivalent (written last; on Ctrl-C too,
                                saying ``interrupted``)
    inputs/, inputs.json, session.json   what ``porter port --resume`` needs (see porter.agent.resume)

Every file is written atomically (a temporary file renamed over it), so an interrupted run's records
are each whole.

``porter runs`` lists runs, ``porter replay`` re-verifies their candidates on this machine, and
``porter export --format sft`` turns repairs into chat-format fine-tuning pairs: by default only
towards candidates that passed on hardware.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from porter.agent.export import failure_label
from porter.agent.llm import SpendRecord
from porter.errors import InputError
from porter.gate.verdict import Judgement, NoJudgement, Status, Verdict, judge
from porter.jsonable import from_jsonable, to_jsonable
from porter.text import fence_for

RUNS = Path(".porter") / "runs"
T = TypeVar("T")


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

    @classmethod
    def reopen(cls, run_dir: Path) -> RunLog:
        """The log of a recorded run, to go on writing it (``porter port --resume``)."""
        log = cls.__new__(cls)
        log.id, log.dir = run_dir.name, run_dir
        log._messages = len(list((run_dir / "messages").glob("*.md")))
        return log

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

    def candidate_record(self, record: CandidateRecord) -> None:
        """The candidate's record: its Verdict, feedback and requirement, with its status word."""
        self.write_json(f"candidates/{record.index:02d}.json", record)


@dataclass(frozen=True)
class CandidateRecord:
    """One candidate of a port: its Verdict, the feedback sent back, and the port's requirement
    its judgement is made under (:func:`porter.gate.verdict.judge`)."""

    index: int
    origin: str  # "retarget" | "model"
    round: int  # 0 for the baseline
    verdict: Verdict
    feedback: str
    path: Path
    require_native: bool = True

    JSON_DERIVED: ClassVar[tuple[str, ...]] = ("status", "passes")  # written for readers, never read back

    @property
    def judgement(self) -> Judgement:
        return judge(self.verdict, require_native=self.require_native)

    @property
    def status(self) -> Status:
        return self.judgement.status

    @property
    def passes(self) -> bool:
        return self.judgement.passed

    @property
    def median_ms(self) -> float:
        return next((t.median_ms for t in self.verdict.timings if t.name == "candidate"), float("inf"))


@dataclass(frozen=True)
class RunConfig:
    """``config.json``: what was asked, and what porter chose (the target and why)."""

    kernel: str
    spec: str
    spec_in_repo: str | None = None  # the spec's path in the repository, to find it in another clone
    kernel_in_repo: str | None = None  # the kernel's, likewise (a resumed port's review branch needs it)
    source_arch: str = ""
    entry: str = ""
    asked_target: str = ""
    target: str = "?"
    target_reason: str = ""
    target_changed: str | None = None
    require_native: bool = False
    model: str | None = None
    agent: str = "port"
    budget: dict[str, Any] = field(default_factory=dict)
    optimize: bool = False
    candidates: int = 1  # proposals per round (--candidates)
    entry_option: str | None = None  # --entry: the entry ported, of a source with several
    warnings: tuple[str, ...] = ()
    started: float = 0.0


class Ended(str, enum.Enum):
    """How a port run ended: ``finished``, ``stopped`` (by the developer, without accepting) or
    ``interrupted`` (Ctrl-C); the last two can be resumed."""

    FINISHED = "finished"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RunOutcome:
    """``result.json``, written last: the port's status word, why it stopped, its best candidate,
    and how the run ended."""

    status: Status
    stop_reason: str
    target: str
    best: int | None
    spend: SpendRecord = field(default_factory=SpendRecord)
    ended: Ended = Ended.FINISHED
    # The best candidate's answer to "equal to the reference?" (porter.gate.evidence): "yes", "no",
    # "not run", or "yes (emulated)" where only porter's PTX emulator ran it; "" in older records.
    equivalent: str = ""


@dataclass(frozen=True)
class RunSummary:
    id: str
    path: Path
    kernel: str
    target: str
    model: str
    status: Status | Ended | NoJudgement  # the result's status; stopped or interrupted; incomplete without result.json
    stop_reason: str
    candidates: int


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: unreadable run record ({err})") from err


def read_record(kind: type[T], path: Path, **defaults: Any) -> T:
    """A typed run record (``defaults`` fill what an older record lacks)."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: unreadable run record (not a JSON object)")
    try:
        return from_jsonable(kind, {**defaults, **data})
    except (TypeError, ValueError) as err:
        raise InputError(f"{path}: unreadable run record ({err})") from err


def read_config(run: Path) -> RunConfig:
    return read_record(RunConfig, run / "config.json", kernel="?", spec="")


def read_outcome(run: Path) -> RunOutcome | None:
    """The run's result, or None while it is incomplete."""
    path = run / "result.json"
    return read_record(RunOutcome, path) if path.is_file() else None


def list_runs(root: Path) -> list[RunSummary]:
    if not root.is_dir():
        return []
    runs = []
    for folder in sorted(p for p in root.iterdir() if (p / "config.json").is_file()):
        config, result = read_config(folder), read_outcome(folder)
        runs.append(RunSummary(
            id=folder.name, path=folder, kernel=config.kernel, target=config.target,
            model=config.model or "none", status=_run_status(result),
            stop_reason=result.stop_reason if result else "",
            candidates=len(list((folder / "candidates").glob("*.ptx"))),
        ))
    return runs


def _run_status(outcome: RunOutcome | None) -> Status | Ended | NoJudgement:
    if outcome is None:
        return NoJudgement.INCOMPLETE
    return outcome.ended if outcome.ended is not Ended.FINISHED else outcome.status


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


def candidates(run: Path) -> Iterator[tuple[int, str, CandidateRecord | None]]:
    """(index, PTX text, record) of every candidate of a run, in order; the record is None for a
    candidate whose check did not finish. Records are judged under the run's requirement."""
    config = read_config(run) if (run / "config.json").is_file() else RunConfig(kernel="?", spec="")
    for ptx in sorted((run / "candidates").glob("*.ptx")):
        record_path = ptx.with_suffix(".json")
        record = None
        if record_path.is_file():
            record = replace(read_record(CandidateRecord, record_path, require_native=config.require_native,
                                   index=int(ptx.stem)), path=ptx)
        yield int(ptx.stem), ptx.read_text(), record


def repair_pairs(run: Path, *, include_unverified: bool = False) -> Iterator[dict[str, Any]]:
    """Chat-format training pairs: a failing candidate and its feedback -> a later candidate that
    passed on hardware. With ``include_unverified``, a later candidate that only got further (it
    assembled where the earlier did not, or was correct but not native, or could not run here) may
    be the better side too, marked ``"verified": false`` in the metadata: a model trained on those
    learns what porter could not confirm. The metadata names the run, the model and both
    candidates' status words, and where the better one came from (``to_origin``: ``model``, or
    ``edit`` for a developer's own edit in ``porter port --interactive``); and labels the pair by
    the failure it repairs (:func:`porter.agent.export.failure_label`), the source and target
    architecture and the workload (the entry)."""
    prompt = _read_json(run / "prompt.json") if (run / "prompt.json").is_file() else []
    config = read_config(run) if (run / "config.json").is_file() else RunConfig(kernel="?", spec="")
    system = next((m["content"] for m in prompt if m["role"] == "system"), "")
    task = next((m["content"] for m in prompt if m["role"] == "user"), "")
    items = [(text, rec) for _, text, rec in candidates(run) if rec is not None]
    workload = config.entry or Path(config.kernel).stem
    for pos, (text, record) in enumerate(items):
        if record.passes or not record.feedback:
            continue
        later = items[pos + 1:]
        better = next((c for c in later if c[1].passes), None)
        if better is None and include_unverified:
            better = next((c for c in later if c[1].judgement.rank > record.judgement.rank), None)
        if better is None:
            continue
        fence, answer = fence_for(text), fence_for(better[0])
        user = (f"{task}\n\nCurrent candidate:\n{fence}ptx\n{text}\n{fence}\n\nFeedback from porter's verifier:\n"
                f"{record.feedback}\n\nReply with the corrected kernel.")
        to = better[1]
        yield {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                            {"role": "assistant", "content": f"{answer}ptx\n{better[0]}\n{answer}"}],
               "metadata": {"run": run.name, "model": config.model, "target": config.target,
                            "source_arch": config.source_arch, "workload": workload,
                            "failure": failure_label(record.verdict, record.status),
                            "from": record.index, "to": to.index, "to_origin": to.origin,
                            "from_status": record.status.value, "to_status": to.status.value,
                            "verified": to.passes,
                            "from_rank": record.judgement.rank, "to_rank": to.judgement.rank}}


def no_pairs_reason(run: Path, *, include_unverified: bool) -> str:
    """Why a run yields no repair pairs, in a few words."""
    records = [rec for _, _, rec in candidates(run) if rec is not None]
    if not records:
        return "it has no candidate records"
    if not any(not r.passes and r.feedback for r in records):
        return "no candidate failed with feedback"
    if not include_unverified:
        return ("no later candidate passed on hardware (--include-unverified also pairs candidates that only got "
                "further, marked unverified)")
    return "no later candidate got further than a failing one"
