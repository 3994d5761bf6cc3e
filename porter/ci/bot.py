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
3. The spec folder comes from the base revision by default, so that code in a pull request does not
   get to judge itself: a looser tolerance or an edited ``ref.py`` in the same pull request is not
   used (``spec_from="head"`` overrides, for trusted triggers). A kernel that moved, or whose spec
   moved, is judged by the base revision's copy of the spec it had. A kernel added together with its
   own new spec has no base spec: it is checked against the new one, and marked "spec new in this
   change" in every report.
4. The kernel's own ``// porter-launch:`` line decides its entry and launch, as in ``porter check``
   (:func:`porter.gate.spec.declared_spec` is the one code path for that).
5. Each head kernel goes through the gate (:func:`porter.gate.check.run_check`) against the spec's
   reference. Without a GPU the static gates (interface, assemble) still run and are reported, and
   the runtime gates are ``not run``.
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
    is_spec,
    nearest_spec,
    spec_candidates,
)
from porter.errors import EnvironmentProblem, InputError, PorterError
from porter.gate.check import CheckOptions, run_check
from porter.gate.runner.client import GpuRunner, Runner, opened
from porter.gate.spec import Spec, declared_spec, load_spec
from porter.gate.verdict import Status, Verdict, exit_code_for
from porter.gitcmd import GitRepo
from porter.ptx import parse_ptx
from porter.ptx.toolchain import Toolchain, find_toolchain

UPSTREAM_REFS = ("@{upstream}", "origin/HEAD", "origin/main", "origin/master")
_EXIT_SEVERITY = (2, 1, 3)  # which exit code wins when kernels disagree


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
            changes.append(Change(letter, fields[i + 2], fields[i + 1]))
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
) -> tuple[tuple[Target, ...], tuple[Skipped, ...], tuple[str, ...]]:
    """Which kernels to check and against which spec, which changed kernels could not be checked
    (and why), and notes on spec changes.

    ``specs`` holds the spec paths that exist at the spec revision, ``other_specs`` those at the
    other revision. A kernel's spec is the nearest ``porter.toml`` walking up from its folder.
    ``folder_kernels`` maps a spec to the PTX files it governs at head; it is used with
    ``spec_from="head"``, where a change to a spec's folder re-checks its unchanged kernels (there is
    no base version to time those against: they did not change).

    With the spec from the base revision (the default), a changed kernel is checked, in this order,
    against: the base revision's copy of its spec; the base copy of a spec the change moved to where
    its spec now is; the base spec of its old path (a kernel that moved, or whose spec moved, is still
    judged by the spec it had); the base spec of its path (a spec deleted in this change still judges).
    Only a kernel with no spec at base at all is checked against a spec new in this change, and
    marked so; and not when the same change removes another spec (a spec moved with enough edits
    that git does not pair the two paths looks exactly like that). Anything else is not checked:
    a :class:`Skipped`, which fails the bot unless unchecked kernels are allowed.
    """
    head_specs, base_specs = (other_specs, specs) if spec_from == "base" else (specs, other_specs)
    moved = {c.path: c.old_path for c in changes
             if c.status in "RC" and c.old_path and is_spec(c.path) and is_spec(c.old_path) and c.old_path in base_specs}
    removed = sorted({c.path for c in changes if c.status == "D" and is_spec(c.path)}
                     | {c.old_path for c in changes if c.status == "R" and c.old_path and is_spec(c.old_path)})
    targets: dict[str, Target] = {}
    skipped: list[Skipped] = []
    notes: list[str] = []
    changed_spec_folders: list[str] = []
    for change in changes:
        if change.status == "D":
            continue
        if not change.path.endswith(".ptx"):
            governing = nearest_spec(change.path, specs)
            if governing is None:
                continue
            if spec_from == "base":
                notes.append(f"{change.path}: changed, but not used here: the spec and reference come from "
                             "the base revision")
            elif governing not in changed_spec_folders:
                changed_spec_folders.append(governing)
            continue
        base_path = None if change.status == "A" else change.old_path or change.path
        at_head = nearest_spec(change.path, head_specs)
        if spec_from == "head":
            if at_head is None:
                skipped.append(Skipped(change.path, "no porter.toml in its folder or any folder above it at the "
                                                    "head revision"))
            else:
                new = at_head not in base_specs
                targets[change.path] = Target(change.path, base_path, at_head, spec_new=new,
                                              spec_note="spec new in this change" if new else "")
            continue
        old_spec = nearest_spec(base_path, base_specs) if base_path is not None else None
        if at_head is not None and at_head in base_specs:
            targets[change.path] = Target(change.path, base_path, at_head)
        elif at_head is not None and at_head in moved:
            targets[change.path] = Target(change.path, base_path, moved[at_head], spec_note=(
                f"spec moved in this change ({moved[at_head]} -> {at_head}): checked against the base revision's "
                f"{moved[at_head]}"))
        elif old_spec is not None:
            targets[change.path] = Target(change.path, base_path, old_spec, spec_note=(
                f"its spec at head is {at_head or 'missing'}; checked against {old_spec}, the spec of "
                f"{base_path} at the base revision"))
        elif at_head is None and (gone := nearest_spec(change.path, base_specs)) is not None:
            targets[change.path] = Target(change.path, base_path, gone, spec_note=(
                f"{gone} is removed in this change: checked against the base revision's copy"))
        elif at_head is not None and removed:
            skipped.append(Skipped(change.path, (
                f"its spec {at_head} is new in this change, which also removes {', '.join(removed)}: a moved spec "
                "that git did not pair up looks like this, and the change would judge itself; land the move "
                "first, or give --allow-unchecked")))
        elif at_head is not None:
            targets[change.path] = Target(change.path, base_path, at_head, spec_new=True,
                                          spec_note="spec new in this change: checked against the change's own spec")
        else:
            skipped.append(Skipped(change.path, "no porter.toml in its folder or any folder above it, at the base "
                                                "or the head revision"))
    for spec in changed_spec_folders:
        for path in folder_kernels.get(spec, ()):
            targets.setdefault(path, Target(path, None, spec))
    return tuple(targets.values()), tuple(skipped), tuple(notes)


