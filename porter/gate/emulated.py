"""Emulated cases: a candidate run in porter's PTX emulator (:mod:`porter.emu`), judged as a GPU run is.

This is the bridge from a spec to the emulator: a case's inputs are porter's own
(:func:`porter.gate.inputs.make_args`: the same seed, sizes and values give the same inputs as a
GPU case), laid out in memory shape with padding, outputs poisoned, tensor maps built from the
spec's geometry, and the hot loop's steps (one entry, or a ``[[kernels]]`` sequence with its
zeroings) launched in order. The outputs are compared with the spec's Python reference by
:func:`porter.gate.compare.compare` within the spec's tolerances.

The emulation gate (``porter check --emulate``, and by default where no GPU can run the
candidate) runs :func:`emulated_size_sets` under two seeds. It is evidence, never a pass: a check
that only emulated stays ``not run`` (docs/emulator.md, "In the gate").
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from porter.emu import Diagnostic, EmuResult, ModuleGlobals, TensorMap, emulate
from porter.errors import InputError
from porter.gate.compare import compare, format_comparison
from porter.gate.inputs import INITIAL, make_args, stream
from porter.gate.plan import free_symbols_of, total_buffer_bytes, unannounced_sizes
from porter.gate.runner.memory import initial_contents
from porter.gate.runner.protocol import INITIAL_STATES, moved_reason
from porter.gate.spec import Spec, declared_spec, load_spec
from porter.gate.summary import output_terms
from porter.gate.usercode import load_callable
from porter.gate.verdict import CaseResult, Gate, OutputCheck, Status, size_label

BUDGET_S = 30.0  # emulation stops starting cases once this much time has gone
DEFAULT_SETS = 3  # size sets chosen from the sweep when the spec declares no [[emulate]]
RAGGED = 8  # a size is ragged when it is not a multiple of this
# Streams a drawn size set is looked for in (each of plan.unannounced_sizes' tries): with padded
# strides most draws of the GEMM example are dearer than its largest fixed set, and 4 streams
# left 1 seed in 500 without one.
DRAWS = 32
# Hiding CuPy from a reference swaps ``sys.modules["cupy"]``, which every thread shares: one
# reference at a time, or a second thread saves the hidden entry as the real one, or restores CuPy
# while the first still runs (a pool checks in threads, and a CuPy reference without a GPU raises).
_HIDING_CUPY = threading.Lock()


@dataclass
class Step:
    """One launch of the hot loop (or a zeroing of buffers, ``entry`` empty)."""

    entry: str
    args: tuple[str, ...]
    zero: tuple[str, ...]
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)


@dataclass
class Case:
    """A run of the hot loop as the gate would make it: buffers and scalars by name, the steps."""

    spec: Spec
    ptx: str
    sizes: dict[str, int]
    values: dict[str, Any]  # buffers (arrays in memory shape), scalars, by param name
    steps: list[Step]
    host: dict[str, Any]  # make_args' inputs and scalars, for the reference
    seed: int = 1  # the case's seed: it draws the inputs and, per step, the emulator's surroundings
    value_case: str = ""  # the value case its inputs come from ("" for the spec's default fills)

    def aligns(self, step: Step) -> dict[int, int]:
        """Each buffer argument's contract alignment (the spec's ``align``), by its place in ``step``:
        the emulator keeps it, and no more."""
        return {i: p.align for i, name in enumerate(step.args) if (p := self.spec.param(name)).kind != "tensormap"}

    def read_only(self, step: Step) -> frozenset[int]:
        """The places in ``step`` of the buffers the spec makes inputs: the GPU gate hands each over
        through a read-only mapping, and the emulator makes a store to one fatal alike."""
        return frozenset(i for i, name in enumerate(step.args)
                         if (p := self.spec.param(name)).kind == "buffer" and p.role == "in")

    def arguments(self, step: Step) -> list[Any]:
        """The emulator's arguments of one step, in the entry's parameter order."""
        out: list[Any] = []
        for name in step.args:
            p = self.spec.param(name)
            if p.kind == "tensormap":
                assert p.tensormap is not None
                target = self.spec.param(p.tensormap.tensor)
                assert target.dtype is not None
                out.append(TensorMap.from_geometry(step.args.index(target.name), target.dtype.itemsize,
                                                   self.spec.tensormap_geometry(p, self.sizes)))
            else:
                out.append(self.values[name])
        return out


def case_of(spec: Spec, ptx: str, sizes: dict[str, int], seed: int = 1, values: str = "") -> Case:
    """The emulator's view of ``ptx`` run under ``spec`` (its porter-launch lines already applied)
    at resolved ``sizes``, with the inputs of seed ``seed`` and value case ``values``."""
    host = make_args(spec, sizes, seed, values)
    memory: dict[str, Any] = {}
    # An output starts as one of the GPU gate's three initial states, drawn per case: a kernel
    # right only when its outputs start as NaN (skipping elements already written, taking a max
    # with what is there) fails the cases that start them random or zero.
    initial = INITIAL_STATES[int(stream(seed, INITIAL, sizes, len(spec.params), values).integers(len(INITIAL_STATES)))]
    for index, p in enumerate(spec.params):
        if p.kind == "buffer":
            assert p.dtype is not None
            shape = spec.memory_shape(p, sizes)
            if p.role == "out":
                nbytes = int(np.prod(shape, dtype=np.int64)) * p.dtype.itemsize
                fill = int(stream(seed, INITIAL, sizes, index, initial).integers(2**32))  # NumPy's seeds are 32-bit
                memory[p.name] = initial_contents(np, p.dtype, nbytes, initial, fill).view(p.dtype.numpy).reshape(shape)
            else:
                view = np.asarray(host[p.name])
                arr = np.zeros(shape, view.dtype)
                arr[tuple(slice(0, s) for s in view.shape)] = view
                memory[p.name] = arr
        elif p.kind == "scratch":
            n = spec.scratch_bytes(p, sizes)
            memory[p.name] = np.zeros(n, np.uint8) if n else None
        elif p.kind == "scalar":
            memory[p.name] = host[p.name]
    steps = []
    for step in spec.sequence():
        if not step.entry:
            steps.append(Step("", (), tuple(step.zero)))
            continue
        dims = spec.launch_dims(sizes, step=step)
        steps.append(Step(step.entry, tuple(step.args), (), dims.grid, dims.block, dims.shared,
                          dims.cluster or (1, 1, 1)))
    return Case(spec, ptx, sizes, memory, steps, host, seed, values)


def emu_case(example: Path, ptx_file: Path, sizes: dict[str, int] | None = None, seed: int = 1,
             values: str = "") -> Case:
    """:func:`case_of` for the spec in ``example`` and the kernel in ``ptx_file`` (its porter-launch
    lines applied), at ``sizes`` over ``[sizes]`` (None: the defaults)."""
    text = ptx_file.read_text()
    spec, _ = declared_spec(load_spec(example), text, source=ptx_file.name)
    resolved = spec.timing_sizes(sizes) if sizes is not None else spec.default_sizes()  # derived sizes filled in
    return case_of(spec, text, resolved, seed, values)


def run_emulated(case: Case, **kw: Any) -> list[EmuResult]:
    """Every step of the hot loop in the emulator, in order; stops after a step that failed. ``kw``
    go to :func:`porter.emu.emulate` (``module``: the variables earlier cases left)."""
    results = []
    for index, step in enumerate(case.steps):
        if not step.entry:
            for name in step.zero:
                case.values[name][...] = 0
            continue
        res = emulate(case.ptx, step.entry, step.grid, step.block, case.arguments(step), dynamic_smem=step.shared,
                      cluster=step.cluster, seed=(case.seed << 8) + index, aligns=case.aligns(step),
                      read_only=case.read_only(step), names=dict(enumerate(step.args)), **kw)
        results.append(res)
        if not res.ok:
            break
    return results


def outputs(case: Case) -> dict[str, np.ndarray]:
    """The output buffers (their views, without padding) after a run, by name."""
    out = {}
    for p in case.spec.params:
        if p.is_output:
            shape = case.spec.shape(p, case.sizes)
            out[p.name] = np.asarray(case.values[p.name])[tuple(slice(0, s) for s in shape)]
    return out


def reference(case: Case) -> dict[str, np.ndarray]:
    """The spec's Python reference on the case's inputs (as the worker gives them), in float64."""
    ref = case.spec.reference
    assert ref is not None and ref.callable is not None
    fn = load_callable(str(ref.callable.path), ref.callable.function)
    given = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.host.items()}
    # References use CuPy when it imports; at these sizes NumPy is quick, and it needs no GPU.
    with _HIDING_CUPY:
        hidden = sys.modules.get("cupy")
        sys.modules["cupy"] = None  # type: ignore[assignment]  # makes `import cupy` raise ImportError
        try:
            with np.errstate(all="ignore"):  # as above: NaN in, NaN out, without a warning per case
                result = fn(given, dict(case.sizes))
        finally:
            if hidden is None:
                del sys.modules["cupy"]
            else:
                sys.modules["cupy"] = hidden
    return {k: np.asarray(v, np.float64) for k, v in result.items()}


def judged(case: Case, name: str, got: np.ndarray, ref: np.ndarray) -> OutputCheck:
    """``got`` against ``ref`` for output ``name`` as the gate judges a GPU case: the spec's tolerance,
    and elements whose reference the output's dtype cannot hold left out."""
    atol, rtol, limit = output_terms(np, case.spec, name, case.sizes, case.value_case, np.asarray(ref).reshape(-1))
    return compare(name, got, ref, atol=atol, rtol=rtol, limit=limit)


