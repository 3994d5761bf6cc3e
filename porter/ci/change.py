"""What ``porter ci`` works on and reports: the changes, the kernels to check, where their specs
are, and the results (:class:`CiOutcome`). Data and pure helpers only: the bot (:mod:`porter.ci.bot`),
its ports (:mod:`porter.ci.port`) and its reports (:mod:`porter.ci.output`) all import this module
and none of them imports another's internals.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from porter.gate.verdict import NoJudgement, Status, Verdict

SpecFrom = Literal["base", "head"]

DEFAULT_MAX_SLOWDOWN = 0.03
SPEC_NAME = "porter.toml"


@dataclass(frozen=True)
class Change:
    """One entry of ``git diff --name-status``: git's status letter (score dropped), the path at head
    (for ``D``, the deleted path) and, for a rename or copy, the path at base."""

    status: str
    path: str
    old_path: str | None = None
    same_content: bool = False  # a rename or copy whose content git found identical (R100, C100)


@dataclass(frozen=True)
class Target:
    """A kernel to check: its path at head, at base (None: new, or unchanged), and its spec's path.

    ``spec_new``: the spec exists only at head, so it is read from head whatever the spec revision
    (a kernel added with its own spec); ``spec_note`` says where the spec came from when it is not
    simply the one beside the kernel at the spec revision."""

    path: str
    base_path: str | None
    spec: str
    spec_new: bool = False
    spec_note: str = ""


@dataclass(frozen=True)
class Skipped:
    """A changed kernel that was not checked against a trusted spec, and why (the reason says whether it
    was checked against the base revision's copy of a spec the change edits)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Finding:
    """Something to point a reviewer at: a repository path, the line when known, what is wrong."""

    path: str
    line: int | None
    message: str


@dataclass(frozen=True)
class SpeedCheck:
    """Head against base, timed interleaved in one run. ``speedup`` > 1: head is faster."""

    status: Status  # passed, failed (slower than allowed) or not run (not measured)
    summary: str
    speedup: float | None = None
    head_ms: float | None = None
    base_ms: float | None = None


@dataclass(frozen=True)
class CiKernel:
    """One changed kernel's result. ``status`` uses the Verdict's words; a slowdown beyond the
    allowed one turns a passed verdict into ``failed``. ``config_error``: the spec or reference is
    wrong (exit 2), not the kernel."""

    path: str
    spec: str
    base_path: str | None
    status: Status
    reason: str
    config_error: bool = False
    verdict: Verdict | None = None
    speed: SpeedCheck | None = None
    findings: tuple[Finding, ...] = ()
    spec_new: bool = False  # checked against a spec that this change adds (see Target)
    spec_note: str = ""


@dataclass(frozen=True)
class CiOutcome:
    exit_code: int
    message: str  # one line: what happened overall
    base: str = ""  # the commit compared against
    base_ref: str = ""  # how that commit was chosen: "origin/main", "merge-base of HEAD and origin/main", ...
    head: str = ""
    head_ref: str = ""
    spec_from: SpecFrom = "base"
    spec_revision: str = ""  # the commit the specs and references were taken from
    kernels: tuple[CiKernel, ...] = ()
    skipped: tuple[Skipped, ...] = ()  # changed kernels that could not be checked: they fail the bot
    allow_unchecked: bool = False  # ... unless this is set (--allow-unchecked)
    allow_interface_change: bool = False  # a kernel whose directives change its interface passes on (see ci.interface)
    notes: tuple[str, ...] = ()
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN
    port_to: str | None = None  # --port-to: each checked kernel is also ported (see porter.ci.port)
    ports: tuple[CiPort, ...] = ()  # one per ported kernel
    wall_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class CiPort:
    path: str
    status: Status | NoJudgement  # the port's status, or not ported
    reason: str
    run_id: str | None = None
    branch: str | None = None
    pushed: bool = False
    warnings: tuple[str, ...] = ()



def spec_candidates(path: str) -> tuple[str, ...]:
    """Where a spec for the file at ``path`` may be, nearest first: ``porter.toml`` in its folder,
    then in each folder above it, up to the repository root."""
    folders = [PurePosixPath(path).parent, *PurePosixPath(path).parent.parents]
    return tuple(str(folder / SPEC_NAME) for folder in folders)


def nearest_spec(path: str, specs: Collection[str]) -> str | None:
    """The spec that governs ``path`` among ``specs``: the nearest ``porter.toml`` walking up from its folder."""
    return next((c for c in spec_candidates(path) if c in specs), None)


def is_spec(path: str) -> bool:
    return PurePosixPath(path).name == SPEC_NAME


def is_kernel(path: str) -> bool:
    return path.endswith(".ptx")


def deleted_kernels(changes: Sequence[Change]) -> tuple[str, ...]:
    """The kernels ``changes`` delete."""
    return tuple(c.path for c in changes if c.status == "D" and is_kernel(c.path))


def material_edits(changes: Sequence[Change], specs: Collection[str],
                   named: Mapping[str, Collection[str]]) -> dict[str, tuple[str, ...]]:
    """For each spec, the files of its material that ``changes`` touch (added, edited, removed, or
    moved with edits): the spec itself, every Python file it governs (a reference may import its neighbours),
    and every file at or under a path the spec names (``named``: repository paths, see
    :meth:`porter.gate.spec.Spec.named_files`). A kernel is not material, nor is documentation.

    ``specs`` holds every spec path of both revisions; a file belongs to the nearest one above it.
    """
    edits: dict[str, list[str]] = {}
    for change in changes:
        if change.same_content:
            continue  # moved as it was: the same material, judged by its base copy
        for path in dict.fromkeys(p for p in (change.path, change.old_path) if p is not None):
            spec = None if is_kernel(path) else nearest_spec(path, specs)
            if spec is None:
                continue
            names = named.get(spec, ())
            if path == spec or path.endswith(".py") or any(path == n or path.startswith(n + "/") for n in names):
                edits.setdefault(spec, []).append(path)
    return {spec: tuple(paths) for spec, paths in edits.items()}
