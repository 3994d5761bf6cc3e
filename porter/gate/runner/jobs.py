"""The worker's jobs: a checked case, a timing run, a recording; each a typed job in, a typed
reply out (:mod:`porter.gate.runner.protocol`)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from porter.gate.runner import judge, rounds
from porter.gate.runner.launch import Launch, Pending, Settled, digests, read_back
from porter.gate.runner.memory import scrubbed
from porter.gate.runner.pinned import host_empty, pinned_copy, release_idle
from porter.gate.runner.protocol import (
    CaseJob,
    CaseReply,
    Job,
    OutputsJob,
    OutputsReply,
    Reference,
    RepeatJob,
    RepeatReply,
    Reply,
    TimeJob,
    TimeReply,
)
from porter.gate.runner.state import KernelKey, LoadedModule, WorkerState, state_moves
from porter.gate.summary import OutputSummary
from porter.gate.usercode import load_callable, on_host


def _same_bytes(run: dict[str, np.ndarray], first: dict[str, np.ndarray]) -> bool:
    """Every output of ``run`` bit-identical to ``first``'s (NaNs at the same places included)."""
    return run.keys() == first.keys() and all(
        run[k].shape == first[k].shape and run[k].dtype == first[k].dtype
        and np.array_equal(run[k].reshape(-1).view(np.uint8), first[k].reshape(-1).view(np.uint8)) for k in run)


def _reference_array(cp: Any, result: dict[str, Any], p: Any) -> np.ndarray:
    """One output of a Python reference, on the host (a CuPy array is copied down), page-locked:
    the judgement uploads it once a run (:mod:`porter.gate.runner.pinned`). For outputs of 16 bits
    or fewer, float32 holds the reference far beyond the output's own rounding and halves what
    crosses the pipe."""
    if p.name not in result:
        raise RuntimeError(f"the reference returned no output {p.name!r}")
    value = result[p.name]
    ref = on_host(value, host_empty(cp))  # a device array is copied down into page-locked memory
    if p.dtype.is_float and p.dtype.itemsize <= 2 and ref.dtype == np.float64:
        return pinned_copy(cp, ref, np.float32)
    return ref if hasattr(value, "__cuda_array_interface__") else pinned_copy(cp, ref)


