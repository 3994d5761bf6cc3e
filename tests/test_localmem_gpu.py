"""Local memory on a real GPU: a thread's frame keeps what a launch wrote for the next launch in
its slot, and porter's scrub before each launch leaves nothing of it, at every frame size, mark
depth and launch shape; a kernel that would be off by one where it finds an earlier launch's mark
passes porter's whole check. (The worker's wiring on the fake device: tests/test_localmem.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from porter.gate.check import CheckOptions, run_check
from porter.gate.spec import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
MARKING = ROOT / "tests" / "data" / "localmem" / "va_local_mark.ptx"

COUNTER = r"""
// counts its launches at word `at` of a WORDS-word frame (volatile, indexed at run time: local memory)
extern "C" __global__ void counter(unsigned int* most, unsigned int at) {
    volatile unsigned int frame[WORDS];
    unsigned int count = frame[at] == 0xC0FFEE01u ? frame[at + 1] + 1u : 1u;
    frame[at] = 0xC0FFEE01u;
    frame[at + 1] = count;
    atomicMax(most, count);
}
"""


def _most(counter, grid: int, block: int, at: int, launches: int, scrub=None) -> int:
    import cupy as cp

    most = cp.zeros(1, dtype=cp.uint32)
    for _ in range(launches):
        if scrub is not None:
            scrub()
        counter((grid,), (block,), (most, np.uint32(at)))
    cp.cuda.Device().synchronize()
    return int(most[0])


@pytest.mark.parametrize("words", [64, 256, 4096])  # 256 B, the 1 KB default window, 16 KB (grows it)
def test_no_launch_after_porters_scrub_finds_what_the_last_left_in_local_memory(words: int, tmp_path: Path) -> None:
    import cupy as cp

    from porter.gate.runner.state import WorkerState

    counter = cp.RawModule(code=COUNTER, options=(f"-DWORDS={words}",)).get_function("counter")
    assert counter.local_size_bytes >= 4 * words
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    state = WorkerState(cp, folder=tmp_path)
    runtime = cp.cuda.runtime
    window = runtime.deviceGetLimit(runtime.cudaLimitStackSize)
    try:
        for grid, block in ((sms * 8, 256), (sms, 1024), (1, 32)):
            for at in (0, words - 2):  # the frame's bottom (the window's, at the largest) and its top
                # the premise: without porter, a slot's count survives from launch to launch
                # (a launch of one warp need not land on the same SM each time: more than 1 is enough)
                assert _most(counter, grid, block, at, 20) > 1, (grid, block, at)
                assert _most(counter, grid, block, at, 20, scrub=state.scrub_kernel_memory) == 1, (grid, block, at)
        state.kernel_memory_held()
    finally:
        state.close()
        runtime.deviceSetLimit(runtime.cudaLimitStackSize, window)  # this process's later scrubs: 1 KB again


def test_a_kernel_off_by_one_where_it_finds_an_earlier_launchs_mark_passes_the_check(runner, toolchain,
                                                                                     tmp_path: Path) -> None:
    import cupy as cp

    # the premise: launched twice in a row by hand, the second launch finds the first's marks
    cubin = tmp_path / "marking.cubin"
    cubin.write_bytes(toolchain.assemble(MARKING.read_text(), f"sm_{cp.cuda.Device().compute_capability}").cubin)
    module = cp.RawModule(path=str(cubin))
    kernel, n = module.get_function("vector_add"), 1 << 16
    x, y = cp.ones(n, dtype=cp.float32), cp.zeros(n, dtype=cp.float32)
    outs = []
    for _ in range(2):
        out = cp.empty(n, dtype=cp.float32)
        kernel(((n + 255) // 256,), (256,), (x, y, out, np.float32(1), np.int32(n)))
        outs.append(out)
    assert bool((outs[0] == 1).all()) and bool((outs[1] == 2).any())
    # porter's check: no launch on other buffers than the last one's (each case's runs, the cases, the timed
    # sets) finds a mark (a launch on the same buffers, which this kernel cannot tell: tests/test_localmem.py)
    verdict = run_check(MARKING, load_spec(VECTOR_ADD / "porter.toml"), CheckOptions(against=VECTOR_ADD / "kernel.ptx"),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason

