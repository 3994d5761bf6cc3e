"""The gate: assemble a candidate, run it over the sweep against a reference, time it -> Verdict.

Order of work, each step feeding the Verdict:
1. interface: the PTX entry exists and its params match the spec;
2. assemble: ptxas for the candidate's target (diagnostics, resources, signature SASS);
3. equivalence: every case in the plan (:func:`plan_cases`) on this GPU, in the worker: each size
   set of the sweep x seed, plus every size set that is timed or profiled, plus the value cases
   (wider inputs); each case runs once per initial output state (NaN poison, random values, zeros);
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

This module orders the gates; each lives in a module of its own: ``equivalence`` (3), ``under_tools``
(4, 5), ``timing`` (6); ``options`` holds what a check is asked to do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from porter.errors import InputError, PorterError
from porter.gate.emulated import emulation_gate
from porter.gate.equivalence import (
    case_reference,
    case_warnings,
    equivalence_gate,
    run_cases,
)
from porter.gate.golden import REPLAYABLE, GoldenCase, check_golden, load_golden
from porter.gate.native import judge_native
from porter.gate.options import CheckOptions as CheckOptions
from porter.gate.options import timed_sizes
from porter.gate.plan import (
    Case,
    plan_cases,
    plan_seeds,
    skipped_unannounced,
)
from porter.gate.references import ReferenceCache
from porter.gate.runner.client import DeviceInfo, GpuRunner, WorkerFault, exclusive
from porter.gate.runner.protocol import Reference
from porter.gate.source import block_problems, check_spec_matches, environment_problems, unread_scalars
from porter.gate.spec import Spec, check_against_module, declared_spec
from porter.gate.timing import drawn_timed_sizes, time_candidate
from porter.gate.under_tools import (
    ToolLaunch,
    largest_checked,
    launch_differs,
    native_gate,
    not_held,
    profile_native,
    sanitize_candidate,
    sanitize_gate,
)
from porter.gate.usercode import callable_problem
from porter.gate.verdict import (
    Gate,
    Status,
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
        return Gate("assemble", Status.PASSED, f"ptxas -arch={result.arch} ok in {result.wall_s:.2f} s{extra}",
                    tuple(spills + [d.message for d in warnings[:5]]))
    errors = [d for d in result.diagnostics if d.severity in ("error", "fatal")]
    details = tuple(f"line {d.line}: {d.message}" if d.line else d.message for d in errors[:10])
    if isa_problem:
        return Gate("assemble", Status.FAILED, f"ptxas -arch={result.arch}: {isa_problem}", details)
    return Gate("assemble", Status.FAILED, f"ptxas -arch={result.arch}: {len(errors)} errors", details)


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
              runner: GpuRunner | None, references: ReferenceCache | None = None,
              helpers: Sequence[GpuRunner] = ()) -> Verdict:
    """The gate on one candidate. ``references`` keeps the reference outputs of a port run's
    cases for the run's other candidates (see :mod:`porter.gate.references`); ``helpers`` are
    other workers on ``runner``'s GPU that run some of its cases (see :mod:`porter.gate.lanes`):
    they start beside the check's own work, and one that cannot start is left out."""
    if not helpers or runner is None:
        return _check(candidate, spec, options, toolchain, runner, references, lambda: [])
    starting = ThreadPoolExecutor(max_workers=len(helpers), thread_name_prefix="porter-helper")
    started = [starting.submit(helper.start) for helper in helpers]

    def ready() -> list[GpuRunner]:
        found = []
        for helper, future in zip(helpers, started, strict=True):
            error = future.exception()
            if error is None:
                found.append(helper)
            elif not isinstance(error, WorkerFault):
                raise error
        return found

    try:
        return _check(candidate, spec, options, toolchain, runner, references, ready)
    finally:
        starting.shutdown(wait=True)  # none is left starting when the caller has them back


