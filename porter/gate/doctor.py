"""``porter doctor``: what this machine can do for porter, and how to install what is missing.

GPU facts come from ``nvidia-smi`` (driver, name, compute capability) and CuPy (runtime); both are
optional. Without a GPU porter still assembles and inspects every target: the runtime gates then
say ``not run``. The toolchain's notes (:func:`porter.ptx.selection.choose`) say which of several
CUDA releases porter uses and why, and, on one line, a ptxas whose cubins this driver cannot load.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, replace
from importlib import metadata

from porter.install import install_hint
from porter.ptx.toolchain import Tool, Toolchain, find_copies, find_toolchain


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "9.0"
    driver: str  # "580.159.04"

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


@dataclass(frozen=True)
class Check:
    name: str
    found: bool
    detail: str  # path and version, or why not
    hint: str = ""  # how to install, when not found
    essential: bool = False


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    gpus: tuple[Gpu, ...]
    gpu_note: str
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.found for c in self.checks if c.essential)


def detect_gpus(timeout_s: float = 20.0) -> tuple[tuple[Gpu, ...], str]:
    """The machine's NVIDIA GPUs via nvidia-smi, and a note saying why there are none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return (), "no GPU: nvidia-smi not found (runtime gates will report `not run`)"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return (), f"no GPU: nvidia-smi failed ({err})"
    if out.returncode != 0:
        first = (out.stderr or out.stdout).strip().splitlines()[:1]
        return (), f"no GPU: nvidia-smi says {first[0] if first else 'nothing'}"
    gpus = []
    for row in out.stdout.strip().splitlines():
        parts = [p.strip() for p in row.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3]))
    return tuple(gpus), "" if gpus else "no GPU listed by nvidia-smi"


def _tool_check(name: str, tool: Tool | None, essential: bool) -> Check:
    if tool is None:
        return Check(name, False, "not found", install_hint(name), essential)
    return Check(name, True, f"{tool.path} ({tool.version}, via {tool.source})", essential=essential)


def _package_check(dist: str, name: str) -> Check:
    try:
        return Check(name, True, f"{dist} {metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        return Check(name, False, "not installed", install_hint(name))


def _cupy_check() -> Check:
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            return Check("cupy", True, f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return Check("cupy", False, "not installed", install_hint("cupy"))


def _which_check(name: str) -> Check:
    from porter.gate.nsight import find_tool

    found = find_tool(name)  # the same search the gate uses, so doctor and check agree
    return Check(name, True, str(found)) if found else Check(name, False, "not found", install_hint(name))


def diagnose() -> DoctorReport:
    toolchain = find_toolchain()
    gpus, note = detect_gpus()
    ptxas = _tool_check("ptxas", toolchain.ptxas, essential=True)
    if ptxas.found and (isa := toolchain.isa()) is not None:
        ptxas = replace(ptxas, detail=f"{ptxas.detail}; PTX ISA up to {isa.max_ptx}")
    checks = (
        ptxas,
        _tool_check("nvdisasm", toolchain.nvdisasm, essential=False),
        _tool_check("cuobjdump", toolchain.cuobjdump, essential=False),
        _cupy_check(),
        _which_check("ncu"),
        _which_check("compute-sanitizer"),
        _package_check("litellm", "litellm"),
    )
    return DoctorReport(checks=checks, gpus=gpus, gpu_note=note, notes=toolchain_notes(toolchain))


def toolchain_notes(toolchain: Toolchain) -> tuple[str, ...]:
    """What porter chose among the toolchains here, and what it could not make consistent."""
    notes: list[str] = []
    chosen = toolchain.ptxas
    if toolchain.driver and chosen is not None and toolchain.driver_problem(toolchain.driver) is None:
        notes.append(f"the GPU driver runs CUDA {toolchain.driver}, and loads the cubins of ptxas {chosen.version}")
    notes += toolchain.notes
    others = [t for t in find_copies("ptxas") if chosen is None or t.path != chosen.path]
    if others:
        listed = ", ".join(f"{t.version} ({t.source}, {t.path})" for t in others)
        why = f"; porter uses ptxas {chosen.version} ({chosen.source}): {toolchain.why}" if chosen and toolchain.why else ""
        notes.append(f"other ptxas here: {listed}{why}; --toolchain DIR or PORTER_CUDA_HOME picks one")
    return tuple(notes)
