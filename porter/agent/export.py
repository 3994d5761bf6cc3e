"""``porter export``: what each repair pair repairs, and what a set of pairs covers.

A fine-tuning set is only as good as its spread: a thousand pairs that all fix one ptxas typo teach
one thing. So every pair (:func:`porter.agent.runs.repair_pairs`) is labelled by the failure it
repairs (:func:`failure_label`: a ptxas error by class, the interface, a wrong result by the pattern
porter found, an out-of-bounds access, no native instructions, too slow), by its source and target
architecture and by its workload; and the export ends with a coverage and balance report over every
run it read (:func:`coverage_report`), after dropping the pairs whose kernels are the same once
comments and spacing are normalised away (:func:`drop_duplicates`).

Pure: it reads Verdicts and pair dicts, never the run folders themselves.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from porter.gate.verdict import Status, Verdict

# A ptxas error's class, by its message (the first that matches, in order).
_PTXAS_CLASSES = (
    ("unsupported on target", re.compile(r"requires \.target|not supported on \.?target|requires sm_", re.I)),
    ("PTX version", re.compile(r"\.version|PTX ISA", re.I)),
    ("unknown instruction", re.compile(r"not a name of any known instruction|unknown (instruction|modifier)", re.I)),
    ("syntax", re.compile(r"syntax error|parsing error", re.I)),
    ("operands", re.compile(r"arguments mismatch|operand|unexpected instruction types", re.I)),
    ("undefined symbol", re.compile(r"unknown symbol|not declared|undefined", re.I)),
    ("illegal use", re.compile(r"illegal|not allowed|invalid", re.I)),
)

# A wrong result's pattern, by what porter's comparison said of it (porter.gate.compare).
_RESULT_PATTERNS = (
    ("never written", ("never written", "still poison")),
    ("depends on the initial output", ("when the output starts as",)),
    ("wrong shape", ("has shape", "transposed")),
    ("scaled", ("× ref everywhere",)),
    ("offset", ("everywhere: a constant offset",)),
    ("ragged edge", ("ragged edge",)),
    ("every tile", ("every tile is bad",)),
    ("some tiles", ("tiles of", "first tile")),
    ("some indices", ("bad rows", "bad columns", "is bad", " only (")),
    ("NaN or Inf", ("nan", "inf")),
)


def failure_label(verdict: Verdict, status: Status | str) -> str:
    """The failure a candidate's Verdict shows, as ``kind`` or ``kind: class`` (``ptxas: syntax``,
    ``wrong result: every tile``, ``out-of-bounds``, ``not native``, ``slow``...): the first gate
    that did not pass decides, as it decides the Verdict's reason."""
    gates = {g.name: g for g in verdict.gates}
    if (gate := gates.get("interface")) is not None and gate.status == Status.FAILED:
        return "interface"
    if (gate := gates.get("assemble")) is not None and gate.status == Status.FAILED:
        return f"ptxas: {_ptxas_class(verdict, gate.details)}"
    if (gate := gates.get("equivalence")) is not None and gate.status == Status.FAILED:
        return _equivalence_label(verdict)
    if (gate := gates.get("sanitize")) is not None and gate.status == Status.FAILED:
        return "out-of-bounds" if "memcheck" in gate.summary else f"sanitizer: {gate.summary.split(' ')[0]}"
    if (gate := gates.get("timing")) is not None and gate.status == Status.FAILED:
        return "slow"
    if status == Status.PASSED_WITHOUT_NATIVE or ((gate := gates.get("native")) is not None
                                                  and gate.status == Status.FAILED):
        return "not native"
    return Status(verdict.status).value  # not run, or an error: nothing of the kernel's was judged wrong


def _ptxas_class(verdict: Verdict, details: Sequence[str]) -> str:
    errors = [d.message for d in verdict.assembly.errors] if verdict.assembly is not None else list(details)
    for message in errors:
        for name, pattern in _PTXAS_CLASSES:
            if pattern.search(message):
                return name
    return "other"


