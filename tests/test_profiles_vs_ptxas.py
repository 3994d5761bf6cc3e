"""The profiles' accept/reject lists, feature PTX minima, signatures and target rules, checked against ptxas.

Every feature has a probe kernel, ``tests/probes/<feature>.ptx``: the smallest valid use of the family, with
its results stored to global memory so that ptxas cannot dead-code-eliminate it. Each probe is assembled for
every profile with ``.target <arch>`` and ``.version max(profile min_ptx, feature min_ptx)``; a feature in
``accepts`` must assemble and one in ``rejects`` must not. ptxas runs are batched per session in a thread
pool (a few hundred runs of ~20 ms each).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from porter.ptx.arch import can_compile, features_used, load_features, load_profiles
from porter.ptx.model import Instruction
from porter.ptx.toolchain import find_copies

PROBES = Path(__file__).resolve().parent / "probes"
# Every PTX ISA version there is, to find the one just below a feature's minimum.
PTX_VERSIONS = [f"7.{n}" for n in range(9)] + [f"8.{n}" for n in range(9)] + ["9.0"]
# Targets for the .target -> -arch rule check: the profiles plus the other ptxas 13 targets of the same families.
EXTRA_TARGETS = ("sm_87", "sm_103", "sm_103f", "sm_110", "sm_110f", "sm_120f", "sm_121", "sm_121a", "sm_121f")


def _find_tool(name: str) -> Path | None:
    """The first copy porter sees (PATH before the pip wheels) of CUDA 13 or newer: the profiles
    record ptxas 13's matrix, which ptxas 12 (no sm_110a) cannot check."""
    for tool in find_copies(name):
        major = tool.version.split(".")[0]
        if major.isdigit() and int(major) >= 13:
            return tool.path
    return None


def _ptxas_problem(ptxas: Path | None) -> str | None:
    """Why this ptxas cannot check the profiles (None if it can)."""
    if ptxas is None:
        return "no ptxas of CUDA 13 or newer found, and the profiles are ptxas 13's matrix (pip install nvidia-cuda-nvcc)"
    return None


PTXAS = _find_tool("ptxas")
NVDISASM = _find_tool("nvdisasm")
_PROBLEM = _ptxas_problem(PTXAS)
needs_ptxas = pytest.mark.skipif(_PROBLEM is not None, reason=str(_PROBLEM))


@dataclass(frozen=True)
class Run:
    ok: bool
    log: str  # what ptxas printed
    sass: str = ""  # nvdisasm -c of the cubin, when asked for


def _with_header(text: str, version: str, target: str) -> str:
    text = re.sub(r"^\.version .*$", f".version {version}", text, count=1, flags=re.MULTILINE)
    return re.sub(r"^\.target .*$", f".target {target}", text, count=1, flags=re.MULTILINE)


def _assemble_all(
    jobs: dict[tuple[str, ...], tuple[str, str]], disassemble: bool = False
) -> dict[tuple[str, ...], Run]:
    """Assemble each job's PTX text for its arch: ``{key: (ptx, arch)}`` -> ``{key: Run}``."""
    assert PTXAS is not None
    with tempfile.TemporaryDirectory(prefix="porter-probes-") as tmp:

        def one(item: tuple[tuple[str, ...], tuple[str, str]]) -> tuple[tuple[str, ...], Run]:
            key, (text, arch) = item
            path = Path(tmp) / ("-".join(key).replace(":", "_") + ".ptx")
            path.write_text(text)
            cmd = [str(PTXAS), f"-arch={arch}", path.name, "-o", path.with_suffix(".cubin").name]
            done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            sass = ""
            if disassemble and done.returncode == 0:
                cubin = path.with_suffix(".cubin").name
                sass = subprocess.run(
                    [str(NVDISASM), "-c", cubin], cwd=tmp, capture_output=True, text=True, check=False
                ).stdout
            return key, Run(ok=done.returncode == 0, log=done.stderr.strip(), sass=sass)

        with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 2)) as pool:
            return dict(pool.map(one, jobs.items()))


def _probe_text(feature: str) -> str:
    return (PROBES / f"{feature}.ptx").read_text()


def _probe_opcodes(feature: str) -> list[str]:
    """The opcodes of the probe's instructions (statements inside the kernel body that are not directives)."""
    body = _probe_text(feature).split("\n{", 1)[1]
    opcodes = []
    for line in body.splitlines():
        match = re.match(r"\s*(?:@!?%?\w+\s+)?([a-z][\w.:]*)\b", line)
        if match and not line.strip().startswith("."):
            opcodes.append(match.group(1))
    return opcodes


def _version(*minima: str | None) -> str:
    return max((m for m in minima if m), key=lambda v: tuple(int(x) for x in v.split(".")))


