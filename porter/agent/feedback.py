"""What the model is told after each attempt: compact, specific, and in the order it should act on.

:func:`feedback_for` turns a candidate's measurements (the ptxas result and the Verdict) into text:
the verdict line, the ptxas errors with the offending lines, every gate, the first failing case's
localization, the native-instruction evidence, registers and spills, speed, and last a list of what
still stands between the candidate and ``passed``. It reports what was measured and says what was
not; it never judges anything itself (the Verdict is the one currency).

The text is cut in the middle when it is too long (:func:`middle_cut`), so the verdict line and the
first errors at the head and the list of blockers at the tail always survive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from porter.agent.edits import EditOutcome
from porter.gate.verdict import CaseResult, Gate, Status, Verdict, size_label
from porter.ptx.assembly import Assembly, EntryResources

_MAX_ERRORS_WITH_CONTEXT = 8
_MAX_ERRORS_LISTED = 20
_MAX_NOTES = 4  # ptxas warnings / advisories shown
_MAX_OTHER_CASES = 6
_MAX_PASSED_SIZES = 8
_MAX_DETAILS = 10
_MAX_LINE = 300  # characters of one case reason or gate detail
_GATE_LINE = re.compile(r"^line (\d+): ")
_HANDLED = ("assemble", "equivalence", "native", "timing")


def feedback_for(
    verdict: Verdict | None,
    assemble: Assembly | None,
    *,
    candidate_text: str,
    require_native: bool,
    max_chars: int = 6000,
) -> str:
    """Feedback on one candidate: its ptxas result and/or Verdict, at most ``max_chars`` characters."""
    lines = candidate_text.splitlines()
    parts = [_headline(verdict, assemble)]
    if assemble is not None:
        parts.append(_assembler(assemble, lines))
    elif verdict is not None and (gate := verdict.gate("assemble")) is not None and gate.status != Status.PASSED:
        parts.append(_assemble_gate(gate, lines))
    if verdict is not None:
        parts += [
            _gates(verdict.gates),
            _equivalence(verdict),
            *(_gate_details(g) for g in verdict.gates if g.name not in _HANDLED and g.status != Status.PASSED),
        ]
    assembled = assemble.ok if assemble is not None else _gate_passed(verdict, "assemble")
    if verdict is not None and assembled:
        parts.append(_native(verdict))
    parts.append(_resources(verdict, assemble))
    if verdict is not None:
        parts.append(_speed(verdict))
        parts.append("\n".join(f"Warning: {w}" for w in verdict.warnings[:_MAX_NOTES]))
    parts.append(_blockers(verdict, assemble, require_native))
    return middle_cut("\n\n".join(p for p in parts if p), max_chars)


def middle_cut(text: str, max_chars: int) -> str:
    """``text`` if it fits, else its head and tail around a ``[... N characters cut ...]`` line.

    Cuts fall on line boundaries when that loses little. The result is never longer than ``max_chars``;
    a limit too small to hold the marker gives a plain prefix.
    """
    max_chars = max(0, max_chars)
    if len(text) <= max_chars:
        return text
    keep = max_chars - len(f"\n[... {len(text)} characters cut ...]\n")
    if keep <= 0:
        return text[:max_chars]
    head_len = keep * 3 // 5
    head, tail = text[:head_len], text[len(text) - (keep - head_len) :] if keep > head_len else ""
    newline = head.rfind("\n")
    if newline >= len(head) // 2:
        head = head[:newline]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) // 2:
        tail = tail[newline + 1 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def format_error_feedback(outcome: EditOutcome) -> str:
    """The message for a reply that could not be applied (see :func:`porter.agent.edits.apply_reply`)."""
    if outcome.ok:
        raise ValueError("the reply was applied: there is no format error to report")
    opening = {
        "truncated": "Your last reply was not used: it is incomplete.",
        "no-code": "Your last reply was not used: it holds no code.",
        "no-match": "Your last reply's edits were not applied.",
        "ambiguous": "Your last reply's edits were not applied.",
        "malformed": "Your last reply was not used: porter could not read it.",
        "header": "Your last reply's kernel was not checked: its header is not this port's.",
        "entry": "Your last reply's kernel was not checked: it lacks the port's entry.",
        "unreadable": "Your last reply's kernel was not checked: porter could not read it.",
    }.get(outcome.error_kind or "", "Your last reply was not used.")
    return (
        f"{opening}\n\n{outcome.error}\n\nThe kernel is unchanged since your previous reply; "
        "edits must match it as it is."
    )


# --- sections ---------------------------------------------------------------------------------


def _headline(verdict: Verdict | None, assemble: Assembly | None) -> str:
    if verdict is not None:
        return f"Verdict for {verdict.arch}: {verdict.status.upper()}: {verdict.reason}"
    if assemble is not None:
        return f"ptxas -arch={assemble.arch}: {'assembled' if assemble.ok else 'FAILED'} (nothing was run)"
    return "Nothing was measured for this candidate."


def _assembler(result: Assembly, lines: Sequence[str]) -> str:
    errors = result.errors
    notes = [d for d in result.diagnostics if d not in errors]
    if result.ok and not notes:
        return ""
    if result.ok:
        out = [f"ptxas -arch={result.arch}: assembled, with {len(notes)} message(s)"]
    else:
        out = [f"ptxas -arch={result.arch}: {len(errors)} error(s)"]
        for d in errors[:_MAX_ERRORS_WITH_CONTEXT]:
            out.append(str(d))
            context = d.context or (_context(lines, d.line) if d.line is not None else "")
            out += [f"    {c}" for c in context.splitlines()]
        listed = errors[_MAX_ERRORS_WITH_CONTEXT:_MAX_ERRORS_LISTED]
        out += [str(d) for d in listed]
        if len(errors) > _MAX_ERRORS_LISTED:
            out.append(f"... and {len(errors) - _MAX_ERRORS_LISTED} more errors")
        if not errors:  # ptxas failed without a parsable message
            out.append(result.log.strip()[-1000:] or "(ptxas printed nothing)")
    out += [str(d) for d in notes[:_MAX_NOTES]]
    return "\n".join(out)


def _assemble_gate(gate: Gate, lines: Sequence[str]) -> str:
    """The verdict's assemble gate, when no Assembly is at hand: its details plus the lines they name."""
    out = [f"assemble: {gate.status}: {gate.summary}"]
    for detail in gate.details[:_MAX_ERRORS_WITH_CONTEXT]:
        out.append(detail)
        match = _GATE_LINE.match(detail)
        if match:
            out += [f"    {c}" for c in _context(lines, int(match.group(1))).splitlines()]
    return "\n".join(out)


