"""What a source kernel must satisfy before anything is judged against it: it assembles for its own
target, and its spec describes it as it runs (its own ``// porter-launch:`` line applied): the entry
exists, the params agree (count, widths, kinds), the block agrees with the entry's ``.reqntid``
(exactly) and ``.maxntid`` (at most) for every size set, and the dynamic shared memory is not less
than the kernel declares (an ``.extern .shared`` array needs some, and a compiler's metadata beside
the kernel, Triton's ``<name>.json`` with ``"shared"``, says how much).

``porter port`` runs these on its source before spending anything (:mod:`porter.agent.preflight`),
``porter check`` on an ``--against`` kernel and, for the block, on every candidate; ``porter spec``
refuses to describe a kernel ptxas rejects. Each problem is an :class:`~porter.errors.InputError`
naming the file and, where there is one, the line.

One finding is a warning in the Verdict rather than a problem (:func:`unread_scalars`): a spec
scalar the kernel never reads, which it cannot honour. One is a problem of candidates only
(:func:`environment_problems`): reading a register that tells one launch from another, or using
the device heap, which outlives a launch.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from porter.errors import EnvironmentProblem, InputError
from porter.gate.expr import free_symbols
from porter.gate.spec import ParamSpec, Spec, check_against_module, declared_spec
from porter.gate.verdict import size_label
from porter.ptx import PtxModule
from porter.ptx.arch import can_compile, normalize_arch
from porter.ptx.dataflow import dynamic_shared_use
from porter.ptx.model import Entry
from porter.ptx.retarget import fit_to_ptxas
from porter.ptx.toolchain import Toolchain
from porter.ptx.triton_meta import read_triton_metadata


def check_source_assembles(module: PtxModule, from_arch: str | None, toolchain: Toolchain, path: Path) -> str:
    """Assemble the source; returns the architecture it was assembled for, raises InputError on a ptxas error.

    A ``.version`` newer than the ptxas in use accepts is lowered first where nothing needs it
    (:func:`porter.ptx.retarget.fit_to_ptxas`); a source that needs a newer PTX ISA than ptxas has is
    EnvironmentProblem, naming what needs it and the CUDA release that brings it."""
    arch = module.arch
    if from_arch is not None and can_compile(module.arch, normalize_arch(from_arch))[0]:
        arch = normalize_arch(from_arch)
    text, lowered = fit_to_ptxas(module, toolchain.isa(), filename=str(path))
    result = toolchain.assemble(text, arch, filename=path.name)
    if not result.ok:
        first = result.errors[0] if result.errors else None
        where = f" line {first.line}:" if first is not None and first.line else ""
        message = first.message if first is not None else (result.log.strip().splitlines() or ["ptxas failed"])[-1]
        if lowered:  # what ptxas refuses may be what the lowered version lacks
            raise EnvironmentProblem(f"{path}: the source kernel does not assemble for {arch} with its .version "
                                     f"lowered for this ptxas (ptxas:{where} {message}; {lowered}); a newer "
                                     "ptxas may take it as written")
        raise InputError(f"{path}: the source kernel does not assemble for {arch} (ptxas:{where} {message}); "
                         f"fix the source first: porter ports a kernel that assembles")
    return arch


def _dims(values: tuple[int, ...]) -> tuple[int, int, int]:
    padded = (*values, 1, 1, 1)[:3]
    return int(padded[0]), int(padded[1]), int(padded[2])


def block_problems(spec: Spec, entry: Entry) -> list[str]:
    """The spec's block against ``.reqntid`` (must equal it) and ``.maxntid`` (must not exceed it), per size set."""
    req, most = entry.directive("reqntid"), entry.directive("maxntid")
    if req is None and most is None:
        return []
    problems: list[str] = []
    for sizes in spec.size_sets():
        block = tuple(spec.launch_dims(sizes).block)
        label = size_label(sizes)
        if req is not None and tuple(block) != _dims(req.values):
            problems.append(f"the spec launches blocks of {block} at {label}, but .entry {entry.name} requires "
                            f".reqntid {_dims(req.values)} (line {req.line})")
        if most is not None and math.prod(block) > math.prod(_dims(most.values)):
            problems.append(f"the spec launches {math.prod(block)} threads a block at {label}, but .entry "
                            f"{entry.name} allows at most .maxntid {_dims(most.values)} = "
                            f"{math.prod(_dims(most.values))} (line {most.line})")
        if problems:
            break  # one size set says it; the others would repeat it
    return problems


def reads_param(entry: Entry, name: str) -> bool:
    """Whether any instruction of ``entry`` names the param ``name``: an ``ld.param`` of it
    (``[alpha]``, ``[alpha+4]``) or its address taken (``mov.u64 %rd1, alpha``). A load whose
    value is then discarded still counts: this sees names, not dataflow."""
    named = re.compile(rf"(?<![\w$%]){re.escape(name)}(?![\w$])")
    return any(named.search(op) for ins in entry.instructions for op in ins.operands)


def _follows_sizes(spec: Spec, param: ParamSpec) -> bool:
    """Whether a scalar's value reads the sizes (``value = "n"``, a stride ``"lda"``)."""
    exprs = [param.value] if param.value is not None else list(param.range or ())
    return any(free_symbols(e) & set(spec.sizes) for e in exprs if e is not None)


