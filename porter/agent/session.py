"""The porting loop: baseline -> propose -> verify -> feed back -> stop.

A session checks the mechanical retarget first (candidate 0). With a model it then asks the agent
for candidates, applies each reply (a whole kernel or SEARCH/REPLACE edits), verifies it with the
gate and sends compact feedback back, until a candidate passes, the budget ends or the model
keeps replying in a broken format. Everything is recorded in ``.porter/runs/<id>/`` as it happens.

Each candidate is judged by :func:`porter.gate.verdict.judge` under the port's requirement (native
instructions, where the tensor-core model changes): ``passed``, ``passed without native
instructions``, ``not run on target hardware`` or ``failed``. The port's status is its best
candidate's (highest rank, then fastest; no candidate is ``failed``). The session stops at the
first candidate that is ``not run on target hardware``: more rounds could not be verified here, so
they are not spent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from porter.agent.llm import Budget, BudgetExhausted, ModelClient, ModelError, Spend, complete_within
from porter.agent.runs import CandidateRecord, RunConfig, RunLog, RunOutcome, new_run_id
from porter.errors import EnvironmentProblem
from porter.gate.check import CheckOptions
from porter.gate.plan import check_seeds
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
from porter.ptx.isa import IsaSupport
from porter.ptx.toolchain import Toolchain

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
    spend: dict[str, Any]
    entry: str = ""  # the source's entry: names the run and the review branch
    asked_target: str = ""  # --to as given, when the target chosen differs from it
    warnings: tuple[str, ...] = ()  # from the pre-flight


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


def uses_tensor_cores(module: PtxModule) -> bool:
    return any(u.feature.startswith(TENSOR_CORE_FEATURES) for u in features_used(module.instructions()))


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
    instructions are required) is as far as this machine can take a port: more rounds could not
    produce more evidence, so none is spent."""
    if record.status == Status.NOT_RUN_ON_TARGET:
        found = ", ".join(op for op, n in record.verdict.signature_sass.items() if n)
        with_sass = f" with {found} in its SASS" if found and record.require_native else ""
        return (f"candidate {record.index} assembles for {target}{with_sass}; it cannot run on this machine, "
                f"so nothing more can be verified here")
    return None


