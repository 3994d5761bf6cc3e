"""PORT_REPORT.md: what a port showed and what it did not, for the kernel engineer reviewing it.

A pure function of the :class:`PortResult`: every figure comes from the best candidate's Verdict
(and the baseline's, for the resources before), so the report can never claim more than the gate
measured. Plain markdown tables, no HTML, so it reads the same on any forge and in a terminal.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import PurePath

from porter.agent.runs import CandidateRecord
from porter.agent.session import PortResult
from porter.gate.evidence import EMULATED, equivalence
from porter.gate.tables import timing_table
from porter.gate.verdict import Status, Verdict, size_label
from porter.ptx.arch import get_profile

# A port's headline where its status word alone would mislead: a failed port's report shows its best failing candidate.
HEADLINE = {Status.FAILED: "failed (best failing candidate)"}

# What each gate shows when it passes, as a reviewer would say it.
GATE_CLAIMS = {
    "interface": "the parameters match the spec",
    "assemble": "assembles with ptxas",
    "equivalence": "equal to the reference over the sweep",
    "emulation": "equal to the reference in emulation (on the CPU, at small shapes: evidence, not hardware)",
    "native": "the target's own tensor-core instructions executed",
    "sanitize": "memory, race, init and sync sanitizers clean",
    "timing": "timed",
}


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; cells lose their newlines and escape ``|`` so no cell can break a row."""
    def cell(value: object) -> str:
        return " ".join(str(value).split()).replace("|", "\\|") or " "

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def reproduce_command(ported: str, spec: str, target: str, *, native: bool) -> str:
    """The ``porter check`` that re-derives the best candidate's verdict: the same spec, the same
    target (never a stand-in arch) and the same native-instruction requirement the session used."""
    words = ["porter", "check", ported, "--spec", spec, "--arch", target]
    if native:
        words.append("--native")
    return shlex.join(words)


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None or math.isnan(x) else format(x, fmt)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{op} x{n}" for op, n in counts.items() if n)



def _shown(v: Verdict, require_native: bool) -> tuple[list[str], list[str]]:
    shown: list[str] = []
    not_shown: list[str] = []
    for g in v.gates:
        claim = GATE_CLAIMS.get(g.name, g.name)
        if g.name == "assemble":
            claim = f"assembles for {v.arch} with ptxas"
        if g.status == Status.PASSED:
            shown.append(f"{claim}: {g.summary}")
        else:
            not_shown.append(f"{claim}: **{g.status}** - {g.summary}")
    names = {g.name for g in v.gates}
    present = _counts(v.signature_sass)
    if present and (v.native is None or v.native.state != "executed"):
        shown.append(f"{v.arch}'s signature instructions are in the cubin ({present}); that they run was not measured")
    if "native" not in names and require_native:
        not_shown.append("the target's own tensor-core instructions: not profiled")
    if "timing" not in names:
        not_shown.append("speed: not timed")
    if "sanitize" not in names:
        not_shown.append("sanitizers (memcheck, racecheck, initcheck, synccheck): not run "
                         "(`porter check --sanitize` runs them)")
    return shown, not_shown


def _gate_section(v: Verdict) -> list[str]:
    out = ["", "## Gates", "", md_table(["gate", "status", "summary"], [[g.name, g.status, g.summary] for g in v.gates])]
    for g in v.gates:
        if g.details and g.status != Status.PASSED:
            out += ["", f"{g.name}:", ""]
            out.extend(f"- {d}" for d in g.details)
    return out


def _sweep_section(v: Verdict) -> list[str]:
    out = ["", "### Equivalence sweep", ""]
    if not v.cases:
        eq = v.gate("equivalence")
        out.append(f"No case ran: {eq.summary if eq else 'the candidate did not get that far'}.")
        return out
    rows = []
    for c in v.cases:
        errs = [o.max_abs_err for o in c.outputs if not math.isnan(o.max_abs_err)]
        l2s = [o.rel_l2 for o in c.outputs if not math.isnan(o.rel_l2)]
        why = c.reason or c.fault or "; ".join(c.guard_violations + c.inputs_modified) or c.nondeterminism
        rows.append([size_label(c.sizes) + (f" [{c.values}]" if c.values else ""), c.seed, c.status, _num(max(errs, default=None)), _num(max(l2s, default=None)),
                     why or "-"])
    out.append(md_table(["sizes", "seed", "status", "max abs err", "rel L2", "why"], rows))
    return out