def judge_speed(verdict: Verdict, max_slowdown: float) -> SpeedCheck:
    """Head's time against base's, from a gate run of head with base as its speed baseline.

    ``slowdown = 1 / speedup - 1`` (0.25: head takes 25% longer); beyond ``max_slowdown`` the head
    kernel fails, with the ratio. Without a ratio the speed is not measured, with the reason.
    """
    speedup = verdict.speedup_vs_source
    if speedup is None:
        return SpeedCheck("not run", f"not measured: {_why_not_timed(verdict)}")
    times = {t.name: t.median_ms for t in verdict.timings}
    head_ms, base_ms = times.get("candidate"), times.get("source")
    figures = f" ({head_ms:.4f} ms vs {base_ms:.4f} ms)" if head_ms is not None and base_ms is not None else ""
    slowdown = 1 / speedup - 1
    if slowdown > max_slowdown:
        summary = (f"{1 / speedup:.2f}x slower than the base kernel{figures}: {slowdown:.1%} more time, "
                   f"{max_slowdown:.1%} allowed")
        return SpeedCheck("failed", summary, speedup, head_ms, base_ms)
    return SpeedCheck("passed", f"{speedup:.2f}x the base kernel's speed{figures}", speedup, head_ms, base_ms)


def _why_not_timed(verdict: Verdict) -> str:
    timing = verdict.gate("timing")
    if timing is not None and timing.status != "passed":
        return timing.summary
    return "; ".join(verdict.warnings) or "the base kernel was not timed"


def kernel_exit_code(kernel: CiKernel) -> int:
    return 2 if kernel.config_error else exit_code_for(kernel.status)


def exit_code(kernels: Sequence[CiKernel], skipped: Sequence[Skipped] = (), *, allow_unchecked: bool = False) -> int:
    """The most severe of the kernels' codes: 2 (configuration), then 1 (failed), then 3 (not run).
    A changed kernel that could not be checked counts as failed (1), unless ``allow_unchecked``."""
    codes = {kernel_exit_code(k) for k in kernels}
    if skipped and not allow_unchecked:
        codes.add(1)
    return next((code for code in _EXIT_SEVERITY if code in codes), 0)


def headline(kernels: Sequence[CiKernel], skipped: Sequence[Skipped], *, allow_unchecked: bool = False) -> str:
    unchecked = ""
    if skipped:
        unchecked = (f"{len(skipped)} changed kernel(s) not checked"
                     + (" (allowed by --allow-unchecked)" if allow_unchecked else " (a failure: --allow-unchecked allows it)"))
    if not kernels:
        return f"no kernel to check; {unchecked}" if skipped else "no kernel changed"
    config = [k for k in kernels if k.config_error]
    if config:
        return f"configuration error: {config[0].reason}"
    counts: dict[str, int] = {}
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


