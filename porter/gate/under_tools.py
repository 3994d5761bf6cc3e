"""The gates of launches outside the worker, under a tool: native (ncu: did the target's own
instructions do the work?) and sanitize (compute-sanitizer); each launch held to the verified outputs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from porter.gate.native import judge_native
from porter.gate.plan import Case, CaseKey, smallest_size_set, total_buffer_bytes
from porter.gate.runner.client import DeviceInfo
from porter.gate.spec import DEFAULT_NATIVE_SHARE, Spec
from porter.gate.verdict import (
    Gate,
    NativeEvidence,
    SanitizerFinding,
    SanitizerReport,
    Status,
    size_label,
)
from porter.ptx.arch import cubin_runs_on, get_profile
from porter.ptx.toolchain import Toolchain


def largest_checked(spec: Spec, plan: list[Case], seed: int) -> dict[str, int] | None:
    """The plan's size set that moves the most bytes among its cases at ``seed`` with the spec's
    own fills: the inputs a tool's launch makes, so that its outputs can be held to the verified
    ones (the large case, or a larger timed one). None for an empty plan."""
    held = [c.sizes for c in plan if c.seed == seed and not c.values]
    return max(held, key=lambda sizes: total_buffer_bytes(spec, sizes), default=None)


@dataclass(frozen=True)
class ToolLaunch:
    """What a launch under a tool (ncu, compute-sanitizer) left: its outputs' digests (none when it
    did not complete, and then its own error, where it printed one)."""

    digests: tuple[int, ...]
    sizes: dict[str, int]
    error: str = ""


def profile_native(spec: Spec, cubin: bytes, entry: str, target: str, signature: dict[str, int], device: DeviceInfo,
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


def launch_differs(what: str, left: ToolLaunch, seed: int, verified: dict[CaseKey, list[int]]) -> str:
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


def not_held(what: str, left: ToolLaunch, seed: int, verified: dict[CaseKey, list[int]]) -> str:
    """Why a launch under a tool was not held to verified outputs: no checked launch ran at its
    case (the cases stopped at a fault before it, which fails the equivalence gate)."""
    if verified.get(Case(left.sizes, seed).key()):
        return ""
    return (f"{what} at {size_label(left.sizes)} was not held to verified outputs: no checked launch ran "
            "there (the cases stopped before it)")


def native_gate(evidence: NativeEvidence, differs: str = "", note: str = "") -> Gate:
    details = tuple(f"{name} = {value:g}" for name, value in evidence.metrics.items()) + ((note,) if note else ())
    if differs:
        return Gate("native", Status.FAILED, differs, (f"{evidence.state}: {evidence.summary}", *details))
    status = {"executed": Status.PASSED, "not measured": Status.NOT_RUN}.get(evidence.state, Status.FAILED)
    return Gate("native", status, f"{evidence.state}: {evidence.summary}", details)


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


def sanitize_candidate(spec: Spec, cubin: bytes, entry: str, toolchain: Toolchain, launch: dict[str, Any] | None,
              seed: int, device: int = 0, largest: dict[str, int] | None = None) -> tuple[SanitizerReport, ...]:
    """The sanitizers' runs (:func:`sanitizer_runs`), ``largest`` the largest checked size set."""
    from porter.gate.nsight import LaunchJob, run_sanitizer

    sass = toolchain.disassemble(cubin) if toolchain.can_disassemble else None
    reports = []
    for tool, sizes, timeout_s in sanitizer_runs(smallest_size_set(spec), spec.middle_sizes(), largest):
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


def sanitize_gate(reports: tuple[SanitizerReport, ...], differs: list[str] | None = None,
                   notes: list[str] | None = None) -> Gate:
    ran = [r for r in reports if r.ran]
    if not ran:
        return Gate("sanitize", Status.NOT_RUN, reports[0].reason if reports else "no sanitizer tools")
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
        return Gate("sanitize", Status.FAILED, differs[0], tuple(differs[1:] + details))
    if dirty:
        return Gate("sanitize", Status.FAILED, ", ".join(f"{r.tool} at {size_label(r.sizes)}: {r.errors} errors" for r in dirty),
                    tuple(details))
    return Gate("sanitize", Status.PASSED, "clean: " + ", ".join(f"{r.tool} ({size_label(r.sizes)})" for r in ran), tuple(details))