def _emulation_section(v: Verdict, target: str) -> list[str]:
    """The cases porter's PTX emulator ran, one per line, and, where they are the only evidence of
    equivalence, a plain sentence that nothing ran on the target's hardware."""
    gate = v.gate("emulation")
    if gate is None:
        return []
    out = ["", "### Emulated cases", ""]
    hardware = f"{target} ({get_profile(target).generation}) hardware"
    said = equivalence(v)
    if said.emulated:
        out += [f"The equivalence evidence is **{EMULATED}**: porter's PTX emulator ran the candidate on the CPU, "
                f"at small shapes, and compared its outputs with the spec's reference. Nothing ran on {hardware}.", ""]
    elif said.said == "not run":
        out += [f"Nothing ran on {hardware}, and porter's PTX emulator gave no evidence either:", ""]
    else:
        out += ["Beside the GPU's cases, porter's PTX emulator ran the candidate on the CPU:", ""]
    if gate.status == Status.PASSED:
        out.extend(f"- {line}" for line in gate.details)
    else:
        out.append(f"- emulation {gate.status}: {gate.summary} (its details are under Gates)")
    return out


def _evidence_section(v: Verdict) -> list[str]:
    out = ["", "### Instruction evidence", ""]
    if v.signature_sass:
        present = _counts(v.signature_sass)
        out.append(f"- signature SASS for {v.arch} in the cubin: "
                   f"{present or 'none of ' + ', '.join(v.signature_sass)}")
    else:
        out.append(f"- signature SASS for {v.arch}: not inspected")
    n = v.native
    if n is None:
        out.append("- executed: not profiled")
    else:
        out.append(f"- executed ({n.arch}): **{n.state}** - {n.summary}")
        if n.executed_counts:
            where = f" at {size_label(n.profiled_sizes)}" if n.profiled_sizes else ""
            out.append(f"- executed counts (warp-level){where}: {_counts(n.executed_counts) or 'none'}")
        if n.share is not None:
            need = f" (at least {100 * n.required_share:.0f}% required)" if n.required_share is not None else ""
            out.append(f"- share of the spec's FLOPs done by {', '.join(n.expected)}: **{100 * n.share:.1f}%**{need}")
        if n.older_share is not None:
            most = f" (at most {100 * (1 - n.required_share):.0f}% allowed)" if n.required_share is not None else ""
            out.append(f"- share done by older tensor-core instructions and scalar FMA (an upper bound): "
                       f"**{100 * n.older_share:.1f}%**{most}")
    for rep in v.sanitizer:
        at = f" at {size_label(rep.sizes)}" if rep.sizes else ""
        out.append(f"- {rep.tool}{at}: {rep.errors} errors" if rep.ran else f"- {rep.tool}: not run ({rep.reason})")
    if v.seeds:
        out.append(f"- seeds: {','.join(map(str, v.seeds))} (`porter check --seeds {','.join(map(str, v.seeds))}` "
                   "reproduces the inputs)")
    return out


def _speed_section(v: Verdict) -> list[str]:
    out = ["", "### Speed", ""]
    if not v.timings:
        timing = v.gate("timing")
        out.append(f"Not timed{': ' + timing.summary if timing else ''}.")
        return out
    out.append(md_table(*timing_table(v.timings)))
    out.append("")

    def ratio(x: float | None) -> str:
        return "not measured" if x is None else f"{x:.2f}x"

    out.append(f"Speed-up vs source: {ratio(v.speedup_vs_source)}; vs library: {ratio(v.speedup_vs_library)} "
               f"(> 1: the port is faster).")
    return out


def _resources_section(before: CandidateRecord | None, best: CandidateRecord) -> list[str]:
    out = ["", "### Resources", ""]
    if before is None or before.index == best.index:
        labelled = [("before and after", best)]
    else:
        labelled = [("before", before), ("after", best)]
    rows: list[list[object]] = []
    for label, record in labelled:
        what = f"{label}: candidate {record.index} ({record.origin})"
        if not record.verdict.resources:
            rows.append([what, "-", "-", "-", "-", "-"])
        for entry, r in record.verdict.resources.items():
            rows.append([what, entry, r.get("registers", "-"), r.get("shared_bytes", "-"),
                         f"{r.get('spill_stores', '-')}/{r.get('spill_loads', '-')}", r.get("stack_frame", "-")])
    out.append(md_table(["", "entry", "registers", "smem B", "spill stores/loads B", "stack B"], rows))
    return out


