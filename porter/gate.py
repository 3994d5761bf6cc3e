"""The gate: assemble a candidate, run it over the sweep against a reference, time it -> Verdict.

Order of work, each step feeding the Verdict:
1. interface: the PTX entry exists and its params match the spec;
2. assemble: ptxas for the candidate's target (diagnostics, resources, signature SASS);
3. equivalence: every size set x seed on this GPU, in the worker (guards, poison, two runs);
4. native (``--native``): one launch under ncu: did the target's signature instructions execute?
5. sanitize (``--sanitize``): memcheck, racecheck, initcheck, synccheck on the smallest case;
6. timing: candidate, source kernel and library baseline interleaved in one run.
Without a GPU that can run the candidate, steps 3-6 are ``not run`` with the reason, never passed
(except that native instructions absent from the SASS are judged absent without a GPU).
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from porter.arch import cubin_runs_on, get_profile, ptx_runs_on
from porter.compare import compare, compare_runs, format_comparison
from porter.errors import InputError
from porter.golden import load_golden
from porter.inspect import read_ptx, signature_evidence
from porter.native import NativeEvidence, judge_native
from porter.profiler import SanitizerFinding, SanitizerReport
from porter.ptx import PtxModule
from porter.runner.client import DeviceInfo, Runner, WorkerFault
from porter.spec import Spec, check_against_entry, declared_spec
from porter.toolchain import AssembleResult, Toolchain
from porter.verdict import CaseResult, Gate, OutputCheck, Timing, Verdict, overall_status

DEFAULT_SEEDS = (0, 1)


@dataclass(frozen=True)
class CheckOptions:
    arch: str | None = None  # assemble for this target; default: the candidate's .target
    against: Path | None = None  # source kernel: the reference (unless golden) and a speed baseline
    speed_baseline: Path | None = None  # source kernel timed beside the candidate, not used as reference
    golden: Path | None = None  # outputs recorded by `porter record`
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    timing: bool = True
    case_timeout_s: float = 60.0
    timing_budget_s: float = 1.0
    native: bool = False  # profile one case with ncu: were the target's own instructions executed?
    sanitize: bool = False  # memcheck, racecheck, initcheck, synccheck on the smallest case
    time_at: tuple[dict[str, int], ...] = ()  # [sizes] overrides to time at; default: [sizes] itself


def block_tile(shape: tuple[int, ...], grid: tuple[int, int, int]) -> tuple[int, ...] | None:
    """Infer the output tile one thread block covers, from the output's shape and the grid.

    CUDA's x is the fastest dimension, so for a 2-D output grid.x spans columns and grid.y rows.
    A launch of one block per row (grid.x == rows) gets a tile of one row. The result rounds up to
    a power of two, since ragged sizes otherwise blur the block boundaries.
    """
    def p2(n: int) -> int:
        return 1 << max(0, math.ceil(math.log2(max(1, n))))

    gx, gy, _ = grid
    if len(shape) == 1:
        return (p2(math.ceil(shape[0] / gx)),) if gx > 1 else None
    if len(shape) == 2:
        rows, cols = shape
        if gy > 1:
            return (p2(math.ceil(rows / gy)), p2(math.ceil(cols / gx)))
        if gx == rows:
            return (1, cols)
        return (rows, p2(math.ceil(cols / gx))) if gx > 1 else None
    return None


def cluster_problems(spec: Spec, entry: Any) -> list[str]:
    """Clusters are launched through the entry's own .reqnctapercluster (CuPy's launch has no
    cluster argument): a spec asking for clusters the entry does not declare cannot be honoured."""
    cluster = spec.launch_dims(spec.default_sizes()).cluster
    if cluster is None or math.prod(cluster) == 1:
        return []
    directive = entry.directive("reqnctapercluster")
    declared = tuple(directive.values) + (1,) * (3 - len(directive.values)) if directive else None
    if declared == tuple(cluster):
        return []
    have = f".reqnctapercluster {', '.join(map(str, declared))}" if declared else "no .reqnctapercluster"
    return [f"the spec launches clusters of {tuple(cluster)} but the entry has {have}: porter forms clusters "
            "through that directive, so the kernel must declare the same shape"]


def _assemble_gate(result: AssembleResult) -> Gate:
    if result.ok:
        warnings = [d for d in result.diagnostics if d.severity == "warning"]
        spills = [f"{n}: {r.spill_stores}/{r.spill_loads} B spilled" for n, r in result.resources.items()
                  if r.spill_stores or r.spill_loads]
        extra = f"; {len(warnings)} warnings" if warnings else ""
        return Gate("assemble", "passed", f"ptxas -arch={result.arch} ok in {result.wall_s:.2f} s{extra}",
                    tuple(spills + [d.message for d in warnings[:5]]))
    errors = [d for d in result.diagnostics if d.severity in ("error", "fatal")]
    details = tuple(f"line {d.line}: {d.message}" if d.line else d.message for d in errors[:10])
    return Gate("assemble", "failed", f"ptxas -arch={result.arch}: {len(errors)} errors", details)


def _resources(result: AssembleResult) -> dict[str, dict[str, object]]:
    return {
        name: {
            "registers": r.registers,
            "shared_bytes": r.shared_bytes,
            "spill_stores": r.spill_stores,
            "spill_loads": r.spill_loads,
            "stack_frame": r.stack_frame,
        }
        for name, r in result.resources.items()
    }


def _reference_job(spec: Spec, options: CheckOptions, source_cubin: bytes | None, source_entry: str,
                   golden: dict[str, Any] | None, case_index: int,
                   source_launch: dict[str, Any] | None = None) -> dict[str, Any]:
    if golden is not None:
        return {"kind": "golden", "path": str(options.golden / golden["cases"][case_index]["file"]),
                "key": "golden:" + str(options.golden)}
    if source_cubin is not None:
        return {"kind": "source", "cubin": source_cubin, "entry": source_entry, "launch": source_launch,
                "key": "source:" + hashlib.sha256(source_cubin).hexdigest()}
    ref = spec.reference
    if ref is None or ref.callable is None:
        raise InputError(f"{spec.source}: no reference: give [reference] python = 'ref.py:fn', --against SOURCE.ptx or --golden DIR")
    return {"kind": "python", "path": str(ref.callable.path), "function": ref.callable.function,
            "key": f"python:{ref.callable.path}:{ref.callable.function}:{ref.callable.path.stat().st_mtime_ns}"}


def _judge_case(spec: Spec, sizes: dict[str, int], seed: int, reply: dict[str, Any]) -> CaseResult:
    runs: list[dict[str, np.ndarray]] = reply["outputs"]
    reference: dict[str, np.ndarray] = reply["reference"]
    checks = []
    nondet = []
    grid = spec.launch_dims(sizes).grid
    for p in spec.outputs:
        atol, rtol = spec.tolerance(p.name, sizes)
        out = runs[0][p.name]
        if p.name not in reference:
            raise InputError(f"the reference returned no output {p.name!r}")
        ref = np.asarray(reference[p.name])
        c = compare(p.name, out, ref, atol=atol, rtol=rtol, tile=block_tile(out.shape, grid))
        checks.append(OutputCheck(
            name=p.name, passed=c.passed, max_abs_err=c.max_abs_err, max_rel_err=c.max_rel_err,
            rel_l2=c.rel_l2, mismatches=c.mismatches, total=c.total, nan_count=c.nan_count,
            inf_count=c.inf_count, atol=atol, rtol=rtol, summary=format_comparison(c), warnings=c.warnings,
        ))
        for later in runs[1:]:
            diff = compare_runs(out, later[p.name])
            if diff:
                nondet.append(f"{p.name}: {diff}")
    reasons = []
    if reply["guards"]:
        reasons.append("out-of-bounds write: " + "; ".join(reply["guards"]))
    if reply["modified"]:
        reasons.append("wrote its input: " + "; ".join(reply["modified"]))
    bad = [c for c in checks if not c.passed]
    if bad:
        reasons.append("; ".join(f"{c.name}: {c.mismatches} of {c.total} elements wrong" for c in bad))
    if nondet:
        reasons.append("nondeterministic: " + "; ".join(nondet))
    return CaseResult(
        sizes=dict(sizes), seed=seed, status="failed" if reasons else "passed", reason="; ".join(reasons),
        outputs=tuple(checks), guard_violations=tuple(reply["guards"]), inputs_modified=tuple(reply["modified"]),
        nondeterminism="; ".join(nondet), wall_s=reply.get("kernel_s", 0.0),
    )


def _case_label(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _equivalence_gate(cases: list[CaseResult], planned: int) -> Gate:
    failed = [c for c in cases if c.status != "passed"]
    if not failed and len(cases) == planned:
        return Gate("equivalence", "passed", f"{len(cases)} cases (size sets x seeds) equal to the reference")
    details = []
    for c in failed[:6]:
        details.append(f"[{_case_label(c.sizes)}; seed {c.seed}] {c.reason or c.fault}")
    skipped = planned - len(cases)
    if skipped:
        details.append(f"{skipped} cases not run after the fault")
    first = failed[0]
    return Gate("equivalence", "failed", f"{len(failed)} of {planned} cases failed; first: {first.reason or first.fault}",
                tuple(details))


def _timing_stats(name: str, samples: list[float], flops: float | None, nbytes: float | None,
                  peak_tflops: float, peak_tbps: float) -> Timing:
    ordered = sorted(samples)
    median = statistics.median(ordered)
    q = lambda f: ordered[min(len(ordered) - 1, int(f * len(ordered)))]  # noqa: E731
    seconds = median / 1e3
    tflops = flops / seconds / 1e12 if flops else None
    tbps = nbytes / seconds / 1e12 if nbytes else None
    shares = [x for x in ((tflops / peak_tflops) if tflops else None, (tbps / peak_tbps) if tbps else None) if x]
    return Timing(name=name, median_ms=median, p10_ms=q(0.1), p90_ms=q(0.9), count=len(samples),
                  tflops=tflops, tbps=tbps, roofline_fraction=max(shares) if shares else None)


def _peaks(device: DeviceInfo) -> tuple[float, float, str]:
    """Peak bf16 TFLOP/s and memory TB/s of this GPU, from its arch profile's parts."""
    profile = get_profile(device.arch)
    return profile.peak_for(device.name)


