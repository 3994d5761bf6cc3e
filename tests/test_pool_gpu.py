"""The pool and the cluster on a real GPU: a round of GEMM candidates verified side by side gives
the verdicts (and, within noise, the speed ratios) of one-after-another checks, with no timing window
overlapping other work; the same round through a dask scheduler with a worker on this GPU gives the
same verdicts. Figures (verdicts per minute) come from tools/bench_throughput.py, not from here."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from porter.gate.check import CheckOptions
from porter.gate.references import ReferenceCache
from porter.gate.spec import load_spec
from porter.pool import CheckJob, RunnerVerifier

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_bt_tile"

pytestmark = pytest.mark.gpu


def _round(tmp_path: Path, n: int) -> list[Path]:
    text = (GEMM / "kernel_sm90a.ptx").read_text()
    paths = []
    for k in range(n):
        path = tmp_path / f"cand{k}.ptx"
        path.write_text(f"{text}\n// candidate {k}\n")
        paths.append(path)
    return paths


def _jobs(paths: list[Path], seeds: tuple[int, ...], references: ReferenceCache | None = None) -> list[CheckJob]:
    spec = load_spec(GEMM / "porter.toml")
    options = CheckOptions(arch="sm_90a", seeds=seeds, speed_baseline=GEMM / "kernel_sm80.ptx")
    return [CheckJob(p, spec, options, references) for p in paths]


def test_a_pooled_round_gives_the_sequential_verdicts_with_timing_alone(toolchain, runner, tmp_path: Path) -> None:
    from porter.pool.lease import overlaps
    from porter.pool.local import LocalPool

    paths = _round(tmp_path, 4)
    alone = RunnerVerifier(runner, toolchain).verify(_jobs(paths, (21, 22)))
    pool = LocalPool(toolchain, per_gpu=2, record=True)
    try:
        cache = ReferenceCache()
        together = pool.verify(_jobs(paths, (21, 22), cache))
        windows = [w for lease in pool.leases.values() for w in lease.windows]
    finally:
        pool.close()
    assert [v.status for v in together] == [v.status for v in alone] == ["passed"] * 4, [v.reason for v in together]
    assert [c.status for v in together for c in v.cases] == [c.status for v in alone for c in v.cases]
    assert cache.stats.hits > 0
    assert any(w.exclusive for w in windows) and not overlaps(windows)
    ratio = statistics.median(v.speedup_vs_source for v in together) / statistics.median(
        v.speedup_vs_source for v in alone)
    assert 0.95 < ratio < 1.05, ratio


def test_a_round_through_a_dask_scheduler_gives_the_local_verdicts(toolchain, runner, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    from porter.pool.cluster import ClusterVerifier
    from porter.pool.dask_workers import WorkerGroup, local_gpus

    paths = _round(tmp_path, 4)
    here = RunnerVerifier(runner, toolchain).verify(_jobs(paths, (31, 32)))
    cluster = LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None)
    group = WorkerGroup(cluster.scheduler_address, local_gpus(), name="gpu-test").start()
    try:
        verifier = ClusterVerifier(cluster.scheduler_address, toolchain=toolchain)
        try:
            there = verifier.verify(_jobs(paths, (31, 32)))
        finally:
            verifier.close()
    finally:
        group.close()
        cluster.close()
    assert [v.status for v in there] == [v.status for v in here] == ["passed"] * 4, [v.reason for v in there]
    assert [c.status for v in there for c in v.cases] == [c.status for v in here for c in v.cases]
    assert all(v.gpu == here[0].gpu for v in there)