def within(case: Case, name: str, got: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    """Whether ``got`` passes :func:`judged`; the largest difference over the judged elements."""
    check = judged(case, name, got, ref)
    return check.passed, check.max_abs_err


# ----------------------------------------------------------------------------- the gate


def _fits(spec: Spec, sizes: dict[str, int]) -> bool:
    """Whether the candidate's spec takes ``sizes`` (a TMA kernel's port may not take every sweep set)."""
    try:
        spec.check_sizes(sizes)
    except InputError:
        return False
    return True


def emulated_size_sets(spec: Spec) -> list[dict[str, int]]:
    """Where a check emulates: the spec's ``[[emulate]]`` size sets, else :data:`DEFAULT_SETS` of
    the sweep's: the one with the most ragged varied size symbols (not a multiple of
    :data:`RAGGED`; the smallest such), then the smallest by buffer bytes until there are three."""
    if spec.emulate:
        return spec.emulated_size_sets()
    sets = sorted((s for s in spec.size_sets() if _fits(spec, s)), key=lambda s: total_buffer_bytes(spec, s))
    varied = [k for k in free_symbols_of(spec) if isinstance(spec.sizes[k], int)]
    ragged = max(sets, key=lambda s: sum(s[k] % RAGGED != 0 for k in varied), default=None)
    chosen = [ragged] if ragged is not None and any(ragged[k] % RAGGED for k in varied) else []
    for sizes in sets:
        if len(chosen) >= DEFAULT_SETS:
            break
        if sizes not in chosen:
            chosen.append(sizes)
    return sorted(chosen, key=lambda s: total_buffer_bytes(spec, s))


def _judge(case: Case, results: list[EmuResult], seed: int) -> CaseResult:
    """One emulated case's judgement: the emulator's fatal finding, else porter's comparison of
    every output with the reference (and of every input with what it was)."""
    sizes = dict(case.sizes)
    launched = [step for step in case.steps if step.entry]  # results stop after a step that failed
    fatal = [(step, d) for step, r in zip(launched, results, strict=False) for d in r.diagnostics
             if d.fatal or d.kind == "race"]
    if fatal:
        step, finding = fatal[0]
        status = Status.NOT_RUN if finding.kind == "unsupported" else Status.FAILED
        return CaseResult(sizes=sizes, seed=seed, status=status, reason=f"the emulator: {_said(step, finding)}",
                          values=case.value_case)
    ref = reference(case)
    got = outputs(case)
    checks: list[OutputCheck] = []
    for p in case.spec.outputs:
        checks.append(judged(case, p.name, got[p.name], ref[p.name]))
    reasons = [f"{c.name}: {c.mismatches} of {c.total} elements wrong" for c in checks if not c.passed]
    modified = [p.name for p in case.spec.params if p.kind == "buffer" and p.role == "in"
                and not np.array_equal(_view(case, p.name).view(np.uint8), np.asarray(case.host[p.name]).view(np.uint8))]
    if modified:
        reasons.append("wrote its input: " + ", ".join(modified))
    return CaseResult(sizes=sizes, seed=seed, status=Status.FAILED if reasons else Status.PASSED,
                      reason="; ".join(reasons), outputs=tuple(checks), inputs_modified=tuple(modified),
                      values=case.value_case)


def _said(step: Step, finding: Diagnostic) -> str:
    """A fatal finding as the gate says it (each buffer by the spec's name: run_emulated passes
    them); a race with the step's entry and what it means."""
    if finding.kind == "race":
        return f"{step.entry}: race: {finding.message} (a missing barrier or wait)"
    return str(finding)


def _label(spec: Spec, sizes: dict[str, int]) -> str:
    """A size set by its own symbols (derived ones, such as a leading dimension, left out)."""
    return size_label({k: v for k, v in sizes.items() if not isinstance(spec.sizes.get(k), str)})


def _view(case: Case, name: str) -> np.ndarray:
    shape = case.spec.shape(case.spec.param(name), case.sizes)
    return np.ascontiguousarray(np.asarray(case.values[name])[tuple(slice(0, s) for s in shape)])


def drawn_emulated_sizes(spec: Spec, sets: list[dict[str, int]], seed: int) -> dict[str, int] | None:
    """A size set drawn from ``seed`` for one check alone, beside ``sets`` (:func:`emulated_size_sets`,
    which a kernel can read in its spec and be right at alone): inside the contract the sweep
    implies, as the GPU's unannounced size set is (:func:`porter.gate.plan.unannounced_sizes`),
    each symbol at most about its largest in ``sets`` and the buffers no larger than the largest
    set's, so that it costs no more than they do; never one of ``sets``. None when no draw fits
    (a spec without a sweep, or that opts out of unannounced sizes)."""
    if not sets:
        return None
    ceiling = {k: max(s[k] for s in sets) for k in sets[0]}
    largest = max(total_buffer_bytes(spec, s) for s in sets)
    for attempt in range(DRAWS):
        drawn = unannounced_sizes(spec, seed, purpose=f"emulated {attempt}", ceiling=ceiling, max_bytes=largest,
                                  avoid=sets)
        if drawn is not None and _fits(spec, drawn):
            return drawn
    return None


def emulated_value_cases(spec: Spec, sets: list[dict[str, int]], drawn: dict[str, int] | None,
                         seed: int) -> list[tuple[dict[str, int], str]]:
    """Where each value case of the spec (:meth:`Spec.value_cases`: its own, then porter's ``wide``,
    which also perturbs the fixed float constants) is emulated: at its ``at`` where the candidate
    takes it and it costs no more than the largest of ``sets``, else at ``drawn`` (without one, at
    one of ``sets`` chosen by ``seed``). A kernel right only for the default fills, or with a fixed
    constant folded in, fails there."""
    largest = max(total_buffer_bytes(spec, s) for s in sets)
    fallback = drawn if drawn is not None else sets[int(stream(seed, 4, {}, "emulated values").integers(len(sets)))]
    placed = []
    for value_case in spec.value_cases():
        where = spec.value_case_sizes(value_case) if value_case.at else None
        if where is None or not _fits(spec, where) or total_buffer_bytes(spec, where) > largest:
            where = fallback
        placed.append((where, value_case.name))
    return placed


def emulation_gate(spec: Spec, ptx: str, seeds: tuple[int, ...], *, budget_s: float = BUDGET_S) -> Gate:
    """The ``emulation`` gate: the candidate over :func:`emulated_size_sets` x ``seeds`` in the
    emulator, and, under the first seed, over a size set drawn for this check
    (:func:`drawn_emulated_sizes`) and the spec's value cases (:func:`emulated_value_cases`); the
    drawn case also under a seeded random order of the warps (an ordering race fails it).
    Failed at the first wrong case; ``not run`` where the emulator lacks an instruction (or the
    spec has no Python reference); cases past the time budget are left out and named, the drawn
    and value cases never (a kernel cannot spend the budget to escape them). Passed, its details
    list every case that ran, one line each."""
    ref = spec.reference
    if ref is None or ref.callable is None:
        return Gate("emulation", Status.NOT_RUN, "emulation compares with the spec's Python reference; this spec has none")
    sets = emulated_size_sets(spec)
    if not sets:
        return Gate("emulation", Status.NOT_RUN, "no size set of the sweep fits the candidate's launch")
    drawn = drawn_emulated_sizes(spec, sets, seeds[0])
    fixed = [(sizes, seed, "") for sizes in sets for seed in seeds]
    always = ([(drawn, seeds[0], "")] if drawn is not None else []) + [
        (sizes, seeds[0], name) for sizes, name in emulated_value_cases(spec, sets, drawn, seeds[0])]
    start = time.perf_counter()
    results: list[CaseResult] = []
    skipped = []
    # One module for every case, as the GPU worker loads the candidate once and runs its cases in
    # it: a kernel that latches state in a module variable at its first launch is seen at the next.
    module = ModuleGlobals()
    for k, (sizes, seed, values) in enumerate([*fixed, *always]):
        if k < len(fixed) and time.perf_counter() - start > budget_s:
            skipped.append(f"{size_label(sizes)} (seed {seed})")
            continue
        case = case_of(spec, ptx, sizes, seed, values)
        where = f"{size_label(sizes)}; seed {seed}" + (f"; values {values}" if values else "") + (
            ", a size set drawn for this check" if sizes is drawn else "")
        # The drawn case runs under a second, seeded random order of the warps too: results that
        # differ between the two are an ordering race (a missing barrier or wait), which the
        # lockstep order alone hides. Not where an output may differ run to run (atomics).
        orders = ({"schedule": ("minpc", f"random:{seed}")}
                  if sizes is drawn and not values and all(p.deterministic for p in spec.outputs) else {})
        found = module_image(module)
        try:
            judged = _judge(case, run_emulated(case, module=module, **orders), seed)
        except Exception as err:  # the emulator's or the reference's fault, not the kernel's
            return Gate("emulation", Status.ERROR, f"at {where}: {type(err).__name__}: {err}")
        if judged.status == Status.PASSED and k > 0 and (moved := state_moved(found, module)):
            judged = replace(judged, status=Status.FAILED, reason=f"the launch {moved_reason(moved)}")
        if judged.status != Status.PASSED:
            wrong = [format_comparison(c) for c in judged.outputs if not c.passed]
            return Gate("emulation", judged.status, f"at {where}: {judged.reason}",
                        (*wrong, *map(_equivalent_case, results)))
        results.append(judged)
    shapes = "; ".join(dict.fromkeys(("drawn for this check: " if c.sizes == drawn else "") + _label(spec, c.sizes)
                                     for c in results))
    if value_cases := list(dict.fromkeys(c.values for c in results if c.values)):
        shapes += f"; values {', '.join(value_cases)}"
    left_out = [f"not emulated (past the {budget_s:.0f} s budget): {', '.join(skipped)}"] if skipped else []
    if drawn is None:  # a spec without a sweep, or that opts out of unannounced sizes
        left_out.append("no size set drawn for this check: only the sizes the spec lists were emulated")
    return Gate("emulation", Status.PASSED, f"equivalent in emulation ({len(results)} cases, shapes {shapes})",
                (*map(_equivalent_case, results), *left_out))


def module_image(module: ModuleGlobals) -> dict[str, bytes]:
    """The bytes of each module variable: every one of them after the module's first launch, which
    lays out all the module's variables (``emu.calls.link``), none before it."""
    return {name: kept.data.tobytes() for name, kept in module.buffers.items()}


def state_moved(found: dict[str, bytes], module: ModuleGlobals) -> list[str]:
    """The module variables a launch left other than it found them (``found``: :func:`module_image`
    before it). Why the gate holds every launch after the first to none: emulation checks a few
    launches, each on fresh buffers, and a program makes many. A kernel that leaves its module's
    variables as it found them starts every later launch from the state a checked one started
    from, so what was checked holds for them by induction; one that counts its launches, or keys
    a cache on its arguments, can break at the launch after the last one checked, whatever that
    number is (the attack kernels ``first_launches`` and ``trap_after_n`` did, at the third). The
    first launch may set a variable for good (a one-time table, a "ready" flag): every later one
    then starts from that state, and is checked from it."""
    now = module_image(module)
    return [name for name, image in now.items() if found.get(name, image) != image]


def _equivalent_case(case: CaseResult) -> str:
    """One emulated case that matched the reference, as the gate's details list it (and so the run
    record and PORT_REPORT.md): its sizes, seed and, per output, the largest difference and the
    relative L2 error (a large value may differ by much and still be within the spec's rtol)."""
    errors = "; ".join(f"{o.name}: max abs err {o.max_abs_err:.3g}, rel L2 {o.rel_l2:.3g}" for o in case.outputs)
    values = f"; values {case.values}" if case.values else ""
    return f"[{size_label(case.sizes)}; seed {case.seed}{values}] equivalent ({errors})"
