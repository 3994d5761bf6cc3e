"""No launch finds what an earlier launch left in its local memory (porter.gate.runner.localmem):
the worker's own jobs on the fake device of tests/fake_cupy.py, whose thread slots keep what a
kernel wrote, as the hardware does, until porter's scrub writes over them. (The real device:
tests/test_localmem_gpu.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fake_cupy
import numpy as np
import pytest
from fake_cupy import at
from hypothesis import given
from hypothesis import strategies as st

from porter.gate.runner.jobs import job_case, job_repeat, job_time
from porter.gate.runner.localmem import LocalScrub
from porter.gate.runner.protocol import CaseJob, Contender, Reference, RepeatJob, TimeJob
from porter.gate.runner.state import WorkerState

VECTOR_ADD = Path(__file__).resolve().parent.parent / "examples" / "vector_add" / "porter.toml"
MARK = b"porter-test-mark"


def _counting(seen: list[int]) -> Any:
    """vector_add, right at every launch, that counts its launches at the bottom of slot 0's window
    (the word farthest from its frame's top) and notes each count in ``seen``."""

    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        at(out, count, np.float32)[:] = np.float32(alpha) * at(x, count, np.float32) + at(y, count, np.float32)
        window = fake_cupy.local_window(0)
        found = int.from_bytes(window[16:20], "little") if window[:16] == MARK else 0
        window[:20] = MARK + (found + 1).to_bytes(4, "little")
        seen.append(found + 1)

    return body


@pytest.fixture
def device() -> Any:
    fake_cupy.LOCAL.clear()
    yield fake_cupy
    fake_cupy.LOCAL.clear()
    fake_cupy.LIMITS["stack"] = 1024
    fake_cupy.SHARED_GPU["on"] = False


def _state(seen: list[int]) -> WorkerState:
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS["vector_add"] = _counting(seen)
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    return state


def test_the_fake_device_keeps_local_memory_between_launches(device: Any) -> None:
    """Without porter between them, the second launch finds the first's count: the tests below can fail."""
    seen: list[int] = []
    body, n = _counting(seen), 16
    x, y, out = (np.zeros(n, np.float32) for _ in range(3))
    for _ in range(2):
        body((1,), (16,), x.ctypes.data, y.ctypes.data, out.ctypes.data, np.float32(1), np.int32(n))
    assert seen == [1, 2]


@pytest.mark.parametrize("window", [1024, 16384])  # the default stack limit, and one a large frame grew
def test_no_checked_repeated_or_timed_launch_finds_an_earlier_launchs_local_memory(device: Any, window: int) -> None:
    fake_cupy.LIMITS["stack"] = window
    seen: list[int] = []
    state = _state(seen)
    candidate = Contender("candidate", "kernel", cubin=b"fake", entry="vector_add")
    try:
        for seed in (1, 2):
            job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(VECTOR_ADD), sizes={"n": 1000},
                                    seed=seed, first=seed == 1, reference=Reference(
                                        "python", path=str(VECTOR_ADD.parent / "ref.py"), function="vector_add")))
        job_repeat(state, RepeatJob(spec_path=str(VECTOR_ADD), sizes={"n": 256}, seed=4, launches=8, candidate=candidate))
        job_time(state, TimeJob(spec_path=str(VECTOR_ADD), sizes={"n": 1000}, seeds=(1, 2), contenders=(candidate,),
                                budget_s=0.0, min_reps=4))
        state.kernel_memory_held()
    finally:
        state.drop_case_launch()
        state.close()
    assert len(seen) >= 2 * 3 + 8 + 4 and set(seen) == {1}


def test_a_scrub_that_could_not_hold_the_gpu_is_porters_failure_once(device: Any) -> None:
    state = _state([])
    try:
        fake_cupy.SHARED_GPU["on"] = True
        state.scrub_kernel_memory()
        with pytest.raises(RuntimeError, match=r"could not hold every SM at once .*porter's failure, not the kernel's"):
            state.kernel_memory_held()
        fake_cupy.SHARED_GPU["on"] = False
        state.scrub_kernel_memory()
        state.kernel_memory_held()  # counted once: a later job on a GPU of its own is not blamed
    finally:
        state.close()


@given(st.lists(st.integers(0, 1 << 19), min_size=1, max_size=6))
def test_each_scrub_covers_its_window_and_is_made_once_a_size(windows: list[int]) -> None:
    scrub = LocalScrub(fake_cupy, sms=4, threads_per_sm=2048)
    made = {window: scrub.kernel(window) for window in windows}
    for window, fn in made.items():
        assert fn.local_size_bytes >= window and scrub.kernel(window) is fn


def test_an_sm_the_scrub_cannot_fill_in_whole_blocks_is_refused() -> None:
    with pytest.raises(RuntimeError, match="1000 threads"):
        LocalScrub(fake_cupy, sms=4, threads_per_sm=1000)
