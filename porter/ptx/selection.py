"""Which CUDA tools porter uses when a machine has several: pip wheels of CUDA 12 and 13, ``CUDA_HOME``,
``PATH``. Pure: it chooses among tools already found (in search order) for a driver already known.

The rules (:func:`choose`):

1. A folder the user names (``--toolchain DIR`` or ``PORTER_CUDA_HOME``) overrides: every tool it
   holds is used, whatever else is there.
2. Otherwise ptxas is one whose cubins the local driver loads: a CUDA major no newer than the
   driver's (cubins of a newer minor of the same major load, those of a newer major do not). Without
   a GPU driver there is no such constraint. Among those, the most complete release wins (nvdisasm
   and cuobjdump of the same release beside it, then of the same major), then the newest, then the
   first in search order.
3. nvdisasm and cuobjdump come from ptxas's release where there is one, else from its major, else
   the newest there is: a disassembler reads older cubins, not newer ones. They never decide what
   runs, so the driver does not constrain them.

What could not be made consistent is said, one line each, in :attr:`Choice.notes`; the one that
matters most, a ptxas whose cubins this driver cannot load, comes from :func:`driver_problem`, which
the gate also asks before it hands a cubin to the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from porter.install import extra_hint
from porter.ptx.isa import ptx_key, release_of

OVERRIDE = "PORTER_CUDA_HOME"
DISASSEMBLERS = ("nvdisasm", "cuobjdump")


class FoundTool(Protocol):
    """What the choice reads of a found binary (:class:`porter.ptx.toolchain.Tool`)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def source(self) -> str: ...


Tool = TypeVar("Tool", bound=FoundTool)


@dataclass(frozen=True)
class Choice(Generic[Tool]):
    ptxas: Tool | None
    nvdisasm: Tool | None
    cuobjdump: Tool | None
    notes: tuple[str, ...] = ()
    why: str = ""  # why this ptxas among several (the rule that decided), "" with one or none


def _release(tool: FoundTool) -> tuple[int, int] | None:
    release = release_of(tool.version)
    return ptx_key(release) if release else None


def _kin(tool: FoundTool, ptxas: FoundTool) -> int:
    """2: the same CUDA release as ``ptxas``; 1: the same major; 0: another."""
    mine, theirs = _release(tool), _release(ptxas)
    if mine is None or theirs is None:
        return 0
    return 2 if mine == theirs else 1 if mine[0] == theirs[0] else 0


def cubins_load(ptxas: FoundTool, driver: str | None) -> bool:
    """Whether a driver of CUDA version ``driver`` (``"13.0"``) loads this ptxas's cubins (None: no driver)."""
    release = _release(ptxas)
    if driver is None or release is None:
        return True
    try:
        return release[0] <= ptx_key(driver)[0]
    except ValueError:
        return True


def driver_problem(ptxas: FoundTool, driver: str | None) -> str | None:
    """The one line to say when this driver cannot load the cubins of ``ptxas``; None when it can."""
    if cubins_load(ptxas, driver):
        return None
    release = _release(ptxas)
    assert release is not None and driver is not None
    major = ptx_key(driver)[0]
    wheel = f"{extra_hint('cuda12')}, or " if major == 12 else ""
    return (f"ptxas {ptxas.version} ({ptxas.source}) makes CUDA {release[0]} cubins, which this driver "
            f"(CUDA {driver}) cannot load: {wheel}point --toolchain / PORTER_CUDA_HOME at a CUDA {major}.x toolkit")


def _best_partner(candidates: Sequence[Tool], ptxas: Tool | None) -> Tool | None:
    if not candidates:
        return None
    if ptxas is None:
        return candidates[0]

    def key(item: tuple[int, Tool]) -> tuple[int, tuple[int, int], int]:
        index, tool = item
        return _kin(tool, ptxas), _release(tool) or (0, 0), -index

    return max(enumerate(candidates), key=key)[1]


def choose(found: Mapping[str, Sequence[Tool]], driver: str | None) -> Choice[Tool]:
    """Pick ptxas, nvdisasm and cuobjdump from every copy ``found`` (by tool name, in search order)
    for a driver of CUDA version ``driver`` (None: no GPU driver here)."""
    ptxases = list(found.get("ptxas", ()))
    notes: list[str] = []
    forced = {name: next((t for t in found.get(name, ()) if t.source == OVERRIDE), None)
              for name in ("ptxas", *DISASSEMBLERS)}
    ptxas = forced["ptxas"]
    why = "named by --toolchain / PORTER_CUDA_HOME" if ptxas is not None else ""
    if ptxas is None and ptxases:
        loadable = [t for t in ptxases if cubins_load(t, driver)]
        if len(loadable) < len(ptxases):
            why = f"the others make cubins this driver (CUDA {driver}) cannot load"
        for skipped in (t for t in ptxases if loadable and t not in loadable):
            notes.append(f"ptxas {skipped.version} ({skipped.source}) not used: this driver (CUDA {driver}) "
                         f"cannot load its CUDA {ptx_key(skipped.version)[0]} cubins")
        pool = loadable or ptxases

        def completeness(item: tuple[int, Tool]) -> tuple[int, tuple[int, int], int]:
            index, tool = item
            partners = sum(max((_kin(d, tool) for d in found.get(name, ())), default=0) for name in DISASSEMBLERS)
            return partners, _release(tool) or (0, 0), -index

        ranked = sorted(enumerate(pool), key=completeness, reverse=True)
        ptxas = ranked[0][1]
        why = _why_first(*(completeness(item) for item in ranked[:2])) if len(ranked) > 1 else why
    if ptxas is not None and (problem := driver_problem(ptxas, driver)):
        notes.append(problem)
    chosen = {name: forced[name] or _best_partner(list(found.get(name, ())), ptxas) for name in DISASSEMBLERS}
    if ptxas is not None and (mixed := _mixed(ptxas, [t for t in chosen.values() if t is not None])):
        notes.append(mixed)
    return Choice(ptxas=ptxas, nvdisasm=chosen["nvdisasm"], cuobjdump=chosen["cuobjdump"], notes=tuple(notes),
                  why=why)


def _why_first(first: tuple[int, tuple[int, int], int], second: tuple[int, tuple[int, int], int]) -> str:
    """Which rule of :func:`choose` put the first ptxas before the second, from their ranking keys
    (disassemblers of its release beside it, its release, its place in the search order)."""
    if first[0] != second[0]:
        return "the most complete release: nvdisasm and cuobjdump of its release are beside it"
    if first[1] != second[1]:
        return "the newest release among equally complete ones"
    return "the first found in search order (PORTER_CUDA_HOME, CUDA_HOME, PATH, pip wheels) among equals"


def _mixed(ptxas: FoundTool, disassemblers: Sequence[FoundTool]) -> str | None:
    """The line that says the disassemblers are not of ptxas's release, and what that means."""
    strangers = [t for t in disassemblers if _kin(t, ptxas) < 2]
    if not strangers or _release(ptxas) is None:
        return None
    listed = " and ".join(f"{t.name} {t.version} ({t.source})" for t in strangers)
    older = [t.name for t in strangers if (_release(t) or (0, 0)) < (_release(ptxas) or (0, 0))]
    meaning = (f"{' and '.join(older)} may not read every cubin it makes" if older
               else "newer ones read its cubins")
    why = " (no CUDA 12 wheel of nvdisasm or cuobjdump exists)" if (_release(ptxas) or (0, 0))[0] == 12 else ""
    return (f"ptxas {ptxas.version} ({ptxas.source}) is used with {listed}, of another CUDA release: none of "
            f"{release_of(ptxas.version)} is here{why}; {meaning}")
