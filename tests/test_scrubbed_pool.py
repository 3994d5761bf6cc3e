"""memory.scrubbed zeroes every byte a judgement's pool handed out, however the pool reuses its
blocks (a property over allocation sequences, on a fake device: the real one is in the GPU tier)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate.runner.memory import scrubbed

ARENA = 1 << 16


class _Pool:
    """Hands out blocks of one arena, reusing a freed block's address for a request that fits it,
    as CuPy's pool does (and writes the request's bytes, as the judgement's arrays would)."""

    def __init__(self, device: np.ndarray, plan: list[tuple[int, int | None]]) -> None:
        self.device, self.plan, self.next, self.taken, self.freed = device, plan, 0, [], 0

    def malloc(self, nbytes: int) -> Any:
        reuse = self.plan[len(self.taken)][1]
        if reuse is not None and self.taken:
            ptr = self.taken[reuse % len(self.taken)][0]
        else:
            ptr, self.next = self.next, self.next + nbytes
        self.taken.append((ptr, nbytes))
        self.device[ptr:ptr + nbytes] = 0xAB
        return SimpleNamespace(ptr=ptr)

    def free_all_blocks(self) -> None:
        self.freed += 1

    def total_bytes(self) -> int:
        return self.next


STREAM = 0x5EED


def _fake_cupy(device: np.ndarray, plan: list[tuple[int, int | None]]) -> Any:
    pool = _Pool(device, plan)
    current: list[Any] = []

    @contextmanager
    def using_allocator(allocate: Any) -> Iterator[None]:
        current.append(allocate)
        try:
            yield
        finally:
            current.pop()

    def memset_async(ptr: int, value: int, nbytes: int, stream: int) -> None:
        assert stream == STREAM  # queued where the launches are
        device[ptr:ptr + nbytes] = value

    cuda = SimpleNamespace(MemoryPool=lambda: pool, using_allocator=using_allocator,
                           get_current_stream=lambda: SimpleNamespace(ptr=STREAM),
                           runtime=SimpleNamespace(memsetAsync=memset_async, memGetInfo=lambda: (1 << 36, 1 << 36)))
    return SimpleNamespace(cuda=cuda, allocate=lambda n: current[-1](n), pool=pool)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 512), st.one_of(st.none(), st.integers(0, 50))), min_size=1, max_size=40))
def test_every_byte_handed_out_is_zero_when_the_block_ends(plan: list[tuple[int, int | None]]) -> None:
    device = np.zeros(ARENA, np.uint8)
    cp = _fake_cupy(device, plan)
    with scrubbed(cp):
        for nbytes, _ in plan:
            cp.allocate(nbytes)
    assert cp.pool.taken
    for ptr, nbytes in cp.pool.taken:
        assert not device[ptr:ptr + nbytes].any(), (ptr, nbytes)


def test_the_pool_keeps_its_zeroed_memory_for_the_next_judgement_up_to_a_bound(monkeypatch: Any) -> None:
    """Blocks after blocks on one device share one pool (no driver allocation a judgement), each
    block's bytes zeroed at its end; what the pool holds past KEEP_BYTES goes back to the driver."""
    from porter.gate.runner import memory

    device = np.zeros(ARENA, np.uint8)
    cp = _fake_cupy(device, [(64, None)] * 8)
    monkeypatch.setattr(memory, "KEEP_BYTES", 200)
    for blocks in range(1, 5):
        with scrubbed(cp):
            cp.allocate(64)
        assert not device.any()
        assert cp.pool.freed == (1 if 64 * blocks > 200 else 0)  # the fake's pool only grows
    assert memory._scrubbed_pool(cp)[0] is cp.pool
