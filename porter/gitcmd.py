"""porter's one way to run git: the review branch (:mod:`porter.review.branch`) and the pre-merge
bot (:mod:`porter.ci`) both go through :func:`run_git`; the bot reads revisions through
:class:`GitRepo`.

The rules every git call follows:

- the variables that point git at another repository, work tree or index than the one ``-C`` names
  (``GIT_DIR``, ``GIT_INDEX_FILE``, ... set by a hook or an outer tool) are removed: with
  ``GIT_INDEX_FILE`` set, ``git add`` in porter's temporary worktree would write the user's index;
- optional locks are off (a read such as ``status`` or ``hash-object`` must not refresh the
  user's index), git never prompts (no terminal in CI), and its messages are in English (``LC_ALL=C``),
  so that one-line errors read the same everywhere;
- paths are literal (``--literal-pathspecs``) where the caller asks: a folder named ``*`` is that
  folder, not a pattern.

Why the ``git`` executable and not GitPython: every operation porter needs is one plumbing command
(``worktree add --no-checkout``, ``read-tree``, ``update-ref`` against an empty old value,
``ls-tree -z``, ``cat-file``), which GitPython would only wrap in the same subprocess call; it needs
the same executable, adds an import to the start of every git-using command, and is not installed
on the GPU machines porter runs on (they cannot reach a package index). So the dependency is gone.
Nothing here is imported by ``porter --help``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from porter.errors import EnvironmentProblem, InputError

GIT_TIMEOUT_S = 300.0

# Variables that point git at another repository, work tree or index than the one -C names.
REDIRECTING_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX",
                    "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE",
                    "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def git_env() -> dict[str, str]:
    """The environment every git call runs with (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTING_VARS}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def run_git(cwd: Path, *args: str, config: tuple[str, ...] = (), check: bool = True, timeout: float | None = None,
            text: bool = True, literal_pathspecs: bool = False, what: str = "porter") -> subprocess.CompletedProcess:
    """``git -C cwd [-c config]... args``; raises EnvironmentProblem when git is missing, takes longer
    than ``timeout`` or (with ``check``) fails, with git's last line. ``what`` names the caller in
    the message for a missing git ("porter ci needs git")."""
    command = ["git"]
    if literal_pathspecs:
        command.append("--literal-pathspecs")
    command += ["-C", str(cwd)]
    for setting in config:
        command += ["-c", setting]
    try:
        done = subprocess.run([*command, *args], capture_output=True, text=text, env=git_env(), timeout=timeout,
                              check=False)
    except FileNotFoundError as err:
        raise EnvironmentProblem(f"git not found on PATH: {what} needs git") from err
    if check and done.returncode != 0:
        stderr = done.stderr if text else done.stderr.decode("utf-8", errors="replace")
        raise EnvironmentProblem(f"git {args[0]} failed in {cwd}: {last_line(stderr)}")
    return done


def repo_root_of(path: Path) -> Path | None:
    """The top of the git work tree holding ``path`` (a file or folder), found on disk without
    running git (``.git`` is a folder, or a file in a linked worktree); None outside any."""
    start = path.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


