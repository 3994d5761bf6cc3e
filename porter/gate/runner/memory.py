"""Device memory a launch uses: buffers laid out as :mod:`porter.gate.layout` places them, between
random guard bytes, and random contents made on the GPU; and the scrubbed pool a judgement
allocates from (:func:`scrubbed`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from porter.gate.layout import Placement

SCRUB = 0x3C  # what a buffer holds once freed: nothing a later kernel could take for a result


class DeviceBuffer:
    """A device allocation laid out as ``placement`` says (see :mod:`porter.gate.layout`):
    ``[lead | data | tail]``, the lead and tail holding a random pattern (new for every buffer, so
    a kernel cannot write "the canary" back) that is compared after each launch.

    A ``fenced`` allocation sits in its own reservation of unmapped address space
    (``porter.gate.runner.isolated``): an access beyond the mapped pages faults at any distance.
    With ``read_only`` too, the kernel gets ``kernel_ptr``, a mapping through which it can only read.
    A ``plain`` one comes from CuPy's pool, near porter's other buffers.
    """

    def __init__(self, cp: Any, nbytes: int, placement: Placement, random: Callable[[Any, int], None],
                 keys: tuple[int, int], *, read_only: bool = False) -> None:
        """``random(view, key)`` fills a device view with the random bytes of ``key`` (porter's own
        kernel, ``WorkerState.fill_random``); ``keys`` are the guard bands' (before, past the end):
        a band's pattern is made again from its key where it is compared byte by byte."""
        self.cp = cp
        self.nbytes = nbytes
        self.lead = placement.lead
        self._fence = None
        total = placement.size(nbytes)
        if placement.family == "fenced":
            from porter.gate.runner.isolated import IsolatedAllocation

            self._fence = IsolatedAllocation(total, cp.cuda.Device().id)
            memory = cp.cuda.UnownedMemory(self._fence.ptr, self._fence.size, self._fence)
            self.raw = cp.ndarray((self._fence.size,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))
        else:
            self.raw = cp.empty(total, dtype=cp.uint8)
        self.data = self.raw[self.lead : self.lead + nbytes]
        # What the kernel is handed: for an input, a read-only mapping of the same memory.
        self.kernel_ptr = (self._fence.read_only_alias() + self.lead if self._fence is not None and read_only
                           else self.ptr)
        self._random, self._keys = random, keys
        self.fill_guards()

    @property
    def ptr(self) -> int:
        return int(self.raw.data.ptr) + self.lead

    def fill_guards(self) -> None:
        for band, key in zip(self._bands(), self._keys, strict=True):
            if band.size:
                self._random(band, key)

    def _bands(self) -> tuple[Any, Any]:
        return self.raw[: self.lead], self.raw[self.lead + self.nbytes :]

    def _pattern(self, which: int) -> Any:
        """Guard band ``which``'s pattern (0 before the start, 1 past the end), made again."""
        pattern = self.cp.empty(self._bands()[which].size, dtype=self.cp.uint8)
        self._random(pattern, self._keys[which])
        return pattern

    def upload(self, host: np.ndarray) -> None:
        if self.nbytes:
            self.data.set(np.ascontiguousarray(host).reshape(-1).view(np.uint8))

    def copy_from(self, device_bytes: Any) -> None:
        if self.nbytes:
            self.data[...] = device_bytes

    def download(self) -> np.ndarray:
        """The data, as host bytes."""
        return cast(np.ndarray, self.data.get())  # a CuPy array's copy on the host

    def guard_bands(self) -> list[Any]:
        """The guard bands that have bytes (before the start, past the end), as device views: what
        :meth:`Launch.integrity` digests once they are written and after every launch."""
        return [band for band in self._bands() if band.size]

    def guard_violation(self, name: str) -> str:
        """Writes into the guard bytes, described, or '' when they are intact (compared on the GPU)."""
        problems = []
        before, after = self._bands()
        if before.size:
            bad = self.cp.flatnonzero(before != self._pattern(0))
            if bad.size:
                problems.append(f"{int(bad.size)} bytes written before its start (nearest {self.lead - int(bad[-1])} bytes before)")
        if after.size:
            bad = self.cp.flatnonzero(after != self._pattern(1))
            if bad.size:
                problems.append(f"{int(bad.size)} bytes written past its end (first at byte +{int(bad[0])} after the last element)")
        return f"{name}: " + "; ".join(problems) if problems else ""

    @property
    def fenced(self) -> bool:
        return self._fence is not None

    def scrub(self) -> None:
        """Overwrite every byte (queued: see :func:`scrub_and_free`)."""
        self.raw.fill(SCRUB)

    def unmap(self) -> None:
        """Give a fenced allocation's memory back, once the device is done with it."""
        if self._fence is not None:
            self.data = self.raw = None
            self._fence.free()
            self._fence = None


def scrub_and_free(cp: Any, buffers: list[DeviceBuffer]) -> None:
    """Scrub every buffer, then, after one wait for the device (where some are fenced: their
    memory is unmapped, which must not happen under a running kernel), give the fenced ones back."""
    for buf in buffers:
        buf.scrub()
    if any(buf.fenced for buf in buffers):
        cp.cuda.Device().synchronize()
        for buf in buffers:
            buf.unmap()


