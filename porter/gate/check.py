"""The gate: assemble a candidate, run it over the sweep against a reference, time it -> Verdict.

Order of work, each step feeding the Verdict:
1. interface: the PTX entry exists and its params match the spec;
2. assemble: ptxas for the candidate's target (diagnostics, resources, signature SASS);
3. equivalence: every case in the plan (:func:`check_plan`) on this GPU, in the worker: each size
   set of the sweep x seed, plus every size set that is timed or profiled, plus the value cases
   (wider inputs); each case runs once per initial output state (NaN poison, random values);
4. native (``--native``): one launch under ncu: did the target's signature instructions execute,
   and what share of the spec's FLOPs did they do?
5. sanitize (``--sanitize``): memcheck on the smallest, the middle and the largest checked case;
   racecheck, initcheck, synccheck on the smallest; a launch under either tool must leave the
   verified outputs;
6. timing: candidate, source kernel and library interleaved in one run, every timed launch from a
   restored state and digested: a timed launch whose outputs differ from the verified ones fails.
Seeds are fresh for every check unless given, and recorded in the Verdict. Without a GPU that
can run the candidate, steps 3-6 are ``not run`` with the reason, never passed (except that
native instructions absent from the SASS are judged absent without a GPU); there, and anywhere
with ``emulate``, the candidate runs in porter's PTX emulator (:mod:`porter.gate.emulated`): the
``emulation`` gate, which can fail a check but never pass one.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from porter.errors import InputError
from porter.gate.compare import compare, compare_runs, format_comparison
from porter.gate.emulated import emulation_gate
from porter.gate.golden import REPLAYABLE, GoldenCase, Manifest, check_golden, load_golden
from porter.gate.native import judge_native
from porter.gate.plan import BUDGET_BYTES, Case, check_plan, check_seeds, skipped_unannounced
from porter.gate.references import ReferenceCache
from porter.gate.runner.client import DeviceInfo, GpuRunner, WorkerFault, exclusive, run_job
from porter.gate.runner.protocol import CaseJob, CaseReply, Contender, Reference, TimeJob, TimeReply
from porter.gate.source import block_problems, check_spec_matches, unread_scalars
from porter.gate.spec import DEFAULT_NATIVE_SHARE, Spec, check_against_module, declared_spec
from porter.gate.usercode import callable_problem
from porter.gate.verdict import (
    CaseResult,
    Gate,
    NativeEvidence,
    SanitizerFinding,
    SanitizerReport,
    Timing,
    Verdict,
    judged_share,
    overall_status,
    size_label,
)
from porter.ptx import PtxModule, read_ptx
from porter.ptx.arch import cubin_runs_on, get_profile, ptx_runs_on, version_problem
from porter.ptx.inspection import signature_evidence, uses_tensor_cores
from porter.ptx.retarget import fit_to_ptxas
from porter.ptx.toolchain import AssembleResult, Toolchain


def timed_sizes(spec: Spec, options: CheckOptions) -> list[dict[str, int]]:
    """The size sets the timing gate runs at: each --time-at set, or [sizes]."""
    return [spec.timing_sizes(o) for o in options.time_at] or [spec.default_sizes()]


@dataclass(frozen=True)
class CheckOptions:
    arch: str | None = None  # assemble for this target; default: the candidate's .target
    against: Path | None = None  # source kernel: the reference (unless golden) and a speed baseline
    speed_baseline: Path | None = None  # source kernel timed beside the candidate, not used as reference
    golden: Path | None = None  # outputs recorded by `porter record`
    seeds: tuple[int, ...] = ()  # () = a fresh pair for this check (see check_seeds)
    timing: bool = True
    case_timeout_s: float = 60.0
    timing_budget_s: float = 1.0
    # Profile with ncu: were the target's own instructions executed, and did they do the work?
    # None: when the cubin holds the target's signature instructions (a claim to be native, held to).
    native: bool | None = False
    sanitize: bool = False  # memcheck up to the largest checked case; racecheck, initcheck, synccheck on the smallest
    time_at: tuple[dict[str, int], ...] = ()  # [sizes] overrides to time at; default: [sizes] itself
    entry: str | None = None  # the candidate's entry to check (--entry); default: the spec's (or its porter-launch)
    # A thorough check (`porter ci`, a port's final candidate) draws its large size set past 2^31 bytes.
    thorough: bool = False
    # Run the candidate in porter's PTX emulator too (the emulation gate). None: where no GPU here
    # can run it. Evidence only: a check that emulated but ran nothing on a GPU stays `not run`.
    emulate: bool | None = None


def check_inputs(spec: Spec, options: CheckOptions) -> None:
    """What a check compares the candidate with, validated before anything decides what can run
    here: a missing, empty or unparsable ``--against`` kernel, one the spec does not describe
    (params, ``.reqntid``/``.maxntid``, dynamic shared memory: what ``porter port`` checks of its
    source), or a reference that does not import or lacks its function is bad input (InputError,
    exit 2) on every machine, never a ``not run`` for want of a GPU."""
    if options.against is not None:
        check_spec_matches(spec, read_ptx(options.against), options.against)
    elif options.golden is None:
        ref = spec.reference
        if ref is None or ref.callable is None:
            raise InputError(f"{spec.source}: no reference: give [reference] python = 'ref.py:fn', "
                             "--against SOURCE.ptx or --golden DIR")
        if problem := callable_problem(ref.callable.path, ref.callable.function):
            raise InputError(f"{spec.source}: reference.python: {problem}")


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


def cluster_problems(spec: Spec, module: PtxModule) -> list[str]:
    """Clusters are launched through the entry's own .reqnctapercluster (CuPy's launch has no
    cluster argument): a spec asking for clusters an entry does not declare cannot be honoured."""
    problems = []
    for step in spec.sequence():
        if not step.entry or step.entry not in {e.name for e in module.kernels}:
            continue
        cluster = spec.launch_dims(spec.default_sizes(), step=step).cluster
        if cluster is None or math.prod(cluster) == 1:
            continue
        directive = module.entry(step.entry).directive("reqnctapercluster")
        declared = tuple(directive.values) + (1,) * (3 - len(directive.values)) if directive else None
        if declared == tuple(cluster):
            continue
        have = f".reqnctapercluster {', '.join(map(str, declared))}" if declared else "no .reqnctapercluster"
        problems.append(f"the spec launches {step.entry} in clusters of {tuple(cluster)} but the entry has {have}: "
                        "porter forms clusters through that directive, so the kernel must declare the same shape")
    return problems


def _assemble_gate(result: AssembleResult, isa_problem: str | None = None) -> Gate:
    """The assemble gate from ptxas's result; when ptxas refused a module that porter can say why
    (a PTX ISA this ptxas lacks, see :func:`porter.ptx.arch.version_problem`), that comes first."""
    if result.ok:
        warnings = [d for d in result.diagnostics if d.severity == "warning"]
        spills = [f"{n}: {r.spill_stores}/{r.spill_loads} B spilled" for n, r in result.resources.items()
                  if r.spill_stores or r.spill_loads]
        extra = f"; {len(warnings)} warnings" if warnings else ""
        return Gate("assemble", "passed", f"ptxas -arch={result.arch} ok in {result.wall_s:.2f} s{extra}",
                    tuple(spills + [d.message for d in warnings[:5]]))
    errors = [d for d in result.diagnostics if d.severity in ("error", "fatal")]
    details = tuple(f"line {d.line}: {d.message}" if d.line else d.message for d in errors[:10])
    if isa_problem:
        return Gate("assemble", "failed", f"ptxas -arch={result.arch}: {isa_problem}", details)
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
                   golden: tuple[Manifest, GoldenCase] | None,
                   source_launch: dict[str, Any] | None = None) -> Reference:
    if golden is not None:
        manifest, case = golden
        return Reference("golden", key="golden:" + str(manifest.folder), path=str(manifest.file(case)))
    if source_cubin is not None:
        return Reference("source", key="source:" + hashlib.sha256(source_cubin).hexdigest(), cubin=source_cubin,
                         entry=source_entry, launch=source_launch)
    ref = spec.reference
    if ref is None or ref.callable is None:
        raise InputError(f"{spec.source}: no reference: give [reference] python = 'ref.py:fn', --against SOURCE.ptx or --golden DIR")
    return Reference("python", path=str(ref.callable.path), function=ref.callable.function,
                     key=f"python:{ref.callable.path}:{ref.callable.function}:{ref.callable.path.stat().st_mtime_ns}")


_INITIAL_WORDS = {"poison": "NaN poison", "random": "random finite values"}


def _judge_case(spec: Spec, case: Case, reply: CaseReply) -> CaseResult:
    sizes = case.sizes
    runs = reply.outputs  # None: bit-identical to the first run
    initials = reply.initials or ["poison"] * len(runs)
    if reply.reference is None:
        raise RuntimeError("a case reached judgement without its reference")
    reference = reply.reference
    scale = spec.value_case(case.values).atol_scale if case.values else 1.0
    checks = []
    problems: list[str] = []
    nondet = []
    grid = spec.launch_dims(sizes).grid
    for p in spec.outputs:
        atol, rtol = spec.tolerance(p.name, sizes)
        atol *= scale
        if p.name not in reference:
            raise InputError(f"the reference returned no output {p.name!r}")
        ref = np.asarray(reference[p.name])
        tile = block_tile(runs[0][p.name].shape, grid)
        # Where the reference is not finite in the output's dtype (inputs span the whole domain),
        # it says nothing: those elements are left out, the rest of the case is judged.
        limit = p.dtype.max_finite if p.dtype is not None and p.dtype.is_float else None
        c = check = compare(p.name, runs[0][p.name], ref, atol=atol, rtol=rtol, tile=tile, limit=limit)
        if not c.passed:
            problems.append(f"{p.name}: {c.mismatches} of {c.total} elements wrong")
        # A later run (another initial state) bit-identical to the first shares its judgement (the
        # worker sends None for a run whose outputs are all bit-identical to the first's); one that
        # differs is compared with the reference, to tell initial-state dependence from a race.
        # An output declared nondeterministic (atomics) may differ: each run must match the reference.
        for initial, later in zip(initials[1:], runs[1:], strict=True):
            if later is None:
                continue
            diff = compare_runs(runs[0][p.name], later[p.name])
            if not diff:
                continue
            again = compare(p.name, later[p.name], ref, atol=atol, rtol=rtol, tile=tile, limit=limit)
            if again.passed == c.passed:
                if p.deterministic:
                    nondet.append(f"{p.name}: {diff}")
                continue
            bad, good = (initial, initials[0]) if c.passed else (initials[0], initial)
            wrong = again if c.passed else c
            problems.append(
                f"{p.name}: {wrong.mismatches} of {wrong.total} elements wrong when the output starts as "
                f"{_INITIAL_WORDS.get(bad, bad)} but right when it starts as {_INITIAL_WORDS.get(good, good)}: "
                "the kernel depends on the output's initial contents (it must write every element from the inputs alone)")
            check = replace(check, passed=False, summary=f"(starting from {_INITIAL_WORDS.get(bad, bad)}) "
                            + format_comparison(wrong))
        checks.append(check)
    reasons = []
    if checks and not any(c.judged for c in checks) and not problems and not reply.guards and not reply.modified:
        return CaseResult(sizes=dict(sizes), seed=case.seed, status="not run", values=case.values, outputs=tuple(checks),
                          reason="not judged: the reference is not finite in the outputs' dtypes anywhere on these inputs")
    if reply.guards:
        reasons.append("out-of-bounds write: " + "; ".join(reply.guards))
    if reply.modified:
        reasons.append("wrote its input: " + "; ".join(reply.modified))
    reasons += problems
    if nondet:
        reasons.append("nondeterministic: " + "; ".join(nondet))
    return CaseResult(
        sizes=dict(sizes), seed=case.seed, status="failed" if reasons else "passed", reason="; ".join(reasons),
        outputs=tuple(checks), guard_violations=tuple(reply.guards), inputs_modified=tuple(reply.modified),
        nondeterminism="; ".join(nondet), wall_s=reply.kernel_s, values=case.values,
    )


def _equivalence_gate(cases: list[CaseResult], planned: int) -> Gate:
    if not cases:
        return Gate("equivalence", "failed", "no case ran: nothing was compared with the reference")
    failed = [c for c in cases if c.status not in ("passed", "not run")]
    unjudged = [c.reason for c in cases if c.status == "not run"]
    if not failed and len(cases) == planned:
        judged = len(cases) - len(unjudged)
        return Gate("equivalence", "passed", f"{judged} cases (size sets x seeds, timed sizes, value cases; each "
                    "from two initial output states) equal to the reference", tuple(unjudged))
    details = []
    for c in failed[:6]:
        values = f"; values {c.values}" if c.values else ""
        details.append(f"[{size_label(c.sizes)}; seed {c.seed}{values}] {c.reason or c.fault}")
    skipped = planned - len(cases)
    if skipped:
        details.append(f"{skipped} cases not run after the fault")
    if not failed:
        return Gate("equivalence", "failed", f"{planned - len(cases)} of {planned} cases not run", tuple(details))
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


def candidate_entry(module: PtxModule, name: str, candidate: Path, *, named_by: str) -> Any:
    """The entry ``name`` of the candidate's module; one line listing its entries when it has none
    by that name (and how to choose one when it has several)."""
    for e in module.kernels:
        if e.name == name:
            return e
    names = [e.name for e in module.kernels]
    if named_by == "--entry":
        raise InputError(f"{candidate}: --entry {name}: no such .entry (entries: {', '.join(names) or 'none'})")
    if len(names) > 1:
        hint = f"its {len(names)} entries are {', '.join(names)}: choose the one to check with --entry"
    elif names:
        hint = f"its one entry is {names[0]}: --entry {names[0]} checks it against this spec"
    else:
        hint = "it has no .entry at all"
    raise InputError(f"{candidate}: no .entry {name!r} ({named_by}); {hint}")


def redirected_entry(launch: dict[str, Any] | None, spec_entry: str, module: PtxModule) -> list[str]:
    """A candidate's porter-launch line may name another entry than the spec's only when the spec's
    own entry is absent from the module (a port that renamed it): while it is present, it is what the
    program launches, and checking another entry of the same module would judge a kernel nobody
    runs. ``--entry`` is the user's way to choose another one."""
    named = (launch or {}).get("entry")
    if named is None or named == spec_entry or not any(e.name == spec_entry for e in module.kernels):
        return []
    return [f"its porter-launch line names the entry {named!r}, but the spec's entry {spec_entry!r} is in the "
            f"module: a directive may choose another entry only where the spec's is absent (--entry {named} checks "
            "that one on purpose)"]


