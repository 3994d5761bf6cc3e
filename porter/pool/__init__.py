"""Where candidates are verified: one interface (:class:`Verifier`), three places.

- :class:`RunnerVerifier`: one runner, one candidate after another;
- :class:`LocalPool` (``porter.pool.local``): every local GPU, a round's candidates side by side,
  timing exclusive per GPU (the embedded default);
- :class:`ClusterVerifier` (``porter.pool.cluster``): a dask.distributed cluster, each candidate
  on a worker that advertises its target architecture (``porter worker``; the optional ``cluster``
  extra).

:func:`open_verifier` is the one place a command's verifier is chosen and closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from porter.pool.verifier import CheckJob, RunnerVerifier, Verifier
from porter.ptx.toolchain import Toolchain

if TYPE_CHECKING:
    from porter.gate.runner.client import GpuRunner
    from porter.pool.local import RunnerFactory

__all__ = ["CheckJob", "RunnerVerifier", "Verifier", "open_verifier"]


@contextmanager
def open_verifier(toolchain: Toolchain, *, gpu: bool = True, cluster: str | None = None,
                  per_gpu: int | None = None, runner: GpuRunner | None = None,
                  runner_factory: RunnerFactory | None = None) -> Iterator[Verifier]:
    """The verifier for one command, closed when the block ends: the cluster at ``cluster`` (an
    unreachable scheduler is one line, exit 3, within seconds), else ``runner`` (a long-lived
    server's GPU worker, kept warm: the caller closes it), else the local pool over this machine's
    GPUs (its workers made by ``runner_factory``, porter's own by default), else (``gpu=False``)
    static checks only."""
    verifier: Verifier
    if runner is not None and gpu and not cluster:
        yield RunnerVerifier(runner, toolchain)
        return
    if cluster:
        from porter.pool.cluster import ClusterVerifier

        verifier = ClusterVerifier(cluster, toolchain=toolchain)
    elif gpu:
        from porter.pool.local import DEFAULT_PER_GPU, LocalPool

        verifier = LocalPool(toolchain, per_gpu=per_gpu or DEFAULT_PER_GPU, runner_factory=runner_factory)
    else:
        verifier = RunnerVerifier(None, toolchain)
    try:
        yield verifier
    finally:
        verifier.close()
