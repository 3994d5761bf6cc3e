"""The porting loop: baseline -> propose -> verify -> feed back -> stop.

A session checks the mechanical retarget first (candidate 0). With a model it then asks the agent
for candidates, applies each reply (a whole kernel, SEARCH/REPLACE edits or a unified diff),
verifies it with the gate and sends compact feedback back, until a candidate passes, the budget
ends or three rounds in a row give no candidate. A reply gives none when it cannot be applied or
its kernel is not this port's (:mod:`porter.agent.screen`: the entry renamed, a header line
missing); the model is told why, in the next round's prompt, and the port goes on: nothing a model
writes ends a port with an input error. Everything is recorded in ``.porter/runs/<id>/`` as it happens.

Each candidate is judged by :func:`porter.gate.verdict.judge` under the port's requirement (native
instructions, where the tensor-core model changes): ``passed``, ``passed without native
instructions``, ``not run on target hardware`` or ``failed``. The port's status is its best
candidate's (highest rank, then fastest; no candidate is ``failed``). The session stops at the
first candidate that is ``not run on target hardware``: more rounds could not be verified here, so
they are not spent. Where porter's PTX emulator runs the candidate (by default where no GPU here
can), that is the first candidate equivalent in emulation with the target's own instructions in
its SASS: one wrong in emulation, or without those instructions where they are required, is
failed and fed back like any other.

Between rounds the session asks its steering (:mod:`porter.agent.steering`): a developer may add a
hint for the model, edit the candidate (verified as the next one), accept the best or stop. The
loop's state is written to ``session.json`` at every step, and a Ctrl-C leaves the records whole
with ``result.json`` saying ``interrupted``: :func:`resume_port` goes on from the last step
(:mod:`porter.agent.resume`), on this machine or another. A resumed run whose last candidate could
not run where it was recorded checks it again first: this machine may have the target GPU. The
check is recorded (origin ``recheck``) only when it ran here: resuming on another machine without
the GPU adds no identical candidates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from porter.agent.llm import (
    Budget,
    BudgetExhausted,
    ModelClient,
    ModelError,
    Spend,
    SpendRecord,
    complete_within,
)
from porter.agent.resume import SessionState
from porter.agent.runs import CandidateRecord, Ended, RunConfig, RunLog, RunOutcome, new_run_id
from porter.agent.steering import Steering, Unsteered
from porter.errors import EnvironmentProblem, InputError
from porter.gate.check import CheckOptions
from porter.gate.evidence import equivalence, outcome_words
from porter.gate.plan import plan_seeds
from porter.gate.references import ReferenceCache
from porter.gate.spec import Spec
from porter.gate.verdict import Status, Verdict, judge
from porter.jsonable import to_jsonable
from porter.pool.verifier import CheckJob, RunnerVerifier, Verifier
from porter.ptx import PtxModule, retarget
from porter.ptx.arch import (
    ArchProfile,
    compatibility,
    features_used,
    get_profile,
    negotiate_version,
    normalize_arch,
    tensor_core_change,
)
from porter.ptx.inspection import uses_tensor_cores
from porter.ptx.isa import IsaSupport
from porter.ptx.toolchain import Toolchain

if TYPE_CHECKING:
    from porter.agent.edits import EditOutcome
    from porter.agent.resume import ResumePoint
    from porter.agent.screen import PortShape
    from porter.agent.steering import RoundView, Steer

TENSOR_CORE_FEATURES = ("mma.sync", "wgmma", "tcgen05")
MAX_FORMAT_ERRORS = 3

Event = Callable[..., None]


@dataclass(frozen=True)
class PortRequest:
    kernel: Path
    spec: Spec
    to_arch: str
    from_arch: str | None = None
    agent: str = "port"
    budget: Budget = field(default_factory=Budget)
    optimize: bool = False
    require_native: bool | None = None  # None: required when the tensor-core model changes
    check: CheckOptions = field(default_factory=CheckOptions)
    call_timeout_s: float = 600.0
    runs_root: Path = Path(".porter/runs")
    repo_root: Path | None = None
    candidates: int = 1  # proposals per round: independent samples of the same conversation
    entry: str | None = None  # --entry: the entry to port, of a source with several


@dataclass(frozen=True)
class PortResult:
    run_id: str
    run_dir: Path
    status: Status
    stop_reason: str
    source_arch: str
    target: str
    target_reason: str
    require_native: bool
    model: str | None
    best: CandidateRecord | None
    candidates: tuple[CandidateRecord, ...]
    spend: SpendRecord
    entry: str = ""  # the source's entry: names the run and the review branch
    asked_target: str = ""  # --to as given, when the target chosen differs from it
    warnings: tuple[str, ...] = ()  # from the pre-flight
    stopped: bool = False  # the developer stopped it without accepting: no review branch; it can be resumed

    @property
    def outcome(self) -> str:
        """The status as people read it: ``equivalent in emulation, not run on target hardware``
        where the best candidate's evidence of equivalence is the emulator's
        (:func:`porter.gate.evidence.outcome_words`), else the status word."""
        return outcome_words(self.status, self.best.verdict if self.best else None)


def repo_relative(path: Path, root: Path | None) -> str | None:
    """``path`` relative to the repository (POSIX form), or None when it lies outside or there is none."""
    if root is None:
        return None
    resolved, top = path.resolve(), root.resolve()
    return resolved.relative_to(top).as_posix() if resolved.is_relative_to(top) else None


def source_entry(module: PtxModule, spec: Spec, path: Path) -> str:
    """The source's entry as it runs (its own porter-launch line applied): names runs and branches,
    which a file name cannot (every Triton dump is ``kernel.ptx``)."""
    from porter.gate.spec import declared_spec

    return declared_spec(spec, module.text, source=str(path))[0].entry


def choose_target(module: PtxModule, to_arch: str, require_native: bool | None = None) -> tuple[str, str]:
    """The concrete target for ``--to``, and why. ``sm_100`` means the family's arch-specific
    target (sm_100a) when the kernel needs it: it uses tensor cores and the target's own tensor-core
    model, or another instruction the kernel uses, exists only on the arch-specific variant. With
    ``require_native=False`` (``--no-require-native``) the target is exactly what was asked.
    Callers say loudly when the target is not the one asked for (see :func:`target_changed`)."""
    asked = normalize_arch(to_arch)
    if asked[-1] in "af":
        return asked, f"{asked}, as asked"
    if require_native is False:
        return asked, f"{asked}, as asked (--no-require-native: the arch-specific {asked}a is not chosen)"
    special = asked + "a"
    try:
        plain, arch_specific = get_profile(asked), get_profile(special)
    except Exception:  # no 'a' profile for this arch: the plain target is the only choice
        return asked, f"{asked}, as asked"
    if uses_tensor_cores(module) and arch_specific.tensor_core != plain.tensor_core:
        return special, (f"{special}: the kernel uses tensor cores, and {arch_specific.tensor_core} "
                         f"exists only on the arch-specific target ({asked} alone has {plain.tensor_core}); "
                         f"--no-require-native keeps {asked}")
    needed = sorted({u.feature for u in features_used(module.instructions())
                     if u.feature in plain.rejects and u.feature in arch_specific.accepts})
    if needed:
        return special, f"{special}: the kernel uses {', '.join(needed)}, which {asked} does not have"
    return asked, f"{asked}: nothing in the kernel needs the arch-specific {special}"


def target_changed(asked: str, target: str) -> str | None:
    """The line to print first when the target is not the one asked for, else None."""
    wanted = normalize_arch(asked)
    return None if wanted == target else f"target {target}, not {wanted} as asked"


def _check_entry_option(module: PtxModule, entry: str | None, path: Path) -> None:
    """``--entry`` names a kernel of the source: one line (exit 2) listing them when it does not."""
    names = [e.name for e in module.kernels]
    if entry is not None and entry not in names:
        raise InputError(f"{path}: --entry {entry}: no such .entry (entries: {', '.join(names) or 'none'})")


def native_required(module: PtxModule, src: ArchProfile, dst: ArchProfile) -> bool:
    return uses_tensor_cores(module) and tensor_core_change(src, dst) is not None


def baseline_text(module: PtxModule, target: str, isa: IsaSupport | None = None) -> tuple[str, str]:
    """The mechanical retarget: .target set to the target, .version raised to what it needs there, or
    lowered to what the ptxas of ``isa`` accepts when nothing needs more; and the note that says so."""
    choice = negotiate_version(module, target, isa)
    if choice.problem:
        raise EnvironmentProblem(choice.problem)
    return retarget(module.text, target, version=choice.version), choice.note


def _best(record: CandidateRecord) -> tuple[int, float]:
    return record.judgement.rank, -record.median_ms


def _cannot_go_further(record: CandidateRecord, target: str) -> str | None:
    """A candidate that assembles for an absent target (with its signature SASS, where native
    instructions are required) and is not wrong in emulation is as far as this machine can take a
    port: more rounds could not produce more evidence, so none is spent. A candidate wrong in
    emulation, or equivalent there but without the target's own instructions where they are
    required, is failed (:func:`porter.gate.verdict.judge`): the model hears why and the port goes
    on. One the emulator could not run (an instruction it lacks) or broke down on ends the port
    too, and the reason says so: the model is not asked to write around porter's emulator."""
    if record.status != Status.NOT_RUN_ON_TARGET:
        return None
    found = ", ".join(op for op, n in record.verdict.signature_sass.items() if n)
    with_sass = f" with {found} in its SASS" if found and record.require_native else ""
    said = equivalence(record.verdict)
    gate = record.verdict.gate("emulation")
    if said.emulated and said.said == "yes":
        evidence = f" and is {said.summary}"
    elif gate is not None:
        evidence = f" (emulation {gate.status}: {gate.summary})"
    else:
        evidence = ""
    return (f"candidate {record.index} assembles for {target}{with_sass}{evidence}; it cannot run on this machine, "
            f"so nothing more can be verified here")


