"""A launch after a module's first must leave its variables as it found them (state.state_moves):
the GPU worker's own code (``jobs.job_case``, ``jobs.job_repeat``) on the fake device of
tests/fake_cupy.py, with a real cubin's variables and kernels that count their launches in them,
or set one for good, or leave them alone. (The real device runs the attack kernels in
test_attacks_gpu.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fake_cupy
import numpy as np
import pytest
from fake_cupy import at

from porter.gate.runner.jobs import job_case, job_repeat
from porter.gate.runner.protocol import CaseJob, Contender, Reference, RepeatJob
from porter.gate.runner.state import WorkerState

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add" / "porter.toml"
COUNTING_PTX = ROOT / "tests" / "data" / "attacks" / "va_trap_after_many.ptx"  # declares g_count


def _body(update: str) -> Any:
    """vector_add, right at every launch; ``update`` says what it does to g_count's first word:
    ``count`` (one more a launch), ``once`` (1, set by the first launch for good) or ``none``."""

    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        at(out, count, np.float32)[:] = np.float32(alpha) * at(x, count, np.float32) + at(y, count, np.float32)
        word = fake_cupy.GLOBALS["g_count"][:4].view(np.uint32)
        if update == "count":
            word[0] += 1
        elif update == "once":
            word[0] = 1

    return body


@pytest.fixture(scope="module")
def cubin(toolchain) -> bytes:
    return toolchain.assemble(COUNTING_PTX.read_text(), "sm_90").cubin


def _state(update: str) -> WorkerState:
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS["vector_add"] = _body(update)
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    return state


def _case(state: WorkerState, cubin: bytes, seed: int, first: bool = False) -> Any:
    reply = job_case(state, CaseJob(cubin=cubin, entry="vector_add", spec_path=str(VECTOR_ADD), sizes={"n": 1000},
                                    seed=seed, first=first, reference=Reference(
                                        "python", path=str(VECTOR_ADD.parent / "ref.py"), function="vector_add")))
    state.drop_case_launch()
    return reply


@pytest.mark.parametrize(("update", "moved"), [("count", ["g_count"]), ("once", []), ("none", [])])
def test_a_case_names_a_variable_its_launches_moved_after_the_modules_first(cubin: bytes, update: str,
                                                                          moved: list[str]) -> None:
    state = _state(update)
    try:
        # the check's first case: its first run is the module's first launch, which may set a
        # variable; its second and third runs (other initial states) may not move it
        assert _case(state, cubin, 1, first=True).moved == moved
        assert _case(state, cubin, 2).moved == moved  # and no later case
    finally:
        state.close()


def test_a_counter_that_runs_across_checks_is_caught_at_each_first_case(cubin: bytes) -> None:
    """A check's first case restores the module as loaded (so checks are reproducible): a counter
    is caught again at every check's first case, by the runs after the module's first launch."""
    state = _state("count")
    try:
        for _ in range(2):
            assert _case(state, cubin, 3, first=True).moved == ["g_count"]
    finally:
        state.close()


@pytest.mark.parametrize(("update", "moved"), [("count", ["g_count (moved by launch 2)"]), ("once", []), ("none", [])])
def test_launches_in_a_row_name_the_first_launch_that_moved_a_variable(cubin: bytes, update: str,
                                                                        moved: list[str]) -> None:
    state = _state(update)
    try:
        reply = job_repeat(state, RepeatJob(spec_path=str(VECTOR_ADD), sizes={"n": 256}, seed=4, launches=8,
                                            candidate=Contender("candidate", "kernel", cubin=cubin,
                                                                entry="vector_add")))
        assert reply.moved == moved and len(reply.digests) == 8 and len(set(reply.digests)) == 1
    finally:
        state.close()
