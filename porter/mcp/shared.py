"""What the tool calls of one MCP server share: the GPU and the budget.

Tool calls arrive concurrently and run in worker threads. :class:`Shared` holds

- one GPU worker (:class:`~porter.gate.runner.Runner`), started on first use and kept warm
  between calls, and one lock around GPU work: a check, a replay and a profile hold it for their
  whole run, a port for each candidate's check; so two calls never time or profile kernels at
  the same time, and the worker, which takes one job at a time, is never asked by two threads;
- an :class:`Allowance`: what all the ports of the server may spend together (``porter mcp
  --max-usd/--max-tokens/--max-rounds``). Each port reserves its budget from it before it starts
  (at most what is left) and gives back what it did not use, so concurrent ports together can
  never spend more than the server was given.

No MCP import here: this is plain threading, tested on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from porter.agent.llm import Budget, SpendRecord
from porter.errors import EnvironmentProblem
from porter.gate.runner import GpuRunner


@dataclass(frozen=True)
class Limits:
    """What the server's ports may spend together; None: no limit."""

    rounds: int | None = None
    tokens: int | None = None
    usd: float | None = None


class Allowance:
    """A budget shared by concurrent ports: reserve before, settle after (see the module docstring)."""

    DEFAULT_ROUNDS = 8  # a port that asks for no round limit reserves this many when rounds are limited

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._left = {"rounds": self.limits.rounds, "tokens": self.limits.tokens, "usd": self.limits.usd}
        self._lock = threading.Lock()

    def left(self) -> dict[str, float | int | None]:
        with self._lock:
            return dict(self._left)

    def reserve(self, asked: Budget) -> Budget:
        """The budget a port may run with: what it asked, capped by what is left (which it takes);
        one line (exit 3) when a limited quantity has nothing left."""
        wanted = {"rounds": asked.max_rounds, "tokens": asked.max_tokens, "usd": asked.max_usd}
        with self._lock:
            spent = [name for name, left in self._left.items() if left is not None and left <= 0]
            if spent:
                raise EnvironmentProblem(f"the server's budget is spent ({', '.join(spent)}): restart porter mcp "
                                         "with a larger --max-" + spent[0])
            granted: dict[str, Any] = {}
            for name, left in self._left.items():
                want = wanted[name]
                if left is None:
                    granted[name] = want
                    continue
                if want is None:
                    want = self.DEFAULT_ROUNDS if name == "rounds" else left
                granted[name] = min(want, left)
                self._left[name] = left - granted[name]
        return replace(asked, max_rounds=granted["rounds"], max_tokens=granted["tokens"], max_usd=granted["usd"])

    def settle(self, granted: Budget, spend: SpendRecord) -> None:
        """Give back what a port reserved and did not spend."""
        used = {"rounds": spend.rounds, "tokens": spend.tokens, "usd": spend.usd}
        reserved = {"rounds": granted.max_rounds, "tokens": granted.max_tokens, "usd": granted.max_usd}
        with self._lock:
            for name, left in self._left.items():
                held = reserved[name]
                if left is not None and held is not None:
                    self._left[name] = left + max(0, held - used[name])


class Shared:
    """The GPU worker, the lock around GPU work and the allowance of one server."""

    def __init__(self, runner_factory: Callable[[], GpuRunner] | None = None, limits: Limits | None = None) -> None:
        self._factory = runner_factory
        self._runner: GpuRunner | None = None
        self._made = threading.Lock()  # two first calls at once make one worker
        self._gpu = threading.Lock()
        self.allowance = Allowance(limits)

    def runner(self) -> GpuRunner:
        """The server's GPU worker (made on first use; use it under :meth:`gpu_work`)."""
        with self._made:
            if self._runner is None:
                if self._factory is None:
                    from porter.gate.runner import Runner

                    self._factory = Runner
                self._runner = self._factory()
            return self._runner

    @contextmanager
    def gpu_work(self) -> Iterator[None]:
        """Hold the GPU: one check, replay, profile or candidate at a time."""
        with self._gpu:
            yield

    def close(self) -> None:
        with self._gpu, self._made:
            if self._runner is not None:
                self._runner.close()
                self._runner = None
