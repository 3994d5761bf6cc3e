"""The cluster: candidates verified on dask.distributed workers of their target architecture.

``--cluster ADDRESS`` sends each candidate's gate, as a :class:`~porter.pool.bundle.Bundle` of the
files it reads, to a worker that advertises the target's resource (``porter worker`` offers, per
GPU, every target whose cubins load there: ``sm_90a=1`` on an H200), one candidate per GPU at a
time; the Verdict comes back as JSON data and is rebuilt typed (:func:`porter.jsonable.from_jsonable`).

What can go wrong, and what porter says:

- the scheduler does not answer: one line, exit 3, within ``connect_timeout_s`` (4 s);
- no worker offers the target: the candidate is checked here without a GPU (interface, ptxas,
  SASS), and its runtime gates are ``not run``, naming the missing resource and what the cluster
  offers; at once, never a wait;
- the workers that offer it leave while it waits: ``not run`` after ``vanished_grace_s``;
- a worker dies mid-candidate: the scheduler runs it again on another worker, once (porter sets the
  scheduler's ``allowed-failures`` to 1 when it connects); a second death is ``error``, with the
  workers that died.

dask is an optional extra (the ``cluster`` extra: :func:`porter.install.install_hint`), imported only here.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from porter.errors import EnvironmentProblem
from porter.gate.check import run_check
from porter.gate.runner.client import Unavailable
from porter.gate.verdict import Status, Verdict, overall_status
from porter.install import install_hint
from porter.jsonable import from_jsonable
from porter.pool.address import scheduler_address
from porter.pool.bundle import pack
from porter.pool.verifier import CheckJob
from porter.ptx import read_ptx
from porter.ptx.arch import ptx_runs_on
from porter.ptx.toolchain import Toolchain


def _one_retry(dask_scheduler: Any) -> int:
    """Run on the scheduler: a task whose worker dies is run again once, elsewhere, then fails."""
    dask_scheduler.allowed_failures = 1
    return dask_scheduler.allowed_failures


class ClusterVerifier:
    """A :class:`~porter.pool.verifier.Verifier` over a dask.distributed cluster."""

    def __init__(self, address: str, *, toolchain: Toolchain, connect_timeout_s: float = 4.0,
                 vanished_grace_s: float = 10.0, poll_s: float = 0.2) -> None:
        address = scheduler_address(address, "--cluster")  # its form, at once, before dask tries it
        try:
            from distributed import Client
        except ImportError:
            raise EnvironmentProblem(f"--cluster needs dask.distributed: {install_hint('dask')}") from None
        self.address = address
        self.toolchain = toolchain
        self.vanished_grace_s = vanished_grace_s
        self.poll_s = poll_s
        logging.getLogger("distributed").setLevel(logging.ERROR)
        try:
            self.client = Client(address, timeout=connect_timeout_s, set_as_default=False)
        except Exception as err:  # refused, timed out, no such host, a malformed address
            raise EnvironmentProblem(f"--cluster {address}: the dask scheduler does not answer "
                                     f"({type(err).__name__}: {err})") from None
        self.client.run_on_scheduler(_one_retry)

    # -- what the cluster offers -----------------------------------------------------------------
    def offered(self) -> dict[str, int]:
        """Each resource the cluster's workers advertise, and how many workers advertise it."""
        counts: dict[str, int] = {}
        for worker in self.client.scheduler_info(n_workers=-1).get("workers", {}).values():
            for name, amount in (worker.get("resources") or {}).items():
                if amount:
                    counts[name] = counts.get(name, 0) + 1
        return counts

    @property
    def capacity(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1).get("workers", {})))

    def describe(self) -> str:
        offered = self.offered()
        text = ", ".join(f"{name} x{n}" for name, n in sorted(offered.items())) or "no resources"
        return f"dask cluster at {self.address}: {self.capacity} workers ({text})"

    # -- verifying -------------------------------------------------------------------------------
    def verify(self, jobs: Sequence[CheckJob]) -> list[Verdict]:
        from distributed import KilledWorker

        offered = self.offered()
        verdicts: list[Verdict | None] = [None] * len(jobs)
        pending: dict[int, tuple[str, Any]] = {}
        for k, job in enumerate(jobs):
            target = resource_for(job, offered)
            if target not in offered:
                verdicts[k] = self._here(job, f"no worker of the cluster at {self.address} offers the resource "
                                              f"{target} (it offers: {_offer_text(offered)}); start `porter worker "
                                              f"--scheduler {self.address}` on a machine with a {target} GPU")
                continue
            future = self.client.submit(_check_remote(), pack(job.candidate, job.spec, job.options),
                                        resources={target: 1}, pure=False,
                                        key=f"porter-check-{job.candidate.stem}-{uuid.uuid4().hex[:12]}")
            pending[k] = (target, future)
        gone_since: dict[int, float] = {}
        while pending:
            for k in [k for k, (_, f) in pending.items() if f.done()]:
                target, future = pending.pop(k)
                try:
                    verdicts[k] = from_jsonable(Verdict, future.result())
                except KilledWorker as err:
                    verdicts[k] = self._here(jobs[k], f"the cluster's workers died while checking it, twice (it was "
                                                      f"retried once elsewhere): {err}", status=Status.ERROR)
            if not pending:
                break
            time.sleep(self.poll_s)
            offered = self.offered()
            now = time.monotonic()
            for k, (target, future) in list(pending.items()):
                if target in offered:
                    gone_since.pop(k, None)
                elif now - gone_since.setdefault(k, now) > self.vanished_grace_s:
                    future.cancel()
                    del pending[k]
                    verdicts[k] = self._here(jobs[k], f"the workers of the cluster at {self.address} that offered "
                                                      f"{target} left while it waited; none offers it now")
        return [v for v in verdicts if v is not None]

    def _here(self, job: CheckJob, reason: str, status: Status = Status.NOT_RUN) -> Verdict:
        """The check of ``job`` on this machine without a GPU (what needs none: interface, ptxas,
        SASS), its runtime gates ``not run`` (or ``error``) for ``reason``."""
        verdict = run_check(job.candidate, job.spec, job.options, toolchain=self.toolchain, runner=Unavailable(reason))
        if status is Status.NOT_RUN:
            return verdict
        gates = tuple(replace(g, status=status) if g.status == Status.NOT_RUN else g for g in verdict.gates)
        word = overall_status(gates)
        return replace(verdict, gates=gates, status=word,
                       reason=verdict.reason if word != status else f"equivalence: {reason}")

    def close(self) -> None:
        self.client.close()


def resource_for(job: CheckJob, offered: dict[str, int]) -> str:
    """The resource a job asks for. An explicit ``--arch`` is a claim about that target: only its own
    resource will do. Without one, the candidate's ``.target``, else (as a local check falls back to
    assembling for the GPU it has) a GPU the cluster offers that its PTX can be assembled for."""
    if job.options.arch:
        return job.options.arch
    arch = read_ptx(job.candidate).arch
    if arch in offered:
        return arch
    devices = [name for name in sorted(offered) if name[-1].isdigit()]  # a worker offers its GPU's own arch
    return next((name for name in devices if ptx_runs_on(arch, name)[0]), arch)


def _check_remote() -> Any:
    from porter.pool.dask_workers import check_remote

    return check_remote


def _offer_text(offered: dict[str, int]) -> str:
    return ", ".join(f"{name} on {n} worker{'s' if n != 1 else ''}" for name, n in sorted(offered.items())) or "nothing"