def run_check(candidate: Path, spec: Spec, options: CheckOptions, *, toolchain: Toolchain,
              runner: Runner | None) -> Verdict:
    start = time.perf_counter()
    module = read_ptx(candidate)
    source_spec = spec  # the spec describes the source; a candidate may declare its own launch
    source_entry = spec.entry
    spec, launch = declared_spec(spec, module.text, source=str(candidate))
    entry_name = spec.entry
    try:
        entry = module.entry(entry_name)
    except KeyError:
        names = ", ".join(e.name for e in module.kernels) or "none"
        raise InputError(f"{candidate}: no .entry {entry_name!r} (entries: {names})") from None
    gates: list[Gate] = []
    warnings: list[str] = []
    problems = check_against_entry(spec, entry) + cluster_problems(spec, entry)
    if problems:
        gates.append(Gate("interface", "failed", "the kernel does not match the spec", tuple(problems)))
        return _verdict(candidate, entry_name, options.arch or module.arch, gates, start=start)
    gates.append(Gate("interface", "passed", f"{len(entry.params)} params match the spec"))

    target = options.arch or module.arch
    text = module.text
    assembled = toolchain.assemble(text, target, filename=candidate.name)
    gates.append(_assemble_gate(assembled))
    base = dict(kernel=str(candidate), entry=entry_name, arch=target, resources=_resources(assembled),
                toolchain=f"ptxas {assembled.ptxas_version}")
    if not assembled.ok:
        return _verdict(candidate, entry_name, target, gates, start=start, **_extra(base))
    signature = _signature(toolchain, assembled, target)

    device, why_not = _device(runner)
    if device is None:
        gates.append(Gate("equivalence", "not run", why_not))
        more, extras = _unmeasured(options, why_not, target, signature)
        gates.extend(more)
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature, **extras,
                        **_extra(base))
    # An explicit --arch is a claim about that target: only its own cubin may stand for it.
    run_cubin, run_note = runnable_cubin(module, assembled, device, toolchain, candidate.name,
                                         fallback=options.arch is None)
    if run_cubin is None:
        gates.append(Gate("equivalence", "not run", run_note))
        more, extras = _unmeasured(options, run_note, target, signature)
        gates.extend(more)
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature,
                        gpu=device.describe(), **extras, **_extra(base))
    if run_note:
        warnings.append(run_note)

    source_cubin, source_launch = None, None
    source_path = options.against or options.speed_baseline
    if source_path is not None:
        source_module = read_ptx(source_path)
        # A source that is itself a port (sm_90a -> sm_100a) runs with its own declared launch.
        declared, source_launch = declared_spec(source_spec, source_module.text, source=str(source_path))
        source_entry = declared.entry
        source_cubin, note = runnable_cubin(source_module, None, device, toolchain, source_path.name)
        if source_cubin is None:
            warnings.append(f"source kernel {source_path}: {note}")
    reference_cubin = source_cubin if options.against is not None and options.golden is None else None
    golden = load_golden(options.golden) if options.golden else None
    if golden is not None:
        plan = [(c["sizes"], c["seed"]) for c in golden["cases"]]
    else:
        plan = [(s, seed) for s in spec.size_sets() for seed in options.seeds]

    cases: list[CaseResult] = []
    assert runner is not None
    for index, (sizes, seed) in enumerate(plan):
        reference = _reference_job(spec, options, reference_cubin, source_entry, golden, index, source_launch)
        try:
            reply = runner.call("case", options.case_timeout_s, cubin=run_cubin, entry=entry_name,
                                spec_path=str(spec.path), sizes=sizes, seed=seed, reference=reference,
                                launch=launch)
        except WorkerFault as fault:
            cases.append(CaseResult(sizes=dict(sizes), seed=seed, status="failed", reason=f"{fault.kind}: {fault}",
                                    fault=str(fault)))
            break
        case = _judge_case(spec, sizes, seed, reply)
        cases.append(case)
        for c in case.outputs:
            warnings.extend(w for w in c.warnings if w not in warnings)
    gates.append(_equivalence_gate(cases, len(plan)))

    extras: dict[str, Any] = {}
    if options.native:
        evidence = _native(spec, run_cubin, entry_name, target, signature, device, launch)
        gates.append(_native_gate(evidence))
        extras["native"] = evidence
    if options.sanitize:
        reports = _sanitize(spec, run_cubin, entry_name, toolchain, launch)
        gates.append(_sanitize_gate(reports))
        extras["sanitizer"] = reports

    timings: tuple[Timing, ...] = ()
    speed: dict[str, float | None] = {}
    if options.timing and gates_passed(gates, "equivalence"):
        timing_gate, timings, speed = _timing(spec, runner, device, run_cubin, entry_name, launch,
                                              (source_cubin, source_entry, source_launch), options)
        gates.append(timing_gate)
        if any(t.roofline_fraction and t.roofline_fraction > 1.05 for t in timings if t.name == "candidate"):
            warnings.append("the candidate measured faster than the roofline: suspect (not a win); check the spec's cost and sizes")
    return _verdict(candidate, entry_name, target, gates, start=start, signature=signature, gpu=device.describe(),
                    cases=tuple(cases), timings=timings, warnings=tuple(warnings), **speed, **extras,
                    **_extra(base))


