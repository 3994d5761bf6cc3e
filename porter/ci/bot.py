"""``porter ci``: the pre-merge bot. Check every kernel a change touches, against a spec it cannot edit.

For the commits base..head:

1. ``git diff --name-status -M`` lists what changed. Every changed ``.ptx`` file is a kernel to
   check; its spec is the nearest ``porter.toml`` walking up from its folder to the repository root
   (:func:`plan` says which revision's copy judges it). A changed kernel for which no spec can be
   found, or whose spec cannot be trusted, is *not checked*, and that fails the bot unless
   ``allow_unchecked`` (``--allow-unchecked``): a skip is never a pass. When no kernel changed, the
   run ends at once ("no kernel changed", exit 0), before ptxas or a GPU is looked for.
2. The head version of each kernel, its base version (when there was one) and the spec's folder
   (spec, reference code, goldens) are written from git objects into a temporary folder. The user's
   work tree is never read or touched.
3. Nothing of the change's own runs (see docs/security.md): the spec folder comes from the base
   revision, so that code in a pull request does not get to judge itself. A kernel that moved, or
   whose spec moved, is judged by the base revision's copy of the spec it had; a change that edits
   a spec's material is judged by the base copy all the same, and says so. A kernel added together
   with its own new spec has no trusted spec: it is "not checked: needs a trusted spec", which fails
   the bot unless allowed. ``spec_from="head"`` (``--trust-head``) takes specs from the head, for
   repositories whose authors are trusted. Symbolic links are resolved inside the repository (a
   kernel whose link target changed is a changed kernel; a link that leaves the repository is
   refused). Each kernel is checked in a worker process of its own, started fresh.
4. The kernel's own ``// porter-launch:`` line decides its entry and launch, as in ``porter check``
   (:func:`porter.gate.spec.declared_spec` is the one code path for that); a head whose directives
   change the interface its base version (or, for a new kernel, the spec) declares fails as an
   interface change unless ``allow_interface_change`` (:mod:`porter.ci.interface`).
5. Each head kernel goes through the gate (:func:`porter.gate.check.run_check`) against the spec's
   reference. Without a GPU the static gates (interface, assemble) still run and are reported, the
   runtime gates are ``not run``, and the equivalence cases run in porter's PTX emulator at small
   shapes (the ``emulation`` gate): a wrong result there fails the kernel, a right one leaves it
   ``not run`` with its cases column saying ``yes (emulated)`` (:mod:`porter.gate.evidence`).
6. The base version, when there is one, is the gate's ``speed_baseline``: timed interleaved with
   the head kernel in the same run, never used as the reference (that would fail every pull request
   that fixes a wrong kernel). A slowdown (``1 / speedup - 1``) beyond ``max_slowdown`` fails the
   kernel, with the ratio. When the base kernel cannot be timed (it does not parse, or cannot run
   on this GPU), the speed is reported as not measured and does not change the exit code.

The base defaults to the merge-base of head with the first of ``@{upstream}``, ``origin/HEAD``,
``origin/main``, ``origin/master`` that exists (unless that merge-base is head itself), else to
``head~1``, which on GitHub's pull-request merge commit is the base branch. A given base is reduced
to its merge-base with head too, so that what landed on the base branch since the branch point is
not counted as the change's.

Exit codes (:attr:`CiOutcome.exit_code`), the most severe present wins, in this order: 2 a
configuration error (bad ref, bad spec or reference), 1 a kernel failed or slowed down beyond
``max_slowdown``, or a changed kernel could not be checked (unless allowed), 3 something could not
be run (no GPU, no ptxas, no git), 0 every changed kernel passed, or none changed.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from porter.ci.change import (
    DEFAULT_MAX_SLOWDOWN,
    Change,
    CiKernel,
    CiOutcome,
    Finding,
    Skipped,
    SpecFrom,
    SpeedCheck,
    Target,
    deleted_kernels,
    is_kernel,
    is_spec,
    material_edits,
    nearest_spec,
    spec_candidates,
)
from porter.ci.interface import interface_change
from porter.ci.revision import write_file, write_spec_folder
from porter.errors import EnvironmentProblem, ExitCode, InputError, PorterError
from porter.gate.check import CheckOptions, run_check
from porter.gate.runner.client import GpuRunner, Runner, opened
from porter.gate.spec import Spec, declared_spec, load_spec
from porter.gate.verdict import Status, Verdict
from porter.gitcmd import GitRepo
from porter.ptx import parse_ptx
from porter.ptx.arch import get_profile
from porter.ptx.toolchain import Toolchain, find_toolchain

UPSTREAM_REFS = ("@{upstream}", "origin/HEAD", "origin/main", "origin/master")
_EXIT_SEVERITY = (ExitCode.INPUT, ExitCode.FAILED, ExitCode.ENVIRONMENT)  # which exit code wins when kernels disagree


# ---------------------------------------------------------------------------------------------
# Pure parts: what changed, what to check, speed, exit code
# ---------------------------------------------------------------------------------------------


def parse_name_status(raw: bytes) -> tuple[Change, ...]:
    """Parse ``git diff --name-status -z``: ``X\\0path\\0``, or ``R100\\0old\\0new\\0`` for renames
    and copies. Paths keep undecodable bytes (surrogateescape) so they can be handed back to git."""
    fields = raw.decode("utf-8", errors="surrogateescape").split("\0")
    changes = []
    i = 0
    while i < len(fields) and fields[i]:
        letter = fields[i][0]
        if letter in "RC":
            changes.append(Change(letter, fields[i + 2], fields[i + 1], same_content=fields[i] == f"{letter}100"))
            i += 3
        else:
            changes.append(Change(letter, fields[i + 1]))
            i += 2
    return tuple(changes)


def plan(
    changes: Sequence[Change],
    *,
    spec_from: SpecFrom,
    specs: Collection[str],
    other_specs: Collection[str],
    folder_kernels: Mapping[str, Sequence[str]],
    edited: Mapping[str, Sequence[str]] | None = None,
) -> tuple[tuple[Target, ...], tuple[Skipped, ...], tuple[str, ...]]:
    """Which kernels to check and against which spec, which changed kernels could not be checked
    (and why), and notes on the change.

    ``specs`` holds the spec paths that exist at the spec revision, ``other_specs`` those at the
    other revision. A kernel's spec is the nearest ``porter.toml`` walking up from its folder.
    ``edited`` maps a spec to the files of its material (the spec, its Python, the files it names)
    that the change edits (see :func:`porter.ci.change.material_edits`). ``folder_kernels`` maps
    such a spec to the PTX files it governs at head; with ``spec_from="head"`` (``--trust-head``)
    they are re-checked against the change's spec (there is no base version to time those against:
    they did not change).

    With the spec from the base revision (the default), nothing of the change's own runs: a changed
    kernel is checked, in this order, against the base revision's copy of its spec; the base copy of
    a spec the change moved to where its spec now is; the base spec of its old path (a kernel that
    moved, or whose spec moved, is still judged by the spec it had); the base spec of its path (a
    spec deleted in this change still judges). A :class:`Skipped` fails the bot unless unchecked
    kernels are allowed: a kernel with no spec at all and a kernel whose only spec is new in this
    change ("needs a trusted spec": its Python would be the change's) are not checked; a kernel whose
    spec's material the change edits is checked against the base copy all the same (editing the
    judgement never takes a kernel out of it, and allowing unchecked kernels does not waive that
    check) and also "needs a trusted spec": a green bot means the judgement a change ran against is
    the base revision's, unchanged.
    """
    edited = edited or {}
    head_specs, base_specs = (other_specs, specs) if spec_from == "base" else (specs, other_specs)
    moved = {c.path: c.old_path for c in changes
             if c.status in "RC" and c.old_path and is_spec(c.path) and is_spec(c.old_path) and c.old_path in base_specs}
    removed = sorted({c.path for c in changes if c.status == "D" and is_spec(c.path)}
                     | {c.old_path for c in changes if c.status == "R" and c.old_path and is_spec(c.old_path)})
    targets: dict[str, Target] = {}
    skipped: dict[str, Skipped] = {}
    notes: list[str] = [f"{path}: deleted in this change" for path in deleted_kernels(changes)]
    for change in changes:
        if change.status == "D" or not is_kernel(change.path):
            continue
        base_path = None if change.status == "A" else change.old_path or change.path
        at_head = nearest_spec(change.path, head_specs)
        if spec_from == "head":
            if at_head is None:
                skipped[change.path] = Skipped(change.path, "not checked: no porter.toml in its folder or any "
                                                            "folder above it at the head revision")
            else:
                new = at_head not in base_specs
                targets[change.path] = Target(change.path, base_path, at_head, spec_new=new,
                                              spec_note="spec new in this change" if new else "")
            continue
        old_spec = nearest_spec(base_path, base_specs) if base_path is not None else None
        if at_head is not None and at_head in base_specs:
            target = Target(change.path, base_path, at_head)
        elif at_head is not None and at_head in moved:
            target = Target(change.path, base_path, moved[at_head], spec_note=(
                f"spec moved in this change ({moved[at_head]} -> {at_head}): checked against the base revision's "
                f"{moved[at_head]}"))
        elif old_spec is not None:
            target = Target(change.path, base_path, old_spec, spec_note=(
                f"its spec at head is {at_head or 'missing'}; checked against {old_spec}, the spec of "
                f"{base_path} at the base revision"))
        elif (above := nearest_spec(change.path, base_specs)) is not None:
            target = Target(change.path, base_path, above, spec_note=(
                f"{above} is removed in this change: checked against the base revision's copy" if at_head is None
                else f"its spec at head, {at_head}, is new in this change: checked against the base revision's "
                     f"{above}"))
        elif at_head is not None and removed:
            skipped[change.path] = Skipped(change.path, (
                f"not checked: needs a trusted spec: its spec {at_head} is new in this change, which also removes "
                f"{', '.join(removed)}: a moved spec that git did not pair up looks like this; land the move first"))
            continue
        elif at_head is not None:
            skipped[change.path] = Skipped(change.path, (
                f"not checked: needs a trusted spec: its spec {at_head} is new in this change, and the change's own "
                "spec and Python do not run here (--trust-head runs them, for repositories whose authors are trusted)"))
            continue
        else:
            skipped[change.path] = Skipped(change.path, "not checked: no porter.toml in its folder or any folder "
                                                        "above it, at the base or the head revision")
            continue
        if at_head is not None and at_head not in base_specs and at_head not in moved:
            skipped[change.path] = Skipped(change.path, (
                f"needs a trusted spec: its spec at head, {at_head}, is new in this change; the kernel was judged by "
                f"the base revision's {target.spec} (see its row), and the new spec does not run here (--trust-head "
                "runs it once reviewed)"))
        elif target.spec in edited:
            files = ", ".join(edited[target.spec])
            said = f"this change edits {files}: checked against the base revision's copy"
            target = replace(target, spec_note=f"{target.spec_note}; {said}" if target.spec_note else said)
            skipped[change.path] = Skipped(change.path, (
                f"needs a trusted spec: this change edits {files}, the material of {target.spec}; the kernel was "
                "judged by the base revision's copy (see its row), and the change's own judgement does not run here "
                "(--trust-head runs it once reviewed)"))
        targets[change.path] = target
    if spec_from == "head":
        for spec in edited:
            for path in folder_kernels.get(spec, ()):
                targets.setdefault(path, Target(path, None, spec))
    else:
        notes += [f"{path}: edited in this change, not used here: specs, references and their Python come from "
                  "the base revision" for paths in edited.values() for path in paths]
    return tuple(targets.values()), tuple(skipped.values()), tuple(notes)


def judge_speed(verdict: Verdict, max_slowdown: float) -> SpeedCheck:
    """Head's time against base's, from a gate run of head with base as its speed baseline.

    ``slowdown = 1 / speedup - 1`` (0.25: head takes 25% longer); beyond ``max_slowdown`` the head
    kernel fails, with the ratio. Without a ratio the speed is not measured, with the reason.
    """
    speedup = verdict.speedup_vs_source
    if speedup is None:
        return SpeedCheck(Status.NOT_RUN, f"not measured: {_why_not_timed(verdict)}")
    times = {t.name: t.median_ms for t in verdict.timings}
    head_ms, base_ms = times.get("candidate"), times.get("source")
    figures = f" ({head_ms:.4f} ms vs {base_ms:.4f} ms)" if head_ms is not None and base_ms is not None else ""
    slowdown = 1 / speedup - 1
    if slowdown > max_slowdown:
        summary = (f"{1 / speedup:.2f}x slower than the base kernel{figures}: {slowdown:.1%} more time, "
                   f"{max_slowdown:.1%} allowed")
        return SpeedCheck(Status.FAILED, summary, speedup, head_ms, base_ms)
    return SpeedCheck(Status.PASSED, f"{speedup:.2f}x the base kernel's speed{figures}", speedup, head_ms, base_ms)


def _why_not_timed(verdict: Verdict) -> str:
    timing = verdict.gate("timing")
    if timing is not None and timing.status != Status.PASSED:
        return timing.summary
    return "; ".join(verdict.warnings) or "the base kernel was not timed"


def kernel_exit_code(kernel: CiKernel) -> ExitCode:
    return ExitCode.INPUT if kernel.config_error else kernel.status.exit_code


def exit_code(kernels: Sequence[CiKernel], skipped: Sequence[Skipped] = (), *, allow_unchecked: bool = False) -> ExitCode:
    """The most severe of the kernels' codes: 2 (configuration), then 1 (failed), then 3 (not run).
    A changed kernel that could not be checked counts as failed (1), unless ``allow_unchecked``."""
    codes = {kernel_exit_code(k) for k in kernels}
    if skipped and not allow_unchecked:
        codes.add(ExitCode.FAILED)
    return next((code for code in _EXIT_SEVERITY if code in codes), ExitCode.OK)


def headline(kernels: Sequence[CiKernel], skipped: Sequence[Skipped], deleted: Sequence[str] = (), *,
             allow_unchecked: bool = False) -> str:
    unchecked = ""
    if skipped:
        unchecked = (f"{len(skipped)} changed kernel(s) not checked against a trusted spec"
                     + (" (allowed by --allow-unchecked)" if allow_unchecked else " (a failure: --allow-unchecked allows it)"))
    if not kernels:
        if skipped:
            return f"no kernel to check; {unchecked}"
        return f"no kernel to check: deleted in this change: {', '.join(deleted)}" if deleted else "no kernel changed"
    config = [k for k in kernels if k.config_error]
    if config:
        return f"configuration error: {config[0].reason}"
    counts: dict[Status, int] = {}
    for k in kernels:
        counts[k.status] = counts.get(k.status, 0) + 1
    checked = f"{len(kernels)} kernel(s) checked: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    return f"{checked}; {unchecked}" if skipped else checked


# ---------------------------------------------------------------------------------------------
# Git: the edge
# ---------------------------------------------------------------------------------------------


def _resolve_base(git: GitRepo, base: str | None, head: str, head_sha: str) -> tuple[str, str]:
    """The commit to compare with, and how it was chosen (see the module docstring)."""
    if base is not None:
        sha = git.commit(base)
        if sha is None:
            raise InputError(f"base {base!r}: no such commit in {git.root}")
        common = git.merge_base(sha, head_sha)
        if common is None:
            raise InputError(f"base {base!r} and head {head!r} share no history")
        return common, base if common == sha else f"merge-base of {head} and {base}"
    for ref in UPSTREAM_REFS:
        sha = git.commit(ref)
        common = git.merge_base(sha, head_sha) if sha else None
        if common is not None and common != head_sha:
            return common, f"merge-base of {head} and {ref}"
    parent = git.commit(f"{head_sha}~1")
    if parent is None:
        raise InputError(f"head {head!r} has no parent and there is no upstream branch: give the base")
    return parent, f"{head}~1"


def _tidy(message: str, tmp: Path) -> str:
    """Say repository paths, not the temporary folder the revisions were written to."""
    for sub in ("spec", "newspec", "head", "base"):
        message = message.replace(f"{tmp / sub}{os.sep}", "").replace(str(tmp / sub), ".")
    return message


# ---------------------------------------------------------------------------------------------
# One kernel
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """What every kernel's check shares."""

    git: GitRepo
    tmp: Path
    head: str
    base: str
    spec_revision: str
    toolchain: Toolchain
    runner_factory: Callable[[], GpuRunner] | None
    max_slowdown: float
    sanitize: bool
    allow_interface_change: bool


