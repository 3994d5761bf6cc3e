"""What a tool call may touch: files inside the server's root, read without quoting them.

``porter mcp`` runs as its owner, and its caller is a coding agent: a model whose input the owner
does not fully control (a file it read, a web page, a prompt injection). So every path a tool call
names is resolved (symlinks followed, ``..`` collapsed; a relative path is the root's) and must lie
inside the root the server was started for (the repository it was started in, or ``--root``).
The spec found beside a kernel and every file a spec names (its reference's and derive functions'
Python, its baseline, its source kernel, the golden files) must too: the gate imports a spec's
Python, so the server only ever imports Python from the owner's repository.

Files are parsed here, before a service runs, with errors that name the file, the line and the kind
of problem but never the file's text (:mod:`porter.mcp.content_free`); the services then read the
same files again, already known to parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from porter.errors import InputError
from porter.mcp.content_free import GOLDEN, NCU_CSV, PTX, RUN_RECORD, SPEC, reading

if TYPE_CHECKING:
    from porter.agent.runs import RunConfig
    from porter.gate.spec import Spec
    from porter.ptx import PtxModule

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a run id or its prefix: one name, never a path


@dataclass(frozen=True)
class Workspace:
    """The server's root (resolved) and the checks every path of a tool call goes through."""

    root: Path

    @classmethod
    def at(cls, root: Path) -> Workspace:
        resolved = root.resolve()
        if not resolved.is_dir():
            raise InputError(f"--root {root}: not a folder")
        return cls(resolved)

    def path(self, text: str, what: str) -> Path:
        """A path a caller gave (relative: to the root), resolved; one line (exit 2) naming only the
        path when it lies outside the root."""
        if "\x00" in text:
            raise InputError(f"{what}: a path cannot hold a NUL character")
        return self.inside(self.root / text, f"{what} {text}")

    def inside(self, path: Path, what: str) -> Path:
        """``path`` (one porter found, relative to the working folder as it would be opened)
        resolved, or one line when it lies outside the root."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            raise InputError(f"{what}: cannot be resolved (a symlink loop?)") from None
        if not resolved.is_relative_to(self.root):
            raise InputError(f"{what}: outside the repository porter mcp serves ({self.root})")
        return resolved

    def optional(self, text: str | None, what: str) -> Path | None:
        return None if text is None else self.path(text, what)

    # -- files, parsed without quoting them ------------------------------------------------------

    def ptx(self, path: Path) -> PtxModule:
        from porter.ptx import read_ptx

        with reading(PTX, path):
            return read_ptx(path)

    def spec_for(self, kernel: Path, spec: Path | None) -> Spec:
        """The spec given, else the nearest porter.toml above the kernel (as ``porter check`` finds
        it), loaded; it and every file it names inside the root."""
        from porter.services import find_spec

        with reading(SPEC, *(p for p in (spec, kernel) if p is not None), "porter.toml"):
            loaded = find_spec(kernel, spec)
        self.inside(loaded.path, f"the spec for {kernel.name} ({loaded.path})")
        for named in _named_files(loaded):
            self.inside(named, f"{loaded.source}: a file it names")
        return loaded

    def spec_file(self, path: Path) -> Spec:
        """A spec by its path (found by porter, e.g. a run's record), inside the root like its files."""
        from porter.gate.spec import load_spec

        self.inside(path, f"the spec {path}")
        with reading(SPEC, path):
            loaded = load_spec(path)
        for named in _named_files(loaded):
            self.inside(named, f"{loaded.source}: a file it names")
        return loaded

    def golden(self, folder: Path) -> None:
        """Golden outputs that can be read, every file of their manifest inside the root."""
        from porter.gate.golden import MANIFEST, load_golden

        with reading(GOLDEN, folder, folder / MANIFEST):
            manifest = load_golden(folder)
        for case in manifest.cases + manifest.reserve:
            self.inside(folder / case.file, f"{folder / MANIFEST}: a file it names")

    def ncu_export(self, path: Path) -> None:
        from porter.gate.hotspots import import_details

        with reading(NCU_CSV, path):
            import_details(path)

    def run(self, ref: str, runs: Path) -> Path:
        """A recorded run's folder, by a path inside the root or by its id (or a unique prefix)."""
        from porter.agent.runs import find_run

        if "/" in ref or "\\" in ref:
            folder = self.path(ref, "run")
            if not (folder / "config.json").is_file():
                raise InputError(f"run {ref}: not a recorded run (no config.json)")
            return folder
        if not _RUN_ID.fullmatch(ref):
            raise InputError(f"run: {ref!r} is neither a run id nor a path")
        return self.inside(find_run(runs, ref), f"run {ref}")

    def run_config(self, folder: Path) -> RunConfig:
        """A run's config.json (any file of that name, for a folder the caller named), read without quoting it."""
        from porter.agent.runs import read_config

        with reading(RUN_RECORD, folder / "config.json"):
            return read_config(folder)


def _named_files(spec: Spec) -> Iterator[Path]:
    """Every file a spec names: what the gate imports or reads on its word."""
    reference = spec.reference
    if reference is not None:
        if reference.callable is not None:
            yield reference.callable.path
        if reference.path is not None:
            yield reference.path
    if spec.baseline is not None:
        yield spec.baseline.path
    for param in spec.params:
        if param.derive is not None:
            yield param.derive.path