def _extra(base: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k in ("resources", "toolchain")}


def _signature(toolchain: Toolchain, result: AssembleResult, arch: str) -> dict[str, int]:
    if not toolchain.can_disassemble or result.cubin is None:
        return {}
    return signature_evidence(result, get_profile(arch), toolchain).found


def _device(runner: Runner | None) -> tuple[DeviceInfo | None, str]:
    if runner is None:
        return None, "no GPU requested (--no-gpu)"
    try:
        return runner.start(), ""
    except WorkerFault as fault:
        return None, str(fault)


def runnable_cubin(module: PtxModule, assembled: AssembleResult | None, device: DeviceInfo,
                   toolchain: Toolchain, filename: str, *, fallback: bool = True) -> tuple[bytes | None, str]:
    """A cubin of this module that this GPU can load, and a note on how it was obtained.

    With ``fallback``, a module whose own target cannot load here (sm_80 PTX on an sm_90 GPU) is
    assembled for this GPU instead, and the note says so; without it, only ``assembled`` counts.
    """
    if assembled is not None and assembled.ok and cubin_runs_on(assembled.arch, device.arch):
        return assembled.cubin, ""
    ok, why = ptx_runs_on(module.arch, device.arch)
    if not fallback and assembled is not None:
        ok, why = False, f"a {assembled.arch} cubin does not load on {device.arch}"
    if not ok:
        target = assembled.arch if assembled is not None else module.arch
        return None, (f"needs a {target} GPU to run; this machine has {device.name} ({device.arch}), and {why}. "
                      "Record golden outputs on the source GPU with `porter record` and check on target hardware")
    build = module.arch if cubin_runs_on(module.arch, device.arch) else device.arch
    result = toolchain.assemble(module.text, build, filename=filename)
    if not result.ok:
        first = next((d.message for d in result.diagnostics if d.severity in ("error", "fatal")), "ptxas failed")
        return None, f"does not assemble for this GPU ({build}): {first}"
    if build == module.arch:
        return result.cubin, ""
    return result.cubin, f"ran as {device.arch} (the .target {module.arch} PTX assembled for this GPU)"


