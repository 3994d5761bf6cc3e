"""The equivalence gate: the plan's cases run in the worker and judged against the reference,
each judgement in a thread while the next case runs."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from porter.errors import InputError
from porter.gate.compare import compare, compare_runs, format_comparison, passing_check
from porter.gate.golden import GoldenCase, Manifest
from porter.gate.lanes import CASE_OVERHEAD_BYTES, split, staggered
from porter.gate.options import CheckOptions
from porter.gate.plan import Case, CaseKey, total_buffer_bytes
from porter.gate.references import ReferenceCache
from porter.gate.runner.client import GpuRunner, WorkerFault, run_job
from porter.gate.runner.protocol import PREFETCH_DEPTH, CaseJob, CaseReply, Reference, Upcoming, moved_reason
from porter.gate.spec import Spec
from porter.gate.summary import output_terms
from porter.gate.verdict import (
    CaseResult,
    Gate,
    OutputCheck,
    Status,
    size_label,
)


def case_reference(spec: Spec, options: CheckOptions, source_cubin: bytes | None, source_entry: str,
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


_INITIAL_WORDS = {"poison": "NaN poison", "random": "random finite values", "zeros": "zeros"}


def judge_case(spec: Spec, case: Case, reply: CaseReply) -> CaseResult:
    """The verdict on one case: from the summaries of a case whose every output passed on the
    device, else from its outputs, compared with the reference here."""
    if reply.summaries:
        return _judged_on_device(spec, case, reply)
    sizes = case.sizes
    runs = reply.outputs  # None: bit-identical to the first run
    first = runs[0]
    if first is None:
        raise RuntimeError("a case reached judgement without its first run's outputs")
    initials = reply.initials or ["poison"] * len(runs)
    if reply.reference is None:
        raise RuntimeError("a case reached judgement without its reference")
    reference = reply.reference
    checks = []
    problems: list[str] = []
    nondet = []
    grid = spec.launch_dims(sizes).grid
    for p in spec.outputs:
        # Where the reference is not finite in the output's dtype (inputs span the whole domain),
        # it says nothing: those elements are left out (limit), the rest of the case is judged.
        if p.name not in reference:
            raise InputError(f"the reference returned no output {p.name!r}")
        ref = np.asarray(reference[p.name])
        atol, rtol, limit = output_terms(np, spec, p.name, sizes, case.values, ref.reshape(-1))
        tile = block_tile(first[p.name].shape, grid)
        c = check = compare(p.name, first[p.name], ref, atol=atol, rtol=rtol, tile=tile, limit=limit)
        if not c.passed:
            problems.append(f"{p.name}: {c.mismatches} of {c.total} elements wrong")
        # A later run (another initial state) bit-identical to the first shares its judgement (the
        # worker sends None for a run whose outputs are all bit-identical to the first's); one that
        # differs is compared with the reference, to tell initial-state dependence from a race.
        # An output declared nondeterministic (atomics) may differ: each run must match the reference.
        for initial, later in zip(initials[1:], runs[1:], strict=True):
            if later is None:
                continue
            diff = compare_runs(first[p.name], later[p.name])
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
    return _case_result(case, reply, checks, problems, nondet)


def _judged_on_device(spec: Spec, case: Case, reply: CaseReply) -> CaseResult:
    """A case whose outputs all passed on the device, in every run: the first run's summaries make
    the checks (the worker sends the arrays of any case where one did not)."""
    for k, run in enumerate(reply.summaries):
        failed = [name for name, s in run.items() if not s.passed]
        if failed or run.keys() != {p.name for p in spec.outputs}:
            raise RuntimeError(f"the worker judged run {k} on the device but sent summaries that do not all pass "
                               f"(failed {failed}, outputs {sorted(run)})")
    checks = [passing_check(p.name, reply.summaries[0][p.name]) for p in spec.outputs]
    return _case_result(case, reply, checks, [], [])


def _case_result(case: Case, reply: CaseReply, checks: list[OutputCheck], problems: list[str],
                 nondet: list[str]) -> CaseResult:
    sizes = case.sizes
    reasons = []
    if (checks and not any(c.judged for c in checks) and not problems and not reply.guards and not reply.modified
            and not reply.moved):
        return CaseResult(sizes=dict(sizes), seed=case.seed, status=Status.NOT_RUN, values=case.values, outputs=tuple(checks),
                          reason="not judged: the reference is not finite in the outputs' dtypes anywhere on these inputs")
    if reply.guards:
        reasons.append("out-of-bounds write: " + "; ".join(reply.guards))
    if reply.modified:
        reasons.append("wrote its input: " + "; ".join(reply.modified))
    if reply.moved:
        reasons.append(moved_reason(reply.moved))
    reasons += problems
    if nondet:
        reasons.append("nondeterministic: " + "; ".join(nondet))
    return CaseResult(
        sizes=dict(sizes), seed=case.seed, status=Status.FAILED if reasons else Status.PASSED, reason="; ".join(reasons),
        outputs=tuple(checks), guard_violations=tuple(reply.guards), inputs_modified=tuple(reply.modified),
        nondeterminism="; ".join(nondet), wall_s=reply.kernel_s, values=case.values,
    )


def equivalence_gate(cases: list[CaseResult], planned: int) -> Gate:
    if not cases:
        return Gate("equivalence", Status.FAILED, "no case ran: nothing was compared with the reference")
    failed = [c for c in cases if c.status not in (Status.PASSED, Status.NOT_RUN)]
    unjudged = [c.reason for c in cases if c.status == Status.NOT_RUN]
    if not failed and len(cases) == planned:
        judged = len(cases) - len(unjudged)
        return Gate("equivalence", Status.PASSED, f"{judged} cases (size sets x seeds, timed sizes, value cases; each "
                    "from each of three initial output states) equal to the reference", tuple(unjudged))
    details = []
    for c in failed[:6]:
        values = f"; values {c.values}" if c.values else ""
        details.append(f"[{size_label(c.sizes)}; seed {c.seed}{values}] {c.reason or c.fault}")
    skipped = planned - len(cases)
    if skipped:
        details.append(f"{skipped} cases not run after the fault")
    if not failed:
        return Gate("equivalence", Status.FAILED, f"{planned - len(cases)} of {planned} cases not run", tuple(details))
    first = failed[0]
    return Gate("equivalence", Status.FAILED, f"{len(failed)} of {planned} cases failed; first: {first.reason or first.fault}",
                tuple(details))


def fault_reason(fault: WorkerFault) -> str:
    """A fault, with what an illegal address most likely means under porter's fences."""
    reason = f"{fault.kind}: {fault}"
    if "illegaladdress" in str(fault).lower().replace("_", ""):  # the driver's and the runtime's names
        reason += (" (an out-of-bounds access, most likely: in a case's first run every buffer ends at unmapped "
                   "memory, so a read or write past its end faults, and inputs are mapped read-only, so a write "
                   "to one faults too)")
    return reason


