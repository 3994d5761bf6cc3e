"""porter with each CUDA release's ptxas this machine has (CUDA 12.9 from the ``dev`` extra's
``nvidia-cuda-nvcc-cu12`` wheel, 13.x from the ``cuda13`` extra, any toolkit on PATH): every example
assembles for its targets, the README's port runs its course, a ``.version`` newer than ptxas takes
is lowered where nothing needs it, and what truly needs a newer PTX ISA is one line naming it.

Each test runs once per release (``tests/toolchains.py``); the release is forced the way a user
would, with ``--toolchain`` (or ``PORTER_CUDA_HOME``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NoGpuRunner
from toolchains import Release, ids, releases

from porter.agent.llm import ReplayModel
from porter.agent.session import PortRequest, PortSession
from porter.gate.check import CheckOptions, run_check
from porter.gate.spec import load_spec
from porter.ptx import read_ptx
from porter.ptx.arch import isa_floor
from porter.ptx.isa import isa_of_release, ptx_key

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data"
TILE = EXAMPLES / "gemm_bt_tile"
VECTOR_ADD = EXAMPLES / "vector_add"
DIRECTIVE = re.compile(r"porter-regen:.*\bptxas=(\S+)")
# Kernels the GPU tier runs (as sources, candidates and attacks): they must assemble with every release.
GPU_TIER_PTX = sorted(p for folder in ("broken", "attacks", "native", "ci") for p in (DATA / folder).glob("*.ptx"))

pytestmark = pytest.mark.skipif(not releases(), reason="no ptxas found: pip install -e '.[cuda13,dev]'")


@pytest.fixture(params=releases(), ids=ids())
def release(request: pytest.FixtureRequest) -> Release:
    return request.param


def porter(release: Release, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "porter", "--toolchain", str(release.home), *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def targets_of(ptx: Path) -> list[str]:
    """The targets an example is assembled for: its source's ``porter-regen: ptxas=`` list, else its .target."""
    source = ptx.with_suffix(".cu")
    found = DIRECTIVE.search(source.read_text(encoding="utf-8")) if source.exists() else None
    return found.group(1).split(",") if found else [read_ptx(ptx).arch]


EXAMPLE_PTX = sorted(EXAMPLES.rglob("*.ptx"))


def test_each_ptxas_says_the_isa_its_release_has(release: Release) -> None:
    isa = release.toolchain().isa()
    assert isa is not None and isa.source == "probed"
    assert isa.max_ptx == isa_of_release(release.version), "the release table disagrees with this ptxas"


@pytest.mark.parametrize("ptx", EXAMPLE_PTX, ids=[str(p.relative_to(EXAMPLES)) for p in EXAMPLE_PTX])
def test_every_example_carries_the_lowest_version_its_instructions_allow(ptx: Path) -> None:
    module = read_ptx(ptx)
    floor = isa_floor(module)
    assert floor is not None and module.version == floor.version, (
        f"{ptx.name}: .version {module.version}, but {floor} is the most it needs: "
        f"python tools/regen_examples.py (or --lower {ptx.relative_to(ROOT)})")


def test_every_example_assembles_for_its_targets(release: Release, tmp_path: Path) -> None:
    toolchain = release.toolchain(tmp_path)
    failures = []
    for ptx in EXAMPLE_PTX:
        for target in targets_of(ptx):
            result = toolchain.assemble(ptx.read_text(encoding="utf-8"), target, filename=ptx.name)
            if not result.ok:
                failures.append(f"{ptx.relative_to(ROOT)} for {target}: {result.errors[0].message}")
    assert not failures, f"ptxas {release.version}: " + "; ".join(failures)


def test_every_gpu_tier_kernel_assembles_for_its_target(release: Release, tmp_path: Path) -> None:
    toolchain = release.toolchain(tmp_path)
    failures = [f"{p.relative_to(ROOT)}: {r.errors[0].message}" for p in GPU_TIER_PTX
                if not (r := toolchain.assemble(p.read_text(encoding="utf-8"), read_ptx(p).arch, filename=p.name)).ok]
    assert not failures, f"ptxas {release.version}: " + "; ".join(failures)


