"""Pre-flight for ``porter port``: what can be known about the source kernel and its spec before
anything is spent (no model call, no GPU, no run record).

- the source assembles: for ``--from`` when its ``.target`` can be assembled there, else for its
  own ``.target``. A ptxas error in the source is the source's fault, reported as such (exit 2),
  not left for the model to "repair" or blamed on whatever the session did next; a ``.version``
  newer than the ptxas in use takes is lowered first where nothing needs it;
- the ptxas in use accepts the PTX ISA the port needs on the target (a module or target that
  needs PTX 9.0 with ptxas 12.9 is one line naming what needs it and CUDA 13.0, exit 3);
- ``--from`` agrees with the PTX's ``.target`` (a contradiction, ``--from sm_80`` for a
  ``.target sm_90a`` kernel, is a warning: the flag decides the source profile, the PTX what runs);
- the spec matches the source as the source says it runs (:func:`porter.gate.source.check_spec_matches`,
  which ``porter check`` shares).

Each problem is an :class:`~porter.errors.InputError` naming the file and, where there is one, the
line. Pure apart from ptxas; nothing here imports the gate's runtime.
"""

from __future__ import annotations

from pathlib import Path

from porter.errors import EnvironmentProblem
from porter.gate.source import check_source_assembles, check_spec_matches
from porter.gate.spec import Spec
from porter.ptx import PtxModule
from porter.ptx.arch import can_compile, negotiate_version, normalize_arch
from porter.ptx.toolchain import Toolchain


def source_arch_warning(module: PtxModule, from_arch: str | None) -> str | None:
    """A warning when ``--from`` contradicts the PTX's ``.target``, else None."""
    if from_arch is None:
        return None
    asked = normalize_arch(from_arch)
    if asked == module.arch:
        return None
    ok, _ = can_compile(module.arch, asked)
    if ok:
        return None  # plain PTX for an older target runs on the newer one: --from says where it runs today
    return (f"--from {asked} contradicts the kernel's .target {module.arch}: porter ports from the {asked} profile, "
            f"but the kernel is assembled as written, for {module.arch}")


def check_target_isa(module: PtxModule, target: str, toolchain: Toolchain, path: Path) -> None:
    """The ptxas in use can assemble the port's target: EnvironmentProblem naming what needs a newer
    PTX ISA there (the target itself, or an instruction of the source) and the CUDA release that has it."""
    problem = negotiate_version(module, target, toolchain.isa()).problem
    if problem:
        raise EnvironmentProblem(f"{path}: cannot port to {target} with this ptxas: {problem}")


def preflight(module: PtxModule, spec: Spec, path: Path, from_arch: str | None, toolchain: Toolchain,
              target: str | None = None) -> list[str]:
    """Every check above, in order; returns the warnings, raises InputError (EnvironmentProblem for
    a ptxas too old for the PTX ISA needed) on the first problem."""
    warnings = [w for w in (source_arch_warning(module, from_arch),) if w]
    check_spec_matches(spec, module, path)
    check_source_assembles(module, from_arch, toolchain, path)
    if target is not None:
        check_target_isa(module, target, toolchain, path)
    return warnings