@dataclass(frozen=True)
class GitRepo:
    root: Path

    @staticmethod
    def open(repo: Path) -> GitRepo:
        top = git_output(repo, "rev-parse", "--show-toplevel")
        if top is None:
            raise InputError(f"{repo}: not inside a git work tree")
        return GitRepo(Path(top.decode().strip()))

    def run(self, *args: str) -> bytes:
        out = git_output(self.root, *args)
        if out is None:
            raise InputError(f"git {' '.join(args)}: failed in {self.root}")
        return out

    def commit(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None."""
        if not ref or ref.startswith("-"):
            return None
        out = git_output(self.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return out.decode().strip() if out else None

    def merge_base(self, a: str, b: str) -> str | None:
        out = git_output(self.root, "merge-base", a, b)
        return out.decode().strip() if out else None

    def existing(self, rev: str, paths: Collection[str]) -> frozenset[str]:
        """Which of ``paths`` exist at ``rev``."""
        if not paths:
            return frozenset()
        out = self.run("ls-tree", "-z", "--full-tree", "--name-only", rev, "--", *sorted(paths))
        return frozenset(decode_path(p) for p in out.split(b"\0") if p)

    def entries(self, rev: str, folder: str, *, recursive: bool) -> list[TreeEntry]:
        """Every entry of ``folder`` at ``rev`` ("." is the whole tree), symbolic links included."""
        args = ["ls-tree", "-z", "--full-tree", *(["-r"] if recursive else []), rev]
        if folder != ".":
            args += ["--", folder + "/"]
        return _tree_entries(self.run(*args))

    def entry(self, rev: str, path: str) -> TreeEntry | None:
        """The tree entry at ``path`` in ``rev`` (links not followed), or None."""
        found = _tree_entries(self.run("ls-tree", "-z", "--full-tree", rev, "--", path))
        return next((e for e in found if e.path == path), None)

    def listing(self, rev: str, folder: str, *, recursive: bool) -> list[tuple[str, str]]:
        """``(object, path)`` of the files in ``folder`` at ``rev`` ("." is the whole tree). A symbolic
        link is listed with the object of the file it resolves to inside the repository (see
        :meth:`resolve`); one that leaves the repository, loops or dangles is left out."""
        listed = []
        for item in self.entries(rev, folder, recursive=recursive):
            found: TreeEntry | None = item
            if item.is_link:
                try:
                    found = self.resolve(rev, item.path)
                except InputError:
                    found = None
            if found is not None and found.kind == "blob":
                listed.append((found.obj, item.path))
        return listed

    def resolve(self, rev: str, path: str, *, max_links: int = 16) -> TreeEntry:
        """The entry a reader of ``path`` at ``rev`` gets once every symbolic link on the way is
        followed (the final one and any folder link), as a checkout would; its ``path`` is the real
        one. InputError when a link leaves the repository (an absolute target, or ``..`` above the
        root), when links loop, or when nothing is there."""
        direct = self.entry(rev, path)
        if direct is not None and not direct.is_link:
            return direct  # a tree holds no path through a link: none of its folders is one
        done: list[str] = []
        todo = [p for p in path.split("/") if p]
        followed = 0
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                if not done:
                    raise InputError(f"{path}: a symbolic link on the way leads outside the repository")
                done.pop()
                continue
            here = "/".join([*done, part])
            found = self.entry(rev, here)
            if found is None:
                raise InputError(f"{path}: {here} does not exist at {rev[:12]}")
            if not found.is_link:
                done.append(part)
                continue
            followed += 1
            if followed > max_links:
                raise InputError(f"{path}: more than {max_links} symbolic links on the way (a loop?)")
            target = decode_path(self.blob(found.obj))
            if target.startswith("/"):
                raise InputError(f"{path}: a symbolic link to {target}, outside the repository")
            todo = [p for p in target.split("/") if p] + todo
        resolved = "/".join(done)
        entry = self.entry(rev, resolved) if resolved else None
        if entry is None:
            raise InputError(f"{path}: nothing at {resolved or 'the repository root'}")
        return entry

    def blob(self, obj: str) -> bytes:
        """The bytes of a blob: an object name, or ``REV:PATH``."""
        return self.run("cat-file", "blob", obj)


@dataclass(frozen=True)
class TreeEntry:
    """One entry of ``git ls-tree``: mode (``120000`` is a symbolic link), kind, object and path."""

    mode: str
    kind: str
    obj: str
    path: str

    @property
    def is_link(self) -> bool:
        return self.mode == "120000"


def _tree_entries(raw: bytes) -> list[TreeEntry]:
    entries = []
    for item in raw.split(b"\0"):
        if item:
            meta, _, path = item.partition(b"\t")
            mode, kind, obj = meta.decode().split()
            entries.append(TreeEntry(mode, kind, obj, decode_path(path)))
    return entries


def decode_path(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def git_output(cwd: Path, *args: str) -> bytes | None:
    """stdout of ``git args`` run in ``cwd``, or None when git says no (with :func:`run_git`'s rules).
    Paths are literal: a folder named ``*`` is that folder, not a pattern."""
    try:
        proc = run_git(cwd, *args, check=False, timeout=GIT_TIMEOUT_S, text=False, literal_pathspecs=True,
                       what="porter ci")
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"git {args[0]} took over {GIT_TIMEOUT_S:.0f} s") from None
    return proc.stdout if proc.returncode == 0 else None
