"""Benchmark the gate itself (GPU machine): how long one full check takes, and whether its timing
agrees with triton.testing.do_bench.

    PYTHONPATH=$PWD python3 tools/bench_gate.py [examples/gemm_bf16] [--repeats 5] [--profile DIR]

1. Full evaluation (assemble with a cold ptxas cache, whole sweep x 2 seeds, timing), repeated
   with warm workers as the repair loop sees them; the first (cold) run, which includes starting
   the workers, is reported separately. ``--lanes`` workers (default: the pool's workers a GPU,
   the check's own and those beside it, as ``porter check`` borrows the pool's free slots) share
   the cases; timing stays on the check's own (see porter/gate/lanes.py).
2. The same checks as a port run's later candidates make them: on the run's seeds, with the
   reference outputs held from its first check (the pace of the repair loop).
3. The kernel's median time at the spec's default sizes as porter measures it (alone, and inside
   the check, interleaved with the source and library), against triton.testing.do_bench (median,
   L2 flushed) on the same cubin and inputs: seven runs of each, alternated (porter's in its warm
   worker, do_bench's each in a fresh process), their medians compared (one do_bench run's median
   alone moved 4% from one run to the next on the H200, and 1.6% between three on the H100). Each
   do_bench process times two windows (see ``DO_BENCH_WINDOWS``): do_bench's defaults, the
   headline, then a second of launches, which says whether the length of the load moves the median.
Prints a small table; speed goals live here, not in unit tests. ``--profile DIR`` also writes
where the warm checks' seconds went: every worker job with its sizes and seconds (jobs.txt), and
the most costly functions of the parent's and of the worker's warm checks (parent.txt, worker.txt)
by cProfile, cumulative and own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from porter.pool.local import DEFAULT_PER_GPU  # noqa: E402
from tools.round_profile import JobClock  # noqa: E402  (after the path: run as a script)


def spec_kernel(example: Path) -> Path:
    """The example's kernel that its spec describes (a family folder holds one per generation)."""
    from porter.gate.spec import load_spec

    entry = load_spec(example / "porter.toml").entry
    return next(p for p in sorted(example.glob("kernel*.ptx")) if f".entry {entry}(" in p.read_text())


class PhaseClock(JobClock):
    """Wraps a Runner and adds up the seconds of each kind of worker job: the sweep's cases, the
    cases the defences add (timed sizes, the unannounced size set, value cases) and the timing run,
    each as the worker spent them, and the transfers of jobs and replies between the processes."""

    def __init__(self, runner, spec) -> None:
        super().__init__(runner)
        self.sweep = [sorted(s.items()) for s in spec.size_sets()]
        self.seconds: dict[str, list[float]] = {}
        self.jobs: list[str] = []  # one line a job: its kind, sizes, seconds in the worker and in all
        self.count = 0  # jobs sent: the worker profiles each job into a file of its own, in this order

    def note(self, job, sent: float, call_s: float, worker_s: float) -> None:
        self.count += 1
        if job.op == "case":
            kind = "value cases" if job.values else (
                "sweep cases" if sorted(job.sizes.items()) in self.sweep else "timed + unannounced cases")
        else:
            kind = job.op
        self.seconds.setdefault(kind, []).append(worker_s)
        self.jobs.append(f"{kind:28} {dict(job.sizes)} values={getattr(job, 'values', '')!r} "
                         f"worker {worker_s:.3f} s, call {call_s:.3f} s")
        self.seconds.setdefault("transfer (job in, reply out)", []).append(call_s - worker_s)

    def take(self) -> dict[str, float]:
        totals = {k: sum(v) for k, v in self.seconds.items()}
        self.seconds = {}
        return totals


