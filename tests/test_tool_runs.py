"""Nothing done twice per candidate (#32): one ptxas run per candidate text and target, one
disassembly per cubin, through a whole port and through repeated checks of one candidate.

The real ptxas and nvdisasm run behind wrappers (``PORTER_CUDA_HOME`` names the wrappers' folder)
that log the digest of each file they are given, so the counts are those of real tool runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import example_repo, plain_git

from porter.ptx.toolchain import find_toolchain

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_bf16"

_plain_git = pytest.fixture(autouse=True)(plain_git)

_WRAPPER = """#!/bin/sh
for a in "$@"; do
  case "$a" in *.ptx|*.cubin) [ -f "$a" ] && echo "{name} $(sha256sum "$a" | cut -c1-16)" >> "$PORTER_TOOL_LOG";; esac
done
exec {real} "$@"
"""


@pytest.fixture
def counted(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ptxas, nvdisasm and cuobjdump log each file they run on, and the log."""
    toolchain = find_toolchain()
    if toolchain.ptxas is None or not toolchain.can_disassemble:
        pytest.skip("needs ptxas and a disassembler (pip install -e '.[cuda13]')")
    home = tmp_path / "home" / "bin"
    home.mkdir(parents=True)
    for tool in (toolchain.ptxas, toolchain.nvdisasm, toolchain.cuobjdump):
        if tool is not None:
            (home / tool.name).write_text(_WRAPPER.format(name=tool.name, real=tool.path))
            (home / tool.name).chmod(0o755)
    log = tmp_path / "tools.log"
    env = {**os.environ, "PORTER_CUDA_HOME": str(home.parent), "PORTER_TOOL_LOG": str(log),
           "PORTER_CACHE_DIR": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return env, log


def _runs(log: Path) -> Counter[tuple[str, str]]:
    """(tool, digest of its input) -> how many times it ran on that input."""
    return Counter(tuple(line.split()[:2]) for line in log.read_text().splitlines())  # type: ignore[misc]


def test_a_port_assembles_each_candidate_once_and_disassembles_each_cubin_once(
        tmp_path: Path, counted: tuple[dict[str, str], Path]) -> None:
    env, log = counted
    repo = example_repo(tmp_path / "repo", GEMM, ("kernel_sm90a.ptx", "porter.toml", "ref.py"), "gemm")
    r = subprocess.run([sys.executable, "-m", "porter", "port", "gemm/kernel_sm90a.ptx", "--to", "sm_100a",
                        "--model", f"replay:{GEMM / 'scripted_session_sm100a.toml'}", "--branch-on-failure"],
                       capture_output=True, text=True, cwd=repo, env=env, timeout=300)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    runs = _runs(log)
    ptxas = {k: n for k, n in runs.items() if k[0] == "ptxas"}
    sass = {k: n for k, n in runs.items() if k[0] != "ptxas"}
    # Four candidates (and the source), each text assembled once; the two that assemble, disassembled once.
    assert len(ptxas) >= 4 and set(ptxas.values()) == {1}, runs
    assert len(sass) == 2 and set(sass.values()) == {1}, runs


def test_checking_one_candidate_again_runs_no_tool_again(tmp_path: Path,
                                                         counted: tuple[dict[str, str], Path]) -> None:
    env, log = counted
    kernel = tmp_path / "kernel_sm100a.ptx"
    kernel.write_text((GEMM / "kernel_sm100a.ptx").read_text())
    script = ("import sys\n"
              "from pathlib import Path\n"
              "from porter.gate.check import CheckOptions, run_check\n"
              "from porter.gate.spec import load_spec\n"
              "from porter.ptx.toolchain import find_toolchain\n"
              "spec, toolchain = load_spec(Path(sys.argv[1])), find_toolchain()\n"
              "for _ in range(3):\n"
              "    v = run_check(Path(sys.argv[2]), spec, CheckOptions(emulate=False), toolchain=toolchain, runner=None)\n"
              "    print(v.status, sorted(v.signature_sass.items()))\n")
    r = subprocess.run([sys.executable, "-c", script, str(GEMM / "porter.toml"), str(kernel)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1 and "('UTCHMMA', 0)" not in lines[0], lines
    runs = _runs(log)  # the candidate assembled once (and ptxas asked once which PTX ISA it takes)
    assert set(runs.values()) == {1} and sum(tool != "ptxas" for tool, _ in runs) == 1, runs


def test_one_text_asked_of_ptxas_by_two_threads_at_once_is_assembled_once(
        counted: tuple[dict[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate assembled ahead (porter.gate.check.prepare) while its own check asks for it."""
    from concurrent.futures import ThreadPoolExecutor

    env, log = counted
    monkeypatch.setenv("PORTER_TOOL_LOG", str(log))
    toolchain = find_toolchain(env)
    text = (GEMM / "kernel_sm90a.ptx").read_text()
    with ThreadPoolExecutor(4) as threads:
        results = list(threads.map(lambda _: toolchain.assemble(text, "sm_90a", filename="k.ptx"), range(4)))
    assert all(r.ok and r.cubin == results[0].cubin for r in results)
    assert [n for (tool, _), n in _runs(log).items() if tool == "ptxas"] == [1], _runs(log)
