"""Test doubles for ports that end in a pass on a CPU: a GPU on which only one kernel is right.

:class:`OnlyGoodCubins` is the ScriptedRunner of test_gate_defenses (it "runs" vector_add by
computing the right answer) with one change: a cubin that is not one of ``good`` gets outputs off
by one, so the gate fails it on equivalence. With :func:`scripted_vector_add` (a wrong reply, then
a right one that assembles to another cubin than the retarget's), a scripted port of vector_add to
sm_90 fails its baseline and its first reply and passes with its second: a passing port, end to
end through the real session and gate, without a GPU.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_gate_defenses import ScriptedRunner

from porter.gate.runner.protocol import CaseJob, CaseReply, Job, Reply
from porter.ptx import retarget

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
_FMA = "fma.rn.f32 \t%f4, %f2, %f1, %f3;"


def _sm90(text: str) -> str:
    return retarget(text, "sm_90", min_version="7.8")


def wrong_kernel() -> str:
    """alpha * x + x: assembles, wrong everywhere."""
    return _sm90((VECTOR_ADD / "kernel.ptx").read_text()).replace(_FMA, "fma.rn.f32 \t%f4, %f2, %f1, %f2;")


def fixed_kernel() -> str:
    """alpha * x + y as a multiply and an add: another cubin than the retarget's single FFMA."""
    text = _sm90((VECTOR_ADD / "kernel.ptx").read_text())
    assert _FMA in text
    return text.replace(".reg .f32 \t%f<5>;", ".reg .f32 \t%f<6>;").replace(
        _FMA, "mul.rn.f32 \t%f5, %f2, %f1;\n\tadd.rn.f32 \t%f4, %f5, %f3;")


def scripted_vector_add(path: Path, *, replies: tuple[str, ...] | None = None) -> Path:
    """A scripted-replies file: the wrong kernel, then the fixed one (whole kernels in ptx blocks)."""
    texts = replies if replies is not None else (wrong_kernel(), fixed_kernel())
    body = 'label = "scripted test session (not a model): vector_add to sm_90"\n'
    for text in texts:
        body += f"\n[[reply]]\ntext = '''\nThe port:\n\n```ptx\n{text}```\n'''\n"
    path.write_text(body)
    return path


def vector_add_copy(folder: Path) -> Path:
    """vector_add's kernel, spec and reference in ``folder``, the spec's sizes made small (the double
    computes every case on the CPU); the kernel's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("kernel.ptx", "ref.py"):
        shutil.copyfile(VECTOR_ADD / name, folder / name)
    spec = (VECTOR_ADD / "porter.toml").read_text()
    for big, small in (("n = 16777216", "n = 8192"), ("n = 1048576", "n = 2048"), ("n = 12582919", "n = 5003")):
        assert big in spec
        spec = spec.replace(big, small)
    (folder / "porter.toml").write_text(spec)
    return folder / "kernel.ptx"


def good_cubins(toolchain: Any) -> set[bytes]:
    result = toolchain.assemble(fixed_kernel(), "sm_90")
    assert result.ok and result.cubin
    return {result.cubin}


class OnlyGoodCubins(ScriptedRunner):
    """A GPU (an H200, as ScriptedRunner says) on which only the kernels in ``good`` are right."""

    def __init__(self, good: set[bytes]) -> None:
        super().__init__()
        self.good = good
        self.info = None
        self.restarts = 0

    def start(self):  # type: ignore[override]
        self.info = super().start()
        return self.info

    def call(self, job: Job, timeout_s: float) -> Reply:
        reply = super().call(job, timeout_s)
        if isinstance(job, CaseJob) and isinstance(reply, CaseReply) and job.cubin not in self.good:
            reply = replace(reply, outputs=[{"out": o["out"] + 1} for o in reply.outputs if o is not None])
        return reply
