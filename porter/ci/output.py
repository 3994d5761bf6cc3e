"""Render a ``porter ci`` outcome for the places CI reads it. Pure functions: an outcome in, text out.

- :func:`render_markdown`: the job summary (``$GITHUB_STEP_SUMMARY``): one table row per kernel,
  then the details of each kernel that did not pass;
- :func:`render_annotations`: GitHub workflow commands (``::error file=...,line=...``) that put
  each finding on its PTX line in the pull request. GitHub shows at most 10 error annotations per
  step, so at most 10 are printed, and a notice says how many were left out;
- :func:`render_junit`: JUnit XML, one testsuite ``porter`` with one testcase per kernel;
- :func:`render_json`: the whole outcome;
- :func:`render_text`: the log.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from porter.ci.change import CiKernel, CiOutcome, Finding, SpeedCheck
from porter.gate.evidence import equivalence
from porter.gate.tables import table
from porter.gate.verdict import JunitElement, Status, size_label
from porter.jsonable import to_jsonable
from porter.text import fence_for

MAX_ANNOTATIONS = 10  # GitHub's limit of error annotations shown per step
_DETAIL_CASES = 5
_CELL_CHARS = 200
# Characters XML 1.0 cannot hold (ptxas or a reference may print control bytes).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# ---------------------------------------------------------------------------------------------
# Shared wording
# ---------------------------------------------------------------------------------------------


def _short(sha: str) -> str:
    return sha[:12]


def _revisions(outcome: CiOutcome, arrow: str = "->") -> str:
    return (f"base {_short(outcome.base)} ({outcome.base_ref}) {arrow} head {_short(outcome.head)} ({outcome.head_ref}); "
            f"spec and reference from the {outcome.spec_from} revision {_short(outcome.spec_revision)}")


def _assemble(kernel: CiKernel) -> str:
    gate = kernel.verdict.gate("assemble") if kernel.verdict else None
    return f"{gate.status} ({kernel.verdict.arch})" if gate and kernel.verdict else "-"


def _cases(kernel: CiKernel) -> str:
    """The GPU's cases passed, of those run; on a runner without a GPU, what porter's PTX emulator
    said (``yes (emulated)``), never a count that reads like hardware's."""
    if kernel.verdict is None:
        return "-"
    if not kernel.verdict.cases:
        said = equivalence(kernel.verdict)
        return said.label if said.emulated else "-"
    passed = sum(c.status == Status.PASSED for c in kernel.verdict.cases)
    return f"{passed}/{len(kernel.verdict.cases)} passed"


def _speed(speed: SpeedCheck | None) -> str:
    if speed is None:
        return "-"
    if speed.speedup is None:
        return "not measured"
    return f"{speed.speedup:.2f}x" + (" (too slow)" if speed.status == Status.FAILED else "")


def _reason(kernel: CiKernel) -> str:
    """The kernel's reason, after its old path when the change renamed it and where its spec came
    from when that is not the usual place."""
    notes = [f"renamed from {kernel.base_path}"] if kernel.base_path not in (None, kernel.path) else []
    notes += [kernel.spec_note] if kernel.spec_note else []
    return "".join(f"[{note}] " for note in notes) + kernel.reason


def _unchecked_title(outcome: CiOutcome) -> str:
    return ("Not checked against a trusted spec (allowed by --allow-unchecked):" if outcome.allow_unchecked
            else "Not checked against a trusted spec (each fails the bot; --allow-unchecked allows it):")


def _port_lines(outcome: CiOutcome) -> list[str]:
    """One line per port asked for with --port-to: its status, and its review branch if it passed."""
    if not outcome.ports:
        return [f"porting to {outcome.port_to}: no kernel to port"]
    lines = []
    for p in outcome.ports:
        where = f" -> branch {p.branch}{' (pushed)' if p.pushed else ''}" if p.branch else ""
        run = f" [run {p.run_id}]" if p.run_id else ""
        lines.append(f"port of {p.path} to {outcome.port_to}: {p.status}{where}{run}: {p.reason}")
        lines.extend(f"  warning: {w}" for w in p.warnings)
    return lines


def _details(kernel: CiKernel) -> list[str]:
    """What a reviewer needs about a kernel that did not pass: its gates and failing cases, or, where
    the gate never ran (the PTX does not parse, the spec is wrong), the findings."""
    if kernel.verdict is None:
        found = [f"{f.path}:{f.line}: {f.message}" if f.line else f"{f.path}: {f.message}" for f in kernel.findings]
        return found or [kernel.reason]
    lines = []
    for gate in kernel.verdict.gates:
        lines.append(f"{gate.name}: {gate.status}: {gate.summary}")
        if gate.status != Status.PASSED:
            lines.extend(f"  {d}" for d in gate.details)
    failing = [c for c in kernel.verdict.cases if c.status != Status.PASSED]
    for case in failing[:_DETAIL_CASES]:
        sizes = size_label(case.sizes)
        lines.append(f"case [{sizes}; seed {case.seed}]: {case.reason or case.fault}")
    if len(failing) > _DETAIL_CASES:
        lines.append(f"... and {len(failing) - _DETAIL_CASES} more failing cases")
    if kernel.speed is not None:
        lines.append(f"speed vs base: {kernel.speed.status}: {kernel.speed.summary}")
    return lines