@pytest.fixture(scope="session")
def matrix() -> dict[tuple[str, ...], Run]:
    """Every (profile, feature) probe assembled at max(profile min_ptx, feature min_ptx)."""
    features = load_features()
    jobs = {
        (arch, name): (_with_header(_probe_text(name), _version(p.min_ptx, f.min_ptx), arch), arch)
        for arch, p in load_profiles().items()
        for name, f in features.items()
    }
    return _assemble_all(jobs)


PAIRS = [(arch, feature) for arch in load_profiles() for feature in load_features()]


@needs_ptxas
@pytest.mark.parametrize(("arch", "feature"), PAIRS, ids=[f"{a}-{f}" for a, f in PAIRS])
def test_profile_matches_ptxas(matrix: dict[tuple[str, ...], Run], arch: str, feature: str) -> None:
    run = matrix[arch, feature]
    if feature in load_profiles()[arch].accepts:
        assert run.ok, f"{arch} lists {feature} in accepts, but ptxas rejects the probe:\n{run.log}"
    else:
        assert not run.ok, f"{arch} lists {feature} in rejects, but ptxas assembles the probe"


def test_every_feature_has_exactly_one_probe_that_exercises_it() -> None:
    features = load_features()
    assert {p.stem for p in PROBES.glob("*.ptx")} == set(features)
    for name in features:
        opcodes = _probe_opcodes(name)
        used = {u.feature for u in features_used(Instruction(line=1, opcode=op) for op in opcodes)}
        assert name in used, f"probe {name}.ptx has no instruction of {name}: {opcodes}"


@needs_ptxas
def test_feature_min_ptx_is_needed() -> None:
    """A declared min_ptx is above some accepting profile's own minimum, and one version less fails there."""
    features, profiles = load_features(), load_profiles()
    jobs = {}
    for name, f in features.items():
        if f.min_ptx is None:
            continue
        below = PTX_VERSIONS[PTX_VERSIONS.index(f.min_ptx) - 1]
        having = [p for p in profiles.values() if name in p.accepts and _version(p.min_ptx, below) == below]
        assert having, f"{name}: min_ptx {f.min_ptx} is not above any accepting profile's own minimum"
        jobs[name,] = (_with_header(_probe_text(name), below, having[0].name), having[0].name)
    for (name,), run in _assemble_all(jobs).items():
        assert not run.ok, f"{name} assembles below its min_ptx {features[name].min_ptx}"


@needs_ptxas
def test_signature_ptx_is_assembled_by_an_accepted_probe(matrix: dict[tuple[str, ...], Run]) -> None:
    for arch, p in load_profiles().items():
        for prefix in p.signature_ptx:
            proving = [
                f
                for f in p.accepts
                if matrix[arch, f].ok and any(op.startswith(prefix) for op in _probe_opcodes(f))
            ]
            assert proving, f"{arch}: no accepted probe with a {prefix} instruction assembles"
        assert matrix[arch, p.tensor_core].ok


@needs_ptxas
@pytest.mark.skipif(NVDISASM is None, reason="nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
def test_tensor_core_probe_produces_signature_sass() -> None:
    profiles, features = load_profiles(), load_features()
    jobs = {
        (arch,): (
            _with_header(
                _probe_text(p.tensor_core), _version(p.min_ptx, features[p.tensor_core].min_ptx), arch
            ),
            arch,
        )
        for arch, p in profiles.items()
    }
    for (arch,), run in _assemble_all(jobs, disassemble=True).items():
        assert run.ok, run.log
        bases = set(re.findall(r"\b([A-Z][A-Z0-9_]+)(?=[.\s])", run.sass))
        assert bases & set(profiles[arch].signature_sass), (
            f"{arch}: none of {profiles[arch].signature_sass} in SASS"
        )


def _targets() -> Iterator[str]:
    yield from load_profiles()
    yield from EXTRA_TARGETS


@needs_ptxas
def test_can_compile_agrees_with_ptxas() -> None:
    """Every .target -> -arch pair: same verdict as ptxas, and on refusal ptxas's own message."""
    targets = list(_targets())
    kernel = (
        ".address_size 64\n.visible .entry k(.param .u64 o)\n"
        "{\n.reg .u64 p;\nld.param.u64 p, [o];\nst.global.u32 [p], 1;\nret;\n}\n"
    )
    jobs = {(src, dst): (f".version 9.0\n.target {src}\n{kernel}", dst) for src in targets for dst in targets}
    for (src, dst), run in _assemble_all(jobs).items():
        ok, why = can_compile(src, dst)
        assert ok == run.ok, (
            f".target {src} -arch={dst}: ptxas {'accepts' if run.ok else 'refuses'}: {run.log}"
        )
        if not ok:
            assert why in run.log