def full_checks(example: Path, repeats: int, profile: Path | None = None,
                lanes: int = DEFAULT_PER_GPU) -> tuple[float, list[float], list[float], float, list[float],
                                                       list[tuple[float, ...]]]:
    from porter.gate.check import CheckOptions, run_check
    from porter.gate.runner import Runner
    from porter.gate.spec import load_spec
    from porter.ptx.toolchain import find_toolchain

    spec = load_spec(example / "porter.toml")
    kernel = spec_kernel(example)
    walls = []
    median_ms = float("nan")
    phases: list[dict[str, float]] = []
    parent = cProfile.Profile()
    if profile is not None:
        from porter.gate.runner.worker import PROFILE_ENV

        profile.mkdir(parents=True, exist_ok=True)
        os.environ[PROFILE_ENV] = tempfile.mkdtemp(prefix="porter-bench-profile-")
    helpers = [Runner() for _ in range(lanes - 1)]  # as porter check borrows the pool's free slots
    with Runner() as runner:
        clock = PhaseClock(runner, spec)
        beside = [PhaseClock(helper, spec) for helper in helpers]
        for repeat in range(repeats + 1):
            os.environ["PORTER_CACHE_DIR"] = tempfile.mkdtemp(prefix="porter-bench-cache-")
            clock.jobs.append(f"-- check {repeat} ({'cold' if repeat == 0 else 'warm'})")
            t0 = time.perf_counter()
            if repeat:
                parent.enable()
            verdict = run_check(kernel, spec, CheckOptions(), toolchain=find_toolchain(), runner=clock, helpers=beside)
            parent.disable()
            walls.append(time.perf_counter() - t0)
            if repeat == 0:
                cold_jobs = clock.count
            phase = clock.take()
            phase["parent (assemble, compare, judge; waits for the helpers)"] = walls[-1] - sum(phase.values())
            helped = [sum(c.take().values()) for c in beside]
            if helped:
                phase["cases in the helper workers, beside these (not in the sum)"] = sum(helped)
            phases.append(phase)
            if verdict.status != "passed":
                raise SystemExit(f"check did not pass: {verdict.reason}")
            median_ms = verdict.timings[0].median_ms
        fresh_jobs = clock.count
        own_pid = runner.pid
        for helper in helpers:
            helper.close()
        loop_walls, loop_phases, loop_first = loop_candidates(kernel, spec, clock, repeats)
        # The candidate alone, as do_bench times it: no library or source kernel interleaved
        # (a cuBLAS run at full power between launches lowers the clocks the candidate sees).
        from porter.gate.check import runnable_cubin
        from porter.gate.runner.client import run_job
        from porter.gate.runner.protocol import Contender, TimeJob
        from porter.ptx import read_ptx

        cubin, _ = runnable_cubin(read_ptx(kernel), None, runner.start(), find_toolchain(), kernel.name)
        alone_job = TimeJob(spec_path=str(example / "porter.toml"), sizes=spec.default_sizes(), seeds=(0,),
                            contenders=(Contender("candidate", "kernel", cubin=cubin, entry=spec.entry),), budget_s=2.0)
        # porter's timing and do_bench's (each in a fresh process) alternated, so that a drift of
        # the GPU's clocks over the minute reaches both alike.
        alone_ms: list[float] = []
        do_bench_runs: list[tuple[float, ...]] = []
        for _ in range(DO_BENCH_RUNS):
            alone_ms.append(statistics.median(run_job(runner, alone_job, 300.0).times_ms[0]))
            do_bench_runs.append(do_bench_ms(example))
    if profile is not None:
        (profile / "jobs.txt").write_text("\n".join(clock.jobs) + "\n")
        write_top(parent, profile / "parent.txt")
        # One file a job, numbered in the order the worker ran them: the cold check's first, the
        # timing alone (not a check) last; the warm checks' are those between.
        # Those of the check's own worker: the helpers' (the cases split off to them) are left out.
        jobs = sorted(Path(os.environ[PROFILE_ENV]).glob(f"job-{own_pid}-*.pstats"))
        for name, chosen in (("worker.txt", jobs[cold_jobs:fresh_jobs]), ("worker-loop.txt", jobs[loop_first:-1])):
            if chosen:
                write_top(pstats.Stats(*map(str, chosen)), profile / name)
    # every phase any warm check had, in the order first seen: the last check's own worker may have
    # handed all of one kind of case to its helpers
    for kind in dict.fromkeys(k for p in phases[1:] for k in p):
        print(f"  phase {kind}: median {statistics.median(p.get(kind, 0.0) for p in phases[1:]):.3f} s (warm)")
    for kind in dict.fromkeys(k for p in loop_phases for k in p):
        print(f"  repair-loop candidate, phase {kind}: median "
              f"{statistics.median(p.get(kind, 0.0) for p in loop_phases):.3f} s")
    timing = verdict.gate("timing")
    if timing is not None:
        print(f"  last check's timing gate: {timing.summary}")
        for line in timing.details:
            print(f"    {line}")
    return walls[0], walls[1:], loop_walls, median_ms, alone_ms, do_bench_runs


