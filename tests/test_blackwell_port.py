"""The scripted sm_90a -> sm_100a port of examples/gemm_bf16 on a machine without a Blackwell GPU
(#30): real ptxas, porter's PTX emulator, a temporary git repository, the shipped scripted session.

The port must end "equivalent in emulation, not run on target hardware" (exit 3), having told the
model that its second reply is wrong in emulation, and its PORT_REPORT.md must list the emulated
cases and say that nothing ran on Blackwell hardware. The loop must not end at a candidate that is
equivalent in emulation without the target's own tensor-core instructions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NoGpuRunner, example_repo, git, plain_git

from porter.agent.replay import ReplayModel
from porter.agent.session import PortRequest, PortSession
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_bf16"
SCRIPT = GEMM / "scripted_session_sm100a.toml"
BRANCH = "porter/gemm_bf16_sm90a-sm_100a"

_plain_git = pytest.fixture(autouse=True)(plain_git)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository holding the Hopper GEMM, its spec and reference (the port's source)."""
    return example_repo(tmp_path / "repo", GEMM, ("kernel_sm90a.ptx", "porter.toml", "ref.py"), "gemm")


def test_the_scripted_blackwell_port_ends_equivalent_in_emulation_not_run_on_hardware(repo: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    r = subprocess.run([sys.executable, "-m", "porter", "port", "gemm/kernel_sm90a.ptx", "--to", "sm_100a",
                        "--model", f"replay:{SCRIPT}", "--branch-on-failure"], capture_output=True, text=True,
                       cwd=repo, env=env, timeout=300)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    first = r.stdout.splitlines()[0]
    assert first.startswith("porter port: EQUIVALENT IN EMULATION, NOT RUN ON TARGET HARDWARE - candidate 3 "), first
    assert "with UTCHMMA" in first and "equivalent in emulation (8 cases, shapes M=1, N=8, K=8;" in first
    assert "; drawn for this check: M=" in first  # beside the sizes a kernel can read in the spec

    (run,) = [p for p in (repo / ".porter" / "runs").iterdir() if p.is_dir()]
    outcome = json.loads((run / "result.json").read_text())
    assert outcome["status"] == "not run on target hardware" and outcome["equivalent"] == "yes (emulated)"
    statuses = [json.loads((run / "candidates" / f"{i:02d}.json").read_text())["verdict"]["status"] for i in range(4)]
    assert statuses == ["failed", "failed", "failed", "not run"]
    # Reply 1 (kind::bf16) is ptxas' to reject; the model heard the line.
    assert "kind::bf16" in (run / "messages" / "004-user.md").read_text()
    # Reply 2 assembles with UTCHMMA but reads B as K-major: the emulator's finding is the next prompt.
    after_reply_2 = (run / "messages" / "006-user.md").read_text()
    # (how many of C's 8 elements are wrong depends on the fresh seed's inputs: a few may be judged out)
    assert "emulation" in after_reply_2 and "at M=1, N=8, K=8" in after_reply_2
    assert re.search(r"C: [1-8] of [1-8] elements wrong", after_reply_2), after_reply_2
    # Reply 3 makes the shipped kernel, byte for byte.
    assert (run / "candidates" / "03.ptx").read_text() == (GEMM / "kernel_sm100a.ptx").read_text()

    report = git(repo, "show", f"{BRANCH}:gemm/PORT_REPORT.md")
    assert report.startswith("# Port of `gemm_bf16_sm100a` to sm_100a: equivalent in emulation, not run on "
                             "target hardware\n")
    assert "The equivalence evidence is **emulated**" in report
    assert "Nothing ran on sm_100a (Blackwell) hardware." in report
    cases = [line for line in report.splitlines() if line.startswith("- [M=") and "] equivalent (C: " in line]
    assert len(cases) == 8, report
    assert "GPU and driver: none: no kernel ran" in report
    title = git(repo, "log", "-1", "--format=%s", BRANCH)
    assert title == ("porter: NOT VERIFIED port of gemm_bf16_sm100a to sm_100a "
                     "(equivalent in emulation, not run on target hardware)")


def test_equivalent_in_emulation_without_the_targets_instructions_does_not_end_the_port(tmp_path: Path,
                                                                                         toolchain) -> None:
    """The mechanical retarget of the mma.sync GEMM to sm_100a assembles and is right in emulation,
    but has no UTCHMMA: failed, and the model is asked for a tcgen05 kernel (here, junk replies)."""
    script = tmp_path / "junk.toml"
    script.write_text('label = "scripted junk (not a model)"\n' + '[[reply]]\ntext = "no kernel here"\n' * 3)
    model = ReplayModel(script)
    request = PortRequest(kernel=GEMM / "kernel_sm80.ptx", spec=load_spec(GEMM), to_arch="sm_100a",
                          runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=toolchain, runner=NoGpuRunner(), model=model).run()
    (baseline,) = result.candidates
    assert baseline.verdict.gate("emulation").status == "passed"
    assert baseline.verdict.signature_sass and not any(baseline.verdict.signature_sass.values())
    assert baseline.status == "failed" and result.status == "failed"
    assert result.spend.rounds == 3 and len(model.received) == 3  # the model was asked, every round
    assert "gave no candidate" in result.stop_reason and "cannot run on this machine" not in result.stop_reason