def _compact(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Older candidates are replaced by a pointer: the model has their feedback, and kernels are long."""
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return [
        {"role": "assistant", "content": "[an earlier candidate, superseded; its feedback follows]"}
        if m["role"] == "assistant" and i != last_assistant else m
        for i, m in enumerate(messages)
    ]


class PortSession:
    """One port. Candidates are verified through ``verifier`` (a round's candidates side by side in
    a pool or on a cluster), else one after another on ``runner``. The candidates of a run share
    its seeds, so that the reference outputs of each case are computed once for all of them
    (:class:`~porter.gate.references.ReferenceCache`); a candidate that passes on them is checked
    again on fresh seeds, and only that check can call it passed."""

    def __init__(self, request: PortRequest, *, toolchain: Toolchain, runner: Any = None, model: ModelClient | None,
                 on_event: Event | None = None, verifier: Verifier | None = None) -> None:
        self.request = request
        self.toolchain = toolchain
        self.runner = runner
        self.verifier: Verifier = verifier if verifier is not None else RunnerVerifier(runner, toolchain)
        self.model = model
        self.emit = on_event or (lambda kind, **data: None)
        self.spend = Spend()
        self.candidates: list[CandidateRecord] = []
        self.seeds = check_seeds(request.check.seeds)  # the run's seeds, shared by its candidates
        self.references = ReferenceCache()

    # -- candidates ------------------------------------------------------------------------------
    def _verify_round(self, log: RunLog, texts: list[str], origin: str, round_no: int, target: str,
                      require_native: bool) -> list[CandidateRecord]:
        """Verify a round's candidates together; those that pass on the run's seeds are verified
        again, together, on fresh seeds, and that second Verdict is the one recorded."""
        from porter.agent.feedback import feedback_for

        first = len(self.candidates)
        paths = [log.candidate(first + k, text) for k, text in enumerate(texts)]
        for k in range(len(texts)):
            self.emit("checking", index=first + k, origin=origin, round=round_no)
        # The source kernel is timed beside each candidate (speed vs source); the spec's reference judges.
        options = replace(self.request.check, arch=target, native=require_native, speed_baseline=self.request.kernel,
                          seeds=self.seeds)
        verdicts = self.verifier.verify([CheckJob(path, self.request.spec, options, self.references) for path in paths])
        verdicts = self._confirm(paths, verdicts, options, require_native)
        records = []
        for k, (text, path, verdict) in enumerate(zip(texts, paths, verdicts, strict=True)):
            feedback = feedback_for(verdict, verdict.assembly, candidate_text=text, require_native=require_native)
            record = CandidateRecord(first + k, origin, round_no, verdict, feedback, path, require_native)
            log.candidate_record(record)
            self.candidates.append(record)
            self.emit("verdict", index=record.index, status=record.status, verdict=verdict)
            records.append(record)
        return records

    def _confirm(self, paths: list[Path], verdicts: list[Verdict], options: CheckOptions,
                 require_native: bool) -> list[Verdict]:
        """The Verdicts, with each one that passes replaced by its check on fresh seeds (which no
        candidate of this run has seen, and whose references are computed anew)."""
        passing = [k for k, v in enumerate(verdicts) if judge(v, require_native=require_native).passed]
        if not passing:
            return verdicts
        fresh = check_seeds()
        while fresh == self.seeds:
            fresh = check_seeds()
        again = self.verifier.verify([CheckJob(paths[k], self.request.spec, replace(options, seeds=fresh))
                                      for k in passing])
        result = list(verdicts)
        for k, verdict in zip(passing, again, strict=True):
            note = (f"re-verified on fresh seeds {', '.join(map(str, fresh))} after passing on the run's seeds "
                    f"{', '.join(map(str, self.seeds))}")
            result[k] = replace(verdict, warnings=(*verdict.warnings, note))
        return result

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> PortResult:
        from porter.agent.preflight import preflight
        from porter.ptx import read_ptx

        req = self.request
        module = read_ptx(req.kernel)
        source_arch = normalize_arch(req.from_arch) if req.from_arch else module.arch
        target, target_reason = choose_target(module, req.to_arch, req.require_native)
        changed = target_changed(req.to_arch, target)
        src, dst = get_profile(source_arch), get_profile(target)
        require = native_required(module, src, dst) if req.require_native is None else req.require_native
        # Before anything is spent or recorded: the source assembles and the spec describes it.
        warnings = tuple(preflight(module, req.spec, req.kernel, req.from_arch, self.toolchain, target))
        baseline_ptx, lowered = baseline_text(module, target, self.toolchain.isa())
        warnings += (f"the mechanical retarget's {lowered}",) if lowered else ()
        entry = source_entry(module, req.spec, req.kernel)
        log = RunLog(req.runs_root, new_run_id(entry, target))
        log.write_json("config.json", RunConfig(
            kernel=str(req.kernel), spec=str(req.spec.path), spec_in_repo=repo_relative(req.spec.path, req.repo_root),
            source_arch=source_arch, entry=entry, asked_target=req.to_arch, target=target, target_reason=target_reason,
            target_changed=changed, require_native=require, model=self.model.name if self.model else None,
            agent=req.agent, budget=to_jsonable(req.budget), optimize=req.optimize, warnings=warnings,
            started=time.time(),
        ))
        self.emit("start", run_id=log.id, source_arch=source_arch, target=target, reason=target_reason,
                  changed=changed, require_native=require, model=self.model.name if self.model else None)
        for warning in warnings:
            self.emit("warning", message=warning)
        baseline = self._verify_round(log, [baseline_ptx], "retarget", 0, target, require)[0]
        stop = self._loop(log, module, src, dst, target, target_reason, require, baseline)
        best = max(self.candidates, key=_best) if self.candidates else None
        result = PortResult(
            run_id=log.id, run_dir=log.dir, status=judge(best.verdict if best else None,
                                                         require_native=require).status, stop_reason=stop, source_arch=source_arch,
            target=target, target_reason=target_reason, require_native=require,
            model=self.model.name if self.model else None, best=best, candidates=tuple(self.candidates),
            spend=self._spend(), entry=entry, asked_target=normalize_arch(req.to_arch) if changed else "",
            warnings=warnings,
        )
        log.write_json("result.json", RunOutcome(result.status, stop, target, best.index if best else None,
                                                 result.spend))
        self.emit("done", result=result)
        return result

    def _spend(self) -> dict[str, Any]:
        s = self.spend
        return {"rounds": s.rounds, "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                "usd": round(s.usd, 6), "wall_s": round(s.elapsed_s, 2)}

    def _loop(self, log: RunLog, module: PtxModule, src: ArchProfile, dst: ArchProfile, target: str,
              target_reason: str, require: bool, baseline: CandidateRecord) -> str:
        from porter.agent.edits import apply_reply
        from porter.agent.feedback import format_error_feedback
        from porter.agent.prompts import PortContext, build_messages, load_agent

        req = self.request
        if baseline.passes and not req.optimize:
            return "the mechanical retarget passes every gate: no model needed"
        if (why := _cannot_go_further(baseline, target)) is not None:
            return why
        if self.model is None:
            return "no model configured: the result is the mechanical retarget baseline alone"
        agent = load_agent(req.agent, repo_root=req.repo_root)
        ctx = PortContext(source_ptx=module.text, source=module, src_profile=src, dst_profile=dst, target=target,
                          target_reason=target_reason, spec=req.spec, baseline=baseline.verdict,
                          baseline_feedback=baseline.feedback, require_native=require,
                          offenders=compatibility(module, target).offenders, isa=self.toolchain.isa())
        messages = build_messages(agent, ctx)
        log.write_json("prompt.json", messages)
        for m in messages:
            log.message(m["role"], m["content"])
        current_text = module.text  # the prompt shows the source as is: first edits apply to it
        format_errors = 0
        # Zero is a budget (the baseline alone), not "unset": only None falls back to the agent's rounds.
        budget = replace(req.budget, max_rounds=agent.max_rounds if req.budget.max_rounds is None
                         else req.budget.max_rounds)
        while True:
            replies, stop = self._sample(log, messages, budget, agent)
            if not replies:
                return stop
            outcomes = []
            for reply in replies:
                log.message("assistant", reply.text)
                self.emit("reply", round=self.spend.rounds, tokens=reply.usage.total_tokens, spend=self._spend())
                outcomes.append(apply_reply(current_text, reply.text, truncated=reply.truncated))
            usable = [(reply, outcome) for reply, outcome in zip(replies, outcomes, strict=True) if outcome.ok]
            if not usable:
                format_errors += 1
                note = format_error_feedback(outcomes[0])
                messages.append({"role": "assistant", "content": replies[0].text})
                messages.append({"role": "user", "content": note})
                log.message("user", note)
                self.emit("format-error", round=self.spend.rounds, error=outcomes[0].error_kind)
                if format_errors >= MAX_FORMAT_ERRORS:
                    return f"{format_errors} malformed replies in a row (last: {outcomes[0].error_kind})"
                if stop:
                    return stop
                continue
            format_errors = 0
            records = self._verify_round(log, [outcome.text for _, outcome in usable], "model", self.spend.rounds,
                                         target, require)
            # The conversation goes on from the round's best candidate (its best pass, else its best
            # failure): its reply and its feedback are what the model sees next.
            pick = max(range(len(records)), key=lambda k: _best(records[k]))
            record, (reply, outcome) = records[pick], usable[pick]
            messages.append({"role": "assistant", "content": reply.text})
            current_text = outcome.text
            if record.passes and not req.optimize:
                return f"candidate {record.index} passes every gate"
            if (why := _cannot_go_further(record, target)) is not None:
                return why
            messages.append({"role": "user", "content": record.feedback})
            log.message("user", record.feedback)
            if stop:
                return stop

    def _sample(self, log: RunLog, messages: list[dict[str, str]], budget: Budget, agent: Any) -> tuple[list[Any], str]:
        """Up to ``candidates`` independent replies to the same conversation (one model call each,
        within the budget), and why fewer came back ('' when all did)."""
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


def run_port(kernel: Path, spec: Spec, to_arch: str, *, toolchain: Toolchain, runner: Any = None, model: ModelClient | None,
             from_arch: str | None = None, agent: str = "port", budget: Budget | None = None, optimize: bool = False,
             require_native: bool | None = None, repo_root: Path | None = None, runs_root: Path | None = None,
             on_event: Event | None = None, verifier: Verifier | None = None, candidates: int = 1) -> PortResult:
    """The one way a port session is built and run (``porter port``, ``porter ci --port-to``,
    ``porter bench``): runs are recorded under ``runs_root``, by default the repository's
    ``.porter/runs``. The caller owns the runner (or the verifier) and the model; ``candidates``
    proposals per round are verified together."""
    if runs_root is None:
        runs_root = (repo_root if repo_root is not None else Path.cwd()) / ".porter" / "runs"
    request = PortRequest(kernel=kernel, spec=spec, to_arch=to_arch, from_arch=from_arch, agent=agent,
                          budget=budget or Budget(), optimize=optimize, require_native=require_native,
                          runs_root=runs_root, repo_root=repo_root, candidates=candidates)
    return PortSession(request, toolchain=toolchain, runner=runner, model=model, on_event=on_event,
                       verifier=verifier).run()