def run_check(candidate: Path, spec: Spec, options: CheckOptions, *, toolchain: Toolchain,
              runner: GpuRunner | None, references: ReferenceCache | None = None) -> Verdict:
    """The gate on one candidate. ``references`` keeps the reference outputs of a port run's
    cases for the run's other candidates (see :mod:`porter.gate.references`)."""
    start = time.perf_counter()
    module = read_ptx(candidate)
    source_spec = spec  # the spec describes the source; a candidate may declare its own launch
    # A golden folder is the user's input: a bad one is refused (exit 2) before anything else is
    # decided, on any machine, GPU or not.
    golden = load_golden(options.golden) if options.golden else None
    if golden is not None:
        check_golden(golden, source_spec, candidate)
    source_entry = spec.entry
    spec, launch = declared_spec(spec, module.text, source=str(candidate))
    if options.entry is not None:
        spec = replace(spec, entry=options.entry)
    if spec.kernels:  # a hot loop of several kernels: check_against_module names a missing one
        entry_name = spec.entry
    else:
        entry_name = candidate_entry(module, spec.entry, candidate,
                                     named_by="--entry" if options.entry is not None
                                     else "its porter-launch line" if launch and "entry" in launch
                                     else "the spec's kernel.entry").name
    gates: list[Gate] = []
    warnings: list[str] = []
    problems = check_against_module(spec, module) + cluster_problems(spec, module)
    if options.entry is None:
        problems += redirected_entry(launch, source_entry, module)
    if entry_name in {e.name for e in module.kernels}:
        problems += block_problems(spec, module.entry(entry_name))
    target = options.arch or module.arch
    # ptxas' diagnostics travel in the Verdict (for the feedback and the bot's annotations), also
    # when the interface fails and no assemble gate is judged.
    assembled = toolchain.assemble(module.text, target, filename=candidate.name)
    if problems:
        gates.append(Gate("interface", "failed", "the kernel does not match the spec", tuple(problems)))
        return _verdict(candidate, entry_name, target, gates, start=start, assembly=assembled.summary())
    warnings += unread_scalars(spec, module)
    launched = [step for step in spec.sequence() if step.entry]
    gates.append(Gate("interface", "passed", f"{len(module.entry(spec.entry).params)} params match the spec"
                      if not spec.kernels else
                      f"{len(launched)} kernels in sequence ({', '.join(s.entry for s in launched)}); "
                      "the params of each match the spec"))

    gates.append(_assemble_gate(assembled, version_problem(module, target, toolchain.isa())))
    base = dict(kernel=str(candidate), entry=entry_name, arch=target, resources=_resources(assembled),
                toolchain=f"ptxas {assembled.ptxas_version}", assembly=assembled.summary())
    if not assembled.ok:
        return _verdict(candidate, entry_name, target, gates, start=start, **_extra(base))
    signature = _signature(toolchain, assembled, target)
    if options.native is None:
        options = replace(options, native=any(signature.values()))
    elif options.native and not uses_tensor_cores(module):
        options = replace(options, native=False)
        warnings.append("--native: not required: the kernel does no tensor-core work (no mma.sync, wgmma or "
                        "tcgen05), so it has no native tensor-core instructions to execute (as porter port says)")

    device, why_not = _device(runner)
    if device is None:
        gates.append(Gate("equivalence", "not run", why_not))
        more, extras = _unmeasured(options, why_not, target, signature)
        gates.extend(more + _emulated(spec, module, options, extras))
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature, **extras,
                        warnings=tuple(warnings), **_extra(base))
    # An explicit --arch is a claim about that target: only its own cubin may stand for it.
    run_cubin, run_note = runnable_cubin(module, assembled, device, toolchain, candidate.name,
                                         fallback=options.arch is None)
    if run_cubin is None:
        gates.append(Gate("equivalence", "not run", run_note))
        more, extras = _unmeasured(options, run_note, target, signature)
        gates.extend(more + _emulated(spec, module, options, extras))
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature,
                        gpu=device.describe(), warnings=tuple(warnings), **extras, **_extra(base))
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
    timed = timed_sizes(spec, options) if options.timing else []
    profiled = spec.default_sizes() if options.native else None
    golden_cases: tuple[GoldenCase, ...] = ()
    if golden is not None:
        golden_cases = golden.plan(check_seeds(options.seeds)[0])
        plan = [c.case() for c in golden_cases]
        seeds = tuple(dict.fromkeys(c.seed for c in golden.cases))
        warnings.append(REPLAYABLE)
        recorded = {c.key() for c in plan}
        missing = [sizes for sizes in [*timed, *([profiled] if profiled else [])]
                   if Case(sizes, seeds[0]).key() not in recorded]
        if missing:
            raise InputError(f"{options.golden}: no recorded case at {size_label(missing[0])} (seed {seeds[0]}), "
                             "which this check times or profiles: what is timed must be verified; record with the "
                             "same --time-at, or check with --no-timing")
    else:
        seeds = check_seeds(options.seeds)
        plan = check_plan(spec, seeds, timed=timed, profiled=profiled, thorough=options.thorough)
        if note := skipped_unannounced(spec, plan):
            warnings.append(note)

    assert runner is not None

    def reference_job(index: int) -> Reference:
        return _reference_job(spec, options, reference_cubin, source_entry,
                              (golden, golden_cases[index]) if golden is not None else None, source_launch)

    def reference_for(sizes: dict[str, int], seed: int) -> Reference | None:
        key = Case(sizes, seed).key()
        return next((reference_job(i) for i, c in enumerate(plan) if c.key() == key), None)

    judging = _run_cases(spec, options, plan, runner, run_cubin, entry_name, launch, warnings, reference_job,
                         references)
    digests = judging.digests
    # Profiling, sanitizing and timing do not wait for the last judgements: the comparisons finish
    # on the CPU while the GPU works. Timing starts only if no case is known to have failed yet, and
    # its result counts only if every case passed.
    later: list[Gate] = []
    extras: dict[str, Any] = {"seeds": seeds}
    if options.native:
        with exclusive(runner):  # ncu's launch has the GPU to itself, as timing does
            evidence, left = _native(spec, run_cubin, entry_name, target, signature, device, launch, seeds[0])
        if left is None:
            later.append(_native_gate(evidence))
        else:
            later.append(_native_gate(evidence, _launch_differs("the profiled launch", left, seeds[0], digests),
                                      _not_held("the profiled launch", left, seeds[0], digests)))
        extras["native"] = evidence
    if options.sanitize:
        with exclusive(runner):
            reports = _sanitize(spec, run_cubin, entry_name, toolchain, launch, seeds[0], device.index,
                                largest_checked(spec, plan, seeds[0]))
        # A clean report is held to the verified outputs; one with errors fails on them already.
        clean = [(f"{r.tool}'s launch", ToolLaunch(r.digests, r.sizes, r.reason)) for r in reports
                 if r.ran and not r.errors]
        differs = [problem for what, left in clean if (problem := _launch_differs(what, left, seeds[0], digests))]
        notes = [note for what, left in clean if (note := _not_held(what, left, seeds[0], digests))]
        later.append(_sanitize_gate(reports, differs, notes))
        extras["sanitizer"] = reports

    timings: tuple[Timing, ...] = ()
    speed: dict[str, float | None] = {}
    timed_run = None
    if options.timing and not judging.failed_so_far():
        drawn = drawn_timed_sizes(spec, plan, timed, seeds[0])
        timed_run = _timing(spec, runner, device, run_cubin, entry_name, launch,
                            (source_cubin, source_entry, source_launch), options, seeds, digests,
                            [*timed, *([drawn] if drawn is not None else [])], reference_for)
    cases = judging.results()
    _case_warnings(cases, warnings)
    gates.append(_equivalence_gate(cases, len(plan)))
    if options.emulate:  # extra evidence beside the GPU's: a wrong result in emulation fails the check
        gates.append(emulation_gate(spec, module.text, seeds))
    gates.extend(later)
    if timed_run is not None and gates_passed(gates, "equivalence"):
        timing_gate, timings, speed = timed_run
        gates.append(timing_gate)
    return _verdict(candidate, entry_name, target, gates, start=start, signature=signature, gpu=device.describe(),
                    cases=tuple(cases), timings=timings, warnings=tuple(warnings), judged_share=judged_share(cases),
                    **speed, **extras,
                    **_extra(base))