# ---------------------------------------------------------------------------------------------
# Markdown (job summary)
# ---------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= _CELL_CHARS else flat[: _CELL_CHARS - 3] + "..."


def render_markdown(outcome: CiOutcome) -> str:
    out = [f"## porter ci: {outcome.message}", ""]
    if outcome.head:
        out += [_revisions(outcome, "→"), ""]
    if outcome.kernels:
        out += ["| kernel | status | assemble | cases | speed vs base | reason |",
                "| --- | --- | --- | --- | --- | --- |"]
        for k in outcome.kernels:
            status = "config error" if k.config_error else k.status
            out.append(f"| `{_cell(k.path)}` | **{status}** | {_assemble(k)} | {_cases(k)} | {_speed(k.speed)} | "
                       f"{_cell(_reason(k))} |")
        out.append("")
    if outcome.skipped:
        out += [_unchecked_title(outcome), ""] + [f"- `{s.path}`: {s.reason}" for s in outcome.skipped] + [""]
    if outcome.notes:
        out += [f"- {note}" for note in outcome.notes] + [""]
    if outcome.port_to:
        out += [f"- {line}" for line in _port_lines(outcome)] + [""]
    for k in outcome.kernels:
        if k.status != Status.PASSED:
            spec = [f"spec: {k.spec} ({k.spec_note})"] if k.spec_note else []
            body = [*spec, *_details(k)]
            fence = fence_for("\n".join(body))  # gate details quote the kernel: none may close the fence
            out += [f"### `{k.path}`: {k.status}", "", f"{fence}text", *body, fence, ""]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# GitHub annotations
# ---------------------------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does (``%``, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as data, plus ``:`` and ``,``, which end a property."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    where = f"file={escape_property(finding.path)}"
    if finding.line is not None:
        where += f",line={finding.line}"
    return f"::error {where},title=porter::{escape_data(finding.message)}"


def render_annotations(outcome: CiOutcome) -> list[str]:
    findings = [f for k in outcome.kernels for f in k.findings]
    if not outcome.allow_unchecked:
        findings += [Finding(s.path, None, s.reason) for s in outcome.skipped]
    lines = [annotation(f) for f in findings[:MAX_ANNOTATIONS]]
    if not outcome.kernels and not outcome.skipped and outcome.exit_code != 0:  # no file to point at
        lines.append(f"::error title=porter::{escape_data(outcome.message)}")
    left_out = len(findings) - MAX_ANNOTATIONS
    if left_out > 0:
        lines.append(f"::notice title=porter::{left_out} more findings not annotated (GitHub shows "
                     f"{MAX_ANNOTATIONS} per step); see the job summary")
    return lines


# ---------------------------------------------------------------------------------------------
# JUnit XML, JSON, text
# ---------------------------------------------------------------------------------------------


def _xml(text: str) -> str:
    return _NOT_XML.sub("?", text)


def render_junit(outcome: CiOutcome) -> str:
    """One testsuite ``porter``; per kernel a testcase with ``<failure>`` (failed, slower than
    allowed), ``<skipped>`` (not run, or not checked) or ``<error>`` (porter, environment or spec)."""
    suite = ET.Element("testsuite", name="porter")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(name: str, seconds: float, kind: JunitElement | None = None, message: str = "", text: str = "") -> None:
        element = ET.SubElement(suite, "testcase", classname="porter", name=_xml(name), time=f"{seconds:.3f}")
        counts["tests"] += 1
        if kind is not None:
            child = ET.SubElement(element, kind, message=_xml(message))
            if text:
                child.text = _xml(text)
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1

    for k in outcome.kernels:
        case(k.path, k.verdict.wall_s if k.verdict else 0.0, k.status.junit, k.reason, "\n".join(_details(k)))
    for s in outcome.skipped:  # a failure unless allowed: the bot fails on it
        case(s.path, 0.0, "skipped" if outcome.allow_unchecked else "failure", s.reason)
    if not outcome.kernels and not outcome.skipped and outcome.exit_code != 0:
        case("porter ci", outcome.wall_s, "error", outcome.message)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{outcome.wall_s:.3f}")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def render_json(outcome: CiOutcome) -> str:
    return json.dumps(to_jsonable(outcome), indent=2) + "\n"


def render_text(outcome: CiOutcome) -> str:
    out = [f"porter ci: {outcome.message}"]
    if outcome.head:
        out.append(_revisions(outcome))
    if outcome.kernels:
        rows = [[k.path, "config error" if k.config_error else k.status, _assemble(k), _cases(k), _speed(k.speed),
                 _reason(k)[:140]] for k in outcome.kernels]
        out += ["", table(["kernel", "status", "assemble", "cases", "speed vs base", "reason"], rows)]
    if outcome.skipped:
        out += ["", _unchecked_title(outcome)] + [f"  {s.path}: {s.reason}" for s in outcome.skipped]
    out += [f"note: {note}" for note in outcome.notes]
    if outcome.port_to:
        out.extend(_port_lines(outcome))
    for k in outcome.kernels:
        if k.status != Status.PASSED:
            out += ["", f"{k.path}:", *(f"  {line}" for line in _details(k))]
    return "\n".join(out)