def trusted_spec(git: GitRepo, target: Target, run: _Run) -> Path:
    """The spec file that judges ``target``, written from git objects (never the work tree) into the
    run's temporary folder: the spec revision's copy, or for a spec new in this change (only with
    ``--trust-head``) the head's. Its folder comes along: reference, derive functions, goldens."""
    revision, folder = (run.head, "newspec") if target.spec_new else (run.spec_revision, "spec")
    return write_spec_folder(git, revision, target.spec, run.tmp / folder)


def _check_target(target: Target, run: _Run) -> CiKernel:
    def result(status: Status, reason: str, **more: Any) -> CiKernel:
        return CiKernel(target.path, target.spec, target.base_path, status, _tidy(reason, run.tmp),
                        spec_new=target.spec_new, spec_note=target.spec_note, **more)

    def config_error(err: PorterError) -> CiKernel:
        reason = _tidy(str(err), run.tmp)
        return result(Status.ERROR, reason, config_error=True, findings=(Finding(target.spec, None, reason),))

    def failed(reason: str, line: int | None = None) -> CiKernel:
        return result(Status.FAILED, reason, findings=(Finding(target.path, line, _tidy(reason, run.tmp)),))

    try:
        spec = load_spec(trusted_spec(run.git, target, run))
    except InputError as err:
        return config_error(err)
    try:
        head_file = write_file(run.git, run.head, target.path, run.tmp / "head")
        module = parse_ptx(head_file.read_text(encoding="utf-8", errors="replace"), filename=target.path)
        declared = declared_spec(spec, module.text, source=target.path)[0]
    except InputError as err:
        return failed(str(err))
    base = _base_kernel(target, spec, run)
    try:
        entry_line = module.entry(declared.entry).line
    except KeyError:
        names = ", ".join(e.name for e in module.kernels) or "none"
        named = f"which {target.spec} names" if declared.entry == spec.entry else "which its porter-launch line names"
        return failed(f"no .entry {declared.entry!r}, {named} (entries: {names})")
    changed = interface_change(base.declared or spec, declared)
    if changed and not run.allow_interface_change:
        against = f"its base version {target.base_path}" if base.declared is not None else target.spec
        return failed(f"interface change against {against}: {changed}; the kernel's own porter-launch, porter-kernel "
                      "and porter-param lines may not change how it is called unless the owner allows it "
                      "(--allow-interface-change)", entry_line)
    # A fresh worker for each kernel: no kernel's judgement shares a process with another's code.
    try:
        with opened(run.runner_factory) as runner:
            options = CheckOptions(speed_baseline=base.path, native=None, sanitize=run.sanitize, thorough=True)
            verdict = run_check(head_file, spec, options, toolchain=run.toolchain, runner=runner)
    except EnvironmentProblem as err:
        return result(Status.NOT_RUN, str(err))
    except InputError as err:
        return config_error(err)
    verdict = replace(verdict, kernel=target.path)
    findings = _findings(verdict, target.path, entry_line)
    if not verdict.passed or target.base_path is None:
        return result(verdict.status, verdict.reason, verdict=verdict, findings=findings)
    speed = (judge_speed(verdict, run.max_slowdown) if base.path
             else SpeedCheck(Status.NOT_RUN, f"not measured: {base.why_untimed}"))
    if speed.status == Status.FAILED:
        findings += (Finding(target.path, entry_line, speed.summary),)
        return result(Status.FAILED, f"speed: {speed.summary}", verdict=verdict, speed=speed, findings=findings)
    return result(verdict.status, verdict.reason, verdict=verdict, speed=speed, findings=findings)