def _emulated(spec: Spec, module: PtxModule, options: CheckOptions, extras: dict[str, Any]) -> list[Gate]:
    """Where no GPU here runs the candidate: the emulation gate, unless ``--no-emulate``; the seeds
    it drew go into ``extras`` (the Verdict's seeds reproduce its inputs)."""
    if options.emulate is False:
        return []
    extras["seeds"] = check_seeds(options.seeds)
    return [emulation_gate(spec, module.text, extras["seeds"])]


def _fault_reason(fault: WorkerFault) -> str:
    """A fault, with what an illegal address most likely means under porter's fences."""
    reason = f"{fault.kind}: {fault}"
    if "illegaladdress" in str(fault).lower().replace("_", ""):  # the driver's and the runtime's names
        reason += (" (an out-of-bounds access, most likely: in a case's first run every buffer ends at unmapped "
                   "memory, so a read or write past its end faults, and inputs are mapped read-only, so a write "
                   "to one faults too)")
    return reason


@dataclass
class _Judging:
    """The cases of a check once all have run: their judgements (NumPy comparisons in threads,
    some perhaps still under way), the case that faulted, and each case's output digests."""

    pending: list[Future[CaseResult]]
    faulted: list[CaseResult]
    digests: dict[tuple, list[int]]

    def failed_so_far(self) -> bool:
        """Whether a case is already known to have failed (a fault, or a finished judgement)."""
        return bool(self.faulted) or any(f.done() and (f.exception() is not None or f.result().status not in ("passed", "not run"))
                                         for f in self.pending)

    def results(self) -> list[CaseResult]:
        return [future.result() for future in self.pending] + self.faulted