def _unmeasured(options: CheckOptions, reason: str, target: str, signature: dict[str, int]) -> tuple[list[Gate], dict[str, Any]]:
    """The runtime evidence that was asked for but cannot be had here, said as such. Native
    instructions absent from the SASS need no GPU to be judged: that verdict stands."""
    gates, extras = [], {}
    if options.native:
        evidence = judge_native(target, get_profile(target).signature_sass, signature, None, not_measured_reason=reason)
        gates.append(_native_gate(evidence))
        extras["native"] = evidence
    if options.sanitize:
        gates.append(Gate("sanitize", "not run", reason))
    return gates, extras


def smallest_case(spec: Spec) -> dict[str, int]:
    """The sweep's size set that moves the fewest bytes: where the sanitizers run (they are slow)."""
    return min(spec.size_sets(), key=lambda sizes: sum(spec.buffer_bytes(p, sizes) for p in spec.params
                                                        if p.kind == "buffer"))


def gates_passed(gates: list[Gate], name: str) -> bool:
    return any(g.name == name and g.status == "passed" for g in gates)


def _native(spec: Spec, cubin: bytes, entry: str, target: str, signature: dict[str, int],
            device: DeviceInfo, launch: dict[str, Any] | None) -> NativeEvidence:
    """Profile the default size set once under ncu and judge the signature instructions' execution."""
    from porter.profiler import LaunchJob, opcode_bases, run_ncu

    profile = get_profile(target)
    sizes = spec.default_sizes()
    if not any(signature.values()):  # absent from the SASS: nothing to profile
        return judge_native(target, profile.signature_sass, signature, {})
    if not cubin_runs_on(target, device.arch):
        return judge_native(target, profile.signature_sass, signature, None,
                            not_measured_reason=f"no {target} GPU here ({device.name} is {device.arch})")
    metrics = tuple(profile.ncu.metrics) if profile.ncu.chip.startswith("gh") else ()
    run = run_ncu(LaunchJob(cubin, entry, spec.path, sizes, launch=launch), metrics=metrics)
    if not run.ok:
        return judge_native(target, profile.signature_sass, signature, None, not_measured_reason=run.reason)
    values = {name: float(v[1]) for name, v in run.metrics.items() if name in metrics and isinstance(v[1], float)}
    return judge_native(target, profile.signature_sass, signature, opcode_bases(run.executed), values, sizes=sizes)