def _equivalence_label(verdict: Verdict) -> str:
    failed = [c for c in verdict.cases if c.status == Status.FAILED]
    if any(c.guard_violations for c in failed) or any("illegaladdress" in c.fault.lower().replace("_", "")
                                                      for c in failed):
        return "out-of-bounds"
    if any(c.inputs_modified for c in failed):
        return "wrote an input"
    if any(c.fault for c in failed):
        return "fault or hang"
    if any(c.nondeterminism for c in failed):
        return "nondeterministic"
    text = " ".join([c.reason for c in failed] + [o.summary for c in failed for o in c.outputs if not o.passed])
    return f"wrong result: {_result_pattern(text)}"


def _result_pattern(text: str) -> str:
    lowered = text.lower()
    for name, needles in _RESULT_PATTERNS:
        if any(needle.lower() in lowered for needle in needles):
            return name
    return "wrong values"


def normalised(ptx: str) -> str:
    """A kernel's text without comments and with its spacing collapsed: two candidates that differ
    only there are the same training example."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", ptx, flags=re.S)
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def pair_key(pair: dict[str, Any]) -> str:
    """The identity of a pair: its failing and its better kernel, normalised (the feedback between
    them follows from the failing kernel)."""
    texts = [m["content"] for m in pair["messages"] if m["role"] in ("user", "assistant")]
    return hashlib.sha256("\0".join(normalised(t) for t in texts[-2:]).encode()).hexdigest()


def drop_duplicates(pairs: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The pairs, the first of each normalised kernel pair kept; and how many were dropped."""
    seen: set[str] = set()
    kept, dropped = [], 0
    for pair in pairs:
        key = pair_key(pair)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(pair)
    return kept, dropped


@dataclass(frozen=True)
class Coverage:
    """What a set of exported pairs covers: counts by failure class, architecture pair and workload."""

    runs: int
    pairs: int
    duplicates: int
    unverified: int
    by_failure: Counter[str]
    by_arch: Counter[str]
    by_workload: Counter[str]


def coverage(pairs: Sequence[dict[str, Any]], *, runs: int, duplicates: int) -> Coverage:
    labels = [p["metadata"] for p in pairs]
    return Coverage(runs=runs, pairs=len(pairs), duplicates=duplicates,
                    unverified=sum(not m["verified"] for m in labels),
                    by_failure=Counter(m["failure"] for m in labels),
                    by_arch=Counter(f"{m['source_arch'] or '?'} -> {m['target']}" for m in labels),
                    by_workload=Counter(m["workload"] for m in labels))


def coverage_report(cov: Coverage) -> str:
    """The report ``porter export`` prints on stderr: counts per class, and where the set is thin."""
    lines = [f"porter export: {cov.pairs} repair pairs from {cov.runs} runs ({cov.duplicates} duplicates dropped by "
             f"normalised kernel text; {cov.pairs - cov.unverified} towards candidates verified on hardware, "
             f"{cov.unverified} unverified)"]
    for title, counts in (("by failure", cov.by_failure), ("by architecture", cov.by_arch),
                          ("by workload", cov.by_workload)):
        listed = ", ".join(f"{name} {n} ({100 * n / cov.pairs:.0f}%)" for name, n in counts.most_common())
        lines.append(f"  {title}: {listed or 'none'}")
    if cov.pairs:
        top, n = cov.by_failure.most_common(1)[0]
        single = sorted(name for name, count in cov.by_failure.items() if count == 1)
        thin = f"; a single pair each: {', '.join(single)}" if single and len(cov.by_failure) > 1 else ""
        lines.append(f"  balance: {len(cov.by_failure)} failure classes; the largest, {top}, holds "
                     f"{100 * n / cov.pairs:.0f}%{thin}")
    return "\n".join(lines)
