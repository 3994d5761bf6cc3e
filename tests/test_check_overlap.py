"""The timing run overlaps the last judgements of a check (a simulated GPU, porter.gate.runner.fake),
and counts only when every case passed."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from conftest import candidates

import porter.gate.equivalence as equivalence
from porter.gate.check import CheckOptions, run_check
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec
from porter.gate.verdict import Status


def _slow_last_judgement(monkeypatch, seconds: float, *, wrong: bool = False) -> list[float]:
    """Makes the judgement of the timed case (one of the plan's last) take ``seconds`` more; returns
    the list that gets the moment it ended (monotonic). ``wrong``: that case is judged failed, as
    a kernel wrong only at its timed size would be."""
    judge, ended = equivalence.judge_case, []

    def slow(spec, case, reply):
        result = judge(spec, case, reply)
        if case.why == "timed":
            time.sleep(seconds)
            ended.append(time.monotonic())
            if wrong:
                result = replace(result, status=Status.FAILED, reason="C: 1 of 4096 elements wrong")
        return result

    monkeypatch.setattr(equivalence, "judge_case", slow)
    return ended


def test_the_timing_run_starts_before_the_last_judgement_ends(toolchain, tmp_path: Path, monkeypatch) -> None:
    path = candidates(tmp_path, 1)[0]
    spec = load_spec(tmp_path / "porter.toml")
    ended = _slow_last_judgement(monkeypatch, 0.5)
    gpu = FakeGpu(time_s=0.3)
    verdict = run_check(path, spec, CheckOptions(seeds=(3, 4)), toolchain=toolchain,
                        runner=gpu.runner())
    assert verdict.status == "passed", verdict.reason
    assert [g.name for g in verdict.gates][-1] == "timing" and verdict.timings
    timed = next(e for e in gpu.log if e[0] == "time")
    assert ended and timed[1] < ended[0]  # the GPU was timing while the CPU still compared


def test_a_case_found_wrong_after_timing_began_leaves_no_timing_in_the_verdict(toolchain, tmp_path: Path,
                                                                             monkeypatch) -> None:
    path = candidates(tmp_path, 1)[0]
    spec = load_spec(tmp_path / "porter.toml")
    ended = _slow_last_judgement(monkeypatch, 0.5, wrong=True)
    gpu = FakeGpu(time_s=0.1)
    verdict = run_check(path, spec, CheckOptions(seeds=(3, 4)), toolchain=toolchain, runner=gpu.runner())
    timed = next(e for e in gpu.log if e[0] == "time")
    assert timed[1] < ended[0]  # timing had begun when the wrong case was judged
    assert verdict.status == "failed" and "1 of 4096 elements wrong" in verdict.reason
    assert "timing" not in [g.name for g in verdict.gates] and not verdict.timings
    assert verdict.speedup_vs_source is None