def _spend_section(result: PortResult) -> list[str]:
    s = result.spend
    out = ["", "## Model and spend", ""]
    if result.model is None:
        out.append("No model: only the mechanical retarget was tried.")
        return out
    out.append(md_table(["model", "rounds", "prompt tokens", "completion tokens", "USD", "wall s"],
                        [[result.model, s.rounds, s.prompt_tokens, s.completion_tokens, f"{s.usd:.4f}", s.wall_s]]))
    return out


def render_port_report(result: PortResult, *, kernel_rel: str, spec_rel: str, ported_rel: str, check_command: str,
                       toolchain: str, gpu: str) -> str:
    """PORT_REPORT.md for the review branch. Paths are as the reader will find them (repository-
    relative on a branch); ``check_command`` is what reproduces the verdict (see
    :func:`reproduce_command`); ``toolchain`` and ``gpu`` describe the machine that measured it."""
    best = result.best
    name = best.verdict.entry if best is not None else kernel_rel
    headline = result.outcome if result.outcome != result.status else HEADLINE.get(result.status, result.status.value)
    out = [f"# Port of `{name}` to {result.target}: {headline}", ""]
    out.append(f"- **source:** `{kernel_rel}` ({result.source_arch})")
    if best is not None:
        out.append(f"- **port:** `{ported_rel}`: candidate {best.index} ({best.origin}, round {best.round})")
    out.append(f"- **spec:** `{spec_rel}`")
    if result.asked_target:
        out.append(f"- **target:** {result.target} (**not {result.asked_target} as asked**): {result.target_reason}")
    else:
        out.append(f"- **target:** {result.target_reason}")
    out.append(f"- **native instructions:** {'required' if result.require_native else 'not required'}")
    out.append(f"- **stopped:** {result.stop_reason}")
    out.extend(f"- **warning:** {w}" for w in result.warnings)
    if best is None:
        out += ["", "No candidate was produced: there is nothing to review."]
    else:
        v = best.verdict
        if result.status != Status.PASSED:
            out += ["", f"**Not verified.** The best candidate's verdict: {v.status} - {v.reason}"]
        shown, not_shown = _shown(v, result.require_native)
        out += ["", "## What was shown", ""]
        out.extend(f"- {line}" for line in shown or ["nothing"])
        out += ["", "## What was not shown", ""]
        out.extend(f"- {line}" for line in not_shown or ["nothing left unmeasured"])
        out += (_gate_section(v) + _sweep_section(v) + _emulation_section(v, result.target) + _evidence_section(v)
                + _speed_section(v))
        baseline = result.candidates[0] if result.candidates else None
        out += _resources_section(baseline, best)
        if v.warnings:
            out += ["", "Warnings:", ""]
            out.extend(f"- {w}" for w in v.warnings)
    out += ["", "## Environment", ""]
    out.append(f"- toolchain: {toolchain or 'not recorded'}")
    out.append(f"- GPU and driver: {gpu or 'none: no kernel ran'}")
    out += _spend_section(result)
    out += ["", "## Run", ""]
    out.append(f"Run `{result.run_id}`: its prompts, replies, candidates and verdicts are in "
               f"`.porter/runs/{result.run_id}/` on the machine that ran it; `porter replay {result.run_id}` "
               f"re-verifies every candidate.")
    out += ["", "## Candidates", ""]
    out.append(md_table(["#", "origin", "round", "status", "verdict"],
                        [[c.index, c.origin, c.round, c.status, c.verdict.reason] for c in result.candidates]))
    where = "" if PurePath(ported_rel).is_absolute() else " from the repository root, with this branch checked out"
    out += ["", "## Reproduce", "", f"Run{where}:", "", "```sh", check_command, "```", "",
            "Exit 0: passed; 1: failed; 3: not run here (no GPU of that architecture, or no profiler).", ""]
    return "\n".join(out)