def loop_candidates(kernel: Path, spec, clock: PhaseClock, repeats: int) -> tuple[list[float], list[dict[str, float]], int]:
    """What a port run's later candidates cost: checks on the run's seeds, the reference outputs
    held from the run's first check (``ReferenceCache``), as ``porter port`` checks every candidate
    after the first (the one that passes is then checked again on fresh seeds: the full checks
    above). The first, which computes the references, is not counted. Also returns the number of
    the first counted check's first job (the worker profiles each job into a file numbered so)."""
    from porter.gate.check import CheckOptions, run_check
    from porter.gate.plan import plan_seeds
    from porter.gate.references import ReferenceCache
    from porter.ptx.toolchain import find_toolchain

    options, references = CheckOptions(seeds=plan_seeds()), ReferenceCache()
    walls, phases, first = [], [], 0
    for repeat in range(repeats + 1):
        os.environ["PORTER_CACHE_DIR"] = tempfile.mkdtemp(prefix="porter-bench-cache-")
        clock.jobs.append(f"-- repair-loop candidate {repeat} ({'computes the references' if repeat == 0 else 'warm'})")
        if repeat == 1:
            first = clock.count
        t0 = time.perf_counter()
        verdict = run_check(kernel, spec, options, toolchain=find_toolchain(), runner=clock, references=references)
        wall = time.perf_counter() - t0
        phase = clock.take()
        if verdict.status != "passed":
            raise SystemExit(f"repair-loop check did not pass: {verdict.reason}")
        if repeat:
            walls.append(wall)
            phase["parent (assemble, compare, judge)"] = wall - sum(phase.values())
            phases.append(phase)
    return walls, phases, first


def write_top(stats: cProfile.Profile | pstats.Stats, path: Path) -> None:
    """The 60 functions of most cumulative seconds, then the 30 of most seconds of their own."""
    out = io.StringIO()
    table = pstats.Stats(stats, stream=out) if isinstance(stats, cProfile.Profile) else stats
    table.stream = out
    table.sort_stats("cumulative").print_stats(60)
    table.sort_stats("tottime").print_stats(30)
    path.write_text(out.getvalue())


DO_BENCH = r'''
import sys, numpy as np, cupy as cp, torch, triton.testing
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from porter.gate.spec import load_spec
from porter.gate.inputs import make_args
from porter.ptx.toolchain import find_toolchain
from porter.ptx import read_ptx
example = Path(sys.argv[2])
spec = load_spec(example / "porter.toml")
kernel_path = sorted(p for p in example.glob("kernel*.ptx") if f".entry {spec.entry}(" in p.read_text())[0]
module = read_ptx(kernel_path)
arch = "sm_%d%d" % torch.cuda.get_device_capability()
res = find_toolchain().assemble(module.text, arch)
open("/tmp/bench.cubin", "wb").write(res.cubin)
fn = cp.RawModule(path="/tmp/bench.cubin").get_function(spec.entry)
sizes = spec.default_sizes()
host = make_args(spec, sizes, 0)
args, keep = [], []
for p in spec.params:
    if p.kind == "buffer":
        shape = spec.shape(p, sizes)
        if p.role == "out":
            buf = cp.empty(int(np.prod(shape)) * p.dtype.itemsize, dtype=cp.uint8)
        else:
            buf = cp.asarray(np.ascontiguousarray(host[p.name]).reshape(-1).view(np.uint8))
        keep.append(buf); args.append(np.uint64(buf.data.ptr))
    elif p.kind == "scratch":
        args.append(np.uint64(0))
    else:
        v = np.asarray(host[p.name]).astype(p.dtype.numpy)
        args.append(v.view(np.uint16)[()] if p.dtype.itemsize == 2 and p.dtype.is_float else v[()])
grid, block, shared, _ = spec.launch_dims(sizes)
if shared > 48 * 1024:
    fn.max_dynamic_shared_size_bytes = shared
launch = lambda: fn(tuple(grid), tuple(block), tuple(args), shared_mem=shared)
# "default": do_bench's own defaults, as its users call it (whatever this triton's are); "w,r": those
windows = [{} if w == "default" else dict(zip(("warmup", "rep"), map(int, w.split(",")))) for w in sys.argv[3:]]
medians = [triton.testing.do_bench(launch, return_mode="median", **window) for window in windows]
print("DO_BENCH_MS", *medians)
'''

