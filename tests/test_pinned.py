"""The worker's large host arrays live in page-locked memory (porter.gate.runner.pinned) without
changing a value: inputs drawn into pinned blocks equal NumPy's, a reference gets read-only views of
them (and copies where it writes into its inputs), and PORTER_PINNED=0 turns it off. On the fake
device of tests/fake_cupy.py a pinned block is a bytearray: the GPU tier times the real one."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import fake_cupy
from fake_cupy import at

from porter.gate.inputs import make_args
from porter.gate.runner import pinned
from porter.gate.runner.jobs import job_case
from porter.gate.runner.protocol import CaseJob, Reference
from porter.gate.runner.state import WorkerState
from porter.gate.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
VECTOR_ADD = EXAMPLES / "vector_add" / "porter.toml"


def _pinned(array: np.ndarray) -> bool:
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, bytearray)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**40), n=st.sampled_from([100, 300_000, 1 << 19]))
def test_inputs_drawn_into_pinned_blocks_are_numpys_bit_for_bit(seed: int, n: int) -> None:
    spec = load_spec(VECTOR_ADD)
    plain = make_args(spec, {"n": n}, seed)
    locked = make_args(spec, {"n": n}, seed, empty=pinned.host_empty(fake_cupy))
    for name in ("x", "y"):
        assert locked[name].tobytes() == plain[name].tobytes()
        assert _pinned(locked[name]) == (plain[name].nbytes >= pinned.PINNED_MIN_BYTES)


def test_pinned_memory_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTER_PINNED", "0")
    assert not _pinned(pinned.host_empty(fake_cupy)(1 << 22, np.float32))
    monkeypatch.delenv("PORTER_PINNED")
    assert _pinned(pinned.host_empty(fake_cupy)(1 << 22, np.float32))


def test_where_pinning_fails_the_array_is_pageable(monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(nbytes: int) -> Any:
        raise MemoryError("no page-locked memory left")

    monkeypatch.setattr(fake_cupy.cuda, "alloc_pinned_memory", exhausted)
    count = (37 << 20) // 4  # a size class no other test frees a block of
    array = pinned.host_empty(fake_cupy)(count, np.float32)
    assert array.size == count and not _pinned(array)


def _state() -> WorkerState:
    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        at(out, count, np.float32)[:] = (np.float32(alpha) * at(x, count, np.float32)
                                         + at(y, count, np.float32)).astype(np.float32)

    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS["vector_add"] = body
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    return state


@pytest.mark.parametrize("writes", [False, True])
def test_a_reference_reads_the_kept_inputs_and_cannot_change_them(tmp_path: Path, writes: bool) -> None:
    """A reference gets read-only views of the worker's inputs; one that writes into them is given
    copies instead: either way it computes from the case's inputs, the kept inputs stay as drawn,
    and the reference comes back (page-locked where large) equal to NumPy's."""
    folder = tmp_path / "va"
    shutil.copytree(VECTOR_ADD.parent, folder)
    body = ("    x = args['x'][:n]\n    x *= 2.0\n" if writes else "    x = args['x'][:n]\n")
    (folder / "ref.py").write_text(
        "import numpy as np\n"
        "def vector_add(args, sizes):\n"
        "    n = int(sizes['n'])\n" + body +
        "    return {'out': float(args['alpha']) * x.astype(np.float64) + args['y'][:n].astype(np.float64)}\n")
    n, seed = 1 << 19, 7
    spec = load_spec(folder / "porter.toml")
    drawn = make_args(spec, {"n": n}, seed)
    state = _state()
    try:
        reply = job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(folder / "porter.toml"),
                                        sizes={"n": n}, seed=seed,
                                        reference=Reference("python", key="r", path=str(folder / "ref.py"),
                                                            function="vector_add")))
        kept = state.inputs(spec, {"n": n}, seed)
    finally:
        state.close()
    assert reply.reference is not None
    x = drawn["x"] * np.float32(2.0) if writes else drawn["x"]
    expected = float(drawn["alpha"]) * x.astype(np.float64) + drawn["y"].astype(np.float64)
    assert np.array_equal(reply.reference["out"], expected, equal_nan=True)
    assert kept["x"].tobytes() == drawn["x"].tobytes() and _pinned(kept["x"])
    assert reply.guards == [] and reply.modified == []


def test_live_pinned_arrays_stay_under_the_cap_and_free_their_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PINNED_MAX_BYTES of live pinned arrays an array is pageable; an array's share comes
    back when the array (and every view of it) is gone."""
    monkeypatch.setattr(pinned, "PINNED_MAX_BYTES", pinned.live_bytes() + (3 << 20))
    empty = pinned.host_empty(fake_cupy)
    first, second = empty(1 << 20, np.uint8), empty(2 << 20, np.uint8)
    view = second[10:].reshape(-1, 2)
    assert _pinned(first) and _pinned(second)
    assert not _pinned(empty(1 << 20, np.uint8))  # 4 MiB would pass the cap
    del second
    assert not _pinned(empty(1 << 20, np.uint8))  # its view still holds it
    del view
    assert _pinned(empty(1 << 20, np.uint8))


@settings(max_examples=300, deadline=None)
@given(nbytes=st.integers(1, 1 << 40))
def test_a_size_class_holds_the_request_and_wastes_at_most_an_eighth(nbytes: int) -> None:
    size = pinned.size_class(nbytes)
    assert nbytes <= size <= max(nbytes + nbytes // 8, 4096 * (1 + nbytes // 4096))
    assert pinned.size_class(size) == size and pinned.size_class(nbytes + 1) >= size


def _block(array: np.ndarray) -> Any:
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj


def test_a_freed_block_serves_the_next_array_of_its_class_and_the_kept_ones_are_capped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An array's block outlives it (up to IDLE_MAX_BYTES of kept blocks) and the next request of
    its size class gets it, written over: a check's inputs land where the last check's lay."""
    empty = pinned.host_empty(fake_cupy)
    first = empty(3_000_000, np.uint8)
    first[:] = 7
    block = _block(first)
    del first
    again = empty(2_900_000, np.float32)[:10]  # 11.6 MB: another class
    assert _block(again) is not block
    second = empty(2_990_000, np.uint8)  # the same class as 3 MB
    assert _block(second) is block and second.size == 2_990_000
    monkeypatch.setattr(pinned, "IDLE_MAX_BYTES", pinned.idle_bytes())
    del second
    assert _block(empty(2_990_000, np.uint8)) is not block  # past the cap: not kept


def test_an_upload_keeps_its_host_array_until_its_copy_has_completed() -> None:
    """An upload reads the host array directly and asynchronously: the array (and its pinned block,
    which a later draw would otherwise reuse) stays alive while the copy may still read it, and is
    let go once the copy's event has completed."""
    import gc
    import weakref
    from types import SimpleNamespace

    events: list[SimpleNamespace] = []

    def record() -> SimpleNamespace:
        events.append(SimpleNamespace(done=False))
        return events[-1]

    cp = SimpleNamespace(**{k: getattr(fake_cupy, k) for k in ("empty", "uint8")},
                         cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=0, record=record)))
    host = np.arange(4096, dtype=np.uint8)
    gone = weakref.ref(host)
    device = pinned.upload(cp, host)
    assert np.array_equal(device.get(), np.arange(4096, dtype=np.uint8))
    del host
    gc.collect()
    assert gone() is not None  # its copy has not completed: still held
    events[0].done = True
    pinned.upload(cp, np.zeros(8, np.uint8))  # the next upload lets the completed ones go
    gc.collect()
    assert gone() is None