def test_inspect_of_the_sm100a_gemm_says_as_is_and_assembles(release: Release) -> None:
    r = porter(release, "inspect", str(EXAMPLES / "gemm_bf16" / "kernel_sm100a.ptx"), "--arch", "sm_100a")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^sm_100a\s+as-is\s+ok\s", r.stdout, re.M), r.stdout
    assert f"({release.version}, PTX ISA up to" in r.stdout


def test_check_of_vector_add_assembles_and_runs_nothing_here(release: Release) -> None:
    r = porter(release, "check", str(VECTOR_ADD / "kernel.ptx"), "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    verdict = json.loads(r.stdout)
    assert verdict["status"] == "not run"
    assert [g["status"] for g in verdict["gates"] if g["name"] == "assemble"] == ["passed"]
    assert verdict["toolchain"] == f"ptxas {release.version}"


def test_the_readme_port_walks_the_scripted_repair_path(release: Release, tmp_path: Path) -> None:
    request = PortRequest(kernel=TILE / "kernel_sm80.ptx", spec=load_spec(TILE / "porter.toml"), to_arch="sm_90a",
                          runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=release.toolchain(tmp_path / "cache"), runner=NoGpuRunner(),
                         model=ReplayModel(TILE / "scripted_session.toml")).run()
    assembled = [(c.origin, c.verdict.gate("assemble").status) for c in result.candidates]
    assert assembled == [("retarget", "passed"), ("model", "failed"), ("model", "passed")]
    assert "m64n64k8" in result.candidates[1].feedback  # rejected for its shape, not for its .version
    assert result.status == "not run on target hardware"
    assert result.best.verdict.signature_sass["HGMMA"] > 0
    assert result.best.verdict.toolchain == f"ptxas {release.version}"


def _newer_than(release: Release, tmp_path: Path) -> tuple[Path, str]:
    """vector_add with the first .version this ptxas refuses; and the newest it takes."""
    accepted = release.toolchain().isa().max_ptx
    major, minor = ptx_key(accepted)
    folder = tmp_path / "va"
    folder.mkdir()
    for name in ("porter.toml", "ref.py"):
        (folder / name).write_text((VECTOR_ADD / name).read_text())
    text = (VECTOR_ADD / "kernel.ptx").read_text().replace(".version 7.0", f".version {major}.{minor + 1}")
    (folder / "kernel.ptx").write_text(text)
    return folder / "kernel.ptx", accepted


def test_a_version_newer_than_ptxas_is_lowered_by_the_retarget_and_said(release: Release, tmp_path: Path) -> None:
    kernel, accepted = _newer_than(release, tmp_path)
    request = PortRequest(kernel=kernel, spec=load_spec(kernel.parent / "porter.toml"), to_arch="sm_90",
                          runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=release.toolchain(tmp_path / "cache"), runner=NoGpuRunner(),
                         model=None).run()
    (baseline,) = result.candidates
    assert baseline.verdict.gate("assemble").status == "passed"
    assert read_ptx(baseline.path).version == accepted
    assert any(w.startswith(f"the mechanical retarget's .version {read_ptx(kernel).version} lowered to {accepted}: "
                            f"ptxas {release.version} accepts PTX ISA up to {accepted}") for w in result.warnings)


def test_a_candidate_with_a_newer_version_fails_and_is_told_which_to_write(release: Release, tmp_path: Path) -> None:
    kernel, accepted = _newer_than(release, tmp_path)
    verdict = run_check(kernel, load_spec(kernel.parent / "porter.toml"), CheckOptions(),
                        toolchain=release.toolchain(tmp_path / "cache"), runner=NoGpuRunner())
    gate = verdict.gate("assemble")
    assert gate.status == "failed"  # a candidate is judged as written
    assert f"is newer than ptxas {release.version} accepts (PTX ISA up to {accepted}): write .version {accepted}" \
        in gate.summary


CLUSTERS = (".version {version}\n.target sm_90\n.address_size 64\n\n"
            ".visible .entry k(\n\t.param .u64 out\n)\n.blocksareclusters\n.reqntid 32, 1, 1\n.reqnctapercluster 2, 1, 1\n"
            "{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [out];\n\tst.global.u32 [%rd1], 1;\n\tret;\n}\n")


def test_what_truly_needs_ptx_9_0_is_named_with_its_line_and_cuda_13(release: Release, tmp_path: Path) -> None:
    kernel = tmp_path / "clusters.ptx"
    kernel.write_text(CLUSTERS.replace("{version}", "9.0"))
    toolchain = release.toolchain(tmp_path / "cache")
    result = toolchain.assemble(kernel.read_text(), "sm_90", filename=kernel.name)
    r = porter(release, "inspect", str(kernel), "--arch", "sm_90")
    if release.toolchain().isa().accepts("9.0"):
        assert result.ok, result.log
        assert re.search(r"^sm_90\s+as-is\s+ok", r.stdout, re.M), r.stdout
    else:
        assert not result.ok
        assert re.search(r"^sm_90\s+needs newer ptxas", r.stdout, re.M), r.stdout
        assert (f".blocksareclusters on k at line 8 needs PTX ISA 9.0 (CUDA 13.0), but ptxas {release.version} "
                "accepts PTX ISA up to") in r.stdout


def test_porting_to_a_target_this_ptxas_lacks_is_one_line_before_any_work(release: Release, tmp_path: Path) -> None:
    for name in ("kernel.ptx", "porter.toml", "ref.py"):
        (tmp_path / name).write_text((VECTOR_ADD / name).read_text())
    r = porter(release, "port", str(tmp_path / "kernel.ptx"), "--to", "sm_110a", "--no-branch", cwd=tmp_path)
    if release.toolchain().isa().accepts("9.0"):
        assert r.returncode == 3, r.stdout + r.stderr  # the retarget assembles; no Thor GPU here to run it
        assert "NOT RUN ON TARGET HARDWARE" in r.stdout
    else:
        assert r.returncode == 3, r.stdout + r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert ".target sm_110a needs PTX ISA 9.0 (CUDA 13.0)" in line and "porter-kernels[cuda13]" in line
        assert not (tmp_path / ".porter").exists()  # nothing was recorded, nothing spent


ON_THE_GPU = [EXAMPLES / "vector_add" / "kernel.ptx", EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx"]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ON_THE_GPU, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_cubins_of_each_release_pass_the_gate_on_this_gpu(release: Release, kernel: Path, runner,
                                                          tmp_path: Path) -> None:
    """On the H200 (driver CUDA 13.0): with ptxas 12.9 (carried, PORTER_CUDA_HOME) and 13.x alike, the
    plain sm_80 kernel (assembled for the GPU) and the sm_90a TMA + wgmma GEMM pass every gate."""
    toolchain = release.toolchain(tmp_path)
    device = runner.start()
    if read_ptx(kernel).arch.endswith("a") and read_ptx(kernel).arch != device.arch + "a":
        pytest.skip(f"{kernel.name} is for {read_ptx(kernel).arch}; this GPU is {device.arch}")
    assert toolchain.driver_problem(device.driver) is None, toolchain.driver_problem(device.driver)
    verdict = run_check(kernel, load_spec(kernel.parent / "porter.toml"), CheckOptions(), toolchain=toolchain,
                        runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.toolchain == f"ptxas {release.version}"


@pytest.mark.skipif(not os.environ.get("CI"), reason="outside CI: the releases this machine happens to have")
def test_ci_runs_these_tests_with_cuda_12_and_cuda_13() -> None:
    majors = {r.major for r in releases()}
    assert {12, 13} <= majors, f"CI found ptxas of CUDA {sorted(majors)} only: install -e '.[cuda13,dev]'"
