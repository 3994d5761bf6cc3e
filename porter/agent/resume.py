"""What a port needs to go on later, on this machine or another: its inputs and where its loop stands.

A run folder holds, beside the records :mod:`porter.agent.runs` describes::

    inputs/                     copies of what the run was started with: the source kernel, the spec
                                and the files it names (reference, baseline), the scripted replies
    inputs.json                 where those copies are, and how to reopen the model (:class:`RunInputs`)
    session.json                where the loop stands (:class:`SessionState`), rewritten atomically at
                                every step: the conversation, the candidate edits apply to, hints,
                                a candidate saved but not yet fed back

``porter port --resume RUN`` reads these back (:func:`resume_point`) and goes on from the last step
with a new budget, counted on top of what was spent (:func:`extend`). Nothing refers to an absolute
path of the machine that recorded the run, so a run folder copied to a machine with the target GPU
resumes there. A reference module that imports files beside it other than those the spec names is
not copied; :attr:`RunInputs.missing` lists the spec's files that could not be.
"""

from __future__ import annotations

import platform
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from porter.agent.llm import Budget, LiteLLMModel, ModelClient, Spend, SpendRecord
from porter.agent.model_choice import check_model, make_model
from porter.agent.replay import ReplayModel
from porter.agent.runs import (
    CandidateRecord,
    RunConfig,
    RunOutcome,
    candidates,
    read_config,
    read_outcome,
    read_record,
)
from porter.errors import InputError
from porter.gate.spec import Spec, load_spec
from porter.gate.verdict import Status

INPUTS = "inputs"
_GOLDEN_COPY_LIMIT = 64 << 20  # golden folders larger than this stay where they are (listed as missing)


@dataclass(frozen=True)
class RunInputs:
    """``inputs.json``: the copies a run was started from, relative to the run folder."""

    kernel: str  # "inputs/kernel_sm80.ptx"
    spec: str  # "inputs/spec/porter.toml"
    model: str | None = None  # a litellm name, "mock:TEXT", or "replay:inputs/<script>" (relative to the run)
    api_base: str | None = None
    missing: tuple[str, ...] = ()  # files the spec names that were not copied (outside its folder, too large)


@dataclass(frozen=True)
class Hint:
    """A developer's hint, given after candidate ``after``."""

    after: int
    text: str
    at: float = 0.0


@dataclass(frozen=True)
class Pending:
    """A candidate saved but not yet fed back: verified (or verified again) on resume."""

    index: int  # the first of the round's candidates
    origin: str  # "model" | "edit" | "recheck"
    replies: tuple[str, ...] = ()  # a model's round: each candidate's reply, in order (one per candidate)


@dataclass(frozen=True)
class Resumed:
    """One resumption of the run: after which candidate, with which budget, on which machine."""

    after: int
    budget: dict[str, Any]
    host: str = ""
    at: float = 0.0


@dataclass(frozen=True)
class SessionState:
    """``session.json``: where the loop stands. ``current`` is the candidate the model's edits apply
    to (None: the source as the prompt shows it)."""

    messages: tuple[dict[str, str], ...]
    current: int | None = None
    format_errors: int = 0
    pending: Pending | None = None
    hints: tuple[Hint, ...] = ()
    resumes: tuple[Resumed, ...] = field(default=())
    sampled: int = 0  # model replies not in the conversation: a round's samples other than its best
    round: int = 0  # the rounds the model was asked, each for `candidates` samples (not the budget's model calls)

    @property
    def replies(self) -> int:
        """Model replies the run has had (a scripted model goes on after as many): those the
        conversation holds, a round's other samples, and a pending round's."""
        pending = len(self.pending.replies) if self.pending is not None else 0
        return sum(m["role"] == "assistant" for m in self.messages) + self.sampled + pending


# -- writing -----------------------------------------------------------------------------------


def _copy_into(run_dir: Path, source: Path, rel: str) -> str:
    target = run_dir / INPUTS / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, target)
    return (Path(INPUTS) / rel).as_posix()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def model_reference(model: ModelClient | None, run_dir: Path) -> tuple[str | None, str | None]:
    """How to reopen ``model`` elsewhere, and its api_base; a scripted model's replies are copied."""
    if model is None:
        return None, None
    if isinstance(model, ReplayModel):
        return "replay:" + _copy_into(run_dir, model.path, f"replies/{model.path.name}"), None
    if isinstance(model, LiteLLMModel):
        if model.mock_response is not None:
            return "mock:" + model.mock_response, None
        return model.model, model.api_base
    return model.name, None


