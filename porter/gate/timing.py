"""The timing gate: candidate, source and library timed interleaved, every timed launch held to
its verified outputs; at the named size sets and at one the check drew."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from porter.gate.median_ci import median_ci
from porter.gate.options import CheckOptions
from porter.gate.plan import (
    BUDGET_BYTES,
    Case,
    CaseKey,
    total_buffer_bytes,
)
from porter.gate.runner import rounds
from porter.gate.runner.client import DeviceInfo, GpuRunner, WorkerFault, exclusive, run_job
from porter.gate.runner.protocol import (
    Contender,
    Reference,
    RepeatJob,
    RepeatReply,
    TimeJob,
    TimeReply,
    moved_reason,
)
from porter.gate.runner.rounds import per_set, within_target
from porter.gate.spec import Spec
from porter.gate.verdict import (
    Gate,
    Status,
    Timing,
    size_label,
)
from porter.ptx.arch import get_profile

T = TypeVar("T")


def _timing_stats(name: str, samples: list[float], sets: int, flops: float | None, nbytes: float | None,
                  peak_tflops: float, peak_tbps: float) -> Timing:
    """One contender's figures, those of its slowest input set (round ``r`` ran on set ``r % sets``):
    a kernel fast only where its buffers lie one way is reported at its speed the other way."""
    own = [times for times in per_set(samples, sets) if times]
    medians = [statistics.median(times) for times in own]
    slowest = max(range(len(own)), key=lambda s: medians[s])
    ordered = sorted(own[slowest])
    median = medians[slowest]
    q: Callable[[float], float] = lambda f: ordered[min(len(ordered) - 1, int(f * len(ordered)))]  # noqa: E731
    interval = median_ci(ordered)
    seconds = median / 1e3
    tflops = flops / seconds / 1e12 if flops else None
    tbps = nbytes / seconds / 1e12 if nbytes else None
    shares = [x for x in ((tflops / peak_tflops) if tflops else None, (tbps / peak_tbps) if tbps else None) if x]
    return Timing(name=name, median_ms=median, p10_ms=q(0.1), p90_ms=q(0.9), count=len(samples),
                  tflops=tflops, tbps=tbps, roofline_fraction=max(shares) if shares else None,
                  ci_low_ms=interval[0] if interval else None, ci_high_ms=interval[1] if interval else None,
                  set_medians_ms=tuple(medians))


def ci_text(t: Timing) -> str:
    """The median's interval as a verdict says it: "±0.4% (95% CI)"."""
    half = t.ci_half_width
    return "(too few launches for a 95% CI)" if half is None else f"±{100 * half:.1f}% (95% CI)"


def timed_sets(checked: tuple[T, ...]) -> tuple[T, ...]:
    """The input sets a timing run rotates through (their seeds, or what goes with each): one per
    checked seed, set ``i`` placed as ``rounds.set_placing`` says (the first flush, the others as a
    program's tensors lie); a single checked seed comes twice, so that both placements are timed."""
    return checked * 2 if len(checked) == 1 else checked


def _set_ratios(other: Timing, cand: Timing) -> float:
    """The speed-up over ``other`` at one size set: the lowest of its per-input-set ratios."""
    return min(o / c for o, c in zip(other.set_medians_ms, cand.set_medians_ms, strict=True))


def _set_note(t: Timing, label: str) -> str:
    """Where a contender's medians differ by more than 3% between input sets, they are named."""
    medians = t.set_medians_ms
    if len(medians) < 2 or max(medians) <= 1.03 * min(medians):
        return ""
    each = ", ".join(f"{m:.4f} ms (set {i + 1}, {rounds.set_placing(i)})" for i, m in enumerate(medians))
    return f"{t.name}'s median per input set at {label}: {each}; the slowest counts"


def _peaks(device: DeviceInfo) -> tuple[float, float, str]:
    """Peak bf16 TFLOP/s and memory TB/s of this GPU, from its arch profile's parts."""
    profile = get_profile(device.arch)
    return profile.peak_for(device.name)


def drawn_timed_sizes(spec: Spec, plan: list[Case], timed: list[dict[str, int]], seed: int) -> dict[str, int] | None:
    """The size set timed beside the named ones: the one this check drew near the first timed set
    (:func:`porter.gate.plan.near_timed_sizes`, checked at ``seed``), or, where none could be drawn,
    its unannounced one. Nobody learns it before the check runs, so a kernel tuned to the timed
    shape alone cannot choose where it is timed. The large case is never timed: its one long
    symbol is a shape no one times a kernel at (a library's split-K, a tile kernel's one block)."""
    for why in ("timed-drawn", "unannounced"):
        drawn = [c.sizes for c in plan if c.why == why and c.seed == seed and not c.values and c.sizes not in timed
                 and total_buffer_bytes(spec, c.sizes) <= BUDGET_BYTES]
        if drawn:
            return drawn[0]
    return None