# do_bench's windows, timed in this order in each do_bench process: None for do_bench called with
# its own defaults, as its users call it (triton 3.6: 25 ms of warm-up, 100 ms of launches), the
# headline; else (warm-up ms, repetition ms). Until 2026-12-07 this script timed only the second (a
# 100 ms warm-up and a second of launches, ten times the defaults) and called it the default; on
# the H200 porter was 1.2% faster than that. Both are kept: whether a longer load moves the median.
DO_BENCH_WINDOWS: dict[str, tuple[int, int] | None] = {
    "its defaults": None, "a second of launches (100 ms warm-up, 1000 ms)": (100, 1000)}


def do_bench_ms(example: Path) -> tuple[float, ...]:
    """One fresh do_bench process's medians (ms), one a window of ``DO_BENCH_WINDOWS``, in its order."""
    windows = ["default" if w is None else f"{w[0]},{w[1]}" for w in DO_BENCH_WINDOWS.values()]
    out = subprocess.run([sys.executable, "-c", DO_BENCH, str(ROOT), str(example), *windows], capture_output=True,
                         text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("DO_BENCH_MS"):
            medians = tuple(float(ms) for ms in line.split()[1:])
            if len(medians) == len(windows):
                return medians
    raise SystemExit(f"do_bench failed:\n{out.stdout[-1000:]}{out.stderr[-3000:]}")


# do_bench's own median moved 4% between two runs on the H200 (2026-12-06), its fresh processes'
# medians fell in two groups 1.7% apart on an H100, and porter's ratio to it spread 0.983 to 1.008
# over the H100 runs of three each: seven each (a process about 6 s) narrow the medians compared
DO_BENCH_RUNS = 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("example", nargs="?", default=str(ROOT / "examples" / "gemm_bf16"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", type=Path, help="a folder for where the warm checks' seconds went")
    parser.add_argument("--lanes", type=int, default=DEFAULT_PER_GPU, help="workers a full check's cases are split over "
                        "(porter check's: the pool's slots on the GPU; 1 for one worker)")
    args = parser.parse_args()
    example = Path(args.example)
    cold, warm, loop, porter_ms, alone_runs, do_bench_runs = full_checks(example, args.repeats, args.profile, args.lanes)
    alone_ms = statistics.median(alone_runs)
    print(f"example: {example.name}")
    print(f"full check, cold (worker start + everything): {cold:.2f} s")
    print(f"full check, warm workers ({args.lanes}), cold ptxas cache: median {statistics.median(warm):.2f} s "
          f"(min {min(warm):.2f}, max {max(warm):.2f}, n={len(warm)})")
    print(f"repair-loop candidate (a port run's later candidate: the run's seeds, references held): median "
          f"{statistics.median(loop):.2f} s (min {min(loop):.2f}, max {max(loop):.2f}, n={len(loop)})")
    print(f"kernel median at default sizes, timed alone, {len(alone_runs)} runs each, alternated with do_bench's "
          f"(each a fresh process): porter {alone_ms:.4f} ms ({', '.join(f'{ms:.4f}' for ms in alone_runs)})")
    for index, window in enumerate(DO_BENCH_WINDOWS):
        runs = [medians[index] for medians in do_bench_runs]
        print(f"  triton do_bench, {window}: {statistics.median(runs):.4f} ms ({', '.join(f'{ms:.4f}' for ms in runs)}), "
              f"porter's ratio to it {alone_ms / statistics.median(runs):.3f}")
    print(f"kernel median inside the check (interleaved with source and library): {porter_ms:.4f} ms")


if __name__ == "__main__":
    main()