def snapshot_inputs(run_dir: Path, kernel: Path, spec: Spec, model: ModelClient | None) -> RunInputs:
    """Copy what the run needs to go on elsewhere into ``run_dir/inputs`` and say where it went."""
    kernel_rel = _copy_into(run_dir, kernel, kernel.name)
    spec_rel = _copy_into(run_dir, spec.path, f"spec/{spec.source}")
    base = spec.base_dir.resolve()
    missing = []
    for path in spec.named_files():
        resolved = path.resolve()
        if not resolved.exists():
            continue
        if not resolved.is_relative_to(base) or _size(resolved) > _GOLDEN_COPY_LIMIT:
            missing.append(str(path))
            continue
        _copy_into(run_dir, resolved, f"spec/{resolved.relative_to(base).as_posix()}")
    ref, api_base = model_reference(model, run_dir)
    return RunInputs(kernel=kernel_rel, spec=spec_rel, model=ref, api_base=api_base, missing=tuple(missing))


# -- reading back ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResumePoint:
    """A recorded run, read back to go on: its config and inputs, the loop's state (None when it
    stopped before the model's first call), the candidates verified so far and the spend."""

    run_dir: Path
    config: RunConfig
    inputs: RunInputs
    state: SessionState | None
    records: tuple[CandidateRecord, ...]
    texts: dict[int, str]
    spend: SpendRecord
    outcome: RunOutcome | None

    @property
    def kernel(self) -> Path:
        return self.run_dir / self.inputs.kernel

    def spec(self) -> Spec:
        return load_spec(self.run_dir / self.inputs.spec)


def resume_point(run_dir: Path) -> ResumePoint:
    """The run at ``run_dir``, ready to go on; one line (exit 2) when it cannot."""
    if not (run_dir / "inputs.json").is_file():
        raise InputError(f"run {run_dir.name}: no inputs.json (recorded by a porter without resume): it cannot be "
                         "resumed; start a new port")
    config = read_config(run_dir)
    inputs = read_record(RunInputs, run_dir / "inputs.json")
    outcome = read_outcome(run_dir)
    if outcome is not None and outcome.status is Status.PASSED and not config.optimize:
        raise InputError(f"run {run_dir.name} passed (candidate {outcome.best}): there is nothing to resume")
    state = read_record(SessionState, run_dir / "session.json") if (run_dir / "session.json").is_file() else None
    records: list[CandidateRecord] = []
    texts: dict[int, str] = {}
    for index, text, record in candidates(run_dir):
        texts[index] = text
        if record is not None:
            if record.index != len(records):
                raise InputError(f"run {run_dir.name}: candidate {len(records)} has no record but a later one has")
            records.append(record)
    spend = _read_spend(run_dir)
    return ResumePoint(run_dir, config, inputs, state, tuple(records), texts, spend, outcome)


def _read_spend(run_dir: Path) -> SpendRecord:
    """The run's ``spend.json`` (none yet: nothing spent), read once, as its type."""
    path = run_dir / "spend.json"
    if not path.is_file():
        return SpendRecord()
    return read_record(SpendRecord, path)


def extend(budget: Budget, spend: Spend) -> Budget:
    """``budget`` counted from now: each limit raised by what has been spent already."""
    return Budget(
        max_rounds=None if budget.max_rounds is None else spend.rounds + budget.max_rounds,
        max_tokens=None if budget.max_tokens is None else spend.total_tokens + budget.max_tokens,
        max_usd=None if budget.max_usd is None else spend.usd + budget.max_usd,
        max_wall_s=None if budget.max_wall_s is None else spend.elapsed_s + budget.max_wall_s,
    )


def reopen_model(point: ResumePoint, *, api_base: str | None, env: Any,
                 replay_model: type[ReplayModel] = ReplayModel) -> ModelClient | None:
    """The run's model, as it was: a scripted model (``replay_model``) from its copied replies, going
    on after the replies the conversation holds; another model checked (its key, its server) as
    ``porter port`` checks it. ``api_base`` overrides the recorded one (a local server's address
    differs per machine)."""
    ref = point.inputs.model
    if ref is None:
        return None
    if ref.startswith("replay:"):
        script = point.run_dir / ref.removeprefix("replay:")
        return replay_model(script, start=point.state.replies if point.state is not None else 0)
    base = api_base or point.inputs.api_base
    check_model(ref, api_base=base, env=env)
    return make_model(ref, api_base=base)


def resumed(state: SessionState, budget: Budget, after: int) -> SessionState:
    """``state`` with this resumption noted; the count of malformed replies in a row starts again."""
    from porter.jsonable import to_jsonable

    note = Resumed(after=after, budget=to_jsonable(budget), host=platform.node(), at=time.time())
    return replace(state, resumes=(*state.resumes, note), format_errors=0)
