"""``porter`` as a user runs it, on a GPU double: for tests that drive the real command line in a
subprocess (a pseudo-terminal, a real SIGINT) and need a port that can pass on a CPU.

The GPU worker is :class:`port_doubles.OnlyGoodCubins` (vector_add's fixed kernel is the one right
kernel). Environment:

- ``PORTER_TEST_PROMPTS=FILE``: every prompt the scripted model is sent is appended to FILE as a
  JSON line, as it is sent;
- ``PORTER_TEST_SLOW_FROM=N``: the scripted model takes 60 s to give its reply number N (0-based)
  and later ones, so that a test can interrupt the port there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from port_doubles import OnlyGoodCubins, good_cubins

    from porter import services
    from porter.agent import llm
    from porter.cli.app import main as porter_main
    from porter.pool import local
    from porter.ptx.toolchain import find_toolchain

    good = good_cubins(find_toolchain())

    @contextmanager
    def double(gpu: bool = True):
        yield OnlyGoodCubins(good) if gpu else None

    services.gpu_runner = double  # type: ignore[assignment]
    local.default_runner_factory = lambda device: OnlyGoodCubins(good)  # the pool's workers, likewise
    record, slow_from = os.environ.get("PORTER_TEST_PROMPTS"), os.environ.get("PORTER_TEST_SLOW_FROM")
    complete = llm.ReplayModel.complete

    def recorded(self, messages, **kw):  # type: ignore[no-untyped-def]
        if record:
            with open(record, "a") as fh:
                fh.write(json.dumps(messages) + "\n")
        if slow_from is not None and self._next >= int(slow_from):
            time.sleep(60)
        return complete(self, messages, **kw)

    llm.ReplayModel.complete = recorded  # type: ignore[method-assign]
    porter_main()


if __name__ == "__main__":
    main()
