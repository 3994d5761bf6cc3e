"""The user's Python is imported once, and whole, however many threads ask for it at once (a
pool's checks and the worker's input thread call reference and derive functions side by side)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import fake_cupy

from porter.gate.usercode import load_callable, on_host


def test_threads_asking_for_a_slow_files_function_at_once_all_get_it(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("import time\n"
                   "time.sleep(0.3)  # a file that takes a while to run (imports numpy, builds tables)\n"
                   "RUNS = globals().get('RUNS', 0) + 1\n"
                   "def reference(args, sizes):\n"
                   "    return RUNS\n")
    with ThreadPoolExecutor(4) as threads:
        found = list(threads.map(lambda _: load_callable(str(ref), "reference"), range(4)))
    assert len({id(fn) for fn in found}) == 1 and found[0]({}, {}) == 1


def test_a_device_array_a_reference_returns_comes_to_the_host_whatever_its_get_takes() -> None:
    """``on_host``: NumPy as it is; a device array (``__cuda_array_interface__``) copied down, into
    the given allocator's array where its ``get`` takes ``out``, by a plain ``get`` where not."""
    class OnlyGet:  # a device array whose get takes no out
        shape, size, dtype = (2, 3), 6, np.dtype(np.float64)

        @property
        def __cuda_array_interface__(self) -> dict[str, object]:
            return {}

        def get(self) -> np.ndarray:
            return np.arange(6.0).reshape(2, 3)

    made: list[np.ndarray] = []

    def empty(count: int, dtype: object) -> np.ndarray:
        made.append(np.empty(count, dtype))  # type: ignore[call-overload]
        return made[-1]

    assert np.array_equal(on_host(np.ones(3)), np.ones(3))
    got = on_host(OnlyGet(), empty)
    assert np.array_equal(got, np.arange(6.0).reshape(2, 3)) and made
    device = fake_cupy.asarray(np.arange(8, dtype=np.float32))
    landed = on_host(device, empty)
    assert type(landed) is np.ndarray and np.array_equal(landed, np.arange(8, dtype=np.float32))
    assert landed.base is made[-1]  # copied into the allocator's array