@dataclass
class Judging:
    """The cases of a check once all have run: their judgements (NumPy comparisons in threads,
    some perhaps still under way), the case that faulted, and each case's output digests."""

    pending: list[Future[CaseResult]]
    faulted: list[CaseResult]
    digests: dict[CaseKey, list[int]]

    def failed_so_far(self) -> bool:
        """Whether a case is already known to have failed (a fault, or a finished judgement)."""
        return bool(self.faulted) or any(f.done() and (f.exception() is not None or f.result().status not in (Status.PASSED, Status.NOT_RUN))
                                         for f in self.pending)

    def results(self) -> list[CaseResult]:
        return [future.result() for future in self.pending] + self.faulted


def run_cases(spec: Spec, options: CheckOptions, plan: list[Case], runner: GpuRunner, cubin: bytes, entry: str,
              launch: dict[str, Any] | None, warnings: list[str], reference_job: Any,
              references: ReferenceCache | None = None, *, helpers: Sequence[GpuRunner] = (),
              kept: Sequence[dict[str, int]] = ()) -> Judging:
    """Run the plan in the worker, judging each case in a thread while the next one runs (the
    comparison is NumPy work that releases the GIL), and stop at the first fault. Returns once
    every case has run; the last judgements may still be under way, so that the GPU work that
    follows (profiling, timing) overlaps them. A reference that ``references`` holds is not asked
    of the worker again (a ``held`` job); one it computes is kept; one that another check is
    computing at the moment is waited for (see :meth:`ReferenceCache.take`).

    ``helpers``: other workers on the same GPU this check may also use: the cases are split
    between them and ``runner`` (see :mod:`porter.gate.lanes`), the cases at ``kept`` sizes (those
    timed next) staying with ``runner``; a fault in any stops every lane after its current case.
    In a port run (``references``), each check starts at another size set
    (:func:`porter.gate.lanes.staggered`): checks side by side compute different references at once."""
    judging = Judging([], [], {})
    lanes = [runner, *helpers]
    costs = [total_buffer_bytes(spec, c.sizes) + CASE_OVERHEAD_BYTES for c in plan]
    dealt = split(costs, len(lanes), [i for i, c in enumerate(plan) if c.sizes in kept])
    if references is not None:  # a port run's checks side by side start at different size sets
        start = references.arrival()
        groups = [(tuple(sorted(c.sizes.items())), c.values) for c in plan]
        dealt = [staggered(indices, groups, start) for indices in dealt]
    judges = ThreadPoolExecutor(max_workers=2, thread_name_prefix="porter-judge")
    pending: dict[int, Future[CaseResult]] = {}
    stop = threading.Event()
    noted = threading.Lock()

    def run_lane(lane: GpuRunner, indices: list[int]) -> None:
        for position, index in enumerate(indices):
            if stop.is_set():
                return
            case = plan[index]
            job = reference_job(index)
            key = ReferenceCache.key(job, str(spec.path), case.key()) if references is not None else None
            held = (references.take(key, options.case_timeout_s) if references is not None and key is not None
                    else None)
            # A worker judging on the device needs the reference there: a held one goes with the job
            # (parked in shared memory, as replies are); one it makes comes back where it is kept.
            reference = job if held is None else Reference("held", key=job.key,
                                                           outputs=held if options.judge == "device" else None)
            try:
                reply = run_job(lane, CaseJob(cubin=cubin, entry=entry, spec_path=str(spec.path), sizes=case.sizes,
                                              seed=case.seed, values=case.values, launch=launch, first=position == 0,
                                              reference=reference, judge=options.judge,
                                              send_reference=references is not None,
                                              upcoming=tuple(Upcoming(plan[i].sizes, plan[i].seed, plan[i].values)
                                                             for i in indices[position + 1:position + 1 + PREFETCH_DEPTH])),
                                options.case_timeout_s)
                if held is not None:
                    reply = replace(reply, reference=held)
                elif references is not None and key is not None and reply.reference is not None:
                    reply = replace(reply, reference=references.put(key, reply.reference))
            except WorkerFault as fault:
                stop.set()
                with noted:
                    judging.faulted.append(CaseResult(sizes=dict(case.sizes), seed=case.seed, status=Status.FAILED,
                                                      values=case.values, reason=fault_reason(fault), fault=str(fault)))
                return
            finally:
                if references is not None and key is not None and held is None:
                    references.abandon(key)  # put, or never coming from this check: nobody waits on it
            with noted:
                judging.digests[case.key()] = reply.digests
                if reply.fence and reply.fence not in warnings:
                    warnings.append(reply.fence)
                pending[index] = judges.submit(judge_case, spec, case, reply)

    try:
        if len(lanes) == 1:
            run_lane(runner, dealt[0])
        else:
            def lane_or_stop(lane: GpuRunner, indices: list[int]) -> None:
                try:
                    run_lane(lane, indices)
                except BaseException:
                    stop.set()  # an error of porter's own in one lane: the others stop too
                    raise

            with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="porter-lane") as pool:
                running = [pool.submit(lane_or_stop, lane, indices) for lane, indices in zip(lanes, dealt, strict=True)]
                for future in running:
                    future.result()
    finally:
        stop.set()
        judges.shutdown(wait=False)  # the submitted judgements still finish
    judging.pending = [pending[index] for index in sorted(pending)]
    return judging


def case_warnings(cases: list[CaseResult], warnings: list[str]) -> None:
    for result in cases:
        for c in result.outputs:
            warnings.extend(w for w in c.warnings if w not in warnings)


