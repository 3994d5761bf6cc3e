"""The user's Python is imported once, and whole, however many threads ask for it at once (a
pool's checks and the worker's input thread call reference and derive functions side by side)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from porter.gate.usercode import load_callable


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