def _run_cases(spec: Spec, options: CheckOptions, plan: list[Case], runner: GpuRunner, cubin: bytes, entry: str,
               launch: dict[str, Any] | None, warnings: list[str], reference_job: Any,
               references: ReferenceCache | None = None) -> _Judging:
    """Run the plan in the worker, judging each case in a thread while the next one runs (the
    comparison is NumPy work that releases the GIL), and stop at the first fault. Returns once
    every case has run; the last judgements may still be under way, so that the GPU work that
    follows (profiling, timing) overlaps them. A reference that ``references`` holds is not asked
    of the worker again (a ``held`` job); one it computes is kept."""
    judging = _Judging([], [], {})
    judges = ThreadPoolExecutor(max_workers=2, thread_name_prefix="porter-judge")
    try:
        for index, case in enumerate(plan):
            job = reference_job(index)
            key = ReferenceCache.key(job, str(spec.path), case.key()) if references is not None else ()
            held = references.get(key) if references is not None else None
            try:
                reply = run_job(runner, CaseJob(cubin=cubin, entry=entry, spec_path=str(spec.path), sizes=case.sizes,
                                                seed=case.seed, values=case.values, launch=launch, first=index == 0,
                                                reference=Reference("held", key=job.key) if held is not None else job),
                                options.case_timeout_s)
            except WorkerFault as fault:
                judging.faulted.append(CaseResult(sizes=dict(case.sizes), seed=case.seed, status="failed",
                                                  values=case.values, reason=_fault_reason(fault), fault=str(fault)))
                break
            judging.digests[case.key()] = reply.digests
            if held is not None:
                reply = replace(reply, reference=held)
            elif references is not None and reply.reference is not None:
                reply = replace(reply, reference=references.put(key, reply.reference))
            if reply.fence and reply.fence not in warnings:
                warnings.append(reply.fence)
            judging.pending.append(judges.submit(_judge_case, spec, case, reply))
    finally:
        judges.shutdown(wait=False)  # the submitted judgements still finish
    return judging


