"""``porter`` as a user runs it, on a GPU double: for tests that drive the real command line in a
subprocess (a pseudo-terminal, a real SIGINT) and need a port that can pass on a CPU.

It builds the doubles and hands them to the command line as its :class:`porter.services.Seams`;
nothing of porter is patched. The GPU workers are :class:`port_doubles.OnlyGoodCubins`
(vector_add's fixed kernel is the one right kernel), and ``replay:`` scripts are played by
:class:`WatchedReplay`. Environment:

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
from pathlib import Path

from porter.agent.llm import Reply
from porter.agent.replay import ReplayModel

sys.path.insert(0, str(Path(__file__).resolve().parent))


class WatchedReplay(ReplayModel):
    """A scripted model that writes each prompt to ``PORTER_TEST_PROMPTS`` as it is sent, and is
    slow from reply ``PORTER_TEST_SLOW_FROM`` on."""

    def complete(self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int,
                 timeout_s: float) -> Reply:
        record, slow_from = os.environ.get("PORTER_TEST_PROMPTS"), os.environ.get("PORTER_TEST_SLOW_FROM")
        if record:
            with open(record, "a") as fh:
                fh.write(json.dumps(messages) + "\n")
        if slow_from is not None and self._next >= int(slow_from):
            time.sleep(60)
        return super().complete(messages, temperature=temperature, max_tokens=max_tokens, timeout_s=timeout_s)


def main() -> None:
    from port_doubles import OnlyGoodCubins, good_cubins

    from porter.cli.app import main as porter_main
    from porter.ptx.toolchain import find_toolchain
    from porter.services import Seams

    good = good_cubins(find_toolchain())
    porter_main(Seams(runner_factory=lambda device: OnlyGoodCubins(good), replay_model=WatchedReplay))


if __name__ == "__main__":
    main()