def _first_line(text: str, limit: int = 240) -> str:
    """The first line of a message, for one line of progress or a stop reason."""
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _compact(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Older candidates are replaced by a pointer: the model has their feedback, and kernels are long."""
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return [
        {"role": "assistant", "content": "[an earlier candidate, superseded; its feedback follows]"}
        if m["role"] == "assistant" and i != last_assistant else m
        for i, m in enumerate(messages)
    ]


@dataclass(frozen=True)
class _Setup:
    """What a session settles before its first candidate (or reads back when it resumes)."""

    module: PtxModule
    source_arch: str
    target: str
    target_reason: str
    changed: str | None
    require: bool
    src: ArchProfile
    dst: ArchProfile
    entry: str
    warnings: tuple[str, ...]
    log: RunLog


class PortSession:
    """One port. Candidates are verified through ``verifier`` (a round's candidates side by side in
    a pool or on a cluster), else one after another on ``runner``. The candidates of a run share
    its seeds, so that the reference outputs of each case are computed once for all of them
    (:class:`~porter.gate.references.ReferenceCache`); a candidate that passes on them is checked
    again on fresh seeds, and only that check can call it passed.

    ``steering`` is asked after each round when the session would go on (default:
    :class:`~porter.agent.steering.Unsteered`); ``gpu_guard`` is held around each round's check
    (an MCP server's lock, so that two ports share one GPU). ``run(resume=...)`` goes on with a
    recorded run (:mod:`porter.agent.resume`)."""

    def __init__(self, request: PortRequest, *, toolchain: Toolchain, runner: Any = None, model: ModelClient | None,
                 on_event: Event | None = None, verifier: Verifier | None = None, steering: Steering | None = None,
                 gpu_guard: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        if request.entry is not None:  # --entry: the spec describes that entry of the source, and checks it
            request = replace(request, spec=replace(request.spec, entry=request.entry))
        self.request = request
        self.toolchain = toolchain
        self.runner = runner
        self.verifier: Verifier = verifier if verifier is not None else RunnerVerifier(runner, toolchain)
        self.model = model
        self.emit = on_event or (lambda kind, **data: None)
        self.steering: Steering = steering or Unsteered()
        self.gpu_guard = gpu_guard or nullcontext
        self.spend = Spend()
        self.candidates: list[CandidateRecord] = []
        self.seeds = plan_seeds(request.check.seeds)  # the run's seeds, shared by its candidates
        self.references = ReferenceCache()
        self.texts: dict[int, str] = {}
        self.stopped = False  # the developer stopped the port without accepting it
        self._state: SessionState | None = None
        self._resumed = False

    # -- candidates ------------------------------------------------------------------------------
    def _verify_round(self, log: RunLog, texts: list[str], origin: str, round_no: int, target: str,
                      require_native: bool) -> list[CandidateRecord]:
        """Save, verify and record a round's candidates."""
        first = len(self.candidates)
        paths = [log.candidate(first + k, text) for k, text in enumerate(texts)]
        for k, text in enumerate(texts):
            self.texts[first + k] = text
            self.emit("checking", index=first + k, origin=origin, round=round_no)
        return self._record(log, paths, self._check(paths, target, require_native), origin, round_no, require_native)

    def _check(self, paths: list[Path], target: str, require_native: bool) -> list[Verdict]:
        """Verify candidates together; those that pass on the run's seeds are verified again,
        together, on fresh seeds, and that second Verdict is the one returned."""
        # The source kernel is timed beside each candidate (speed vs source); the spec's reference judges.
        options = replace(self.request.check, arch=target, native=require_native, speed_baseline=self.request.kernel,
                          seeds=self.seeds, entry=self.request.entry or self.request.check.entry)
        with self.gpu_guard():
            verdicts = self.verifier.verify([CheckJob(path, self.request.spec, options, self.references)
                                             for path in paths])
            return self._confirm(paths, verdicts, options, require_native)

    def _record(self, log: RunLog, paths: list[Path], verdicts: list[Verdict], origin: str, round_no: int,
                require_native: bool) -> list[CandidateRecord]:
        """The records of the candidates saved at ``paths`` (the next indices), with their feedback."""
        from porter.agent.feedback import feedback_for

        records: list[CandidateRecord] = []
        for path, verdict in zip(paths, verdicts, strict=True):
            text = self.texts[len(self.candidates)]
            feedback = feedback_for(verdict, verdict.assembly, candidate_text=text, require_native=require_native)
            record = CandidateRecord(len(self.candidates), origin, round_no, verdict, feedback, path, require_native)
            log.candidate_record(record)
            self.candidates.append(record)
            self.emit("verdict", index=record.index, status=record.status, verdict=verdict)
            records.append(record)
        return records

    def _checked_again(self, log: RunLog, record: CandidateRecord, round_no: int,
                       setup: _Setup) -> tuple[int, Path, Verdict] | None:
        """A resumed run's last candidate, which could not run where it was recorded, checked on this
        machine: saved as the next candidate (its index, path and Verdict; the caller records it)
        when this machine could run it, else None and nothing is saved: a machine without the target
        GPU says nothing new, so resuming there again and again adds no identical rechecks."""
        self.emit("checking", index=record.index, origin="recheck", round=round_no)
        (verdict,) = self._check([log.dir / "candidates" / f"{record.index:02d}.ptx"], setup.target, setup.require)
        if judge(verdict, require_native=setup.require).status is Status.NOT_RUN_ON_TARGET:
            return None
        new = len(self.candidates)
        self.texts[new] = self.texts[record.index]
        path = log.candidate(new, self.texts[new])
        return new, path, replace(verdict, kernel=str(path))

    def _verify(self, log: RunLog, text: str, origin: str, round_no: int, target: str,
                require_native: bool) -> CandidateRecord:
        return self._verify_round(log, [text], origin, round_no, target, require_native)[0]

    def _confirm(self, paths: list[Path], verdicts: list[Verdict], options: CheckOptions,
                 require_native: bool) -> list[Verdict]:
        """The Verdicts, with each one that passes replaced by its thorough check on fresh seeds (which
        no candidate of this run has seen, and whose references are computed anew)."""
        passing = [k for k, v in enumerate(verdicts) if judge(v, require_native=require_native).passed]
        if not passing:
            return verdicts
        fresh = plan_seeds()
        while fresh == self.seeds:
            fresh = plan_seeds()
        # The confirming check is thorough: its large size set passes 2^31 bytes (see porter.gate.plan).
        again = self.verifier.verify([CheckJob(paths[k], self.request.spec, replace(options, seeds=fresh, thorough=True))
                                      for k in passing])
        result = list(verdicts)
        for k, verdict in zip(passing, again, strict=True):
            note = (f"re-verified on fresh seeds {', '.join(map(str, fresh))} after passing on the run's seeds "
                    f"{', '.join(map(str, self.seeds))}")
            result[k] = replace(verdict, warnings=(*verdict.warnings, note))
        return result

    # -- the run ---------------------------------------------------------------------------------
    def run(self, resume: ResumePoint | None = None) -> PortResult:
        """Run the port (or go on with ``resume``). On Ctrl-C the run's records are left whole,
        ``result.json`` says ``interrupted``, and the KeyboardInterrupt goes on up."""
        setup = self._begin() if resume is None else self._reopen(resume)
        try:
            stop = self._loop(setup, resume.state if resume is not None else None)
        except KeyboardInterrupt:
            self._end(setup, "interrupted (Ctrl-C): `porter port --resume "
                      f"{setup.log.id}` goes on from the last step", ended=Ended.INTERRUPTED)
            raise
        return self._end(setup, stop, ended=Ended.STOPPED if self.stopped else Ended.FINISHED)

    def _begin(self) -> _Setup:
        from porter.agent.preflight import preflight
        from porter.agent.prompts import load_agent
        from porter.agent.resume import snapshot_inputs
        from porter.ptx import read_ptx

        req = self.request
        module = read_ptx(req.kernel)
        _check_entry_option(module, req.entry, req.kernel)
        load_agent(req.agent, repo_root=req.repo_root)  # an unknown --agent is said now, with the known names
        source_arch = normalize_arch(req.from_arch) if req.from_arch else module.arch
        target, target_reason = choose_target(module, req.to_arch, req.require_native)
        changed = target_changed(req.to_arch, target)
        src, dst = get_profile(source_arch), get_profile(target)
        require = native_required(module, src, dst) if req.require_native is None else req.require_native
        # Before anything is spent or recorded: the source assembles and the spec describes it.
        warnings = tuple(preflight(module, req.spec, req.kernel, req.from_arch, self.toolchain, target))
        _, lowered = baseline_text(module, target, self.toolchain.isa())
        warnings += (f"the mechanical retarget's {lowered}",) if lowered else ()
        entry = source_entry(module, req.spec, req.kernel)
        log = RunLog(req.runs_root, new_run_id(entry, target))
        log.write_json("config.json", RunConfig(
            kernel=str(req.kernel), spec=str(req.spec.path), spec_in_repo=repo_relative(req.spec.path, req.repo_root),
            kernel_in_repo=repo_relative(req.kernel, req.repo_root),
            source_arch=source_arch, entry=entry, asked_target=req.to_arch, target=target, target_reason=target_reason,
            target_changed=changed, require_native=require, model=self.model.name if self.model else None,
            agent=req.agent, budget=to_jsonable(req.budget), optimize=req.optimize, candidates=req.candidates,
            entry_option=req.entry, warnings=warnings,
            started=time.time(),
        ))
        log.write_json("inputs.json", snapshot_inputs(log.dir, req.kernel, req.spec, self.model))
        self.emit("start", run_id=log.id, source_arch=source_arch, target=target, reason=target_reason,
                  changed=changed, require_native=require, model=self.model.name if self.model else None)
        for warning in warnings:
            self.emit("warning", message=warning)
        return _Setup(module, source_arch, target, target_reason, changed, require, src, dst, entry, warnings, log)

    def _reopen(self, point: ResumePoint) -> _Setup:
        from porter.ptx import read_ptx

        config = point.config
        module = read_ptx(self.request.kernel)
        log = RunLog.reopen(point.run_dir)
        self.candidates = list(point.records)
        self.texts = dict(point.texts)
        self.spend = Spend.going_on_from(point.spend)
        self._resumed = True
        self.emit("start", run_id=log.id, source_arch=config.source_arch, target=config.target,
                  reason=config.target_reason, changed=config.target_changed, require_native=config.require_native,
                  model=self.model.name if self.model else None, resumed=len(self.candidates))
        return _Setup(module, config.source_arch, config.target, config.target_reason, config.target_changed,
                      config.require_native, get_profile(config.source_arch), get_profile(config.target), config.entry,
                      config.warnings, log)

    def _end(self, setup: _Setup, stop: str, *, ended: Ended) -> PortResult:
        req, log = self.request, setup.log
        best = max(self.candidates, key=_best) if self.candidates else None
        result = PortResult(
            run_id=log.id, run_dir=log.dir, status=judge(best.verdict if best else None,
                                                         require_native=setup.require).status, stop_reason=stop,
            source_arch=setup.source_arch, target=setup.target, target_reason=setup.target_reason,
            require_native=setup.require, model=self.model.name if self.model else None, best=best,
            candidates=tuple(self.candidates), spend=self._spend(), entry=setup.entry,
            asked_target=normalize_arch(req.to_arch) if setup.changed else "", warnings=setup.warnings,
            stopped=self.stopped,
        )
        log.write_json("spend.json", result.spend)
        log.write_json("result.json", RunOutcome(result.status, stop, setup.target, best.index if best else None,
                                                 result.spend, ended=ended,
                                                 equivalent=equivalence(best.verdict).label if best else ""))
        self.emit("interrupted" if ended is Ended.INTERRUPTED else "done", result=result)
        return result

    def _spend(self) -> SpendRecord:
        return self.spend.snapshot()

    # -- the loop --------------------------------------------------------------------------------
    def _checkpoint(self, log: RunLog, state: SessionState) -> SessionState:
        """Where the loop stands, on disk before the next step (what a resume goes on from)."""
        log.write_json("session.json", state)
        self._state = state
        return state

    def _text(self, index: int | None, module: PtxModule) -> str:
        return module.text if index is None else self.texts[index]

    def _loop(self, setup: _Setup, state: SessionState | None) -> str:
        from porter.agent.feedback import format_error_feedback
        from porter.agent.prompts import load_agent
        from porter.agent.resume import Pending, extend, resumed

        req, log, module = self.request, setup.log, setup.module
        if state is None:
            if not self.candidates:
                self._verify(log, baseline_text(module, setup.target, self.toolchain.isa())[0], "retarget", 0,
                             setup.target, setup.require)
            baseline = self.candidates[-1]
            if self._resumed and baseline.status is Status.NOT_RUN_ON_TARGET:  # perhaps this machine can run it
                again = self._checked_again(log, baseline, 0, setup)
                if again is None:
                    return f"checked again on this machine: {_cannot_go_further(baseline, setup.target)}"
                _, path, verdict = again
                baseline = self._record(log, [path], [verdict], "recheck", 0, setup.require)[0]
            if baseline.passes and not req.optimize:
                return "the mechanical retarget passes every gate: no model needed"
            if (why := _cannot_go_further(baseline, setup.target)) is not None:
                return why
            if self.model is None:
                return "no model configured: the result is the mechanical retarget baseline alone"
            state = self._checkpoint(log, self._first_prompt(setup, baseline))
            if self._resumed:
                state = self._checkpoint(log, resumed(state, req.budget, baseline.index))
            state, end = self._steer(setup, state, baseline)
            if end is not None:
                return end
        elif self._resumed:
            state = self._checkpoint(log, resumed(state, req.budget, len(self.candidates) - 1))
            last = self.candidates[-1]
            if state.pending is None and last.status is Status.NOT_RUN_ON_TARGET:
                # The run stopped where its machine could verify no more: this one may run it.
                again = self._checked_again(log, last, state.round, setup)
                if again is None:
                    return f"checked again on this machine: {_cannot_go_further(last, setup.target)}"
                new, path, verdict = again
                state = self._checkpoint(log, replace(state, pending=Pending(new, "recheck")))
                self._record(log, [path], [verdict], "recheck", state.round, setup.require)
        if self.model is None:
            return "no model configured: the result is the mechanical retarget baseline alone"
        agent = load_agent(req.agent, repo_root=req.repo_root)
        shape = self._shape(setup)
        # Zero is a budget (the baseline alone), not "unset": only None falls back to the agent's rounds.
        budget = replace(req.budget, max_rounds=agent.max_rounds if req.budget.max_rounds is None
                         else req.budget.max_rounds)
        if self._resumed:  # a resumed run's budget counts from where it stood
            budget = extend(budget, self.spend)
        while True:
            if state.pending is not None:
                state, end = self._settle(setup, state)
                if end is not None:
                    return end
                continue
            round_no = state.round + 1
            replies, stop = self._sample(log, list(state.messages), budget, agent)
            if not replies:
                return stop
            outcomes = self._read_replies(log, replies, round_no, self._text(state.current, module), shape)
            usable = [(reply, outcome) for reply, outcome in zip(replies, outcomes, strict=True) if outcome.ok]
            if not usable:
                note = format_error_feedback(outcomes[0])
                log.message("user", note)
                messages = (*state.messages, {"role": "assistant", "content": replies[0].text},
                            {"role": "user", "content": note})
                state = self._checkpoint(log, replace(state, messages=messages, format_errors=state.format_errors + 1,
                                                      sampled=state.sampled + len(replies) - 1, round=round_no))
                self.emit("format-error", round=round_no, error=outcomes[0].error_kind)
                if state.format_errors >= MAX_FORMAT_ERRORS:
                    return (f"{state.format_errors} rounds in a row gave no candidate (last: "
                            f"{outcomes[0].error_kind}: {_first_line(outcomes[0].error)})")
                if stop:
                    return stop
                continue
            first = len(self.candidates)
            for k, (_, outcome) in enumerate(usable):
                log.candidate(first + k, outcome.text)
                self.texts[first + k] = outcome.text
            # The round's replies wait beside the conversation until the round is verified: the
            # best candidate's reply (its best pass, else its best failure) is the one the model sees.
            state = self._checkpoint(log, replace(
                state, format_errors=0, sampled=state.sampled + len(replies) - len(usable), round=round_no,
                pending=Pending(first, "model", replies=tuple(reply.text for reply, _ in usable))))

    def _read_replies(self, log: RunLog, replies: list[Any], round_no: int, current: str,
                      shape: PortShape) -> list[EditOutcome]:
        """Each reply of a round applied to ``current`` and screened (:mod:`porter.agent.screen`);
        each one that gives no candidate is said, with its sample's number when the round has several."""
        from porter.agent.edits import apply_reply
        from porter.agent.screen import screened

        samples = max(1, self.request.candidates)
        outcomes = []
        for sample, reply in enumerate(replies, 1):
            log.message("assistant", reply.text)
            self.emit("reply", round=round_no, sample=sample, samples=samples, tokens=reply.usage.total_tokens,
                      spend=self._spend())
            outcome = screened(apply_reply(current, reply.text, truncated=reply.truncated), current, shape)
            if not outcome.ok:
                self.emit("no-candidate", round=round_no, sample=sample, samples=samples, error=outcome.error_kind,
                          message=_first_line(outcome.error))
            outcomes.append(outcome)
        return outcomes

    def _shape(self, setup: _Setup) -> PortShape:
        """What a reply's kernel must declare to be a candidate of this port (see :mod:`porter.agent.screen`)."""
        from porter.agent.screen import PortShape

        version = negotiate_version(setup.module, setup.target, self.toolchain.isa()).version
        return PortShape(spec=self.request.spec, target=setup.target, address_size=setup.module.address_size,
                         version=version, entry=self.request.entry)

    def _sample(self, log: RunLog, messages: list[dict[str, str]], budget: Budget, agent: Any) -> tuple[list[Any], str]:
        """Up to ``candidates`` independent replies to the same conversation (one model call each,
        within the budget), and why fewer came back ('' when all did)."""
        assert self.model is not None
        replies: list[Any] = []
        stop = ""
        try:
            for _ in range(max(1, self.request.candidates)):
                replies.append(complete_within(self.model, _compact(messages), budget=budget, spend=self.spend,
                                               temperature=agent.temperature, max_tokens=agent.max_tokens_per_reply,
                                               timeout_s=self.request.call_timeout_s))
        except BudgetExhausted as exhausted:
            stop = exhausted.reason
        except ModelError as err:
            stop = f"model error: {err}"
        finally:
            log.write_json("spend.json", self._spend())
        return replies, stop

    def _first_prompt(self, setup: _Setup, baseline: CandidateRecord) -> SessionState:
        from porter.agent.prompts import PortContext, build_messages, load_agent

        req, log, module = self.request, setup.log, setup.module
        agent = load_agent(req.agent, repo_root=req.repo_root)
        ctx = PortContext(source_ptx=module.text, source=module, src_profile=setup.src, dst_profile=setup.dst,
                          target=setup.target, target_reason=setup.target_reason, spec=req.spec,
                          baseline=baseline.verdict, baseline_feedback=baseline.feedback,
                          require_native=setup.require, offenders=compatibility(module, setup.target).offenders,
                          isa=self.toolchain.isa())
        messages = build_messages(agent, ctx)
        log.write_json("prompt.json", messages)
        for m in messages:
            log.message(m["role"], m["content"])
        # The prompt shows the source as is: the model's first edits apply to it.
        return SessionState(messages=tuple(messages), current=None)

    def _settle(self, setup: _Setup, state: SessionState) -> tuple[SessionState, str | None]:
        """Verify the pending round (taking the records a resumed run has), feed its best candidate
        back with its reply, and ask the steering; a stop reason when the port ends there."""
        from porter.agent.steering import add_note, edit_note

        assert state.pending is not None
        log, pending = setup.log, state.pending
        indices = range(pending.index, pending.index + max(1, len(pending.replies)))
        for index in indices:
            if index not in self.texts:
                self.texts[index] = (log.dir / "candidates" / f"{index:02d}.ptx").read_text()
        todo = [self.texts[i] for i in indices if i >= len(self.candidates)]
        if todo:
            self._verify_round(log, todo, pending.origin, state.round, setup.target, setup.require)
        record = max((self.candidates[i] for i in indices), key=_best)
        if pending.replies:  # the model's round: the best candidate's reply joins the conversation
            reply = pending.replies[record.index - pending.index]
            state = replace(state, messages=(*state.messages, {"role": "assistant", "content": reply}),
                            sampled=state.sampled + len(pending.replies) - 1)
        state = replace(state, current=record.index, pending=None)
        if record.passes and not self.request.optimize:
            self._checkpoint(log, state)
            by = " (the developer's edit)" if record.origin == "edit" else ""
            return state, f"candidate {record.index}{by} passes every gate"
        if (why := _cannot_go_further(record, setup.target)) is not None:
            self._checkpoint(log, state)
            return state, why
        if record.origin == "edit":
            note = edit_note(record.index, self.texts[record.index], record.feedback)
            messages = tuple(add_note(list(state.messages), note))
        else:
            note = record.feedback
            messages = (*state.messages, {"role": "user", "content": note})
        log.message("user", note)
        state = self._checkpoint(log, replace(state, messages=messages))
        return self._steer(setup, state, record)

    def _ask(self, setup: _Setup, view: RoundView) -> Steer:
        """The steering's answer after a candidate. An edit that is not a kernel of this port (its
        entry renamed, a header line gone: :mod:`porter.agent.screen`) is not checked: the developer
        is told why and asked again, and the port goes on."""
        from porter.agent.screen import screen_kernel
        from porter.agent.steering import Action

        while True:
            steer = self.steering.after_candidate(view)
            if steer.action is not Action.EDIT or not steer.text.strip():
                return steer
            problem = screen_kernel(steer.text, self._shape(setup), "Your edit")
            if problem is None:
                return steer
            self.emit("warning", message=f"your edit of candidate {view.record.index} was not checked: {problem[1]}")

    def _steer(self, setup: _Setup, state: SessionState, record: CandidateRecord) -> tuple[SessionState, str | None]:
        """Ask the steering what to do after ``record``; a stop reason when the port ends there."""
        from porter.agent.resume import Hint, Pending
        from porter.agent.steering import Action, RoundView, add_note, hint_note

        log = setup.log
        index = record.index
        previous = (f"candidate {index - 1}", self.texts[index - 1]) if index > 0 and index - 1 in self.texts \
            else ("source", setup.module.text)
        view = RoundView(run_id=log.id, record=record, text=self.texts[index], previous_text=previous[1],
                         previous_label=previous[0], best=max(self.candidates, key=_best), spend=self._spend())
        steer = self._ask(setup, view)
        if steer.action is Action.HINT and steer.text.strip():
            hint = Hint(after=index, text=steer.text.strip(), at=time.time())
            log.message("hint", hint.text)
            state = self._checkpoint(log, replace(state, messages=tuple(add_note(list(state.messages),
                                                                                 hint_note(hint.text))),
                                                  hints=(*state.hints, hint)))
            self.emit("hint", after=index, text=hint.text)
            return state, None
        if steer.action is Action.ACCEPT:
            best = view.best
            return state, f"accepted by the developer after candidate {index}: the best is candidate {best.index}"
        if steer.action is Action.STOP:
            self.stopped = True
            return state, (f"stopped by the developer after candidate {index} (`porter port --resume {log.id}` "
                           "goes on)")
        if steer.action is Action.EDIT and steer.text.strip():
            new = len(self.candidates)
            log.candidate(new, steer.text)
            self.texts[new] = steer.text
            self.emit("edit", index=new, after=index)
            state = self._checkpoint(log, replace(state, pending=Pending(new, "edit")))
            return self._settle(setup, state)
        return state, None


def run_port(kernel: Path, spec: Spec, to_arch: str, *, toolchain: Toolchain, runner: Any = None, model: ModelClient | None,
             from_arch: str | None = None, agent: str = "port", budget: Budget | None = None, optimize: bool = False,
             require_native: bool | None = None, repo_root: Path | None = None, runs_root: Path | None = None,
             on_event: Event | None = None, verifier: Verifier | None = None, candidates: int = 1,
             steering: Steering | None = None, entry: str | None = None,
             gpu_guard: Callable[[], AbstractContextManager[Any]] | None = None) -> PortResult:
    """The one way a port session is built and run (``porter port``, ``porter ci --port-to``,
    ``porter bench``, the MCP server): runs are recorded under ``runs_root``, by default the
    repository's ``.porter/runs``. The caller owns the runner (or the verifier) and the model;
    ``candidates`` proposals per round are verified together; ``entry`` (``--entry``) chooses the
    entry of a source with several."""
    if runs_root is None:
        runs_root = (repo_root if repo_root is not None else Path.cwd()) / ".porter" / "runs"
    request = PortRequest(kernel=kernel, spec=spec, to_arch=to_arch, from_arch=from_arch, agent=agent,
                          budget=budget or Budget(), optimize=optimize, require_native=require_native,
                          runs_root=runs_root, repo_root=repo_root, candidates=candidates, entry=entry)
    return PortSession(request, toolchain=toolchain, runner=runner, model=model, on_event=on_event,
                       verifier=verifier, steering=steering, gpu_guard=gpu_guard).run()


def resume_port(point: ResumePoint, *, toolchain: Toolchain, runner: Any = None, model: ModelClient | None,
                budget: Budget | None = None, repo_root: Path | None = None, on_event: Event | None = None,
                verifier: Verifier | None = None, steering: Steering | None = None,
                gpu_guard: Callable[[], AbstractContextManager[Any]] | None = None) -> PortResult:
    """Go on with a recorded run from its last step, from the inputs it recorded (the same kernel,
    spec, target, requirement, agent and candidates per round), with ``budget`` counted on top of
    what was spent."""
    config = point.config
    request = PortRequest(kernel=point.kernel, spec=point.spec(), to_arch=config.target, from_arch=config.source_arch,
                          agent=config.agent, budget=budget or Budget(max_rounds=None), optimize=config.optimize,
                          require_native=config.require_native, runs_root=point.run_dir.parent, repo_root=repo_root,
                          candidates=config.candidates, entry=config.entry_option)
    return PortSession(request, toolchain=toolchain, runner=runner, model=model, on_event=on_event,
                       verifier=verifier, steering=steering, gpu_guard=gpu_guard).run(resume=point)
