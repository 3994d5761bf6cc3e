"""Each thread's local memory (its stack frame), overwritten before every launch.

Local memory outlives a launch: the driver backs it with one allocation per context, a window of
``cudaLimitStackSize`` bytes for every thread an SM can hold, and a thread of a later launch that
lands in the same slot finds what the last one left (on an H100, 2026-12-07, a kernel counting its
launches in a 256-byte frame counted 100 of 100). A candidate could keep results there, a GEMM
its output tiles, find them again in a timed launch and be timed copying them, as a cache in a
module variable was before the gate restored those.

The scrub is a kernel whose frame is the whole window, launched so that every thread slot of
every SM is occupied at once: each slot's window is then written through, whatever its layout.
The window is the context's stack limit, read before each scrub: it grows to the largest frame
any kernel launched in the context has needed (and ``cudaDeviceGetLimit`` reports it grown), so
the scrub follows a candidate with a large frame. Its cost is the window times the device's
threads: 1 KB (the default) on an H100's 132 SMs is 277 MB, 0.094 ms a launch.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from porter.gate.runner.mix import MIX_SOURCE

THREADS = 256  # a scrub block
MIN_WORDS = 256  # the smallest frame made (1 KB, the default window): see LocalScrub.kernel

SOURCE = MIX_SOURCE + r"""
// Random words through a frame of PORTER_LOCAL_WORDS words (volatile: each store is made, in
// local memory); PORTER_BLOCKS_PER_SM blocks of PORTER_THREADS fill an SM's thread slots (the
// launch bounds keep the registers within them). Then each block waits until every block of the
// launch has written (``arrived`` reaching ``target``): blocks that all ran at once held every
// slot of every SM, so every slot's window was written. A block that waits longer than
// PORTER_WAIT_NS (the GPU shared with work porter does not own) counts itself in ``missed``.
extern "C" __global__ void __launch_bounds__(PORTER_THREADS, PORTER_BLOCKS_PER_SM)
porter_scrub_local(unsigned long long key, unsigned long long* arrived, unsigned long long target,
                   unsigned int* missed) {
    volatile unsigned int frame[PORTER_LOCAL_WORDS];
    unsigned long long thread = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (unsigned int i = 0; i < PORTER_LOCAL_WORDS; ++i) {
        frame[i] = (unsigned int)porter_mix(key, thread * PORTER_LOCAL_WORDS + i);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(arrived, 1ull);
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        while (*(volatile unsigned long long*)arrived < target) {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            if (now - start > PORTER_WAIT_NS) {
                atomicAdd(missed, 1u);
                break;
            }
            __nanosleep(256);
        }
    }
    __syncthreads();
}
"""
WAIT_NS = 50_000_000  # how long a scrub block waits for the others: far beyond a launch's dispatch


def window_bytes(cp: Any) -> int:
    """The context's local window a thread, in bytes: its stack limit, grown by any frame larger."""
    runtime = cp.cuda.runtime
    return int(runtime.deviceGetLimit(runtime.cudaLimitStackSize))


class LocalScrub:
    """The scrub kernels of one worker's device, one per window size met (each made once), and
    the counters their launches share."""

    def __init__(self, cp: Any, sms: int, threads_per_sm: int) -> None:
        if threads_per_sm % THREADS:
            raise RuntimeError(f"an SM here holds {threads_per_sm} threads, not a multiple of {THREADS}: "
                               "porter's local-memory scrub cannot fill its slots")
        self.cp, self.blocks_per_sm = cp, threads_per_sm // THREADS
        self.blocks = sms * self.blocks_per_sm
        self._kernels: dict[int, Any] = {}  # frame bytes asked for, and those made -> the kernel
        self._arrived = cp.zeros(1, dtype=cp.uint64)  # blocks of every launch so far that have written
        self._missed = cp.zeros(1, dtype=cp.uint32)  # blocks that stopped waiting for the others
        self._launches = 0

    def kernel(self, window: int) -> Any:
        """The scrub for a ``window``-byte window. Its frame may come out larger than asked (the
        compiler's alignment): its launch then grows the window to that frame, which it covers,
        so the kernel is kept under that size too."""
        # at least 1 KB: a volatile array much smaller may be kept in registers, a frame of nothing
        words = max(MIN_WORDS, -(-window // 4))
        if 4 * words not in self._kernels:
            module = self.cp.RawModule(code=SOURCE, options=(
                f"-DPORTER_LOCAL_WORDS={words}u", f"-DPORTER_THREADS={THREADS}",
                f"-DPORTER_BLOCKS_PER_SM={self.blocks_per_sm}", f"-DPORTER_WAIT_NS={WAIT_NS}ull"))
            fn = module.get_function("porter_scrub_local")
            frame = int(fn.local_size_bytes)
            if frame < window:
                raise RuntimeError(f"porter's local-memory scrub has a {frame}-byte frame for a {window}-byte window")
            self._kernels[4 * words] = fn
            self._kernels.setdefault(frame, fn)
        return self._kernels[4 * words]

    def __call__(self) -> None:
        """Overwrite every thread slot's whole window with random words, new for every call
        (queued: :meth:`missed` says whether every launch held the whole GPU)."""
        fn = self.kernel(window_bytes(self.cp))
        key = np.uint64(int.from_bytes(os.urandom(8), "little"))
        self._launches += 1
        fn((self.blocks,), (THREADS,), (key, self._arrived, np.uint64(self._launches * self.blocks), self._missed))

    def missed(self) -> int:
        """Blocks of the scrubs so far that ran without every other block of their launch beside
        them (read from the device, and reset): 0 unless the GPU was shared."""
        count = int(self._missed[0])
        if count:
            self._missed[...] = 0
        return count