def time_candidate(spec: Spec, runner: GpuRunner, device: DeviceInfo, cubin: bytes, entry: str, launch: dict[str, Any] | None,
            source: tuple[bytes | None, str, dict[str, Any] | None], options: CheckOptions, seeds: tuple[int, ...],
            verified: dict[CaseKey, list[int]], timed: list[dict[str, int]],
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
    # Every size set's timing run inside one exclusive holding of the GPU: where other checks share
    # it (a pool), it is drained of their cases once a candidate, not once a size set.
    runs: list[tuple[TimeJob, TimeReply, RepeatJob]] = []
    with exclusive(runner):
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
            slots = timed_sets(tuple(checked))
            if references is not None:
                references = timed_sets(references)
            job = TimeJob(spec_path=str(spec.path), sizes=sizes, seeds=slots, contenders=tuple(contenders),
                          budget_s=options.timing_budget_s, ci_target=options.timing_ci, references=references)
            try:
                reply = run_job(runner, job, max(120.0, options.case_timeout_s))
            except WorkerFault as fault:
                return _failed_run(f"the timing run failed at {label}: {fault.kind}: {fault}", timings, ratios)
            runs.append((job, reply, RepeatJob(spec_path=job.spec_path, sizes=sizes, seed=slots[0],
                                               candidate=contenders[0],
                                               launches=min(len(reply.times_ms[0]), rounds.REPEAT_LAUNCHES),
                                               reference=references[0] if references is not None else None)))
    # The launches in a row after each run (not timed): they share the GPU with other checks' cases.
    for job, reply, in_a_row in runs:
        sizes, slots, label = job.sizes, job.seeds, size_label(job.sizes)
        try:
            repeat = run_job(runner, in_a_row, max(120.0, options.case_timeout_s))
        except WorkerFault as fault:
            return _failed_run(f"the repeated launches failed at {label}: {fault.kind}: {fault}", timings, ratios)
        flops, nbytes = spec.flops(sizes), spec.bytes(sizes)
        here = [replace(_timing_stats(name, samples, len(slots), flops, nbytes, peak_tflops, peak_tbps), sizes=label)
                for name, samples in zip(reply.names, reply.times_ms, strict=True)]
        timings.extend(here)
        by_name = {t.name: t for t in here}
        cand = by_name["candidate"]
        notes += [note for t in here if (note := _set_note(t, label))]
        problems += timed_outputs_problems(reply, repeat, [Case(sizes, seed).key() for seed in slots], verified,
                                           label, tuple(p.name for p in spec.outputs), held)
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
                ratios[other].append(_set_ratios(by_name[other], cand))
        part_text = [f"candidate median {cand.median_ms:.4f} ms {ci_text(cand)}, n={cand.count} over {len(slots)} "
                     f"input sets (the slowest set's median) at {label}"]
        if cand.roofline_fraction is not None:
            part_text.append(f"{100 * cand.roofline_fraction:.0f}% of the {part} roofline")
        for other in ("source", "library"):
            if other in by_name:
                part_text.append(f"{_set_ratios(by_name[other], cand):.2f}x vs {other}")
        target = f"±{100 * options.timing_ci:g}%"
        part_text.append(f"every median within {target}: target reached" if within_target(reply.times_ms, len(slots),
                                                                                           options.timing_ci)
                         else f"stopped at the cap before every median was within {target}")
        parts.append(", ".join(part_text))
    if len(parts) > 1:
        notes.append("the headline speed-ups are the lowest over these size sets (each the lowest over its input sets)")
    speed = _headline(ratios)
    if problems:
        return Gate("timing", Status.FAILED, problems[0], tuple(problems[1:] + parts)), tuple(timings), speed
    return Gate("timing", Status.PASSED, "; ".join(parts), tuple(notes)), tuple(timings), speed


def _failed_run(said: str, timings: list[Timing], ratios: dict[str, list[float]],
                ) -> tuple[Gate, tuple[Timing, ...], dict[str, float | None]]:
    return (Gate("timing", Status.ERROR, said, ("a kernel that passes its checked launches but fails when launched "
                                                 "repeatedly is not correct",)), tuple(timings), _headline(ratios))


def _headline(ratios: dict[str, list[float]]) -> dict[str, float | None]:
    """The verdict's speed-ups: each the lowest measured (None where that contender never ran)."""
    return {f"speedup_vs_{other}": min(found) if found else None for other, found in ratios.items()}


def timed_outputs_problems(reply: TimeReply, repeat: RepeatReply, keys: list[CaseKey], verified: dict[CaseKey, list[int]],
                           label: str, outputs: tuple[str, ...] = (), held: tuple[str, ...] = ()) -> list[str]:
    """How the candidate's timed launches differ from its verified launches on the same input sets.

    Timed launch ``r`` ran on input set ``r % len(keys)`` (the case ``keys[r % len(keys)]``); the
    launches in a row (``repeat``) on the first. Each launch leaves one number per output (``outputs``, in order): a
    digest, which must be the verified launch's, or for an output declared nondeterministic
    (``held``) the count of its elements outside the reference's tolerance, which must be 0 (the
    verified launch's entry)."""
    problems = []
    guards = reply.guards[reply.of("candidate")] + repeat.guards
    if guards:
        problems.append(f"out-of-bounds write during the timed launches at {label}: {'; '.join(guards)}")
    if repeat.moved:
        problems.append(f"the launches in a row at {label}: a launch {moved_reason(repeat.moved)}")
    expected = [verified.get(key) for key in keys]
    digests = reply.digests[reply.of("candidate")]
    if not keys or not all(expected) or digests is None:
        problems.append(f"the timed outputs at {label} could not be held to verified ones (no checked case there)")
        return problems
    per = reply.outputs_per_launch
    for what, found, sets in (("timed launches", digests, len(keys)),
                              ("repeated launches (globals kept)", repeat.digests, 1)):
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