def _case_warnings(cases: list[CaseResult], warnings: list[str]) -> None:
    for result in cases:
        for c in result.outputs:
            warnings.extend(w for w in c.warnings if w not in warnings)


def _extra(base: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k in ("resources", "toolchain", "assembly")}


def _signature(toolchain: Toolchain, result: AssembleResult, arch: str) -> dict[str, int]:
    if not toolchain.can_disassemble or result.cubin is None:
        return {}
    return signature_evidence(result, get_profile(arch), toolchain).found


def _device(runner: GpuRunner | None) -> tuple[DeviceInfo | None, str]:
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
    if (problem := toolchain.driver_problem(device.driver)) is not None:
        return None, problem
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
    # A source or reference (a judged candidate has assembled as written by now) may carry a .version
    # newer than this ptxas takes: lowered where nothing needs it, else an EnvironmentProblem.
    text, _ = fit_to_ptxas(module, toolchain.isa(), filename=filename)
    result = toolchain.assemble(text, build, filename=filename)
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


def _buffer_bytes(spec: Spec, sizes: dict[str, int]) -> int:
    return sum(spec.buffer_bytes(p, sizes) for p in spec.params if p.kind == "buffer")


def smallest_case(spec: Spec) -> dict[str, int]:
    """The sweep's size set that moves the fewest bytes: where the sanitizers run (they are slow)."""
    return min(spec.size_sets(), key=lambda sizes: _buffer_bytes(spec, sizes))