def _context(lines: Sequence[str], line: int) -> str:
    """The line with two lines each side, numbered, the line itself marked, as ptxas diagnostics show it."""
    if not 1 <= line <= len(lines):
        return ""
    first, last = max(1, line - 2), min(len(lines), line + 2)
    width = len(str(last))
    return "\n".join(
        f"{'>' if n == line else ' '} {n:>{width}} | {lines[n - 1].rstrip()}" for n in range(first, last + 1)
    )


def _gates(gates: Iterable[Gate]) -> str:
    return "Gates:\n" + "\n".join(f"- {g.name}: {g.status}: {_short(g.summary)}" for g in gates)


def _gate_details(gate: Gate) -> str:
    if not gate.details:
        return ""
    shown = [f"  {_short(d)}" for d in gate.details[:_MAX_DETAILS]]
    more = len(gate.details) - _MAX_DETAILS
    return "\n".join(
        [f"{gate.name} ({gate.status}):", *shown] + ([f"  ... and {more} more"] if more > 0 else [])
    )


def _equivalence(verdict: Verdict) -> str:
    gate = verdict.gate("equivalence")
    if gate is None or gate.status == Status.PASSED:
        return ""
    failed = [c for c in verdict.cases if c.status != Status.PASSED]
    if not failed:
        return _gate_details(gate)
    first, others = failed[0], failed[1:]
    out = [f"First failing case: {size_label(first.sizes)}; seed {first.seed}"]
    out += _case_problems(first)
    for check in first.outputs:
        if not check.passed:
            out += [f"  {line}" for line in check.summary.splitlines()]
    if others:
        out.append("Other failing cases:")
        out += [
            f"- {size_label(c.sizes)}; seed {c.seed}: {_short(c.reason or c.fault)}"
            for c in others[:_MAX_OTHER_CASES]
        ]
        if len(others) > _MAX_OTHER_CASES:
            out.append(f"- and {len(others) - _MAX_OTHER_CASES} more")
    passed = list(dict.fromkeys(size_label(c.sizes) for c in verdict.cases if c.status == Status.PASSED))
    if passed:
        more = f"; and {len(passed) - _MAX_PASSED_SIZES} more" if len(passed) > _MAX_PASSED_SIZES else ""
        out.append(f"Passed at: {'; '.join(passed[:_MAX_PASSED_SIZES])}{more}")
    return "\n".join(out)


def _case_problems(case: CaseResult) -> list[str]:
    out = []
    if case.fault:
        out.append(f"  fault: {_short(case.fault)}")
    if case.guard_violations:
        out.append("  out-of-bounds writes (into the guard bands around buffers):")
        out += [f"    {_short(g)}" for g in case.guard_violations[:_MAX_DETAILS]]
    if case.inputs_modified:
        out.append(f"  wrote input buffers (inputs must stay unchanged): {'; '.join(case.inputs_modified)}")
    if case.nondeterminism:
        out.append(f"  nondeterministic (two identical runs differ): {_short(case.nondeterminism)}")
    if not out and not any(not c.passed for c in case.outputs):
        out.append(f"  {_short(case.reason)}")
    return out


