"""The review branch: every port ends as a git branch holding the ported kernel, its evidence
(PORT_REPORT.md) and the command that reproduces the verdict, made without touching the user's work.

How the user's work stays untouched, whatever state it is in (dirty, staged, mid-merge or rebase,
detached HEAD):
- the commit is made in a temporary worktree, added ``--detach --no-checkout`` from HEAD's commit.
  ``read-tree`` fills that worktree's own index with HEAD's tree, so only porter's files are ever
  written to disk, however large the repository; the main index, working tree, stash and current
  branch are never written;
- the branch ref is created last, with ``update-ref`` against the empty old value, so it appears only
  once its commit exists and can never move an existing branch;
- git runs with optional locks off (a read such as ``hash-object`` must not refresh the main index)
  and without the variables that redirect it (``GIT_INDEX_FILE`` set by a hook would otherwise send
  ``git add`` into the user's index);
- the user's hooks do not run: the commit records exactly the bytes the gate verified, and a
  formatting hook would make the evidence describe different ones.

A session that did not pass gets a branch only when asked for one, and its title then says NOT
VERIFIED ("passed without native instructions" and "not run on target hardware" count as not
passed). Where no branch can be made (no repository, a bare one, a locked index, ...) the same files
can go to an output folder instead.

All git work goes through :mod:`porter.gitcmd` (the ``git`` executable, with the variables that
redirect it removed), which keeps ``porter --help`` free of imports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from porter.agent.runs import CandidateRecord
from porter.agent.session import PortResult, repo_relative
from porter.errors import InputError
from porter.gate.verdict import Status
from porter.gitcmd import last_line, run_git
from porter.review.port_report import render_port_report, reproduce_command

PORTER_NAME = "porter"
PORTER_EMAIL = "porter@localhost"
REPORT_NAME = "PORT_REPORT.md"
PUSH_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ReviewOutcome:
    branch: str | None
    commit: str | None
    files: tuple[str, ...]  # repository-relative on a branch, absolute in out_dir
    pushed: bool = False
    push_error: str = ""
    warnings: tuple[str, ...] = ()
    out_dir: Path | None = None
    reason: str = ""  # why there is no branch


@dataclass(frozen=True)
class _Repo:
    """Where the kernel lives in git. ``problem`` says why no branch can be made there; ``top`` and
    ``head`` are filled as far as they could be found (a locked index still has both)."""

    top: Path | None = None
    head: str | None = None
    problem: str = ""
    locked: bool = False  # the problem is a held index.lock: usually gone a moment later


def _git(cwd: Path, *args: str, config: tuple[str, ...] = (), check: bool = True,
         timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return run_git(cwd, *args, config=config, check=check, timeout=timeout, what="a review branch")


def branch_name(stem: str, target: str) -> str:
    """``porter/<stem>-<target>``, made a valid ref name whatever the file is called."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{stem}-{target}")
    safe = re.sub(r"\.{2,}", ".", safe)
    safe = re.sub(r"-{2,}", "-", safe).strip(".-")
    if safe.endswith(".lock"):
        safe = safe[: -len(".lock")] + "-lock"
    return f"porter/{safe or 'port'}"