def largest_checked(spec: Spec, plan: list[Case], seed: int) -> dict[str, int] | None:
    """The plan's size set that moves the most bytes among its cases at ``seed`` with the spec's
    own fills: the inputs a tool's launch makes, so that its outputs can be held to the verified
    ones (the large case, or a larger timed one). None for an empty plan."""
    held = [c.sizes for c in plan if c.seed == seed and not c.values]
    return max(held, key=lambda sizes: _buffer_bytes(spec, sizes), default=None)


def gates_passed(gates: list[Gate], name: str) -> bool:
    return any(g.name == name and g.status == "passed" for g in gates)


@dataclass(frozen=True)
class ToolLaunch:
    """What a launch under a tool (ncu, compute-sanitizer) left: its outputs' digests (none when it
    did not complete, and then its own error, where it printed one)."""

    digests: tuple[int, ...]
    sizes: dict[str, int]
    error: str = ""


def _native(spec: Spec, cubin: bytes, entry: str, target: str, signature: dict[str, int], device: DeviceInfo,
            launch: dict[str, Any] | None, seed: int) -> tuple[NativeEvidence, ToolLaunch | None]:
    """Profile the default size set once under ncu: did the signature instructions execute, and
    what share of the spec's FLOPs did they do? Also what the profiled launch left (None where
    ncu profiled nothing)."""
    from porter.gate.nsight import LaunchJob, opcode_bases, run_ncu

    profile = get_profile(target)
    sizes = spec.default_sizes()
    required = spec.cost.native_share if spec.cost is not None else DEFAULT_NATIVE_SHARE
    if not any(signature.values()):  # absent from the SASS: nothing to profile
        return judge_native(target, profile.signature_sass, signature, {}), None
    if not cubin_runs_on(target, device.arch):
        return judge_native(target, profile.signature_sass, signature, None,
                            not_measured_reason=f"no {target} GPU here ({device.name} is {device.arch})"), None
    metrics = tuple(profile.ncu.metrics) if profile.ncu.chip.startswith("gh") else ()
    kernels = [step.entry for step in spec.sequence() if step.entry]
    run = run_ncu(LaunchJob(cubin, entry, spec.path, sizes, seed, launch=launch, entries=spec.entries,
                            launches=len(kernels), device=device.index), metrics=metrics)
    if not run.ok:
        return judge_native(target, profile.signature_sass, signature, None, not_measured_reason=run.reason), None
    values = {name: float(v[1]) for name, v in run.metrics.items() if name in metrics and isinstance(v[1], float)}
    return judge_native(target, profile.signature_sass, signature, opcode_bases(run.executed), values, sizes=sizes,
                        executed_opcodes=run.executed, spec_flops=spec.flops(sizes),
                        required_share=required), ToolLaunch(run.digests, sizes, run.reason)


def _launch_differs(what: str, left: ToolLaunch, seed: int, verified: dict[tuple, list[int]]) -> str:
    """A launch outside the worker (under ncu or a sanitizer) must leave the outputs the verified
    launch at the same sizes and seed left: else it was not the kernel that was checked. One that
    left none (it exited on an error, or crashed, under the tool) did not show that either."""
    expected = verified.get(Case(left.sizes, seed).key())
    label = size_label(left.sizes)
    if not expected:
        return ""
    if not left.digests:
        error = f" ({left.error})" if left.error else ""
        return (f"{what} at {label} did not complete: it left no outputs{error}, so the kernel the tool saw cannot "
                "be shown to be the one that was checked")
    if list(left.digests) == list(expected):
        return ""
    return (f"{what} at {label} left other outputs than the verified launch there: the kernel "
            "behaves otherwise when profiled than when checked")


def _not_held(what: str, left: ToolLaunch, seed: int, verified: dict[tuple, list[int]]) -> str:
    """Why a launch under a tool was not held to verified outputs: no checked launch ran at its
    case (the cases stopped at a fault before it, which fails the equivalence gate)."""
    if verified.get(Case(left.sizes, seed).key()):
        return ""
    return (f"{what} at {size_label(left.sizes)} was not held to verified outputs: no checked launch ran "
            "there (the cases stopped before it)")


def _native_gate(evidence: NativeEvidence, differs: str = "", note: str = "") -> Gate:
    details = tuple(f"{name} = {value:g}" for name, value in evidence.metrics.items()) + ((note,) if note else ())
    if differs:
        return Gate("native", "failed", differs, (f"{evidence.state}: {evidence.summary}", *details))
    status = {"executed": "passed", "not measured": "not run"}.get(evidence.state, "failed")
    return Gate("native", status, f"{evidence.state}: {evidence.summary}", details)  # type: ignore[arg-type]


SANITIZER_TIMEOUT_S = 600.0
LARGEST_MEMCHECK_TIMEOUT_S = 1800.0  # memcheck slows every access; the largest case moves up to 12 GiB


class SanitizerRun(NamedTuple):
    tool: str
    sizes: dict[str, int]
    timeout_s: float = SANITIZER_TIMEOUT_S


