"""Where each buffer of a launch lies in memory, drawn so that no kernel can tell where it runs.

A kernel can read its pointers: their values, their distances, their alignment, what lies past
a buffer's end. If porter placed buffers one way when checking and another when timing or
profiling, a candidate could behave well only where it is judged. So every launch porter makes
(checked, timed, profiled, sanitized) takes its placement from one family:

- ``fenced``: each buffer in a reservation of its own, with unmapped address space on both sides
  (far from every other buffer);
- ``plain``: each buffer inside an ordinary allocation from the memory pool (near the others),
  guard bytes on each side;

and in each, the start is aligned to the contract's ``align`` and no further (a random multiple
of it past the allocation's start), so alignment beyond the contract's is never constant.

Every checked case runs once per initial state (``protocol.INITIAL_STATES``). The first run is **flush**:
fenced, every buffer ending at the unmapped boundary (within ``align`` bytes of it, exactly at it
when the buffer's size is a multiple of its alignment), so that an access one element past the end
faults at every size. The later runs each have buffers of their own, whose family and offsets the
case's seed draws (alike for each). A timing run's first input set lies as the first run, its later sets and the profiled
launch as a program's tensors lie (``plain``: near each other, offsets drawn from the seed), so
that speed and native share are measured where programs run the kernel; compute-sanitizer's
launch is plain with nothing before or after the data (``exact``), which the drawn run's plain
family includes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

GUARD_SPAN = 64 * 1024  # the most guard bytes porter draws on either side of a buffer
# Where a program's tensors start: cudaMalloc aligns every allocation to 256 bytes (PyTorch's and
# CuPy's pools to 512), so the ``plain`` placing (timing, profiling) aligns starts to this or the
# contract's ``align``, the larger, and no further.
PROGRAM_ALIGN = 256

Family = Literal["fenced", "plain"]
# How a launch places its buffers (see runner.launch.Launch): flush, drawn (family and offsets from
# the seed), plain (offsets from the seed, always the plain family: as a program's tensors lie) or exact.
Placing = Literal["flush", "drawn", "plain", "exact"]


def run_placing(run: int) -> Placing:
    """Where the buffers of a checked case's run ``run`` lie: the first run's flush, every later
    run's drawn from the case's seed (each in buffers of its own, placed alike). Timing and
    profiling place theirs as the first run or as a program's tensors lie (``plain``: see
    ``runner.rounds.set_placing``), layouts the checked runs also cover."""
    return "flush" if run == 0 else "drawn"


@dataclass(frozen=True)
class Placement:
    """One buffer's place: its family, the bytes of the allocation before its data (``lead``) and
    after it (``tail``). ``lead + nbytes + tail`` is the allocation's size (for ``fenced``, whole
    pages)."""

    family: Family
    lead: int
    tail: int

    def size(self, nbytes: int) -> int:
        return self.lead + nbytes + self.tail


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def flush(nbytes: int, align: int, page: int) -> Placement:
    """Fenced, the data as close to the end of the mapped pages as its alignment lets it be."""
    size = max(page, _round_up(nbytes, page))
    lead = (size - nbytes) // align * align
    return Placement("fenced", lead, size - nbytes - lead)


def exact() -> Placement:
    """Plain, nothing around the data: what compute-sanitizer needs to see a buffer's true bounds."""
    return Placement("plain", 0, 0)


def drawn(rng: np.random.Generator, nbytes: int, align: int, page: int, family: Family) -> Placement:
    """A placement of ``family`` with random guard spans: the lead a random multiple of ``align``
    (0 included), the tail random (0 included; for ``fenced``, whatever rounds the pages up)."""
    lead = int(rng.integers(0, GUARD_SPAN // align + 1)) * align
    if family == "plain":
        return Placement("plain", lead, int(rng.integers(0, GUARD_SPAN + 1)))
    size = max(page, _round_up(lead + nbytes + int(rng.integers(0, GUARD_SPAN + 1)), page))
    return Placement("fenced", lead, size - lead - nbytes)


def draw_family(rng: np.random.Generator, fenced_available: bool) -> Family:
    """One launch's family: fenced or plain, even odds (plain only, where fences are unavailable)."""
    return "fenced" if fenced_available and rng.integers(0, 2) == 0 else "plain"

