"""Verdicts per minute for a round of candidates: one after another on one worker, against the local
pool (every GPU, several workers per GPU, timing exclusive per GPU, the round's seeds and reference
outputs shared), and per GPU; optionally through a dask cluster too.

    PYTHONPATH=$PWD python3 tools/bench_throughput.py [--example examples/gemm_bf16] [--candidates 8]
        [--per-gpu 1,2,3] [--rounds 3] [--seed S] [--cluster tcp://HOST:8786 | --cluster local] [--fake] [--json OUT.json]
        [--profile DIR]

The round is ``--candidates`` copies of the example's kernel (by default the kernel its spec
describes, checked as ``tools/bench_gate.py`` checks it: the whole sweep under two seeds, the timed
and unannounced size sets, the value cases, timing against the library), each with its own trailing
comment: ptxas runs for every one, and their cubins are the same. Every configuration is warmed
first (workers started, CUDA contexts and library handles made) on other seeds, then timed over
``--rounds`` rounds (default 3), each on fresh seeds, the same rounds for every configuration:
the wall time is their median, since what a round costs moves with what its seeds draw (the
large case's size and axis, the drawn timed size; ``all_rounds_per_minute`` is every round's
verdicts over every round's seconds). What it prints, per configuration: wall time,
verdicts per minute (and per GPU), the status words, the candidates' median ratio against the
library (porter's timing must not change with the pool: compare the columns), and how many timing
windows overlapped other work on their GPU (must be 0). ``--fake`` runs the same code on simulated GPUs (porter.gate.runner.fake.FakeGpu) with
``--fake-case-s`` / ``--fake-time-s`` seconds of simulated GPU work per case / timing job: a CPU
check of the overlap, not a GPU figure. ``--profile DIR`` also writes, and prints, where each
pooled round's seconds went (tools/round_profile.py: the workers' jobs, the GPU lease, CPU seconds,
the parent's threads sampled), and on a GPU runs the round once more with every worker job under
cProfile at the last ``--per-gpu`` (worker-xN.txt: the workers' functions; a slower round, in a row
of its own).

"sequential" is the one-worker path of this version (one candidate after another, fresh seeds for
each, nothing shared): for the figure of the code before the pool, run tools/bench_gate.py on main.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    mode: str
    gpus: int
    per_gpu: int
    wall_s: float
    statuses: list[str]
    library_ratio: float | None
    overlaps: int | None
    extra: dict[str, float | str] = field(default_factory=dict)

    @property
    def per_minute(self) -> float:
        return 60.0 * len(self.statuses) / self.wall_s

    def line(self) -> str:
        ratio = "-" if self.library_ratio is None else f"{self.library_ratio:.3f}"
        overlaps = "-" if self.overlaps is None else str(self.overlaps)
        counts = ", ".join(f"{n} {s}" for s, n in sorted({s: self.statuses.count(s) for s in self.statuses}.items()))
        return (f"| {self.mode} | {self.gpus} | {self.per_gpu} | {self.wall_s:.2f} | {self.per_minute:.1f} | "
                f"{self.per_minute / max(1, self.gpus):.1f} | {counts} | {ratio} | {overlaps} |")


def spec_kernel(example: Path) -> Path:
    from porter.gate.spec import load_spec

    entry = load_spec(example / "porter.toml").entry
    return next(p for p in sorted(example.glob("kernel*.ptx")) if f".entry {entry}(" in p.read_text())


def round_of(kernel: Path, n: int, folder: Path) -> list[Path]:
    text = kernel.read_text()
    paths = []
    for k in range(n):
        path = folder / f"candidate{k:02d}.ptx"
        path.write_text(f"{text}\n// candidate {k} of the round\n")
        paths.append(path)
    return paths


def library_ratio(verdicts: list) -> float | None:
    ratios = [v.speedup_vs_library for v in verdicts if v.speedup_vs_library]
    return statistics.median(ratios) if ratios else None


def jobs_for(paths: list[Path], spec, options, references=None):
    from porter.pool import CheckJob

    return [CheckJob(p, spec, options, references) for p in paths]


def sequential(paths, spec, options, toolchain, factory) -> Row:
    from dataclasses import replace

    from porter.gate.plan import plan_seeds
    from porter.pool import RunnerVerifier

    verifier = RunnerVerifier(factory(0), toolchain)
    try:
        verifier.verify(jobs_for(paths[:1], spec, replace(options, seeds=plan_seeds())))  # warm
        start = time.perf_counter()
        verdicts = [verifier.verify(jobs_for([p], spec, replace(options, seeds=plan_seeds())))[0] for p in paths]
        wall = time.perf_counter() - start
    finally:
        verifier.close()
    return Row("sequential (one worker, fresh seeds each)", 1, 1, wall, [str(v.status) for v in verdicts],
               library_ratio(verdicts), None)


def pooled(paths, spec, options, toolchain, factory, per_gpu: int, devices=None, label="pool",
           profile: Path | None = None, rounds: list[tuple[int, ...]] | None = None) -> tuple[Row, list]:
    """One round through a LocalPool for each seed pair of ``rounds`` (default: one round on fresh
    seeds), each with a reference cache of its own (as port runs would be), after a warm-up round:
    the row's wall time is their median (a round's cost moves with what its seeds draw: the large
    case's size and axis, the drawn timed size; every configuration gets the same ``rounds``, so
    that their rows compare like with like). With ``profile``, where the first measured round's
    seconds went is written there (tools/round_profile.py) and printed."""
    from dataclasses import replace

    from porter.gate.plan import plan_seeds
    from porter.gate.references import ReferenceCache
    from porter.pool.lease import overlaps
    from porter.pool.local import LocalPool
    from tools.round_profile import JobClock, RoundProfile

    clocks: list[JobClock] = []

    def clocked(device: int):
        clocks.append(JobClock(factory(device), f"worker{len(clocks)}"))
        return clocks[-1]

    pool = LocalPool(toolchain, devices=devices, per_gpu=per_gpu, runner_factory=clocked if profile else factory,
                     record=True)
    walls: list[float] = []
    clashes = 0
    try:
        warm = replace(options, seeds=plan_seeds())
        pool.verify(jobs_for(paths[: pool.capacity], spec, warm))  # every worker started and warm
        for lease in pool.leases.values():
            lease.windows.clear()
        for index, seeds in enumerate(rounds or [plan_seeds()]):
            cache = ReferenceCache()
            run = replace(options, seeds=seeds)
            measured = RoundProfile(clocks, pool.leases) if profile and index == 0 else None
            began = time.time()
            start = time.perf_counter()
            with measured.round() if measured else contextlib.nullcontext():
                verdicts = pool.verify(jobs_for(paths, spec, run, cache))
            walls.append(time.perf_counter() - start)
            if measured is not None and profile is not None:
                write_profile(measured, verdicts, profile, per_gpu, began)
            clashes += sum(len(overlaps(lease.windows)) for lease in pool.leases.values())
            for lease in pool.leases.values():
                lease.windows.clear()
        # What a port does next with a passing candidate: the same check on fresh seeds.
        start = time.perf_counter()
        pool.verify(jobs_for(paths[:1], spec, replace(options, seeds=plan_seeds())))
        confirm = time.perf_counter() - start
        clashes += sum(len(overlaps(lease.windows)) for lease in pool.leases.values())
        gpus = pool.gpus
    finally:
        pool.close()
    extra = {"reference_hits": cache.stats.hits, "reference_misses": cache.stats.misses,
             "reference_waits": cache.stats.waits, "fresh_seed_recheck_s": confirm}
    if len(walls) > 1:
        extra["round_walls_s"] = " ".join(f"{w:.2f}" for w in walls)
        # Every round's verdicts over every round's seconds: what a long run of rounds delivers,
        # the rounds whose large case ran along a reduction axis counted at their cost.
        extra["all_rounds_per_minute"] = round(60.0 * len(paths) * len(walls) / sum(walls), 1)
    row = Row(label, gpus, per_gpu, statistics.median(walls), [str(v.status) for v in verdicts],
              library_ratio(verdicts), clashes, extra)
    return row, verdicts


def write_profile(measured, verdicts, profile: Path, per_gpu: int, began: float) -> None:
    """The round's report (and each candidate's timing: launches, interval, whether the target was
    reached), written and printed; where the workers ran every job under cProfile, their functions."""
    from porter.gate.runner.worker import PROFILE_ENV

    profile.mkdir(parents=True, exist_ok=True)
    lines = [measured.report(), "timings (contender, size set, launches, median ms, 95% interval):"]
    for k, verdict in enumerate(verdicts):
        for t in verdict.timings:
            half = t.ci_half_width
            lines.append(f"  candidate {k} {t.name:9} {t.sizes:55} n={t.count:4} {t.median_ms:.4f} "
                         f"{'±%.2f%%' % (100 * half) if half is not None else '-'}")
        gate = verdict.gate("timing")
        if gate is not None and "cap" in gate.summary:
            lines.append(f"  candidate {k}: stopped at the cap")
    report = "\n".join(lines)
    name = f"round-x{per_gpu}{'-cprofile' if os.environ.get(PROFILE_ENV) else ''}"
    (profile / f"{name}.txt").write_text(report + "\n")
    print(report, flush=True)
    if not os.environ.get(PROFILE_ENV):
        return
    from tools.bench_gate import write_top

    files = [f for f in Path(os.environ[PROFILE_ENV]).glob("job-*.pstats") if f.stat().st_mtime >= began]
    if files:
        stats = pstats.Stats(*map(str, files))
        write_top(stats, profile / f"worker-x{per_gpu}.txt")
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats("cumulative").print_callees(
            r"jobs.py.*\((job_time|job_case|judged|reference)\)|launch.py.*\((__init__|reset|integrity)\)"
            r"|state.py.*\((case_launch|inputs)\)|summary.py.*\(summarize\)")
        (profile / f"worker-x{per_gpu}-callees.txt").write_text(out.getvalue())


def clustered(address: str, paths, spec, options, toolchain, factory) -> tuple[Row, list]:
    """The round through a dask scheduler: ``address``, or ``local`` for a scheduler and a porter
    worker on this machine's GPUs, both started here (tcp://127.0.0.1)."""
    from dataclasses import replace

    from porter.gate.plan import plan_seeds
    from porter.pool.cluster import ClusterVerifier

    cluster = group = None
    if address == "local":
        from distributed import LocalCluster

        from porter.pool.dask_workers import WorkerGroup, local_gpus

        cluster = LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None)
        address = cluster.scheduler_address
        group = WorkerGroup(address, local_gpus(factory), name="bench").start()
        print(f"started a scheduler at {address} and workers: {group.describe()}", flush=True)
    verifier = ClusterVerifier(address, toolchain=toolchain)
    try:
        workers = verifier.capacity
        verifier.verify(jobs_for(paths[:workers], spec, replace(options, seeds=plan_seeds())))  # warm
        start = time.perf_counter()
        verdicts = verifier.verify(jobs_for(paths, spec, replace(options, seeds=plan_seeds())))  # a run's shared seeds
        wall = time.perf_counter() - start
    finally:
        verifier.close()
        if group is not None:
            group.close()
        if cluster is not None:
            cluster.close()
    return Row(f"dask cluster {address}", workers, 1, wall, [str(v.status) for v in verdicts], library_ratio(verdicts),
               None), verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", default=str(ROOT / "examples" / "gemm_bf16"))
    parser.add_argument("--kernel", default=None, help="the candidate (default: the kernel the spec describes)")
    parser.add_argument("--arch", default=None, help="assemble for this target (default: the kernel's .target)")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds per pool configuration, each on fresh seeds: the median is reported")
    parser.add_argument("--per-gpu", default="1,2,3", help="workers per GPU to try, comma-separated")
    parser.add_argument("--seed", type=int, default=None,
                        help="round k checks seeds (SEED + 2k, SEED + 2k + 1) instead of fresh ones: the same rounds "
                             "for two versions of porter, run one after the other")
    parser.add_argument("--no-sequential", action="store_true")
    parser.add_argument("--cluster", default=None, help="also verify the round through this dask scheduler "
                        "('local': start one here, with a porter worker on this machine's GPUs)")
    parser.add_argument("--fake", action="store_true", help="simulated GPUs (a CPU check of the overlap)")
    parser.add_argument("--fake-gpus", type=int, default=1)
    parser.add_argument("--fake-case-s", type=float, default=0.05)
    parser.add_argument("--fake-time-s", type=float, default=0.3)
    parser.add_argument("--json", default=None, help="write the rows here as JSON")
    parser.add_argument("--profile", type=Path, default=None,
                        help="a folder for where each pooled round's seconds went (tools/round_profile.py)")
    args = parser.parse_args()

    os.environ.setdefault("PORTER_CACHE_DIR", tempfile.mkdtemp(prefix="porter-throughput-cache-"))
    from porter.gate.check import CheckOptions
    from porter.gate.plan import plan_seeds
    from porter.gate.spec import load_spec
    from porter.ptx.toolchain import find_toolchain

    example = Path(args.example)
    spec = load_spec(example / "porter.toml")
    kernel = Path(args.kernel) if args.kernel else spec_kernel(example)
    toolchain = find_toolchain()
    toolchain.require("ptxas")
    paths = round_of(kernel, args.candidates, Path(tempfile.mkdtemp(prefix="porter-round-")))
    options = CheckOptions(arch=args.arch)
    if args.fake:
        from porter.gate.runner.fake import FakeGpu

        gpus = [FakeGpu(case_s=args.fake_case_s, time_s=args.fake_time_s, device_count=args.fake_gpus)
                for _ in range(args.fake_gpus)]

        def factory(device: int):
            return gpus[device].runner()
    else:
        from porter.gate.runner import Runner

        def factory(device: int):
            return Runner(device=device)

    rows: list[Row] = []
    if not args.no_sequential:
        rows.append(sequential(paths, spec, options, toolchain, factory))
        print(rows[-1].line(), flush=True)
    pool_verdicts = None
    # fresh for this run (or given), the same for every configuration
    rounds = [plan_seeds() if args.seed is None else (args.seed + 2 * k, args.seed + 2 * k + 1)
              for k in range(args.rounds)]
    per_gpus = [int(x) for x in args.per_gpu.split(",") if x.strip()]
    for per_gpu in per_gpus:
        row, pool_verdicts = pooled(paths, spec, options, toolchain, factory, per_gpu, profile=args.profile,
                                    rounds=rounds)
        rows.append(row)
        print(row.line(), flush=True)
        if row.gpus > 1 and per_gpu == 1:
            for device in range(row.gpus):  # each GPU alone
                alone, _ = pooled(paths, spec, options, toolchain, factory, 1, devices=[device], label=f"pool, GPU {device} only")
                rows.append(alone)
                print(alone.line(), flush=True)
    if args.profile and not args.fake:
        # Once more with every worker job under cProfile (slower: its own row), for the workers' functions.
        from porter.gate.runner.worker import PROFILE_ENV

        os.environ[PROFILE_ENV] = tempfile.mkdtemp(prefix="porter-round-profile-")
        row, _ = pooled(paths, spec, options, toolchain, factory, per_gpus[-1], label="pool, workers under cProfile",
                        profile=args.profile)
        del os.environ[PROFILE_ENV]
        rows.append(row)
        print(row.line(), flush=True)
    if args.cluster:
        row, cluster_verdicts = clustered(args.cluster, paths, spec, options, toolchain, factory)
        rows.append(row)
        print(row.line(), flush=True)
        if pool_verdicts is not None:
            same = [a.status == b.status for a, b in zip(pool_verdicts, cluster_verdicts, strict=True)]
            print(f"cluster verdicts equal to the pool's: {sum(same)} of {len(same)}")

    print()
    print(f"{args.candidates} candidates of {kernel.relative_to(ROOT) if kernel.is_relative_to(ROOT) else kernel}"
          f"{' on simulated GPUs' if args.fake else ''}")
    print("| mode | GPUs | workers per GPU | wall s | verdicts/min | per GPU | statuses | median x vs library | "
          "timing overlaps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row.line())
    for row in rows:
        if row.extra:
            print(f"{row.mode} x{row.per_gpu}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                        for k, v in row.extra.items()))
    if args.json:
        Path(args.json).write_text(json.dumps([{**r.__dict__, "per_minute": r.per_minute} for r in rows], indent=2))


if __name__ == "__main__":
    main()