def sanitizer_runs(small: dict[str, int], middle: dict[str, int],
                   largest: dict[str, int] | None = None) -> list[SanitizerRun]:
    """memcheck on the smallest, the middle and the largest checked size set, each once (a bug
    past the first tiles shows only on a larger one, an offset that overflows only on the
    largest); racecheck, initcheck and synccheck, which are slow, on the smallest."""
    from porter.gate.nsight import SANITIZER_TOOLS

    runs = [SanitizerRun("memcheck", small)]
    if middle != small:
        runs.append(SanitizerRun("memcheck", middle))
    if largest is not None and largest not in (small, middle):
        runs.append(SanitizerRun("memcheck", largest, LARGEST_MEMCHECK_TIMEOUT_S))
    return runs + [SanitizerRun(tool, small) for tool in SANITIZER_TOOLS if tool != "memcheck"]


def _sanitize(spec: Spec, cubin: bytes, entry: str, toolchain: Toolchain, launch: dict[str, Any] | None,
              seed: int, device: int = 0, largest: dict[str, int] | None = None) -> tuple[SanitizerReport, ...]:
    """The sanitizers' runs (:func:`sanitizer_runs`), ``largest`` the largest checked size set."""
    from porter.gate.nsight import LaunchJob, run_sanitizer

    sass = toolchain.disassemble(cubin) if toolchain.can_disassemble else None
    reports = []
    for tool, sizes, timeout_s in sanitizer_runs(smallest_case(spec), spec.middle_sizes(), largest):
        report = run_sanitizer(LaunchJob(cubin, entry, spec.path, sizes, seed, launch=launch, device=device), tool,
                               timeout_s=timeout_s)
        report = replace(report, sizes=dict(sizes))
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


def _sanitize_gate(reports: tuple[SanitizerReport, ...], differs: list[str] | None = None,
                   notes: list[str] | None = None) -> Gate:
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
    details += notes or []
    if differs:
        return Gate("sanitize", "failed", differs[0], tuple(differs[1:] + details))
    if dirty:
        return Gate("sanitize", "failed", ", ".join(f"{r.tool} at {size_label(r.sizes)}: {r.errors} errors" for r in dirty),
                    tuple(details))
    return Gate("sanitize", "passed", "clean: " + ", ".join(f"{r.tool} ({size_label(r.sizes)})" for r in ran), tuple(details))


def drawn_timed_sizes(spec: Spec, plan: list[Case], timed: list[dict[str, int]], seed: int) -> dict[str, int] | None:
    """The size set timed beside the named ones: of the size sets this check drew for itself (the
    unannounced and the large one, checked at ``seed``), the costliest. Nobody learns it before
    the check runs, so a kernel tuned to the timed shape alone cannot choose where it is timed.
    A thorough check's large case past the ordinary budget is left out: every contender holds its
    buffers while timing."""
    drawn = [c.sizes for c in plan if c.why in ("unannounced", "large") and c.seed == seed and not c.values
             and c.sizes not in timed and _buffer_bytes(spec, c.sizes) <= BUDGET_BYTES]
    if not drawn:
        return None
    return max(drawn, key=lambda sizes: (spec.flops(sizes) or 0.0, spec.bytes(sizes) or 0.0,
                                         _buffer_bytes(spec, sizes)))


