"""What ptxas said about one candidate, as pure data: diagnostics, per-entry resources, the log.

These types are the toolchain's results without the cubin or the command line, so that the Verdict
can carry them (``Verdict.assembly``) without importing the code that runs ptxas: a consumer that
wants a candidate's ptxas errors and their lines reads them from the Verdict, never re-assembles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info", "fatal"]


@dataclass(frozen=True)
class Diagnostic:
    """One ptxas message that is not routine resource reporting."""

    line: int | None  # 1-based line in the PTX; None for messages about the whole run
    severity: Severity
    message: str  # without the "(C7508)" code prefix
    code: str | None = None  # "C7508" for ptxas' numbered advisories
    context: str = ""  # the line with 2 lines each side, numbered, the offending one marked ">"

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        code = f" [{self.code}]" if self.code else ""
        return f"{where}{self.severity}{code}: {self.message}"


@dataclass(frozen=True)
class EntryResources:
    """What ``ptxas -v`` reports for one ``.entry`` or ``.func``, in bytes per thread unless noted.

    ptxas gives a ``.func`` only its stack line, so its ``registers`` is None (ptxas 13 also charges
    a called function's local arrays to the calling entry's frame). ptxas 13 reports the ``cmem[0]``
    parameter bank for sm_8x targets but not for sm_90 and newer.
    """

    name: str
    registers: int | None = None
    barriers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cumulative_stack: int = 0  # stack of the entry plus every function it calls
    shared_bytes: int = 0  # static shared memory per CTA
    constant_bytes: dict[int, int] = field(default_factory=dict)  # constant bank -> bytes


@dataclass(frozen=True)
class Assembly:
    """One ptxas run's outcome: ``ok`` only when ptxas exited 0 and wrote the cubin."""

    ok: bool
    arch: str
    diagnostics: tuple[Diagnostic, ...]
    resources: dict[str, EntryResources]  # by function name
    wall_s: float  # of the ptxas run that produced this result, also when it comes from the cache
    cached: bool
    ptxas_version: str
    log: str  # ptxas' stderr then stdout, unparsed

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity in ("error", "fatal"))

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")

    def summary(self) -> Assembly:
        """This outcome as plain data (an ``AssembleResult`` without its cubin and command)."""
        return Assembly(ok=self.ok, arch=self.arch, diagnostics=self.diagnostics, resources=self.resources,
                        wall_s=self.wall_s, cached=self.cached, ptxas_version=self.ptxas_version, log=self.log)