def _native_gate(evidence: NativeEvidence) -> Gate:
    status = {"executed": "passed", "not measured": "not run"}.get(evidence.state, "failed")
    details = tuple(f"{name} = {value:g}" for name, value in evidence.metrics.items())
    return Gate("native", status, f"{evidence.state}: {evidence.summary}", details)  # type: ignore[arg-type]


def _sanitize(spec: Spec, cubin: bytes, entry: str, toolchain: Toolchain,
              launch: dict[str, Any] | None) -> tuple[SanitizerReport, ...]:
    from porter.profiler import SANITIZER_TOOLS, LaunchJob, run_sanitizer

    job = LaunchJob(cubin, entry, spec.path, smallest_case(spec), launch=launch)
    sass = toolchain.disassemble(cubin) if toolchain.can_disassemble else None
    reports = []
    for tool in SANITIZER_TOOLS:
        report = run_sanitizer(job, tool)
        if sass is not None:
            report = replace(report, findings=tuple(_with_sass(f, sass) for f in report.findings))
        reports.append(report)
    return tuple(reports)


def _with_sass(finding: SanitizerFinding, sass: Any) -> SanitizerFinding:
    """Attach the SASS instruction at the finding's offset (16 bytes per instruction since Volta)."""
    function = sass.functions.get(finding.function)
    if function is None or finding.offset is None:
        return finding
    index = finding.offset // 16
    if index < len(function.instructions):
        return replace(finding, sass=function.instructions[index])
    return finding


