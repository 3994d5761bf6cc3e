"""Tables shared by the terminal report, PORT_REPORT.md and the bot's log: plain text only.

Here, beside the Verdict whose timings they print, rather than in ``report/``: PORT_REPORT.md
(``review/``) is written in a layer below ``report/`` and may not import it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from porter.gate.verdict import Timing


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain, aligned text table (no colours: it must read the same in CI logs)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def timing_table(timings: Sequence[Timing]) -> tuple[list[str], list[list[object]]]:
    """Headers and rows of the timings table that the terminal report and PORT_REPORT.md print,
    with an "at" column when the timings span several size sets (``--time-at``). A median is its
    contender's slowest input set's, with its 95% confidence interval's half-width."""

    def num(x: float | None, fmt: str) -> str:
        return "-" if x is None or math.isnan(x) else format(x, fmt)

    several = len({t.sizes for t in timings}) > 1
    def ci(t: Timing) -> str:
        half = t.ci_half_width
        return "-" if half is None else f"±{100 * half:.1f}%"

    headers = ["timed", *(["at"] if several else []), "median ms", "95% CI", "p10-p90 ms", "n", "TFLOP/s", "TB/s",
               "roofline"]
    rows: list[list[object]] = [
        [t.name, *([t.sizes] if several else []), f"{t.median_ms:.4f}", ci(t), f"{t.p10_ms:.4f}-{t.p90_ms:.4f}", t.count,
         num(t.tflops, ".1f"), num(t.tbps, ".2f"),
         "-" if t.roofline_fraction is None else f"{100 * t.roofline_fraction:.0f}%"]
        for t in timings
    ]
    return headers, rows
