"""Where a Verdict's equivalence evidence came from: a GPU, or porter's PTX emulator.

A candidate that no GPU here can run may still have been run in the emulator (the ``emulation``
gate, :mod:`porter.gate.emulated`). That is evidence, never a pass, and every output that shows
equivalence (bench rows, ``porter ci``, ``porter port``'s last line, PORT_REPORT.md, the run
record) must say which kind it is. They all read it here, from the gates' statuses, so the word is
decided once and nothing parses a summary to find it.
"""

from __future__ import annotations

from dataclasses import dataclass

from porter.gate.verdict import Answer, Status, Verdict

EMULATED = "emulated"  # the one word outputs use for evidence from porter's PTX emulator


@dataclass(frozen=True)
class Equivalence:
    """A Verdict's answer to "is it equal to the reference?": ``said`` and whether that answer
    came from the emulator rather than a GPU (``emulated``); ``summary`` is the deciding gate's.
    ``said`` is the deciding gate's answer (``yes``, ``no``), or ``not run`` where none decided."""

    said: Answer
    emulated: bool
    summary: str = ""

    @property
    def label(self) -> str:
        """``yes``, ``no`` or ``not run``, marked ``(emulated)`` where the emulator said it."""
        return f"{self.said} ({EMULATED})" if self.emulated else self.said


_DECIDING = (Status.PASSED, Status.FAILED)  # a gate that ran and said yes or no


def equivalence(verdict: Verdict) -> Equivalence:
    """The GPU's answer where its equivalence gate ran (passed or failed); else the emulator's
    where the emulation gate ran; else ``not run``. A GPU run outranks emulation beside it: it is
    the stronger evidence (a failure in emulation still fails the Verdict, and its reason says so)."""
    for name, emulated in (("equivalence", False), ("emulation", True)):
        gate = verdict.gate(name)
        if gate is not None and gate.status in _DECIDING:
            return Equivalence(gate.status.answer, emulated, gate.summary)
    return Equivalence("not run", False)


def outcome_words(status: Status, verdict: Verdict | None) -> str:
    """A port's or check's status word, prefixed with ``equivalent in emulation`` when it was not
    run on hardware and the emulator found it equal: ``equivalent in emulation, not run on target
    hardware``. Any other status is said as it is."""
    if verdict is None or status not in (Status.NOT_RUN_ON_TARGET, Status.NOT_RUN):
        return status.value
    said = equivalence(verdict)
    return f"equivalent in emulation, {status}" if said.emulated and said.said == "yes" else status.value