def _inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing tree paths that would land outside ``root``."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise InputError(f"{relative!r}: a path outside the repository")
    return path


def _write_file(git: GitRepo, rev: str, path: str, root: Path) -> Path:
    dest = _inside(root, path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(git.blob(f"{rev}:{path}"))
    return dest


def _write_folder(git: GitRepo, rev: str, folder: str, root: Path) -> None:
    for obj, path in git.listing(rev, folder, recursive=True):
        dest = _inside(root, path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(git.blob(obj))


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
    runner: GpuRunner | None
    max_slowdown: float
    sanitize: bool


def _check_target(target: Target, run: _Run) -> CiKernel:
    def result(status: Status, reason: str, **more: Any) -> CiKernel:
        return CiKernel(target.path, target.spec, target.base_path, status, _tidy(reason, run.tmp),
                        spec_new=target.spec_new, spec_note=target.spec_note, **more)

    def config_error(err: PorterError) -> CiKernel:
        reason = _tidy(str(err), run.tmp)
        return result("error", reason, config_error=True, findings=(Finding(target.spec, None, reason),))

    # A spec new in this change exists only at head: it is read from there, and the kernel says so.
    revision, folder = (run.head, "newspec") if target.spec_new else (run.spec_revision, "spec")
    spec_file = run.tmp / folder / target.spec
    try:
        if not spec_file.exists():
            _write_folder(run.git, revision, str(PurePosixPath(target.spec).parent), run.tmp / folder)
        spec = load_spec(spec_file)
    except InputError as err:
        return config_error(err)
    head_file = _write_file(run.git, run.head, target.path, run.tmp / "head")
    try:
        module = parse_ptx(head_file.read_text(encoding="utf-8", errors="replace"), filename=target.path)
        # The kernel's own porter-launch line decides its entry and launch, as in porter check.
        entry_name = declared_spec(spec, module.text, source=target.path)[0].entry
    except InputError as err:
        return result("failed", str(err), findings=(Finding(target.path, None, str(err)),))
    try:
        entry_line = module.entry(entry_name).line
    except KeyError:
        names = ", ".join(e.name for e in module.kernels) or "none"
        named = f"which {target.spec} names" if entry_name == spec.entry else "which its porter-launch line names"
        reason = f"no .entry {entry_name!r}, {named} (entries: {names})"
        return result("failed", reason, findings=(Finding(target.path, None, reason),))
    baseline, untimed = _baseline(target, spec, run)
    try:
        options = CheckOptions(speed_baseline=baseline, native=None, sanitize=run.sanitize)
        verdict = run_check(head_file, spec, options, toolchain=run.toolchain, runner=run.runner)
    except EnvironmentProblem as err:
        return result("not run", str(err))
    except InputError as err:
        return config_error(err)
    verdict = replace(verdict, kernel=target.path)
    findings = _findings(verdict, target.path, entry_line)
    if not verdict.passed or target.base_path is None:
        return result(verdict.status, verdict.reason, verdict=verdict, findings=findings)
    speed = judge_speed(verdict, run.max_slowdown) if baseline else SpeedCheck("not run", f"not measured: {untimed}")
    if speed.status == "failed":
        findings += (Finding(target.path, entry_line, speed.summary),)
        return result("failed", f"speed: {speed.summary}", verdict=verdict, speed=speed, findings=findings)
    return result(verdict.status, verdict.reason, verdict=verdict, speed=speed, findings=findings)


def _baseline(target: Target, spec: Spec, run: _Run) -> tuple[Path | None, str]:
    """The base kernel's file to time against, or None and why not.

    Checked here because the gate takes a baseline that does not parse as bad input, and a base
    kernel the change replaces is not the change's configuration. The base kernel's entry is the one
    its own porter-launch line names, else the spec's (the gate launches it the same way).
    """
    if target.base_path is None:
        return None, "no base version"
    path = _write_file(run.git, run.base, target.base_path, run.tmp / "base")
    try:
        module = parse_ptx(path.read_text(encoding="utf-8", errors="replace"), filename=target.base_path)
        entry = declared_spec(spec, module.text, source=target.base_path)[0].entry
    except InputError as err:
        return None, f"the base kernel does not parse: {err}"
    if entry not in [e.name for e in module.kernels]:
        return None, f"the base kernel has no .entry {entry!r}"
    return path, ""


def _findings(verdict: Verdict, path: str, entry_line: int) -> tuple[Finding, ...]:
    """Where a failed verdict points: ptxas' error lines (the Verdict carries them), else the
    kernel's ``.entry`` line."""
    if verdict.status != "failed":
        return ()
    assemble = verdict.gate("assemble")
    if assemble is not None and assemble.status == "failed" and verdict.assembly is not None:
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
    sanitize: bool = True,
) -> CiOutcome:
    """Check the kernels changed between ``base`` and ``head`` (see the module docstring).

    Never raises porter's errors: a bad ref or spec is an outcome with exit code 2, a missing git
    one with exit code 3. ``runner_factory=None`` runs no kernel (``--no-gpu``). A kernel whose
    cubin holds its target's signature instructions is held to them (the native gate: executed,
    doing the spec's work); ``sanitize`` runs the compute-sanitizer tools on each kernel.
    """
    start = time.perf_counter()
    known: dict[str, Any] = dict(base_ref=base or "", head_ref=head, spec_from=spec_from,
                                 max_slowdown=max_slowdown, port_to=port_to, allow_unchecked=allow_unchecked)
    try:
        if spec_from not in ("base", "head"):
            raise InputError(f"spec_from: 'base' or 'head', not {spec_from!r}")
        if not max_slowdown >= 0:
            raise InputError(f"max slowdown: a fraction >= 0 (0.03 is 3%), not {max_slowdown}")
        git = GitRepo.open(repo)
        head_sha = git.commit(head)
        if head_sha is None:
            raise InputError(f"head {head!r}: no such commit in {git.root}")
        base_sha, base_ref = _resolve_base(git, base, head, head_sha)
        spec_rev, other_rev = (base_sha, head_sha) if spec_from == "base" else (head_sha, base_sha)
        known.update(base=base_sha, base_ref=base_ref, head=head_sha, spec_revision=spec_rev)
        changes = parse_name_status(git.run("diff", "--name-status", "-z", "-M", "--no-ext-diff",
                                            base_sha, head_sha, "--"))
        paths = {p for c in changes for p in (c.path, c.old_path) if p is not None}
        candidates = {spec for p in paths for spec in spec_candidates(p)}
        specs = git.existing(spec_rev, candidates)
        other_specs = git.existing(other_rev, candidates)
        folder_kernels = {}
        if spec_from == "head":
            governing = {nearest_spec(c.path, specs) for c in changes if c.status != "D" and not c.path.endswith(".ptx")}
            for spec in governing - {None}:
                listed = [p for _, p in git.listing(head_sha, str(PurePosixPath(spec).parent), recursive=True)]
                nested = {p for p in listed if is_spec(p)}
                folder_kernels[spec] = [p for p in listed if p.endswith(".ptx") and nearest_spec(p, nested) == spec]
        targets, skipped, notes = plan(changes, spec_from=spec_from, specs=specs, other_specs=other_specs,
                                       folder_kernels=folder_kernels)
        known.update(skipped=skipped, notes=notes)
        if not targets:
            return CiOutcome(exit_code((), skipped, allow_unchecked=allow_unchecked),
                             headline((), skipped, allow_unchecked=allow_unchecked),
                             wall_s=time.perf_counter() - start, **known)
        kernels = _check_all(targets, git, head_sha, base_sha, spec_rev, toolchain or find_toolchain(),
                             runner_factory, max_slowdown, sanitize)
    except PorterError as err:
        return CiOutcome(err.exit_code, str(err), wall_s=time.perf_counter() - start, **known)
    return CiOutcome(exit_code(kernels, skipped, allow_unchecked=allow_unchecked),
                     headline(kernels, skipped, allow_unchecked=allow_unchecked), kernels=kernels,
                     wall_s=time.perf_counter() - start, **known)


def _check_all(targets: Sequence[Target], git: GitRepo, head: str, base: str, spec_revision: str, toolchain: Toolchain,
               runner_factory: Callable[[], GpuRunner] | None, max_slowdown: float,
               sanitize: bool) -> tuple[CiKernel, ...]:
    with opened(runner_factory) as runner, tempfile.TemporaryDirectory(prefix="porter-ci-") as tmp:
        run = _Run(git, Path(tmp).resolve(), head, base, spec_revision, toolchain, runner, max_slowdown, sanitize)
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
                           allow_unchecked=allow_unchecked, sanitize=sanitize)
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
