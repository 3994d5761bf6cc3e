"""The one interface through which candidates are verified: a :class:`Verifier` takes a round of
check jobs and gives back one Verdict per job, in order.

Three implementations share it: :class:`RunnerVerifier`, the gate on one runner, one candidate
after another (what porter did before the pool, and what a caller holding one runner gets);
:class:`porter.pool.local.LocalPool`, every local GPU, candidates side by side; and
:class:`porter.pool.cluster.ClusterVerifier`, a dask.distributed cluster, each candidate's gate on
a worker of its target architecture. The agent loop, the benchmark and the services see only this
protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from porter.gate.check import CheckOptions, prepare, run_check
from porter.gate.references import ReferenceCache
from porter.gate.runner.client import GpuRunner
from porter.gate.spec import Spec
from porter.gate.verdict import Verdict
from porter.ptx.toolchain import Toolchain


@dataclass(frozen=True)
class CheckJob:
    """One candidate's gate: the file, the spec that describes the source, the check's options.
    ``references`` is the port run's reference cache (None outside a port run)."""

    candidate: Path
    spec: Spec
    options: CheckOptions
    references: ReferenceCache | None = None


@contextmanager
def prepared_ahead(jobs: Sequence[CheckJob], toolchain: Toolchain, skip: int) -> Iterator[None]:
    """While the block runs, the parent-side work of the round's jobs after the first ``skip``
    (assembly, SASS) is done in a thread of its own (see :func:`porter.gate.check.prepare`), so
    that a candidate's ptxas run overlaps the previous candidate's GPU work; an error in it (a bug:
    porter's own errors are left for the check to report) is raised once the block is done."""
    later = list(jobs)[skip:]
    if not later:
        yield
        return
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="porter-prepare")
    futures = [ahead.submit(prepare, j.candidate, j.options, toolchain) for j in later]
    try:
        yield
    finally:
        ahead.shutdown(wait=True, cancel_futures=True)
    for future in futures:
        if not future.cancelled():
            future.result()


class Verifier(Protocol):
    """Verifies candidates: one Verdict per job, in the jobs' order. ``capacity`` is how many
    candidates it verifies at once (slots, cluster workers); ``describe`` names where they run."""

    @property
    def capacity(self) -> int: ...

    def verify(self, jobs: Sequence[CheckJob]) -> list[Verdict]: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class RunnerVerifier:
    """The gate on one runner (or none: static checks only), one candidate after another."""

    def __init__(self, runner: GpuRunner | None, toolchain: Toolchain) -> None:
        self.runner = runner
        self.toolchain = toolchain

    @property
    def capacity(self) -> int:
        return 1

    def verify(self, jobs: Sequence[CheckJob]) -> list[Verdict]:
        with prepared_ahead(jobs, self.toolchain, skip=1):
            return [run_check(j.candidate, j.spec, j.options, toolchain=self.toolchain, runner=self.runner,
                              references=j.references) for j in jobs]

    def describe(self) -> str:
        info = getattr(self.runner, "info", None)
        if self.runner is None:
            return "no GPU"
        return info.describe() if info is not None else "one GPU worker"

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()
