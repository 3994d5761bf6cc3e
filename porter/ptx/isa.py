"""PTX ISA versions and CUDA releases: which ``.version`` a ptxas accepts, and how to say what is missing.

A ptxas accepts ``.version`` up to the PTX ISA of its CUDA release (ptxas 12.9 stops at 8.8, 13.0 at
9.0) and refuses a newer one outright (``Unsupported .version 9.0; current version is '8.8'``),
whatever the module uses. porter asks the ptxas in use (:func:`probe_text` is a module no ptxas
accepts, and :func:`parse_probe` reads the version its refusal names); where that gives nothing it
falls back to :data:`CUDA_PTX_ISA`, the table of releases.

What a module *needs* (its ``.target``'s minimum and its instruction families' minima, from
``profiles/``) is :func:`porter.ptx.arch.isa_needs`; this module holds the facts and the words:
pure data and text, no tool runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from porter.install import extra_hint

# (CUDA release, the PTX ISA its ptxas accepts at most), oldest first. 12.7 was never released
# publicly (its ISA 8.6 first shipped in 12.8). Checked here with ptxas 12.9.86 (8.8), 13.0.88 (9.0)
# and 13.5.37 (9.5); the others from NVIDIA's PTX release history. A CUDA 13 release newer than
# the table accepts 9.<minor>, the rule every 13.x release has followed so far.
CUDA_PTX_ISA: tuple[tuple[str, str], ...] = (
    ("11.0", "7.0"), ("11.1", "7.1"), ("11.2", "7.2"), ("11.3", "7.3"), ("11.4", "7.4"),
    ("11.5", "7.5"), ("11.6", "7.6"), ("11.7", "7.7"), ("11.8", "7.8"),
    ("12.0", "8.0"), ("12.1", "8.1"), ("12.2", "8.2"), ("12.3", "8.3"), ("12.4", "8.4"),
    ("12.5", "8.5"), ("12.6", "8.5"), ("12.8", "8.7"), ("12.9", "8.8"),
    ("13.0", "9.0"), ("13.1", "9.1"), ("13.2", "9.2"), ("13.3", "9.3"), ("13.4", "9.4"), ("13.5", "9.5"),
)

_VERSION = re.compile(r"^(\d+)\.(\d+)")
# ptxas's refusal of a .version it does not know names the newest one it does.
_CURRENT = re.compile(r"Unsupported \.version \S+; current version is '(\d+\.\d+)'")
# ptxas's wording when a feature needs a newer ISA than the module's .version.
_REQUIRES = re.compile(r"requires PTX ISA \.version (\d+\.\d+) or later")
PROBE_VERSION = "99.9"


def ptx_key(version: str) -> tuple[int, int]:
    """``"8.10"`` -> ``(8, 10)``: PTX ISA versions compare by number, not as text."""
    match = _VERSION.match(version.strip())
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return int(match.group(1)), int(match.group(2))


def release_of(version: str) -> str | None:
    """``"12.9.86"`` -> ``"12.9"``; None for a version that is not one (``"unknown"``)."""
    try:
        major, minor = ptx_key(version)
    except ValueError:
        return None
    return f"{major}.{minor}"


def isa_of_release(release: str) -> str | None:
    """The PTX ISA a CUDA release's ptxas accepts at most (``"12.9"`` -> ``"8.8"``); None if unknown."""
    wanted = release_of(release)
    if wanted is None:
        return None
    for cuda, isa in CUDA_PTX_ISA:
        if cuda == wanted:
            return isa
    major, minor = ptx_key(wanted)
    last_major, _ = ptx_key(CUDA_PTX_ISA[-1][0])
    if major == last_major and (major, minor) > ptx_key(CUDA_PTX_ISA[-1][0]):
        return f"{major - 4}.{minor}"
    return None


def release_for_isa(isa: str) -> str:
    """The first public CUDA release whose ptxas accepts ``isa`` (``"9.0"`` -> ``"13.0"``)."""
    key = ptx_key(isa)
    for cuda, accepted in CUDA_PTX_ISA:
        if ptx_key(accepted) >= key:
            return cuda
    major, minor = key
    return f"{major + 4}.{minor}"  # past the table: 9.N comes with 13.N


@dataclass(frozen=True)
class IsaSupport:
    """The PTX ISA versions one ptxas accepts: up to ``max_ptx``."""

    ptxas: str  # its version, "12.9.86"
    max_ptx: str  # "8.8"
    source: str  # "probed" (ptxas said so) or "table" (from its release)

    def accepts(self, version: str) -> bool:
        return ptx_key(version) <= ptx_key(self.max_ptx)

    def describe(self) -> str:
        return f"ptxas {self.ptxas} accepts PTX ISA up to {self.max_ptx}"


@dataclass(frozen=True)
class IsaNeed:
    """Why a module needs at least ``version``: its ``.target`` or one instruction (with its line)."""

    version: str
    what: str  # "`elect.sync` (elect)" or ".target sm_100a"
    line: int | None = None

    def describe(self) -> str:
        where = f" at line {self.line}" if self.line else ""
        return f"{self.what}{where} needs PTX ISA {self.version} (CUDA {release_for_isa(self.version)})"


def probe_text(target: str = "sm_80") -> str:
    """A module whose ``.version`` no ptxas knows: its refusal names the newest version it does."""
    return f".version {PROBE_VERSION}\n.target {target}\n.address_size 64\n"


def parse_probe(log: str) -> str | None:
    """The newest PTX ISA a ptxas accepts, from its refusal of :func:`probe_text`; None if not said."""
    match = _CURRENT.search(log)
    return match.group(1) if match else None


def required_by_diagnostic(message: str) -> str | None:
    """The ISA a ptxas diagnostic says a feature needs (``... requires PTX ISA .version 9.0 or later``)."""
    match = _REQUIRES.search(message)
    return match.group(1) if match else None


def too_new(need: IsaNeed, support: IsaSupport) -> str:
    """One line: what needs a newer PTX ISA than this ptxas accepts, and what brings it."""
    release = release_for_isa(need.version)
    extra = "cuda13" if ptx_key(release) >= (13, 0) else "cuda12"
    return (f"{need.describe()}, but {support.describe()}: use CUDA {release} or newer "
            f"({extra_hint(extra)}, or --toolchain DIR / PORTER_CUDA_HOME)")


def lowered(old: str, new: str, floor: IsaNeed | None, support: IsaSupport) -> str:
    """One line: a ``.version`` was lowered for this ptxas, and why that changes nothing the module uses."""
    if floor is None:
        why = "porter knows of nothing in the module that needs a newer one"
    else:
        where = f" at line {floor.line}" if floor.line else ""
        why = f"nothing in the module needs more than {floor.version} ({floor.what}{where})"
    return f".version {old} lowered to {new}: {support.describe()}, and {why}"
