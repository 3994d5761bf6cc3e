"""Render porter's results as text for a terminal or a log. Pure functions: results in, text out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from porter.agent.session import PortResult
from porter.agent.steering import RoundView
from porter.gate.doctor import DoctorReport
from porter.gate.tables import table, timing_table
from porter.gate.verdict import Status, Verdict, size_label
from porter.ptx.inspection import ArchInspection, InspectReport
from porter.review.branch import ReviewOutcome


def _line_list(lines: Sequence[int], limit: int = 6) -> str:
    shown = ", ".join(str(n) for n in lines[:limit])
    more = f" (+{len(lines) - limit} more)" if len(lines) > limit else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"


def _resources(arch: ArchInspection) -> str:
    parts = []
    for name, r in arch.resources.items():
        text = f"{r.registers} regs"
        if r.shared_bytes:
            text += f", {r.shared_bytes} B smem"
        if r.spill_stores or r.spill_loads:
            text += f", spills {r.spill_stores}/{r.spill_loads} B"
        if r.stack_frame:
            text += f", stack {r.stack_frame} B"
        parts.append(text if len(arch.resources) == 1 else f"{name}: {text}")
    return "; ".join(parts)


def _signature(arch: ArchInspection) -> str:
    if arch.signature is None:
        return ""
    found = {op: n for op, n in arch.signature.found.items() if n}
    if not found:
        return f"none of {', '.join(arch.signature.expected)}"
    return ", ".join(f"{op} x{n}" for op, n in found.items())


def _assembly(arch: ArchInspection) -> str:
    if arch.assembled is None:
        return "-"
    if arch.assembled:
        return "ok (retargeted)" if arch.retargeted else "ok"
    errors = [d for d in arch.diagnostics if d.severity in ("error", "fatal")]
    first = errors[0] if errors else None
    if first is None:
        return "FAILED"
    where = f"line {first.line}: " if first.line else ""
    return f"FAILED: {where}{first.message}"


def render_inspect(report: InspectReport) -> str:
    m = report.module
    out = [f"{report.path}: PTX {m.version}, .target {', '.join(m.target)}, {m.address_size}-bit"]
    out.append("")
    out.append("entries:")
    for e in m.entries:
        params = ", ".join(
            f"{p.name}: {p.type}{' ptr' if p.is_ptr else ''}{f'[{p.array_size}]' if p.array_size else ''}"
            for p in e.params
        )
        directives = " ".join(f".{d.name} {','.join(map(str, d.values))}" for d in e.directives)
        out.append(f"  .{e.kind} {e.name}({params})  line {e.line}, {len(e.instructions)} instructions")
        if directives:
            out.append(f"      {directives}")
    out.append("")
    by_feature: dict[str, list[int]] = defaultdict(list)
    for use in report.features:
        by_feature[use.feature].append(use.line)
    if by_feature:
        out.append("features used:")
        width = max(len(f) for f in by_feature)
        for feature, lines in by_feature.items():
            out.append(f"  {feature.ljust(width)}  {_line_list(lines)}")
    else:
        out.append("features used: none that is architecture-specific")
    out.append("")
    rows = []
    for a in report.archs:
        rows.append([a.arch, a.verdict, _assembly(a), _resources(a), _signature(a)])
    out.append(table(["arch", "verdict", "ptxas", "resources", "signature SASS"], rows))
    notes = [a for a in report.archs if a.verdict != "as-is" or a.reason]
    if notes:
        out.append("")
        out.append("why:")
        for a in notes:
            c = a.compatibility
            if c.offenders:
                out.append(f"  {a.arch}: {c.reason.split('; first:')[0]}")
                out.extend(f"    {o.message}" for o in c.offenders[:4])
                if len(c.offenders) > 4:
                    out.append(f"    ... and {len(c.offenders) - 4} more")
            elif c.reason:
                out.append(f"  {a.arch}: {c.reason}")
    if report.ptxas:
        out.append("")
        out.append(f"ptxas: {report.ptxas}")
    return "\n".join(out)


def render_doctor(report: DoctorReport) -> str:
    rows = [[c.name, "ok" if c.found else "MISSING", c.detail] for c in report.checks]
    out = [table(["component", "status", "detail"], rows), ""]
    if report.gpus:
        for g in report.gpus:
            out.append(f"GPU {g.index}: {g.name}, compute capability {g.compute_capability} ({g.arch}), driver {g.driver}")
    else:
        out.append(report.gpu_note)
    out.extend(f"note: {n}" for n in report.notes)
    missing = [c for c in report.checks if not c.found and c.hint]
    if missing:
        out.append("")
        out.append("to install what is missing:")
        for c in missing:
            out.append(f"  {c.name}: {c.hint}")
    if not report.ok:
        out.append("")
        out.append("porter cannot assemble PTX without ptxas: install it first.")
    return "\n".join(out)


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def render_verdict(v: Verdict) -> str:
    """The verdict table a kernel engineer reads: each gate, the sweep, the timings, the evidence."""
    out = [f"{v.kernel} [{v.entry}] for {v.arch}: {v.status.upper()} - {v.reason}"]
    if v.gpu:
        out.append(f"GPU: {v.gpu}; {v.toolchain}")
    if v.seeds:
        out.append(f"seeds: {','.join(map(str, v.seeds))} (--seeds {','.join(map(str, v.seeds))} reproduces the inputs)")
    out.append("")
    out.append(table(["gate", "status", "summary"], [[g.name, g.status, g.summary] for g in v.gates]))
    for g in v.gates:
        if g.details and g.status != Status.PASSED:
            out.append("")
            out.append(f"{g.name}:")
            out.extend(f"  {d}" for d in g.details)
    emulation = v.gate("emulation")
    if emulation is not None and emulation.status == Status.PASSED:
        out += ["", "emulated cases (porter's PTX emulator on this CPU; not hardware):"]
        out.extend(f"  {d}" for d in emulation.details)
    if v.cases:
        out.append("")
        rows = []
        for c in v.cases:
            worst = max((o.max_abs_err for o in c.outputs if o.max_abs_err == o.max_abs_err), default=float("nan"))
            l2 = max((o.rel_l2 for o in c.outputs if o.rel_l2 == o.rel_l2), default=float("nan"))
            rows.append([size_label(c.sizes) + (f" [{c.values}]" if c.values else ""),
                         c.seed, c.status,
                         f"{worst:.3g}", f"{l2:.3g}", c.reason[:90]])
        out.append(table(["sizes", "seed", "status", "max abs err", "rel L2", "why"], rows))
        if v.judged_share is not None:
            out.append(f"judged: {100 * v.judged_share:.2f}% of the output elements (the others' reference is not "
                       "finite in the output's dtype: left out)")
        failing = next((c for c in v.cases if c.status != Status.PASSED and c.outputs), None)
        if failing is not None:
            out.append("")
            out.append(f"first failing case ({size_label(failing.sizes)}, seed {failing.seed}):")
            for o in failing.outputs:
                if not o.passed:
                    out.extend(f"  {line}" for line in o.summary.splitlines())
    if v.timings:
        out.append("")
        out.append(table(*timing_table(v.timings)))
        out.append(f"speedup vs source: {_fmt_ratio(v.speedup_vs_source)}; vs library: {_fmt_ratio(v.speedup_vs_library)}")
    if v.native is not None:
        out.append(f"native ({v.native.arch}): {v.native.state}: {v.native.summary}")
    for rep in v.sanitizer:
        if rep.ran:
            at = f" at {size_label(rep.sizes)}" if rep.sizes else ""
            out.append(f"{rep.tool}{at}: {rep.errors} errors ({rep.wall_s:.1f} s)")
            for f in rep.findings[:3]:
                where = f" at {f.function}+0x{f.offset:x}" if f.offset is not None else ""
                out.append(f"  {f.message}{where}{f' ({f.sass})' if f.sass else ''}")
        else:
            out.append(f"{rep.tool}: not run ({rep.reason})")
    if v.signature_sass:
        found = ", ".join(f"{op} x{n}" for op, n in v.signature_sass.items() if n)
        if found:
            executed = "execution: see native above" if v.native is not None else "execution not measured (--native)"
            out.append(f"signature SASS for {v.arch}: {found} (present in the cubin; {executed})")
        else:
            out.append(f"signature SASS for {v.arch}: none of {', '.join(v.signature_sass)} in the cubin")
    for name, r in v.resources.items():
        out.append(f"resources {name}: {r['registers']} regs, {r['shared_bytes']} B smem, "
                   f"spills {r['spill_stores']}/{r['spill_loads']} B, stack {r['stack_frame']} B")
    if v.warnings:
        out.append("")
        out.extend(f"warning: {w}" for w in v.warnings)
    out.append(f"({v.wall_s:.2f} s)")
    return "\n".join(out)


def render_port(result: PortResult) -> str:
    """The end of `porter port`: what was achieved, what was not, and where the evidence is."""
    out = [f"porter port: {result.outcome.upper()} - {result.stop_reason}"]
    if result.asked_target:
        out.append(f"target: {result.target}, NOT {result.asked_target} as asked: {result.target_reason}")
    else:
        out.append(f"target: {result.target_reason}")
    out.extend(f"warning: {w}" for w in result.warnings)
    out.append(f"native instructions: {'required' if result.require_native else 'not required'}")
    if result.model is None:
        out.append("model: none configured (set --model, PORTER_MODEL or .porter/config.toml); only the mechanical "
                   "retarget was tried")
    else:
        s = result.spend
        out.append(f"model: {result.model}; {s.rounds} rounds, {s.prompt_tokens}+{s.completion_tokens} tokens, "
                   f"${s.usd:.4f}")
    if result.best is not None:
        out.extend(achievements(result.best.verdict))
    out.append("")
    rows = [[c.index, c.origin, c.round, c.status, c.verdict.reason[:100]] for c in result.candidates]
    out.append(table(["#", "origin", "round", "status", "verdict"], rows))
    if result.best is not None:
        out.append("")
        out.append(f"best: candidate {result.best.index} ({result.best.path})")
        out.append(render_verdict(result.best.verdict))
    out.append("")
    out.append(f"run {result.run_id}: {result.run_dir}  (porter replay {result.run_id} re-verifies it)")
    return "\n".join(out)


DIFF_LINES = 80  # a steering prompt shows at most this many lines of a candidate's diff


def render_round(view: RoundView) -> str:
    """What a developer steering a port sees after a candidate: its verdict table, the best so far,
    the spend, and the diff against the text before it."""
    rec, v = view.record, view.record.verdict
    out = [f"candidate {rec.index} ({rec.origin}, round {rec.round}): {rec.status.upper()} - {v.reason}", ""]
    out.append(table(["gate", "status", "summary"], [[g.name, g.status, g.summary] for g in v.gates]))
    out.append(f"best so far: candidate {view.best.index} ({view.best.status}); spent {view.spend.line()}")
    diff = view.diff.splitlines()
    if not diff:
        out.append(f"no change from {view.previous_label}")
    else:
        out.append(f"diff against {view.previous_label}:")
        out.extend(diff[:DIFF_LINES])
        if len(diff) > DIFF_LINES:
            out.append(f"... {len(diff) - DIFF_LINES} more lines (candidates are in {rec.path.parent})")
    return "\n".join(out)


def achievements(v: Verdict) -> list[str]:
    """Plain sentences: what the best candidate was shown to do, and what nobody checked (a "no"
    in capitals, as the terminal says every failure)."""
    lines = ["achieved:"]
    for name, what in (("assemble", f"assembles for {v.arch}"), ("equivalence", "equal to the reference over the sweep"),
                       ("emulation", "equal to the reference in emulation (CPU, small shapes; not hardware)"),
                       ("native", f"{v.arch}'s own tensor-core instructions executed"), ("timing", "timed")):
        gate = v.gate(name)
        if gate is not None:
            said = gate.status.answer
            lines.append(f"  {what}: {said.upper() if said == 'no' else said} - {gate.summary}")
    return lines


def render_review(review: ReviewOutcome | None, result: PortResult, *, branch: bool) -> str:
    """Where the port went for review, or why it went nowhere."""
    if not branch:
        return "review branch: none (--no-branch)"
    if review is None and result.stopped:
        return f"review branch: none, the port was stopped (`porter port --resume {result.run_id}` goes on)"
    if review is None:
        return (f"review branch: none, the port is {result.outcome}; --branch-on-failure makes one whose title "
                "says NOT VERIFIED")
    lines = []
    if review.branch:
        lines.append(f"review branch: {review.branch} ({review.commit[:12] if review.commit else '?'}): "
                     f"{', '.join(review.files)}")
    elif review.out_dir:
        lines.append(f"no branch; wrote {', '.join(review.files)}")
    else:
        lines.append(f"review branch: none ({review.reason})")
    if review.pushed:
        lines.append("pushed")
    lines.extend(f"warning: {w}" for w in review.warnings)
    return "\n".join(lines)