def _timing(spec: Spec, runner: GpuRunner, device: DeviceInfo, cubin: bytes, entry: str, launch: dict[str, Any] | None,
            source: tuple[bytes | None, str, dict[str, Any] | None], options: CheckOptions, seeds: tuple[int, ...],
            verified: dict[tuple, list[int]], timed: list[dict[str, int]],
            reference_for: Callable[[dict[str, int], int], Reference | None] = lambda sizes, seed: None,
            ) -> tuple[Gate, tuple[Timing, ...], dict[str, float | None]]:
    """Candidate (with its own launch, if it declares one), source (the spec's launch) and library,
    at each size set in ``timed`` (the named ones, then the drawn one); the headline speed-ups are
    the lowest over them, so that a kernel fast only at the shape it is timed at gains nothing.

    What is timed must be what was verified: timing rotates through every input set checked at
    the size set (one per seed), and every timed launch of the candidate must leave the outputs
    (by digest) that its checked launch on the same set left, its guard bytes intact; no timing
    may beat the roofline unless the spec calls its cost approximate.
    """
    contenders = [Contender("candidate", "kernel", cubin=cubin, entry=entry, launch=launch)]
    source_cubin, source_entry, source_launch = source
    if source_cubin is not None:
        contenders.append(Contender("source", "kernel", cubin=source_cubin, entry=source_entry, launch=source_launch))
    if spec.baseline is not None:
        contenders.append(Contender("library", "callable", path=str(spec.baseline.path),
                                    function=spec.baseline.function))
    peak_tflops, peak_tbps, part = _peaks(device)
    approximate = spec.cost is not None and spec.cost.approximate
    timings: list[Timing] = []
    parts: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    ratios: dict[str, list[float]] = {"source": [], "library": []}
    # Outputs declared nondeterministic cannot be held to a digest: each timed launch's are
    # compared with the reference, on the GPU, within the spec's tolerance.
    held = tuple(p.name for p in spec.outputs if not p.deterministic)
    for sizes in timed:
        label = size_label(sizes)
        checked = [seed for seed in seeds if verified.get(Case(sizes, seed).key())]
        if not checked:
            problems.append(f"the timed outputs at {label} could not be held to verified ones (no checked case there)")
            continue
        references = tuple(reference_for(sizes, seed) for seed in checked) if held else None
        if references is not None and None in references:
            problems.append(f"the timed {', '.join(held)} at {label} could not be held to the reference "
                            "(no checked case there)")
        try:
            reply = run_job(runner, TimeJob(spec_path=str(spec.path), sizes=sizes, seeds=tuple(checked),
                                            contenders=tuple(contenders), budget_s=options.timing_budget_s,
                                            references=references), max(120.0, options.case_timeout_s))
        except WorkerFault as fault:
            return (Gate("timing", "error", f"the timing run failed at {label}: {fault.kind}: {fault}",
                         ("a kernel that passes its checked launches but fails when launched repeatedly is not "
                          "correct",)), tuple(timings), _headline(ratios))
        flops, nbytes = spec.flops(sizes), spec.bytes(sizes)
        here = [replace(_timing_stats(name, samples, flops, nbytes, peak_tflops, peak_tbps), sizes=label)
                for name, samples in zip(reply.names, reply.times_ms, strict=True)]
        timings.extend(here)
        by_name = {t.name: t for t in here}
        cand = by_name["candidate"]
        problems += _timed_outputs_problems(reply, [Case(sizes, seed).key() for seed in checked], verified, label,
                                            tuple(p.name for p in spec.outputs), held)
        if cand.roofline_fraction is not None and cand.roofline_fraction > 1.05:
            said = (f"the candidate measured {100 * cand.roofline_fraction:.0f}% of the {part} roofline at {label}: "
                    "faster than the hardware allows for the spec's cost")
            if approximate:
                notes.append(said + " (the spec's cost is declared approximate)")
            else:
                problems.append(said + "; either the kernel skips work or [cost] overstates it "
                                "(set cost.approximate = true if the cost model is an estimate)")
        for other in ratios:
            if other in by_name:
                ratios[other].append(by_name[other].median_ms / cand.median_ms)
        part_text = [f"candidate {cand.median_ms:.4f} ms (median of {cand.count}, {len(checked)} input sets) at {label}"]
        if cand.roofline_fraction is not None:
            part_text.append(f"{100 * cand.roofline_fraction:.0f}% of the {part} roofline")
        for other in ("source", "library"):
            if other in by_name:
                part_text.append(f"{by_name[other].median_ms / cand.median_ms:.2f}x vs {other}")
        parts.append(", ".join(part_text))
    if len(parts) > 1:
        notes.append("the headline speed-ups are the lowest over these size sets")
    speed = _headline(ratios)
    if problems:
        return Gate("timing", "failed", problems[0], tuple(problems[1:] + parts)), tuple(timings), speed
    return Gate("timing", "passed", "; ".join(parts), tuple(notes)), tuple(timings), speed


def _headline(ratios: dict[str, list[float]]) -> dict[str, float | None]:
    """The verdict's speed-ups: each the lowest measured (None where that contender never ran)."""
    return {f"speedup_vs_{other}": min(found) if found else None for other, found in ratios.items()}


def _timed_outputs_problems(reply: TimeReply, keys: list[tuple], verified: dict[tuple, list[int]], label: str,
                            outputs: tuple[str, ...] = (), held: tuple[str, ...] = ()) -> list[str]:
    """How the candidate's timed launches differ from its verified launches on the same input sets.

    Timed launch ``r`` ran on input set ``r % len(keys)`` (the case ``keys[r % len(keys)]``); the
    repeat phase on the first. Each launch leaves one number per output (``outputs``, in order): a
    digest, which must be the verified launch's, or for an output declared nondeterministic
    (``held``) the count of its elements outside the reference's tolerance, which must be 0 (the
    verified launch's entry)."""
    problems = []
    guards = reply.guards[reply.of("candidate")]
    if guards:
        problems.append(f"out-of-bounds write during the timed launches at {label}: {'; '.join(guards)}")
    expected = [verified.get(key) for key in keys]
    digests = reply.digests[reply.of("candidate")]
    if not keys or not all(expected) or digests is None:
        problems.append(f"the timed outputs at {label} could not be held to verified ones (no checked case there)")
        return problems
    per = reply.outputs_per_launch
    for what, found, sets in (("timed launches", digests, len(keys)),
                              ("repeated launches (globals kept)", reply.repeat_digests, 1)):
        launches = [tuple(found[i:i + per]) for i in range(0, len(found), per)]
        differ = [i for i, got in enumerate(launches) if list(got) != list(expected[i % sets] or [])]
        if differ:
            first, want = launches[differ[0]], expected[differ[0] % sets] or []
            slots = [k for k in range(min(len(first), len(want))) if first[k] != want[k]]
            which = [outputs[k] + (f" ({first[k]} elements outside the reference's tolerance)" if outputs[k] in held
                                   else "") for k in slots if k < len(outputs)]
            named = f", in {', '.join(which)}" if which else ""
            problems.append(f"{len(differ)} of {len(launches)} {what} at {label} left outputs that differ from "
                            f"the verified launch (first: launch {differ[0] + 1}{named}): the kernel did not do the "
                            "verified work on every launch (skipped, cached or changed it when called again)")
    return problems


def _verdict(candidate: Path, entry: str, arch: str, gates: list[Gate], *, start: float,
             signature: dict[str, int] | None = None, **fields: Any) -> Verdict:
    status = overall_status(tuple(gates))
    deciding = next((g for g in gates if g.status == status), gates[-1])
    reason = "every gate passed on this GPU" if status == "passed" else f"{deciding.name}: {deciding.summary}"
    verdict = Verdict(kernel=str(candidate), entry=entry, arch=arch, status=status, reason=reason,
                      gates=tuple(gates), signature_sass=signature or {}, **fields)
    return replace(verdict, wall_s=time.perf_counter() - start)