@dataclass(frozen=True)
class _BaseKernel:
    """The base version of a changed kernel: its file to time against (None, and why not), and the
    interface it declares (the spec with its own directives applied; None when it has no base
    version or that version does not parse)."""

    path: Path | None
    declared: Spec | None
    why_untimed: str


def _base_kernel(target: Target, spec: Spec, run: _Run) -> _BaseKernel:
    """Read here because the gate takes a baseline that does not parse as bad input, and a base
    kernel the change replaces is not the change's configuration. The base kernel's entry is the one
    its own porter-launch line names, else the spec's (the gate launches it the same way)."""
    if target.base_path is None:
        return _BaseKernel(None, None, "no base version")
    try:
        path = write_file(run.git, run.base, target.base_path, run.tmp / "base")
        module = parse_ptx(path.read_text(encoding="utf-8", errors="replace"), filename=target.base_path)
        declared = declared_spec(spec, module.text, source=target.base_path)[0]
    except InputError as err:
        return _BaseKernel(None, None, f"the base kernel does not parse: {err}")
    if declared.entry not in [e.name for e in module.kernels]:
        return _BaseKernel(None, declared, f"the base kernel has no .entry {declared.entry!r}")
    return _BaseKernel(path, declared, "")


def _findings(verdict: Verdict, path: str, entry_line: int) -> tuple[Finding, ...]:
    """Where a failed verdict points: ptxas' error lines (the Verdict carries them), else the
    kernel's ``.entry`` line."""
    if verdict.status != Status.FAILED:
        return ()
    assemble = verdict.gate("assemble")
    if assemble is not None and assemble.status == Status.FAILED and verdict.assembly is not None:
        said = verdict.assembly
        errors = [d for d in said.diagnostics if d.severity == "error"] or list(said.errors)
        if errors:
            return tuple(Finding(path, d.line, f"ptxas -arch={verdict.arch}: {d.message}") for d in errors)
    return (Finding(path, entry_line, verdict.reason),)


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def check_change(
    repo: Path,
    *,
    base: str | None = None,
    head: str = "HEAD",
    spec_from: SpecFrom = "base",
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    toolchain: Toolchain | None = None,
    runner_factory: Callable[[], GpuRunner] | None = Runner,
    port_to: str | None = None,
    allow_unchecked: bool = False,
    allow_interface_change: bool = False,
    sanitize: bool = True,
) -> CiOutcome:
    """Check the kernels changed between ``base`` and ``head`` (see the module docstring).

    Never raises porter's errors: a bad ref or spec is an outcome with exit code 2, a missing git
    one with exit code 3. ``runner_factory=None`` runs no kernel (``--no-gpu``); otherwise each
    kernel gets a worker of its own, started fresh. A kernel whose cubin holds its target's
    signature instructions is held to them (the native gate: executed, doing the spec's work);
    ``sanitize`` runs the compute-sanitizer tools on each kernel.
    """
    start = time.perf_counter()
    known: dict[str, Any] = dict(base_ref=base or "", head_ref=head, spec_from=spec_from,
                                 max_slowdown=max_slowdown, port_to=port_to, allow_unchecked=allow_unchecked,
                                 allow_interface_change=allow_interface_change)
    try:
        if spec_from not in ("base", "head"):
            raise InputError(f"spec_from: 'base' or 'head', not {spec_from!r}")
        if not max_slowdown >= 0:
            raise InputError(f"max slowdown: a fraction >= 0 (0.03 is 3%), not {max_slowdown}")
        if port_to is not None:
            try:
                get_profile(port_to)
            except InputError as err:  # bad input, said before any work
                raise InputError(f"--port-to: {err}") from None
        if not repo.is_dir():
            raise InputError(f"--repo {repo}: no such folder")
        git = GitRepo.open(repo)
        head_sha = git.commit(head)
        if head_sha is None:
            raise InputError(f"head {head!r}: no such commit in {git.root}")
        base_sha, base_ref = _resolve_base(git, base, head, head_sha)
        spec_rev, other_rev = (base_sha, head_sha) if spec_from == "base" else (head_sha, base_sha)
        known.update(base=base_sha, base_ref=base_ref, head=head_sha, spec_revision=spec_rev)
        changes = parse_name_status(git.run("diff", "--name-status", "-z", "-M", "--no-ext-diff",
                                            base_sha, head_sha, "--"))
        changes += _link_changes(git, base_sha, head_sha, changes)
        paths = {p for c in changes for p in (c.path, c.old_path) if p is not None}
        candidates = {spec for p in paths for spec in spec_candidates(p)}
        specs = git.existing(spec_rev, candidates)
        other_specs = git.existing(other_rev, candidates)
        with tempfile.TemporaryDirectory(prefix="porter-ci-") as tmp:
            edited = material_edits(changes, specs | other_specs,
                                    _named_material(git, base_sha, changes, specs | other_specs, Path(tmp)))
        folder_kernels = ({spec: _governed_kernels(git, head_sha, spec) for spec in edited}
                          if spec_from == "head" else {})
        targets, skipped, notes = plan(changes, spec_from=spec_from, specs=specs, other_specs=other_specs,
                                       folder_kernels=folder_kernels, edited=edited)
        known.update(skipped=skipped, notes=notes)
        if not targets:
            return CiOutcome(exit_code((), skipped, allow_unchecked=allow_unchecked),
                             headline((), skipped, deleted_kernels(changes), allow_unchecked=allow_unchecked),
                             wall_s=time.perf_counter() - start, **known)
        kernels = _check_all(targets, git, head_sha, base_sha, spec_rev, toolchain or find_toolchain(),
                             runner_factory, max_slowdown, sanitize, allow_interface_change)
    except PorterError as err:
        return CiOutcome(err.exit_code, str(err), wall_s=time.perf_counter() - start, **known)
    return CiOutcome(exit_code(kernels, skipped, allow_unchecked=allow_unchecked),
                     headline(kernels, skipped, deleted_kernels(changes), allow_unchecked=allow_unchecked),
                     kernels=kernels,
                     wall_s=time.perf_counter() - start, **known)