def _sanitize_gate(reports: tuple[SanitizerReport, ...]) -> Gate:
    ran = [r for r in reports if r.ran]
    if not ran:
        return Gate("sanitize", "not run", reports[0].reason if reports else "no sanitizer tools")
    dirty = [r for r in ran if r.errors]
    details = []
    for r in dirty:
        for f in r.findings[:3]:
            where = f" at {f.function}+0x{f.offset:x}" if f.offset is not None else ""
            sass = f" ({f.sass})" if f.sass else ""
            details.append(f"{r.tool}: {f.message}{where}{sass}; {f.detail}"[:300])
    details += [f"{r.tool}: not run ({r.reason})" for r in reports if not r.ran]
    if dirty:
        return Gate("sanitize", "failed", ", ".join(f"{r.tool}: {r.errors} errors" for r in dirty), tuple(details))
    return Gate("sanitize", "passed", "clean: " + ", ".join(r.tool for r in ran), tuple(details))


def _timing(spec: Spec, runner: Runner, device: DeviceInfo, cubin: bytes, entry: str, launch: dict[str, Any] | None,
            source: tuple[bytes | None, str, dict[str, Any] | None], options: CheckOptions) -> tuple[Gate, tuple[Timing, ...], dict[str, float | None]]:
    """Candidate (with its own launch, if it declares one), source (the spec's launch) and library,
    at each size set asked for; the speedups are those of the first."""
    contenders: list[dict[str, Any]] = [{"name": "candidate", "kind": "kernel", "cubin": cubin, "entry": entry,
                                         "launch": launch}]
    source_cubin, source_entry, source_launch = source
    if source_cubin is not None:
        contenders.append({"name": "source", "kind": "kernel", "cubin": source_cubin, "entry": source_entry,
                           "launch": source_launch})
    if spec.baseline is not None:
        contenders.append({"name": "library", "kind": "callable", "path": str(spec.baseline.path),
                           "function": spec.baseline.function})
    peak_tflops, peak_tbps, part = _peaks(device)
    timings: list[Timing] = []
    parts: list[str] = []
    speed: dict[str, float | None] = {}
    for sizes in [spec.timing_sizes(o) for o in options.time_at] or [spec.default_sizes()]:
        try:
            reply = runner.call("time", max(120.0, options.case_timeout_s), spec_path=str(spec.path), sizes=sizes,
                                seed=options.seeds[0], contenders=contenders, budget_s=options.timing_budget_s)
        except WorkerFault as fault:
            return Gate("timing", "error", f"timing failed at {_case_label(sizes)}: {fault}"), tuple(timings), speed
        flops, nbytes = spec.flops(sizes), spec.bytes(sizes)
        here = [replace(_timing_stats(name, samples, flops, nbytes, peak_tflops, peak_tbps), sizes=_case_label(sizes))
                for name, samples in zip(reply["names"], reply["times_ms"], strict=True)]
        timings.extend(here)
        by_name = {t.name: t for t in here}
        cand = by_name["candidate"]
        if not speed:
            speed = {
                "speedup_vs_source": by_name["source"].median_ms / cand.median_ms if "source" in by_name else None,
                "speedup_vs_library": by_name["library"].median_ms / cand.median_ms if "library" in by_name else None,
            }
        part_text = [f"candidate {cand.median_ms:.4f} ms (median of {cand.count}) at {_case_label(sizes)}"]
        if cand.roofline_fraction is not None:
            part_text.append(f"{100 * cand.roofline_fraction:.0f}% of the {part} roofline")
        for other in ("source", "library"):
            if other in by_name:
                part_text.append(f"{by_name[other].median_ms / cand.median_ms:.2f}x vs {other}")
        parts.append(", ".join(part_text))
    return Gate("timing", "passed", "; ".join(parts)), tuple(timings), speed


def _verdict(candidate: Path, entry: str, arch: str, gates: list[Gate], *, start: float,
             signature: dict[str, int] | None = None, **fields: Any) -> Verdict:
    judged = tuple(g for g in gates if g.name != "timing")
    status = overall_status(judged)
    deciding = next((g for g in judged if g.status == status), judged[-1])
    reason = "every gate passed on this GPU" if status == "passed" else f"{deciding.name}: {deciding.summary}"
    verdict = Verdict(kernel=str(candidate), entry=entry, arch=arch, status=status, reason=reason,
                      gates=tuple(gates), signature_sass=signature or {}, **fields)
    return replace(verdict, wall_s=time.perf_counter() - start)