def _read_only(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    view = value.view()
    view.flags.writeable = False
    return view


def _python_reference(fn: Any, host_args: dict[str, Any], sizes: dict[str, int]) -> Any:
    """``fn`` on the case's inputs: read-only views of the arrays the worker keeps (no copy of a
    4096^2 input a case), or, for a reference that writes into its inputs, copies."""
    try:
        return fn({k: _read_only(v) for k, v in host_args.items()}, dict(sizes))
    except ValueError as err:
        if "read-only" not in str(err):
            raise
    return fn({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in host_args.items()}, dict(sizes))


def _reference(state: WorkerState, spec: Any, sizes: dict[str, int], seed: int, values: str,
               host_args: dict[str, Any], reference: Reference) -> dict[str, np.ndarray]:
    # The spec is part of the key: two specs may share a ref.py but fill their inputs differently.
    key = (reference.key, id(spec), tuple(sorted(sizes.items())), seed, values)
    if key in state.references:
        return state.references[key]
    kind = reference.kind
    if kind == "python":
        fn = load_callable(reference.path, reference.function)
        # A reference that runs on the GPU through CuPy allocates from the judgement's scrubbed
        # pool: nothing it computed is left in device memory that a later launch of a candidate
        # (this case's next run, a timed launch on these inputs) could read. It may return CuPy
        # arrays; they are copied down inside the block.
        with scrubbed(state.cp):
            result = _python_reference(fn, host_args, sizes)
            outs = {p.name: _reference_array(state.cp, result, p) for p in spec.outputs}
            del result
    elif kind == "source":
        # A source that is itself a port declares its own launch; the source's entry is launched.
        spec = state.spec(str(spec.path), reference.launch, reference.entry or None)
        module = state.module(reference.cubin)
        launch = Launch(state, spec, sizes, host_args, seed)
        try:
            launch.reset()
            launch.run(module)
            state.cp.cuda.Device().synchronize()
            outs, guards, modified = launch.collect()
        finally:
            launch.release()
        if guards or modified:
            raise RuntimeError("the source kernel used as reference misbehaves: " + "; ".join(guards + modified))
    elif kind == "golden":
        with np.load(reference.path) as data:
            outs = {name: data[name] for name in data.files}
    else:
        raise RuntimeError(f"unknown reference kind {kind!r}")
    if len(state.references) > 64:
        state.references.clear()
    state.references[key] = outs
    return outs


def job_case(state: WorkerState, job: CaseJob) -> CaseReply:
    """One case of the sweep: run the candidate's hot loop once per initial output state on the
    same fresh inputs, each run from a fully restored state (see ``Launch.reset``) in buffers of
    its own: the first run's end at unmapped memory, the later runs' lie as the case's seed draws
    (see :mod:`porter.gate.layout`).

    Every run launches, and what it left is computed behind it on the device (``Launch.check``),
    before anything is read; then the first run's outputs are compared with the reference there
    (:mod:`porter.gate.runner.judge`), and everything comes back in the case's one
    synchronisation (a wait on a GPU another process shares costs that process's time slice).
    The runs' own digests, taken again behind the last launch, say that no launch wrote into an
    earlier run's outputs.

    ``launch`` is the candidate's own launch directive (or its own sequence of kernels); the
    reference (a source kernel included) always runs with the spec's own launch; ``first`` marks
    a check's first case. ``entry`` is the candidate's entry as the caller read it; the kernels
    run are those of the spec with the directive applied. The reply carries the digests of the
    first run's outputs (which timed launches must reproduce; 0 for an output declared
    nondeterministic, which the caller compares with the reference instead), the memory-safety
    findings, and either each run's outputs or, judged on the device, each run's summaries (see
    :class:`~porter.gate.runner.protocol.CaseReply` and :mod:`porter.gate.runner.judge`).
    """
    sizes, seed, values, initials = job.sizes, job.seed, job.values, job.initials
    source_spec = state.spec(job.spec_path)
    spec = state.spec(job.spec_path, job.launch, job.entry)
    host_args = state.inputs(spec, sizes, seed, values)
    for coming in job.upcoming:  # drawn while this case runs
        state.prefetch(spec, coming.sizes, coming.seed, coming.values)
    module = state.module(job.cubin)
    if job.first:  # a check starts from the module as loaded, whatever an earlier check left in it
        module.restore()
        release_idle(state.cp)
    kernel_key = (job.cubin, job.entry, repr(job.launch))
    judging = _Judging(state, job, source_spec, host_args) if job.judge == "device" else None
    if judging is not None:
        judging.reference()  # made (or taken) before any launch: it never meets a candidate kernel on the device
    per_run: list[dict[str, np.ndarray] | None] = []
    guards: list[str] = []
    modified: list[str] = []
    start = time.perf_counter()
    try:
        launches, settled, moved = _run_all(state, spec, sizes, host_args, seed, kernel_key, module, initials, judging)
        # as the timing loop digests outputs: 0 for one declared nondeterministic
        digests = [d if p.deterministic else 0 for p, d in zip(spec.outputs, settled[0].outputs, strict=True)]
        for candidate, found in zip(launches, settled, strict=True):
            guards += [x for x in found.guards if x not in guards]
            modified += [x for x in found.modified if x not in modified]
            if judging is not None and judging.judged(candidate, found.outputs):
                continue
            runs = judging.earlier() if judging is not None else []
            judging = None  # from here on, every run's outputs go to the host
            for outs in [*runs, candidate.outputs()]:
                # A later run bit-identical to the first is sent as None: the parent judges it with the
                # first, and the outputs cross the pipe once.
                first = per_run[0] if per_run else None
                per_run.append(None if outs is None or (first is not None and _same_bytes(outs, first)) else outs)
    except BaseException:
        try:
            state.drop_case_launch()
        except Exception:
            state._cases.clear()
        raise
    if guards:  # the patterns are spent: the next case gets fresh buffers
        state.drop_case_launch()
    kernel_s = time.perf_counter() - start
    if judging is not None:
        return CaseReply(outputs=[], initials=list(initials), reference=judging.sent(), guards=guards,
                         modified=modified, digests=digests, kernel_s=kernel_s, fence=state.fence_note,
                         summaries=judging.summaries, moved=moved)
    # A reference the parent already holds for this case (a port run's earlier candidate) is
    # neither computed nor sent again.
    ref = None if job.reference.kind == "held" else _reference(state, source_spec, sizes, seed, values,
                                                               host_args, job.reference)
    return CaseReply(outputs=per_run, initials=list(initials), reference=ref, guards=guards, modified=modified,
                     digests=digests, kernel_s=kernel_s, fence=state.fence_note, moved=moved)


def context_error(cp: Any) -> Exception | None:
    """The error the worker's CUDA context answers a synchronisation with (a kernel's fault keeps
    it), or None where it has none."""
    try:
        cp.cuda.Device().synchronize()
    except Exception as err:
        return err
    return None


def _run_all(state: WorkerState, spec: Any, sizes: dict[str, int], host_args: dict[str, Any], seed: int,
             kernel_key: KernelKey, module: LoadedModule, initials: tuple[str, ...],
             judging: _Judging | None) -> tuple[list[Launch], list[Settled], list[str]]:
    """Every run of a case launched, each in its own buffers, what each left checked behind it, the
    first run's outputs compared with the reference behind the last (where ``judging``), all read
    with one synchronisation: each run's launch and what it left (``Launch.settled``). A kernel's
    fault surfaces at that read; it names every run, since it cannot say which one faulted. Also
    the module variables the case's launches left other than they found them."""
    launches: list[Launch] = []
    pending: list[Pending] = []
    # The module's variables as the case found them (as its first run left them where that was the
    # module's first launch, which may set them for good), compared after its last: state.state_moves.
    found_state = None if module.fresh else module.snapshot()
    try:
        for k, initial in enumerate(initials):
            candidate = state.case_launch(spec, sizes, host_args, seed, kernel_key, k)
            candidate.reset(initial)
            candidate.run(module)
            module.fresh = False
            if found_state is None:
                found_state = module.snapshot()
            pending.append(candidate.check())
            launches.append(candidate)
        held = module.moved(found_state or [])
        # Every earlier run's outputs as they are behind the last launch: as that run left them, or
        # a later launch wrote into them.
        again = digests(state, [c.buffers[p.name].data for c in launches[:-1] for p in spec.outputs])
        compared = judging.compare(launches[0]) if judging is not None else None
        found = read_back(state.cp, [*(p.values for p in pending), again, held,
                                     *([compared.values] if compared else [])])
    except Exception as err:
        if len(initials) == 1:
            raise
        # A kernel's fault surfaces at the next call, which may be a library's (cuRAND's error hides
        # it): name the context's own. Keep the CUDA error's name in the text: it decides whether
        # the worker restarts, and what the parent says of the fault.
        cause = context_error(state.cp) or err
        raise RuntimeError(f"{type(cause).__name__}: {cause} (in one of the case's launches, whose outputs started as "
                           f"{', '.join(initials)}: the first in buffers that end at unmapped memory, the others placed "
                           "otherwise; a kernel that faults in only some depends on the output's initial contents or "
                           "on where its buffers lie)") from cause
    runs = found[:len(launches)]  # then the earlier runs' digests again, then the comparison's figures
    settled = [c.settled(p, [int(x) for x in values]) for c, p, values in zip(launches, pending, runs, strict=True)]
    outputs = len(spec.outputs)
    for k, found_run in enumerate(settled[:-1]):
        if [int(x) for x in found[len(launches)][k * outputs:(k + 1) * outputs]] != found_run.outputs:
            raise RuntimeError("the outputs of an earlier run changed after it completed: a later launch wrote into "
                               "the buffers of an earlier one")
    if judging is not None and compared is not None:
        judging.first_compared(compared, found[-1])
    return launches, settled, list(state_moves(module.names, found[len(launches) + 1]))


class _Judging:
    """A case judged on the device (see :mod:`porter.gate.runner.judge`): each run's summaries, as
    long as every output passes and no output declared deterministic differs from the first run's
    (by their digests, taken as each run completes). A reference the parent holds comes with the
    job; one the worker makes is made on the host (or by the source kernel) before the first
    launch, and is sent back only where asked."""

    def __init__(self, state: WorkerState, job: CaseJob, source_spec: Any, host_args: dict[str, Any]) -> None:
        self.state, self.job, self.spec, self.host_args = state, job, source_spec, host_args
        self.summaries: list[dict[str, OutputSummary]] = []
        self._launches: list[tuple[Launch, list[int]]] = []
        self._reference: dict[str, np.ndarray] | None = None
        self._first: dict[str, OutputSummary] | None = None  # the first run's, read with its checks

    def compare(self, launch: Launch) -> judge.Comparison | None:
        """The first run's outputs compared with the reference on the device, not read."""
        return judge.compare(self.state, launch, self.spec, self.job.sizes, self.job.values, self.reference())

    def first_compared(self, comparison: judge.Comparison, found: np.ndarray) -> None:
        """:meth:`compare`'s figures as read."""
        self._first = comparison.summaries(found)

    def judged(self, launch: Launch, bits: list[int]) -> bool:
        """Whether the run that completed in ``launch``, its outputs' digests ``bits``, passed on
        the device (it is then judged); else the case goes to the host (see :meth:`earlier`)."""
        first = self._launches[0][1] if self._launches else bits
        self._launches.append((launch, bits))
        if any(p.deterministic and a != b for p, a, b in zip(self.spec.outputs, bits, first, strict=True)):
            return False
        if self.summaries and bits == first:
            # Every output's bytes those of the first run, which passed: the same comparison with the
            # same reference comes to the same summaries, so the reference does not go up again.
            self.summaries.append(self.summaries[0])
            return True
        if len(self._launches) == 1 and self._first is not None:
            found: dict[str, OutputSummary] | None = self._first
        else:
            found = judge.summaries(self.state, launch, self.spec, self.job.sizes, self.job.values, self.reference())
        if found is None or not all(s.passed for s in found.values()):
            return False
        self.summaries.append(found)
        return True

    def reference(self) -> dict[str, np.ndarray]:
        if self._reference is None:
            job = self.job
            if job.reference.kind == "held":
                if job.reference.outputs is None:
                    raise RuntimeError("a held reference reached a case judged on the device without its arrays")
                # Mapped from the parent's parking file and uploaded from there: a case uploads it
                # once (later runs bit-identical to the first reuse its summaries), so a page-locked
                # copy would cost a host copy and, for a new size, a page-locked allocation (about
                # 13 ms for 32 MB on the H100, 2026-12-06) to save a few milliseconds of upload.
                self._reference = {k: np.asarray(v) for k, v in job.reference.outputs.items()}
            else:
                self._reference = _reference(self.state, self.spec, job.sizes, job.seed, job.values, self.host_args,
                                             job.reference)
        return self._reference

    def earlier(self) -> list[dict[str, np.ndarray] | None]:
        """What the host needs of the runs before the last: the first run's outputs, copied to the
        host as that run left them (the case's read-back showed them unchanged since), and None for
        each run between, which passed on the device bit-identical to the first in every output
        declared deterministic (the host judges None as the first run)."""
        if len(self._launches) < 2:
            return []
        return [self._launches[0][0].outputs()] + [None] * (len(self._launches) - 2)

    def sent(self) -> dict[str, np.ndarray] | None:
        """The reference for the reply: only one the worker made, and only where asked."""
        return self._reference if self.job.send_reference and self.job.reference.kind != "held" else None


def _baseline_args(cp: Any, spec: Any, sizes: dict[str, int], launch: Launch) -> dict[str, Any]:
    """CuPy views of the launch's buffers, for a library baseline callable."""
    views: dict[str, Any] = {}
    for p in spec.params:
        if p.kind == "buffer":
            shape = tuple(spec.shape(p, sizes))
            try:
                dtype = cp.dtype(p.dtype.numpy)
                cp.empty(0, dtype=dtype)
            except Exception:  # bf16 / fp8: CuPy has no such dtype; hand over the raw bits
                dtype = {1: cp.uint8, 2: cp.uint16}[p.dtype.itemsize]
            memory = launch.buffers[p.name].data.view(dtype).reshape(spec.memory_shape(p, sizes))
            views[p.name] = memory[..., : shape[-1]] if memory.shape != shape else memory
        elif p.kind == "scalar":
            views[p.name] = launch.host_args[p.name]
    views.update({v.name: launch.host_args[v.name] for v in spec.values})
    return views


def job_time(state: WorkerState, job: TimeJob) -> TimeReply:
    """Time contenders interleaved: in each round, each contender once, L2 flushed before each.

    Interleaving makes ratios between contenders survive clock and thermal drift. Round ``r``
    runs on input set ``r % len(seeds)`` (each set drawn from its seed, each checked by the caller),
    so no launch finds the inputs the last one had; set 0's buffers lie as a checked case's first
    run (flush), the later sets' as a program's tensors (see :func:`rounds.set_placing`), so that
    a kernel is timed where it is checked and where it will run. Every timed launch starts from
    the same restored state as a checked one (fresh poison in the outputs, inputs and module
    globals restored, shared memory overwritten: all outside the timed events), and a kernel
    contender's outputs are digested after every launch, so the caller can hold each timed launch
    to the outputs verified for its set.

    Rounds run in batches until every contender's median on every set is known to ``ci_target``
    or the budget's cap is reached (see :mod:`porter.gate.runner.rounds`); the events are
    allocated for the cap beforehand and read, after a synchronize, between batches only. Then the
    guard bytes are checked (the launches in a row that follow are a job of their own, which
    shares the GPU: :func:`job_repeat`). A contender's
    launch is one run of its hot loop, every kernel of a sequence inside the timed events. With
    ``references`` (one per seed, as the case jobs had them), the candidate's nondeterministic
    outputs are held to them (see :mod:`porter.gate.runner.hold`).
    """
    cp = state.cp
    state.drop_case_launch()
    spec_path, sizes, seeds, contenders = job.spec_path, job.sizes, job.seeds, job.contenders
    sets = len(seeds)
    spec = state.spec(spec_path)
    inputs = [state.inputs(spec, sizes, seed) for seed in seeds]
    flush = state.flush_buffer()
    # steps[contender][set]: (its launch, its module or None for a library callable, one run)
    steps: list[list[tuple[Launch, LoadedModule | None, Any]]] = []
    launches: list[Launch] = []
    try:
        for c in contenders:
            own = state.spec(spec_path, c.launch, c.entry or None)
            steps.append([])
            for index, (seed, host_args) in enumerate(zip(seeds, inputs, strict=True)):
                launch = Launch(state, own, sizes, host_args, seed, rounds.set_placing(index))
                launches.append(launch)
                if c.kind == "kernel":
                    module = state.module(c.cubin)
                    steps[-1].append((launch, module, lambda launch=launch, module=module: launch.run(module)))
                else:
                    fn = load_callable(c.path, c.function)
                    views = _baseline_args(cp, spec, sizes, launch)
                    steps[-1].append((launch, None, lambda fn=fn, views=views: fn(views, dict(sizes))))

        if job.references and any(not p.deterministic for p in spec.outputs):
            for (launch, _, _), seed, host_args, reference in zip(steps[0], seeds, inputs, job.references,
                                                                  strict=True):
                if reference is not None:
                    launch.hold(_reference(state, spec, sizes, seed, "", host_args, reference))

        def prepare(launch: Launch, kernel: LoadedModule | None) -> None:
            # Module globals back to their load-time image: nothing a kernel remembered (a cache
            # of results, a launch count) survives into a timed launch.
            if kernel is not None:
                kernel.restore()
            launch.reset()
            flush.fill(0)

        # Warm-up (module load, cuBLAS handle, clocks, each set's buffers), then estimate one round's time.
        for _ in range(2):
            t0 = time.perf_counter()
            for own_steps in steps:
                for launch, kernel, run in own_steps:
                    prepare(launch, kernel)
                    run()
            cp.cuda.Device().synchronize()
        round_s = max(time.perf_counter() - t0, 1e-6) / sets
        cap = rounds.rep_cap(job.budget_s, round_s, job.min_reps, job.max_reps, sets)
        events = [[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(cap)] for _ in steps]
        outputs = len(spec.outputs)
        digests = [cp.zeros(cap * outputs, dtype=cp.uint64) if c.kind == "kernel" else None for c in contenders]

        def run_batch(first: int, end: int) -> list[list[float]]:
            for r in range(first, end):
                for i in rounds.round_order(r, sets, len(steps)):
                    launch, kernel, run = steps[i][r % sets]
                    prepare(launch, kernel)
                    start, stop = events[i][r]
                    start.record()
                    run()
                    stop.record()
                    if digests[i] is not None:
                        launch.digest_outputs(digests[i], r * outputs)
            cp.cuda.Device().synchronize()  # between batches: no timed window is open
            return [[cp.cuda.get_elapsed_time(*evs[r]) for r in range(first, end)] for evs in events]

        times = rounds.adaptive_rounds(run_batch, len(steps), sets, job.min_reps, cap, job.ci_target)
        for _, kernel, _ in (step for own_steps in steps for step in own_steps):
            if kernel is not None:
                kernel.fresh = False  # each timed launch started from the image, and may have set its variables
        reps = len(times[0]) if times else 0
        guards = [[g for launch, _, _ in own_steps for g in launch.guard_problems()] for own_steps in steps]
        digest_lists = [None if d is None else [int(x) for x in d[:reps * outputs].get()] for d in digests]
    finally:
        for launch in launches:
            launch.release()
    return TimeReply(names=[c.name for c in contenders], times_ms=times, digests=digest_lists,
                     outputs_per_launch=len(spec.outputs), guards=guards, seeds=list(seeds))


def job_repeat(state: WorkerState, job: RepeatJob) -> RepeatReply:
    """The candidate launched again and again on a timed set's first input set, placed as that set
    is timed, without restoring its globals between launches, as a program calls it, each launch
    from fresh poison and digested: a kernel that counts its calls and skips (or breaks) after a
    few is caught here. Apart from the timing run, which needs the GPU alone: this needs no quiet
    GPU, and shares it with other checks' cases."""
    cp = state.cp
    state.drop_case_launch()
    c = job.candidate
    spec = state.spec(job.spec_path)
    host_args = state.inputs(spec, job.sizes, job.seed)
    launch = Launch(state, state.spec(job.spec_path, c.launch, c.entry or None), job.sizes, host_args, job.seed,
                    rounds.set_placing(0))
    try:
        if job.reference is not None and any(not p.deterministic for p in spec.outputs):
            launch.hold(_reference(state, spec, job.sizes, job.seed, "", host_args, job.reference))
        module = state.module(c.cubin)
        module.restore()
        outputs = len(spec.outputs)
        digests = cp.zeros(job.launches * outputs, dtype=cp.uint64)
        moves = []  # per launch after the first: which variables it left other than it found them
        for r in range(job.launches):
            found_state = module.snapshot() if r > 0 else []
            launch.reset()
            launch.run(module)
            launch.digest_outputs(digests, r * outputs)
            if r > 0 and module.globals:
                moves.append(module.moved(found_state))
        module.fresh = False
        found, flags = read_back(cp, [digests, cp.concatenate(moves) if moves else cp.zeros(0, dtype=cp.uint64)])
        guards = launch.guard_problems()
    finally:
        launch.release()
    moved = state_moves(module.names, flags)  # row r: launch r + 2
    return RepeatReply(digests=[int(x) for x in found], guards=guards,
                       moved=[f"{name} (moved by launch {row + 2})" for name, row in moved.items()])


def job_outputs(state: WorkerState, job: OutputsJob) -> OutputsReply:
    """Run a kernel once and return its outputs (for ``porter record``), with its own launch if declared."""
    spec = state.spec(job.spec_path)
    source = Reference("source", key=hashlib.sha256(job.cubin).hexdigest(), cubin=job.cubin, entry=job.entry,
                       launch=job.launch)
    host_args = state.inputs(spec, job.sizes, job.seed, job.values)
    return OutputsReply(_reference(state, spec, job.sizes, job.seed, job.values, host_args, source))


def run(state: WorkerState, job: Job) -> Reply:
    """The worker's answer to ``job``."""
    if isinstance(job, CaseJob):
        return job_case(state, job)
    if isinstance(job, TimeJob):
        return job_time(state, job)
    if isinstance(job, RepeatJob):
        return job_repeat(state, job)
    return job_outputs(state, job)
