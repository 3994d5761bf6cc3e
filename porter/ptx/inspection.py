"""``porter inspect``: what a PTX module is, and where it can go.

For each architecture: the static compatibility verdict (as is / mechanical retarget / not at all,
with offending lines), and where ptxas can assemble it, the resource usage and which of the
architecture's signature tensor-core instructions appear in the SASS.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from porter.ptx import PtxModule, read_ptx
from porter.ptx.arch import (
    ArchProfile,
    Compatibility,
    FeatureUse,
    compatibility,
    features_used,
    load_profiles,
)
from porter.ptx.assembly import Diagnostic, EntryResources
from porter.ptx.retarget import retarget
from porter.ptx.toolchain import AssembleResult, Toolchain, find_toolchain


@dataclass(frozen=True)
class SignatureEvidence:
    """Which of an architecture's signature SASS opcodes a cubin contains, and how often."""

    expected: tuple[str, ...]
    found: dict[str, int]


@dataclass(frozen=True)
class ArchInspection:
    arch: str
    compatibility: Compatibility
    assembled: bool | None  # None: not attempted (incompatible, or --no-assemble)
    retargeted: bool
    command: str
    resources: dict[str, EntryResources]
    diagnostics: tuple[Diagnostic, ...]
    signature: SignatureEvidence | None

    # What can be said for this arch: the static verdict ("as-is", "retarget", "incompatible", or
    # "needs newer ptxas" when the ptxas in use is too old for the PTX ISA the module needs there),
    # unless ptxas contradicts it ("ptxas error"): a module ptxas rejects never "assembles as is".
    verdict: str = ""
    reason: str = ""


@dataclass(frozen=True)
class InspectReport:
    path: Path
    module: PtxModule
    features: tuple[FeatureUse, ...]
    archs: tuple[ArchInspection, ...]
    ptxas: str | None  # "path (version)" of the ptxas used, None when nothing was assembled

    @property
    def rejected_everywhere(self) -> bool:
        """ptxas was asked for at least one architecture and rejected the module for every one:
        the kernel goes nowhere as written (``porter inspect`` exits 1)."""
        tried = [a for a in self.archs if a.assembled is not None]
        return bool(tried) and not any(a.assembled for a in tried)


TENSOR_CORE_FEATURES = ("mma.sync", "wgmma", "tcgen05")


def uses_tensor_cores(module: PtxModule) -> bool:
    """Whether the module does tensor-core work at all: only then can the target's own tensor-core
    instructions be asked of it (a vector add or a softmax has none to execute)."""
    return any(u.feature.startswith(TENSOR_CORE_FEATURES) for u in features_used(module.instructions()))


def signature_evidence(result: AssembleResult, profile: ArchProfile, toolchain: Toolchain) -> SignatureEvidence:
    """Disassemble a successful assembly and count the profile's signature SASS opcodes."""
    assert result.cubin is not None
    histogram = toolchain.disassemble(result.cubin).bases()
    return SignatureEvidence(
        expected=profile.signature_sass,
        found={op: histogram.get(op, 0) for op in profile.signature_sass},
    )


def assemble_for(module: PtxModule, compat: Compatibility) -> tuple[str, bool]:
    """The text to hand ptxas for this verdict: the module itself, or its mechanical retarget (which
    may lower a ``.version`` the ptxas in use does not take)."""
    if compat.status == "retarget":
        return retarget(module.text, compat.new_target or compat.arch, version=compat.new_version), True
    return module.text, False


def inspect_arch(
    module: PtxModule, profile: ArchProfile, toolchain: Toolchain | None, filename: str
) -> ArchInspection:
    compat = compatibility(module, profile.name, toolchain.isa() if toolchain is not None else None)
    if compat.status in ("incompatible", "needs newer ptxas") or toolchain is None:
        return ArchInspection(profile.name, compat, None, False, "", {}, (), None, compat.status, compat.reason)
    text, retargeted = assemble_for(module, compat)
    result = toolchain.assemble(text, profile.name, filename=filename)
    signature = signature_evidence(result, profile, toolchain) if result.ok and toolchain.can_disassemble else None
    verdict: str = compat.status
    reason = compat.reason
    if not result.ok:
        first = result.errors[0] if result.errors else None
        where = f"line {first.line}: " if first is not None and first.line else ""
        said = f"{where}{first.message}" if first is not None else "no message"
        verdict = "ptxas error"
        reason = f"ptxas rejects it{' after the retarget' if retargeted else ''} for {profile.name} ({said})"
        compat = replace(compat, reason=reason)  # the static "assembles as is" would contradict ptxas
    return ArchInspection(
        arch=profile.name,
        compatibility=compat,
        assembled=result.ok,
        retargeted=retargeted,
        command=result.command_line,
        resources=dict(result.resources),
        diagnostics=tuple(result.diagnostics),
        signature=signature,
        verdict=verdict,
        reason=reason,
    )


def inspect_file(path: Path, *, archs: list[str] | None = None, assemble: bool = True) -> InspectReport:
    module = read_ptx(path)
    profiles = load_profiles()
    if archs:
        from porter.ptx.arch import get_profile

        chosen = [get_profile(a) for a in archs]
    else:
        chosen = list(profiles.values())
    toolchain = None
    if assemble:
        toolchain = find_toolchain()
        toolchain.require("ptxas")
    with ThreadPoolExecutor(max_workers=4) as pool:
        inspections = tuple(pool.map(lambda p: inspect_arch(module, p, toolchain, path.name), chosen))
    ptxas = toolchain.ptxas if toolchain else None
    isa = toolchain.isa() if toolchain else None
    return InspectReport(
        path=path,
        module=module,
        features=tuple(features_used(module.instructions())),
        archs=inspections,
        ptxas=f"{ptxas.path} ({ptxas.version}{f', PTX ISA up to {isa.max_ptx}' if isa else ''})" if ptxas else None,
    )