def _check(candidate: Path, spec: Spec, options: CheckOptions, toolchain: Toolchain, runner: GpuRunner | None,
           references: ReferenceCache | None, helpers: Callable[[], list[GpuRunner]]) -> Verdict:
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
    source_path = options.against or options.speed_baseline
    source_module = read_ptx(source_path) if source_path is not None else None
    problems = (check_against_module(spec, module) + cluster_problems(spec, module)
                + environment_problems(module, source_module))
    if options.entry is None:
        problems += redirected_entry(launch, source_entry, module)
    if entry_name in {e.name for e in module.kernels}:
        problems += block_problems(spec, module.entry(entry_name))
    target = options.arch or module.arch
    # ptxas' diagnostics travel in the Verdict (for the feedback and the bot's annotations), also
    # when the interface fails and no assemble gate is judged.
    with _assembled_for_device(module, candidate, target, options, runner, toolchain):
        assembled = assemble_candidate(module, candidate, target, toolchain)
    if problems:
        gates.append(Gate("interface", Status.FAILED, "the kernel does not match the spec", tuple(problems)))
        return _verdict(candidate, entry_name, target, gates, start=start, assembly=assembled.summary())
    warnings += unread_scalars(spec, module)
    launched = [step for step in spec.sequence() if step.entry]
    gates.append(Gate("interface", Status.PASSED, f"{len(module.entry(spec.entry).params)} params match the spec"
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
        gates.append(Gate("equivalence", Status.NOT_RUN, why_not))
        more, extras = _unmeasured(options, why_not, target, signature)
        gates.extend(more + _emulated(spec, module, options, extras))
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature, **extras,
                        warnings=tuple(warnings), **_extra(base))
    # An explicit --arch is a claim about that target: only its own cubin may stand for it.
    run_cubin, run_note = runnable_cubin(module, assembled, device, toolchain, candidate.name,
                                         fallback=options.arch is None)
    if run_cubin is None:
        gates.append(Gate("equivalence", Status.NOT_RUN, run_note))
        more, extras = _unmeasured(options, run_note, target, signature)
        gates.extend(more + _emulated(spec, module, options, extras))
        return _verdict(candidate, entry_name, target, gates, start=start, signature=signature,
                        gpu=device.describe(), warnings=tuple(warnings), **extras, **_extra(base))
    if run_note:
        warnings.append(run_note)

    source_cubin, source_launch = None, None
    if source_path is not None and source_module is not None:
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
        golden_cases = golden.plan(plan_seeds(options.seeds)[0])
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
        seeds = plan_seeds(options.seeds)
        plan = plan_cases(spec, seeds, timed=timed, profiled=profiled, thorough=options.thorough)
        if note := skipped_unannounced(spec, plan):
            warnings.append(note)

    assert runner is not None

    def reference_job(index: int) -> Reference:
        return case_reference(spec, options, reference_cubin, source_entry,
                              (golden, golden_cases[index]) if golden is not None else None, source_launch)

    def reference_for(sizes: dict[str, int], seed: int) -> Reference | None:
        key = Case(sizes, seed).key()
        return next((reference_job(i) for i, c in enumerate(plan) if c.key() == key), None)

    drawn = drawn_timed_sizes(spec, plan, timed, seeds[0]) if options.timing else None
    timed_sets = [*timed, *([drawn] if drawn is not None else [])]
    judging = run_cases(spec, options, plan, runner, run_cubin, entry_name, launch, warnings, reference_job,
                        references, helpers=helpers(), kept=timed_sets)
    digests = judging.digests
    # Profiling, sanitizing and timing do not wait for the last judgements: the comparisons finish
    # on the CPU while the GPU works. Timing starts only if no case is known to have failed yet, and
    # its result counts only if every case passed.
    later: list[Gate] = []
    extras = {"seeds": seeds}
    if options.native:
        with exclusive(runner):  # ncu's launch has the GPU to itself, as timing does
            evidence, left = profile_native(spec, run_cubin, entry_name, target, signature, device, launch, seeds[0])
        if left is None:
            later.append(native_gate(evidence))
        else:
            later.append(native_gate(evidence, launch_differs("the profiled launch", left, seeds[0], digests),
                                      not_held("the profiled launch", left, seeds[0], digests)))
        extras["native"] = evidence
    if options.sanitize:
        with exclusive(runner):
            reports = sanitize_candidate(spec, run_cubin, entry_name, toolchain, launch, seeds[0], device.index,
                                largest_checked(spec, plan, seeds[0]))
        # A clean report is held to the verified outputs; one with errors fails on them already.
        clean = [(f"{r.tool}'s launch", ToolLaunch(r.digests, r.sizes, r.reason)) for r in reports
                 if r.ran and not r.errors]
        differs = [problem for what, left in clean if (problem := launch_differs(what, left, seeds[0], digests))]
        notes = [note for what, left in clean if (note := not_held(what, left, seeds[0], digests))]
        later.append(sanitize_gate(reports, differs, notes))
        extras["sanitizer"] = reports

    timings: tuple[Timing, ...] = ()
    speed: dict[str, float | None] = {}
    timed_run = None
    if options.timing and not judging.failed_so_far():
        timed_run = time_candidate(spec, runner, device, run_cubin, entry_name, launch,
                            (source_cubin, source_entry, source_launch), options, seeds, digests,
                            timed_sets, reference_for)
    cases = judging.results()
    case_warnings(cases, warnings)
    gates.append(equivalence_gate(cases, len(plan)))
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
    extras["seeds"] = plan_seeds(options.seeds)
    return [emulation_gate(spec, module.text, extras["seeds"])]


def _extra(base: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in base.items() if k in ("resources", "toolchain", "assembly")}


def assemble_candidate(module: PtxModule, candidate: Path, target: str, toolchain: Toolchain) -> AssembleResult:
    """The candidate's cubin for ``target`` as its check assembles it (ptxas' cache makes a second
    call a lookup: see :func:`prepare`)."""
    return toolchain.assemble(module.text, target, filename=candidate.name)


def prepare(candidate: Path, options: CheckOptions, toolchain: Toolchain) -> None:
    """The parent-side work of a check that needs no GPU, done ahead: the candidate assembled for
    its target and its SASS read, as :func:`run_check` will do them, so that its check finds both
    in the caches (ptxas' on disk, the disassembly's in this process). A verifier calls it for the
    next candidates of a round while the GPU works on the current one. A file that cannot be read
    or assembled is left for its check to report."""
    try:
        module = read_ptx(candidate)
        target = options.arch or module.arch
        assembled = assemble_candidate(module, candidate, target, toolchain)
        if assembled.ok:
            _signature(toolchain, assembled, target)
    except PorterError:
        return


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


@contextmanager
def _assembled_for_device(module: PtxModule, candidate: Path, target: str, options: CheckOptions,
                          runner: GpuRunner | None, toolchain: Toolchain) -> Iterator[None]:
    """Where the running worker's GPU cannot load the target's cubin (sm_80 PTX on an sm_90 GPU),
    the module's assembly for that GPU runs beside the target's (ptxas is a process of its own):
    :func:`runnable_cubin` then finds it in ptxas' cache. A failure there is left for that call."""
    info = runner.info if runner is not None else None
    if info is None or options.arch is not None or cubin_runs_on(target, info.arch):
        yield
        return
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="porter-assemble")
    ahead.submit(runnable_cubin, module, None, info, toolchain, candidate.name)
    try:
        yield
    finally:
        ahead.shutdown(wait=True)


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
        gates.append(native_gate(evidence))
        extras["native"] = evidence
    if options.sanitize:
        gates.append(Gate("sanitize", Status.NOT_RUN, reason))
    return gates, extras


def gates_passed(gates: list[Gate], name: str) -> bool:
    return any(g.name == name and g.status == Status.PASSED for g in gates)


def _verdict(candidate: Path, entry: str, arch: str, gates: list[Gate], *, start: float,
             signature: dict[str, int] | None = None, **fields: Any) -> Verdict:
    status = overall_status(tuple(gates))
    deciding = next((g for g in gates if g.status == status), gates[-1])
    reason = "every gate passed on this GPU" if status == Status.PASSED else f"{deciding.name}: {deciding.summary}"
    verdict = Verdict(kernel=str(candidate), entry=entry, arch=arch, status=status, reason=reason,
                      gates=tuple(gates), signature_sass=signature or {}, **fields)
    return replace(verdict, wall_s=time.perf_counter() - start)