def _link_changes(git: GitRepo, base: str, head: str, changes: Sequence[Change]) -> tuple[Change, ...]:
    """Kernels that are symbolic links whose target changed: the link itself is unchanged, so git's
    diff does not name it, but what a reader of the kernel's path gets did change. Compared by what
    each revision's link resolves to; a link that leaves the repository at head is listed when it
    is new or changed (checking it refuses it, with the reason)."""
    listed = {c.path for c in changes}
    found = []
    for link in git.entries(head, ".", recursive=True):
        if not link.is_link or not is_kernel(link.path) or link.path in listed:
            continue
        try:
            now = git.resolve(head, link.path).obj
        except InputError:
            continue  # unchanged (not in the diff) and unresolvable: not this change's doing
        try:
            before: str | None = git.resolve(base, link.path).obj
        except InputError:
            before = None
        if now != before:
            found.append(Change("A" if git.entry(base, link.path) is None else "M", link.path))
    return tuple(found)


def _named_material(git: GitRepo, base: str, changes: Sequence[Change], specs: Collection[str],
                    tmp: Path) -> dict[str, tuple[str, ...]]:
    """The repository paths each base spec names (see :func:`material_edits`), read for the specs
    that govern a changed file other than a kernel, the spec itself or Python (those count anyway)."""
    governing = {nearest_spec(p, specs) for c in changes for p in (c.path, c.old_path)
                 if p is not None and not is_kernel(p) and not is_spec(p) and not p.endswith(".py")}
    named: dict[str, tuple[str, ...]] = {}
    for spec in sorted(s for s in governing if s is not None):
        folder = str(PurePosixPath(spec).parent)
        if git.entry(base, spec) is None:
            continue
        try:
            loaded = load_spec(write_spec_folder(git, base, spec, tmp), allow_todo=True)
        except InputError:
            continue  # a base spec that does not load: the kernels it governs say so when checked
        root = (tmp / folder).resolve()
        named[spec] = tuple(str(PurePosixPath(folder) / p.resolve().relative_to(root).as_posix())
                            for p in loaded.named_files() if p.resolve().is_relative_to(root))
    return named


