"""Files of a revision, written from git objects into a folder of porter's: the one way ``porter
ci`` reads a revision. The user's work tree is never read, and nothing lands outside the folder."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from porter.errors import InputError
from porter.gitcmd import GitRepo


def inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing tree paths that would land outside ``root``."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise InputError(f"{relative!r}: a path outside the repository")
    return path


def write_file(git: GitRepo, rev: str, path: str, root: Path) -> Path:
    """The file at ``path`` in ``rev`` written under ``root``: for a symbolic link, the file it
    resolves to inside the repository (InputError for one that leaves it, loops or dangles)."""
    dest = inside(root, path)
    found = git.resolve(rev, path)
    if found.kind != "blob":
        raise InputError(f"{path}: resolves to {found.path}, which is not a file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(git.blob(found.obj))
    return dest


def write_spec_folder(git: GitRepo, rev: str, spec: str, root: Path) -> Path:
    """The spec file ``spec`` of ``rev`` under ``root``, with its folder (reference, derive code,
    goldens) written once: a second call for a spec of the same folder writes nothing."""
    spec_file = root / spec
    if not spec_file.exists():
        write_folder(git, rev, str(PurePosixPath(spec).parent), root)
    return spec_file


def write_folder(git: GitRepo, rev: str, folder: str, root: Path) -> None:
    """Every file of ``folder`` at ``rev`` under ``root`` (links resolved, see :meth:`GitRepo.listing`)."""
    for obj, path in git.listing(rev, folder, recursive=True):
        dest = inside(root, path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(git.blob(obj))