def unread_scalars(spec: Spec, module: PtxModule) -> list[str]:
    """A warning for each scalar of the spec that no kernel it is passed to reads: porter draws or
    perturbs it per case, and a kernel that never reads it cannot honour it. A ``const`` scalar is
    compiled in on purpose, and one that follows the sizes may reach the kernel otherwise (the
    grid, a tensor map's strides), where the sweep's and the drawn sizes check it."""
    readers: dict[str, dict[str, bool]] = {}  # scalar -> {entry it is passed to: read there}
    kernels = {e.name: e for e in module.kernels}
    for step in spec.sequence():
        entry = kernels.get(step.entry)
        if entry is None:
            continue
        for name, ptx in zip(step.args, entry.params, strict=False):
            param = spec.param(name)
            if param.kind == "scalar" and not param.const and not _follows_sizes(spec, param):
                readers.setdefault(name, {})
                readers[name][entry.name] = readers[name].get(entry.name, False) or reads_param(entry, ptx.name)
    return [f"scalar {name} is never read by {' or '.join(entries)}: the kernel cannot honour it (folded in as a "
            "constant? a compile-time constant is declared const = true)"
            for name, entries in readers.items() if not any(entries.values())]


def declared_dynamic_shared(path: Path, entry: str) -> int | None:
    """Dynamic shared bytes a compiler's metadata beside the kernel declares: Triton writes
    ``<stem>.json`` with ``"name"`` and ``"shared"`` next to the PTX in its cache. None without one."""
    meta, _ = read_triton_metadata(path, entry)
    return meta.shared if meta is not None else None


def shared_problems(spec: Spec, module: PtxModule, entry: Entry, path: Path) -> list[str]:
    """The spec's dynamic shared memory against what the kernel declares it needs."""
    extern = dynamic_shared_use(module, entry)
    declared = declared_dynamic_shared(path, entry.name)
    for sizes in spec.size_sets():
        shared = spec.launch_dims(sizes).shared
        label = size_label(sizes)
        if declared is not None and shared < declared:
            return [f"the spec gives {shared} bytes of dynamic shared memory at {label}, but "
                    f"{path.with_suffix('.json').name} declares {declared} for {entry.name}"]
        if extern is not None and shared == 0:
            return [f"the kernel declares dynamic shared memory (.extern .shared {extern.what}[] at line {extern.line}), "
                    f"but the spec launches it with none at {label} (set [launch] shared)"]
    return []


def check_spec_matches(spec: Spec, module: PtxModule, path: Path) -> None:
    """The spec describes the source as the source runs; InputError listing the first problems."""
    declared, _ = declared_spec(spec, module.text, source=str(path))
    try:
        entry = module.entry(declared.entry)
    except KeyError:
        names = ", ".join(e.name for e in module.kernels) or "none"
        raise InputError(f"{path}: no .entry {declared.entry!r}, which {spec.path.name} names (entries: {names})") from None
    problems = check_against_module(declared, module)  # every kernel of a hot loop of several
    problems += block_problems(declared, entry)
    problems += shared_problems(declared, module, entry, path)
    if problems:
        more = f" (+{len(problems) - 2} more)" if len(problems) > 2 else ""
        raise InputError(f"{path}: the spec {spec.path} does not match the source kernel: "
                         f"{'; '.join(problems[:2])}{more}")


# Special registers whose value tells one launch from another, or a checked run from a production
# one: clocks and the global timer (when, how long since), the grid's launch id (how many launches
# before this one), the driver's environment registers, the performance counters and the graph
# being executed. Nothing porter checks can make them read the same as in production.
_ENVIRONMENT = re.compile(r"%(clock(?:_hi|64)?|globaltimer(?:_lo|_hi)?|gridid|envreg\d+|pm[0-7](?:_64)?"
                          r"|current_graph_exec)(?![\w$])")


def environment_reads(module: PtxModule) -> dict[str, int]:
    """Each launch-telling special register the module reads (:data:`_ENVIRONMENT`) and the first
    line that reads it."""
    found: dict[str, int] = {}
    for instruction in module.instructions():
        for operand in instruction.operands:
            for match in _ENVIRONMENT.finditer(operand):
                found.setdefault(match.group(0), instruction.line)
    return found


# The device heap's system calls (the PTX ABI's): memory a launch takes from the heap outlives it,
# and nothing of it is restored between launches, as module globals, outputs and shared memory are.
_HEAP = frozenset({"malloc", "free"})


def heap_calls(module: PtxModule) -> dict[str, int]:
    """Each device-heap function the module calls, and its first call's line (ptxas takes a system
    call's address for no call through a register: a call names it)."""
    found: dict[str, int] = {}
    for instruction in module.instructions():
        if instruction.opcode.split(".")[0] == "call":
            for operand in instruction.operands:
                if operand.strip() in _HEAP:
                    found.setdefault(operand.strip(), instruction.line)
    return found


def environment_problems(candidate: PtxModule, source: PtxModule | None) -> list[str]:
    """A candidate may read a clock, the global timer, the launch id, an environment register or a
    performance counter, or use the device heap, only where its source does the same: with one, a
    kernel can be right where porter looks (in the first seconds, the first launches, under a
    profiler) and wrong afterwards, or keep in the heap what an earlier launch computed and skip the
    work in the launches porter times; no check can see either. Without a source (``porter check``
    with no ``--against`` or ``--speed-baseline``), none may be used."""
    reads = set(environment_reads(source)) if source is not None else set()
    source_heap = source is not None and bool(heap_calls(source))  # a source on the heap: its port may be too
    unlike = ", which its source does not" if source is not None else " (and no source kernel is given that does)"
    return [f"line {line}: reads {register}{unlike}: a kernel that reads the clock, the timer, the launch id or the "
            "driver's environment can tell porter's launches from later ones and behave otherwise there, which no "
            "check sees" for register, line in environment_reads(candidate).items() if register not in reads] + [
            f"line {line}: calls {name}{unlike}: memory from the device heap outlives the launch and porter restores "
            "none of it between launches, so a kernel can keep there what an earlier launch computed and skip the "
            "work in later ones (the timed ones), which no check sees" for name, line in heap_calls(candidate).items()
            if not source_heap]