def _native(verdict: Verdict) -> str:
    out = []
    if verdict.signature_sass:
        found = [
            f"{op} x{n} in SASS" if n else f"{op} not in SASS" for op, n in verdict.signature_sass.items()
        ]
        out.append(f"Signature instructions of {verdict.arch}: {', '.join(found)}.")
    else:
        out.append(f"Signature instructions of {verdict.arch}: SASS not inspected (no disassembler here).")
    if verdict.native is not None:
        out.append(f"Native execution: {verdict.native.state}: {verdict.native.summary}")
    elif (gate := verdict.gate("native")) is not None:
        out.append(f"Native execution: {gate.status}: {gate.summary}")
    else:
        out.append("Native execution: not measured.")
    return "\n".join(out)


def _resources(verdict: Verdict | None, assemble: Assembly | None) -> str:
    if assemble is not None and assemble.resources:
        rows = {name: _from_entry(r) for name, r in assemble.resources.items()}
    elif verdict is not None:
        rows = dict(verdict.resources)
    else:
        return ""
    out = []
    for name, r in rows.items():
        if r.get("registers") is None:
            continue  # a .func: ptxas reports only its stack
        text = (
            f"{name}: {r['registers']} registers, {r.get('shared_bytes', 0)} B static shared, "
            f"stack {r.get('stack_frame', 0)} B"
        )
        stores, loads = r.get("spill_stores", 0), r.get("spill_loads", 0)
        if stores or loads:
            text += f", SPILLS {stores} B stored / {loads} B loaded (keep fewer values live)"
        else:
            text += ", no spills"
        out.append(text)
    return "Resources:\n" + "\n".join(f"- {line}" for line in out) if out else ""


def _from_entry(r: EntryResources) -> dict[str, object]:
    return {
        "registers": r.registers,
        "shared_bytes": r.shared_bytes,
        "stack_frame": r.stack_frame,
        "spill_stores": r.spill_stores,
        "spill_loads": r.spill_loads,
    }


def _speed(verdict: Verdict) -> str:
    gate = verdict.gate("timing")
    if not verdict.timings:
        return f"Speed: {gate.status}: {gate.summary}" if gate is not None and gate.status != Status.PASSED else ""
    out = ["Speed:"]
    for t in verdict.timings:
        half = t.ci_half_width
        ci = "" if half is None else f" ±{100 * half:.1f}% (95% CI)"
        figures = [f"{t.median_ms:.4f} ms median{ci} (p10-p90 {t.p10_ms:.4f}-{t.p90_ms:.4f}, n={t.count})"]
        if t.tflops is not None:
            figures.append(f"{t.tflops:.1f} TFLOP/s")
        if t.tbps is not None:
            figures.append(f"{t.tbps:.2f} TB/s")
        if t.roofline_fraction is not None:
            figures.append(f"{100 * t.roofline_fraction:.0f}% of roofline")
        out.append(f"- {t.name}: {', '.join(figures)}")
    for other, ratio in (("source", verdict.speedup_vs_source), ("library", verdict.speedup_vs_library)):
        if ratio is not None:
            word = "faster" if ratio >= 1 else "slower"
            out.append(f"- candidate vs {other}: {ratio:.2f}x ({word})")
    return "\n".join(out)


def _blockers(verdict: Verdict | None, assemble: Assembly | None, require_native: bool) -> str:
    items = []
    if assemble is not None and not assemble.ok:
        items.append("ptxas rejects the kernel: fix the errors above first.")
    if verdict is not None:
        for g in verdict.gates:
            if g.status == Status.PASSED or g.name == "timing" or (g.name == "assemble" and assemble is not None):
                continue
            if g.status == Status.NOT_RUN:
                items.append(
                    f"{g.name} was not run here ({_short(g.summary)}): not the kernel's fault, but "
                    "nothing is passed until it runs."
                )
            else:
                items.append(f"{g.name} {g.status}: {_short(g.summary)}")
        if require_native and verdict.gate("native") is None and _gate_passed(verdict, "assemble"):
            items.append(_static_native(verdict))
    elif assemble is not None and assemble.ok:
        items.append("nothing has been run yet: equivalence, native evidence and speed are unmeasured.")
    if not items:
        slower = (
            verdict is not None and verdict.speedup_vs_source is not None and verdict.speedup_vs_source < 1
        )
        tail = " It is slower than the source: make it faster without breaking correctness." if slower else ""
        return "What still blocks passed: nothing." + tail
    return "What still blocks passed:\n" + "\n".join(f"- {item}" for item in items)


def _static_native(verdict: Verdict) -> str:
    """Native code is required but was not profiled: what the SASS alone says."""
    if not verdict.signature_sass:
        return "native: neither the SASS nor the execution of the signature instructions was checked."
    if any(verdict.signature_sass.values()):
        return "native: signature instructions are in the SASS, but their execution was not measured."
    return (
        f"native: none of {verdict.arch}'s signature instructions ({', '.join(verdict.signature_sass)}) is in "
        "the SASS: the work still runs on another path."
    )


# --- helpers ----------------------------------------------------------------------------------


def _gate_passed(verdict: Verdict | None, name: str) -> bool:
    gate = verdict.gate(name) if verdict is not None else None
    return gate is not None and gate.status == Status.PASSED



def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_LINE else text[: _MAX_LINE - 3] + "..."