def _governed_kernels(git: GitRepo, rev: str, spec: str) -> list[str]:
    """The kernels at ``rev`` whose nearest spec is ``spec``."""
    listed = [path for _, path in git.listing(rev, str(PurePosixPath(spec).parent), recursive=True)]
    nested = {p for p in listed if is_spec(p)}
    return [p for p in listed if is_kernel(p) and nearest_spec(p, nested) == spec]


def _check_all(targets: Sequence[Target], git: GitRepo, head: str, base: str, spec_revision: str, toolchain: Toolchain,
               runner_factory: Callable[[], GpuRunner] | None, max_slowdown: float,
               sanitize: bool, allow_interface_change: bool) -> tuple[CiKernel, ...]:
    with tempfile.TemporaryDirectory(prefix="porter-ci-") as tmp:
        run = _Run(git, Path(tmp).resolve(), head, base, spec_revision, toolchain, runner_factory, max_slowdown,
                   sanitize, allow_interface_change)
        return tuple(_check_target(t, run) for t in targets)


def run_ci(
    repo: Path,
    *,
    base: str | None = None,
    head: str = "HEAD",
    spec_from: SpecFrom = "base",
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    junit: Path | None = None,
    json_out: Path | None = None,
    summary_path: Path | None = None,
    annotations: bool | None = None,
    port_to: str | None = None,
    model: str | None = None,
    api_base: str | None = None,
    push: str | None = None,
    toolchain: Toolchain | None = None,
    runner_factory: Callable[[], GpuRunner] | None = Runner,
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
    allow_unchecked: bool = False,
    allow_interface_change: bool = False,
    sanitize: bool = True,
) -> CiOutcome:
    """The body of ``porter ci``: check the change, write the reports, print the log and annotations.

    ``summary_path`` defaults to ``$GITHUB_STEP_SUMMARY`` when set; the markdown summary is appended
    there, as GitHub expects of each step. ``annotations`` (``::error`` workflow commands on stdout)
    default to on when ``$GITHUB_ACTIONS`` is ``true`` and off elsewhere, where they are noise.
    ``env`` replaces ``os.environ`` for those two lookups. The exit code is ``outcome.exit_code``.
    """
    from porter.ci.output import render_annotations, render_json, render_junit, render_markdown, render_text

    env = os.environ if env is None else env
    outcome = check_change(repo, base=base, head=head, spec_from=spec_from, max_slowdown=max_slowdown,
                           toolchain=toolchain, runner_factory=runner_factory, port_to=port_to,
                           allow_unchecked=allow_unchecked, allow_interface_change=allow_interface_change,
                           sanitize=sanitize)
    if port_to and outcome.kernels:
        from porter.agent.llm import Budget
        from porter.ci.port import port_changed

        ports = port_changed(outcome, repo, to_arch=port_to, model=model, api_base=api_base, budget=Budget(),
                             push=push, toolchain=toolchain or find_toolchain(), runner_factory=runner_factory)
        outcome = replace(outcome, ports=ports)
    if summary_path is None and env.get("GITHUB_STEP_SUMMARY"):
        summary_path = Path(env["GITHUB_STEP_SUMMARY"])
    if summary_path is not None:
        _write(summary_path, render_markdown(outcome), append=True)
    if junit is not None:
        _write(junit, render_junit(outcome))
    if json_out is not None:
        _write(json_out, render_json(outcome))
    echo(render_text(outcome))
    if annotations if annotations is not None else env.get("GITHUB_ACTIONS") == "true":
        for line in render_annotations(outcome):
            echo(line)
    return outcome


def _write(path: Path, text: str, *, append: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise InputError(f"{path}: cannot write ({err.strerror})") from None