def _free_branch(top: Path, wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``-3``, ... : the first name that is neither a branch nor
    collides with one as a folder (``a/b`` cannot exist beside a branch ``a``, nor vice versa)."""
    listed = _git(top, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/").stdout.split()

    def taken(name: str) -> bool:
        return any(b == name or b.startswith(name + "/") or name.startswith(b + "/") for b in listed)

    name, n = wanted, 1
    while taken(name):
        n += 1
        name = f"{wanted}-{n}"
    return name


def _locate(kernel: Path, repo: Path | None) -> _Repo:
    start = repo if repo is not None else kernel.absolute().parent
    probe = _git(start, "rev-parse", "--is-bare-repository", "--is-inside-git-dir", check=False)
    if probe.returncode != 0:
        return _Repo(problem=f"{start} is not in a git repository, so there is no review branch to make")
    bare, inside_git_dir = probe.stdout.split()[:2]
    if bare == "true":
        return _Repo(problem=f"{start} is in a bare repository: a review branch needs a work tree")
    if inside_git_dir == "true":
        return _Repo(problem=f"{start} is inside a .git folder: a review branch needs a work tree")
    top = Path(_git(start, "rev-parse", "--show-toplevel").stdout.strip())
    head = _git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).stdout.strip() or None
    if head is None:
        return _Repo(top=top, problem=f"{top} has no commit yet: a review branch needs one to start from")
    if not kernel.resolve().is_relative_to(top):
        return _Repo(top=top, head=head, problem=f"{kernel} is outside the repository {top}")
    git_dir = Path(_git(top, "rev-parse", "--absolute-git-dir").stdout.strip())
    if (git_dir / "index.lock").exists():
        return _Repo(top=top, head=head, locked=True, problem=(
            f"{git_dir / 'index.lock'} exists: another git command is running (or crashed; "
            f"remove the file if none is running)"))
    return _Repo(top=top, head=head)


def branch_problem(kernel: Path) -> str:
    """Why no review branch could be made for ``kernel`` (no repository, a bare one, no commit, the
    kernel outside it), or "" when one can: asked before a session starts, so that a branch nobody
    can make is said at once. A locked index is not counted: it is usually gone by the end."""
    where = _locate(kernel, None)
    return "" if where.locked else where.problem


def _committed_state(top: Path, head: str, rel: str, path: Path) -> str:
    """``same``, ``modified`` or ``untracked``: the working-tree file against HEAD's copy. Hashing
    with ``--path`` applies the path's filters (line endings, LFS) as a commit would."""
    blob = _git(top, "rev-parse", "--verify", "--quiet", f"{head}:{rel}", check=False).stdout.strip()
    if not blob:
        return "untracked"
    # Absolute: git runs in ``top``, and a path relative to where porter was started means nothing there.
    now = _git(top, "hash-object", f"--path={rel}", "--", str(path.resolve())).stdout.strip()
    return "same" if now == blob else "modified"


def _needs_identity(top: Path) -> tuple[str, ...]:
    """``-c`` settings for porter's own identity, only where the repository has none of its own."""
    for ident in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        if _git(top, "var", ident, config=("user.useConfigOnly=true",), check=False).returncode != 0:
            break
    else:
        return ()
    settings = []
    for key, value in (("user.name", PORTER_NAME), ("user.email", PORTER_EMAIL)):
        if _git(top, "config", key, check=False).returncode != 0:
            settings.append(f"{key}={value}")
    return tuple(settings)


def commit_message(result: PortResult, best: CandidateRecord, *, ported: str, report: str, command: str) -> str:
    """Summary line, a short body and the ``Porter-*`` trailers that tools can read back."""
    name = best.verdict.entry
    if result.status == Status.PASSED:
        title = f"porter: port {name} to {result.target} (passed)"
    else:
        title = f"porter: NOT VERIFIED port of {name} to {result.target} ({result.outcome})"
    paragraphs = [
        f"Candidate {best.index} ({best.origin}, round {best.round}) ported from {result.source_arch}, "
        f"written to {ported}. Stopped: {result.stop_reason}",
    ]
    if result.status != Status.PASSED:
        paragraphs.append(f"This port did not pass porter's gates: {best.verdict.status} - {best.verdict.reason}. "
                          f"Check it before merging.")
    paragraphs.append(f"Evidence: {report}. To reproduce the verdict:")
    body = [textwrap.fill(p, width=72, break_long_words=False, break_on_hyphens=False) for p in paragraphs]
    trailers = [f"Porter-Run: {result.run_id}", f"Porter-Model: {result.model or 'none'}",
                f"Porter-Status: {result.status}"]
    return "\n\n".join([title, *body, f"    {command}", "\n".join(trailers)]) + "\n"


def open_review_branch(result: PortResult, *, kernel: Path, spec_path: Path, in_place: bool = False,
                       branch_on_failure: bool = False, push: str | None = None, out_dir: Path | None = None,
                       repo: Path | None = None, toolchain: str = "", gpu: str = "",
                       committed_spec_only: bool = False) -> ReviewOutcome:
    """Commit the best candidate of ``result`` on a new branch ``porter/<entry>-<target>``.

    ``kernel`` and ``spec_path`` are the files the session ported and checked with; ``repo`` is the
    repository to branch in (default: the one holding the kernel). ``in_place`` replaces the kernel's
    content on the branch instead of adding ``<stem>.<target>.ptx`` beside it. ``push`` names a remote
    to push the branch to. ``toolchain`` and ``gpu`` describe the machine for the report (default:
    what the verdict recorded). Without a usable repository, raises InputError having written
    nothing, unless ``out_dir`` is given: the files go there instead. A spec whose working-tree copy
    is not HEAD's is carried onto the branch, unless ``committed_spec_only`` (``porter ci``: the
    working tree is a pull request's, and a spec there may be a link to a file nobody committed).
    """
    best = result.best
    if best is None:
        return ReviewOutcome(None, None, (), reason="the session produced no candidate to commit")
    if result.status != Status.PASSED and not branch_on_failure:
        return ReviewOutcome(None, None, (), reason=(
            f"the port's status is '{result.status}', not 'passed': a review branch is made for a passed port only, "
            f"unless one is asked for on failure (its title then says NOT VERIFIED)"))
    for path, what in ((kernel, "kernel"), (spec_path, "spec"), (best.path, "candidate")):
        if not path.is_file():
            raise InputError(f"{path}: no such {what} file")
    toolchain = toolchain or best.verdict.toolchain
    gpu = gpu or best.verdict.gpu
    where = _locate(kernel, repo)
    if where.problem:
        if out_dir is None:
            raise InputError(where.problem)
        return _write_out_dir(result, best, where, out_dir, kernel=kernel, spec_path=spec_path, in_place=in_place,
                              toolchain=toolchain, gpu=gpu)
    assert where.top is not None and where.head is not None
    return _commit_branch(result, best, where.top, where.head, kernel=kernel, spec_path=spec_path,
                          in_place=in_place, push=push, toolchain=toolchain, gpu=gpu,
                          committed_spec_only=committed_spec_only)


def _commit_branch(result: PortResult, best: CandidateRecord, top: Path, head: str, *, kernel: Path,
                   spec_path: Path, in_place: bool, push: str | None, toolchain: str, gpu: str,
                   committed_spec_only: bool = False) -> ReviewOutcome:
    kernel_rel = repo_relative(kernel, top)
    assert kernel_rel is not None  # _locate checked it
    folder = PurePosixPath(kernel_rel).parent
    ported_rel = kernel_rel if in_place else (folder / f"{kernel.stem}.{result.target}.ptx").as_posix()
    report_rel = (folder / REPORT_NAME).as_posix()
    warnings: list[str] = []
    state = _committed_state(top, head, kernel_rel, kernel)
    if state == "modified":
        warnings.append(f"{kernel_rel} has uncommitted changes: the port was made from the working-tree copy, "
                        f"the branch starts from HEAD's")
    elif state == "untracked":
        warnings.append(f"{kernel_rel} is not committed: the branch does not hold the kernel the port was made from")
    files: dict[str, bytes] = {ported_rel: best.path.read_bytes()}
    spec_rel = repo_relative(spec_path, top)
    if spec_rel is None:
        spec_ref = str(spec_path.resolve())
        warnings.append(f"the spec {spec_ref} is outside the repository: it is not on the branch")
    else:
        spec_ref = spec_rel
        spec_state = _committed_state(top, head, spec_rel, spec_path)
        if spec_state != "same" and committed_spec_only:
            warnings.append(f"{spec_rel} in the working tree is not HEAD's: the branch carries no copy of it "
                            f"(the port was checked with the spec of the revision that judged the kernel)")
        elif spec_state != "same":
            files[spec_rel] = spec_path.read_bytes()
            warnings.append(f"{spec_rel} {'has uncommitted changes' if spec_state == 'modified' else 'is not committed'}: "
                            f"the branch carries the working-tree copy the port was checked with")
    command = reproduce_command(ported_rel, spec_ref, result.target, native=result.require_native)
    files[report_rel] = render_port_report(result, kernel_rel=kernel_rel, spec_rel=spec_ref, ported_rel=ported_rel,
                                           check_command=command, toolchain=toolchain, gpu=gpu).encode()
    message = commit_message(result, best, ported=ported_rel, report=report_rel, command=command)
    # The entry names the branch: file names do not tell ports apart (every Triton dump is kernel.ptx).
    branch = _free_branch(top, branch_name(result.entry or kernel.stem, result.target))
    commit = _commit_in_worktree(top, head, files, message)
    # Created last, against the empty old value: it cannot exist half-made or move another branch.
    _git(top, "update-ref", "-m", "porter: review branch", f"refs/heads/{branch}", commit, "")
    pushed, push_error = False, ""
    if push is not None:
        pushed, push_error = _push(top, push, branch)
        if push_error:
            warnings.append(f"push of {branch} to {push} failed ({push_error}); the local branch is kept")
    return ReviewOutcome(branch, commit, tuple(files), pushed, push_error, tuple(warnings))


def _commit_in_worktree(top: Path, head: str, files: dict[str, bytes], message: str) -> str:
    no_hooks = (f"core.hooksPath={os.devnull}",)
    identity = _needs_identity(top)
    scratch = Path(tempfile.mkdtemp(prefix="porter-review-"))
    tree = scratch / "worktree"
    try:
        try:
            _git(top, "worktree", "add", "--quiet", "--detach", "--no-checkout", str(tree), head, config=no_hooks)
            _git(tree, "read-tree", head)
            for rel, data in files.items():
                target = tree / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            _git(tree, "add", "--force", "--", *files)  # --force: a *.ptx ignore rule must not drop the port
            (scratch / "COMMIT_MSG").write_text(message)
            _git(tree, "commit", "--quiet", "--file", str(scratch / "COMMIT_MSG"),
                 config=no_hooks + identity)
            return _git(tree, "rev-parse", "HEAD").stdout.strip()
        finally:
            # its own worktree only: a prune would also forget the user's worktrees whose folders
            # are missing for now (an unmounted disk), with their index and detached HEAD
            _git(top, "worktree", "remove", "--force", str(tree), check=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _push(top: Path, remote: str, branch: str) -> tuple[bool, str]:
    try:
        done = _git(top, "push", "--quiet", remote, f"refs/heads/{branch}:refs/heads/{branch}", check=False,
                    timeout=PUSH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"no answer from {remote} in {PUSH_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        return False, last_line(done.stderr)
    return True, ""


def _write_out_dir(result: PortResult, best: CandidateRecord, where: _Repo, out_dir: Path, *, kernel: Path,
                   spec_path: Path, in_place: bool, toolchain: str, gpu: str) -> ReviewOutcome:
    """The branch's files, flat in ``out_dir``, with COMMIT_MSG.txt. Paths in the report are absolute:
    the spec must stay where it is for its reference files to resolve. The spec is copied when it
    differs from HEAD's copy, or when there is no HEAD to tell."""
    ported = out_dir / (kernel.name if in_place else f"{kernel.stem}.{result.target}.ptx")
    spec_ref = str(spec_path.resolve())
    command = reproduce_command(str(ported), spec_ref, result.target, native=result.require_native)
    files: dict[Path, bytes] = {ported: best.path.read_bytes()}
    spec_changed = True
    if where.top is not None and where.head is not None and (rel := repo_relative(spec_path, where.top)) is not None:
        spec_changed = _committed_state(where.top, where.head, rel, spec_path) != "same"
    if spec_changed:
        files[out_dir / spec_path.name] = spec_path.read_bytes()
    report = out_dir / REPORT_NAME
    files[report] = render_port_report(result, kernel_rel=str(kernel.resolve()), spec_rel=spec_ref,
                                       ported_rel=str(ported), check_command=command, toolchain=toolchain,
                                       gpu=gpu).encode()
    files[out_dir / "COMMIT_MSG.txt"] = commit_message(result, best, ported=ported.name, report=REPORT_NAME,
                                                       command=command).encode()
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise InputError(f"{', '.join(existing)}: already there; porter does not overwrite files in {out_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        with path.open("xb") as handle:
            handle.write(data)
    return ReviewOutcome(None, None, tuple(str(p) for p in files), out_dir=out_dir,
                         reason=f"no branch: {where.problem}; the files are in {out_dir}")
