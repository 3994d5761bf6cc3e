"""What the emulator found wrong, each finding tied to a PTX line.

A :class:`Diagnostic` is pure data. ``fatal`` ones stop the launch (as the GPU would: an
out-of-bounds access, a wait that can never complete, an unsupported instruction); the others
are findings about a run that went on (a read of shared memory never written, TMEM not freed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The kinds, so that callers can match on them without parsing messages.
KINDS = (
    "out-of-bounds",        # an access outside every buffer or past a buffer's end
    "read-only",            # a store to an input the caller made read-only
    "misaligned",           # an access not aligned to its size
    "deadlock",             # a wait that can never complete (barrier, mbarrier, tcgen05.alloc)
    "uninitialized-shared",  # a read of shared memory nothing wrote
    "tmem",                 # TMEM over-allocated, read before written, not freed, out of quadrant
    "descriptor",           # a shared-memory or instruction descriptor that does not fit the layout
    "not-converged",        # a .sync.aligned instruction run by part of a warp
    "race",                 # outputs that differ between schedules
    "unsupported",          # an instruction or form the emulator does not implement
    "trap",                 # trap / a TMA box the hardware refuses / a step budget exceeded
    "assert",               # a device-side assert failed (__assertfail): message, file and line
)


@dataclass(frozen=True)
class Diagnostic:
    kind: str
    line: int  # 1-based line in the PTX text (0: not tied to one line)
    message: str
    cta: tuple[int, int, int] = (0, 0, 0)
    fatal: bool = False
    details: dict[str, object] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "launch"
        return f"{where}: {self.kind}: {self.message} (CTA {self.cta})"


class EmuTrap(Exception):
    """Raised inside execution to stop the launch with a fatal diagnostic."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


class Findings:
    """Collects diagnostics, each (kind, line, message) once, so that a loop reports a fault once."""

    def __init__(self, limit: int = 200) -> None:
        self.items: list[Diagnostic] = []
        self._seen: set[tuple[str, int, str]] = set()
        self.limit = limit

    def add(self, diagnostic: Diagnostic) -> None:
        key = (diagnostic.kind, diagnostic.line, diagnostic.message)
        if key in self._seen or len(self.items) >= self.limit:
            return
        self._seen.add(key)
        self.items.append(diagnostic)

    def once_per_line(self, kind: str, line: int) -> bool:
        """True the first time (kind, line) is reported through this check (cheap pre-filter)."""
        key = (kind, line, "")
        if key in self._seen:
            return False
        self._seen.add(key)
        return True