# (mantissa bits, exponent bits) of the IEEE-like float types: an all-ones exponent is inf or NaN.
_FLOAT_FIELDS = {"f64": (52, 11), "f32": (23, 8), "f16": (10, 5), "bf16": (7, 8), "e5m2": (2, 5)}


def initial_contents(cp: Any, dtype: Any, nbytes: int, initial: str, seed: int) -> Any:
    """``nbytes`` of an output buffer as the initial state ``initial`` (one of
    :data:`porter.gate.runner.protocol.INITIAL_STATES`) leaves it: ``dtype``'s NaN poison, zeros,
    or random finite values drawn from ``seed`` (:func:`random_finite`); CuPy or NumPy as ``cp``."""
    if initial == "poison":
        view = cp.empty(nbytes, dtype=cp.uint8)
        view.view({1: cp.uint8, 2: cp.uint16, 4: cp.uint32, 8: cp.uint64}[dtype.itemsize]).fill(dtype.poison_bits)
        return view
    if initial == "zeros":
        return cp.zeros(nbytes, dtype=cp.uint8)
    return random_finite(cp, dtype, nbytes, seed)


def random_finite(cp: Any, dtype: Any, nbytes: int, seed: int) -> Any:
    """``nbytes`` of random finite values of ``dtype``, made on the GPU: random bit patterns (every
    magnitude from subnormal to the largest finite), with the few that would be inf or NaN moved to
    the next exponent down. An output's initial contents that no kernel can tell from a result."""
    raw = cp.random.RandomState(seed).randint(0, 256, size=nbytes, dtype=np.uint8)
    if not dtype.is_float or nbytes % dtype.itemsize:
        return raw
    words = raw.view({1: cp.uint8, 2: cp.uint16, 4: cp.uint32, 8: cp.uint64}[dtype.itemsize])
    if dtype.name == "e4m3":  # only S.1111.111 is NaN in e4m3fn
        words ^= ((words & words.dtype.type(0x7F)) == words.dtype.type(0x7F)).astype(words.dtype)
        return raw
    mantissa, exponent = _FLOAT_FIELDS[dtype.name]
    ones = words.dtype.type((1 << exponent) - 1)
    special = ((words >> words.dtype.type(mantissa)) & ones) == ones
    words ^= special.astype(words.dtype) << words.dtype.type(mantissa)
    return raw


# The scrubbed pool keeps up to this many bytes between judgements (at most a 64th of the device's
# memory, so that a small GPU's launches keep theirs), all of them zeroed: a judgement then
# allocates without the driver (cudaMalloc and cudaFree, which waits for the device, for each of
# its blocks, every run of every case). What it holds past this goes back to the driver.
KEEP_BYTES = 2 << 30
_POOLS: dict[int, tuple[Any, Any, int]] = {}  # id(cp) -> (cp, its scrubbed pool, bytes kept): cp held, so the id stays its own


def _scrubbed_pool(cp: Any) -> tuple[Any, int]:
    held = _POOLS.get(id(cp))
    if held is None or held[0] is not cp:
        if len(_POOLS) > 8:  # array modules come and go only in tests
            _POOLS.clear()
        keep = min(KEEP_BYTES, int(cp.cuda.runtime.memGetInfo()[1]) // 64)
        held = _POOLS[id(cp)] = (cp, cp.cuda.MemoryPool(), keep)
    return held[1], held[2]


@contextmanager
def scrubbed(cp: Any) -> Iterator[None]:
    """Every device allocation CuPy makes in the block comes from a pool of porter's own, never
    the one the launches' buffers come from; at the end every byte the pool handed out is zeroed
    (arrays still alive keep theirs until they are dropped, zeroed already). The pool keeps its
    memory for the next block, zeroed, up to ``KEEP_BYTES`` (less on a small GPU), and hands the
    rest back to the driver.
    A kernel that reaches that memory between judgements finds zeros, and whatever it writes there
    is overwritten before it is read: a judgement only reads arrays it has written. The block
    must leave no array it made in use."""
    pool, keep = _scrubbed_pool(cp)
    # Each address the pool handed out, with the most bytes handed there: a judgement's hundreds of
    # temporaries reuse a few blocks, and each is zeroed once (on the H200, 2026-12-05, a memset per
    # allocation was 6500 of them a GEMM check).
    handed: dict[int, int] = {}

    def allocate(nbytes: int) -> Any:
        memory = pool.malloc(nbytes)
        ptr = int(memory.ptr)
        handed[ptr] = max(nbytes, handed.get(ptr, 0))
        return memory

    try:
        with cp.cuda.using_allocator(allocate):
            yield
    finally:
        # Queued behind the judgement's kernels on the stream every launch takes, so the zeroing
        # completes before any later kernel starts, without the host waiting for it (a wait on a
        # shared GPU costs another process's time slice); freeing memory waits for the device.
        stream = cp.cuda.get_current_stream().ptr
        for ptr, nbytes in handed.items():
            cp.cuda.runtime.memsetAsync(ptr, 0, nbytes, stream)
        if pool.total_bytes() > keep:
            pool.free_all_blocks()
