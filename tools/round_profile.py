"""Where a pool round's seconds go (``tools/bench_throughput.py --profile DIR``).

A round of candidates on one GPU is paced by whichever of four things runs out first: the GPU, the
workers (each one process, one job at a time), the exclusive timing windows (every other worker
waits while one candidate is timed), or the parent process (every check's planning, judging and
pickling in one interpreter, under one GIL). This module measures each over one round:

- every worker job, as the parent sent it: when it was sent, how long the call took, and how many
  of those seconds the worker spent on the job itself (the rest is the pipe: pickling, the parent
  thread waiting for the GIL to read the reply);
- the GPU lease's windows: how long some job held the GPU, how long timing held it alone, and how
  long no job held it at all;
- CPU seconds of the parent and of each worker process (their threads included);
- the parent's threads, sampled every few milliseconds: the functions on their stacks (a thread
  blocked in a pipe or a lock shows as such), and how late the sampler itself ran (it needs the GIL:
  a late sampler is a busy GIL);
- the GPU's own utilisation, from ``nvidia-smi`` where there is one.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class JobRecord:
    worker: str
    op: str
    sizes: str
    sent: float  # monotonic s
    call_s: float
    worker_s: float


class JobClock:
    """A worker (any GpuRunner) whose every job is noted as it returns (:meth:`note`): by default
    into ``records``, which a :class:`RoundProfile` shares among a pool's workers."""

    def __init__(self, runner: Any, name: str = "") -> None:
        self.runner, self.name = runner, name
        self.records: list[JobRecord] = []

    @property
    def info(self) -> Any:
        return self.runner.info

    @property
    def restarts(self) -> int:
        return self.runner.restarts

    @property
    def pid(self) -> int | None:
        return getattr(self.runner, "pid", None)

    def start(self) -> Any:
        return self.runner.start()

    def exclusive(self) -> AbstractContextManager[object]:
        from porter.gate.runner.client import exclusive

        return exclusive(self.runner)

    def call(self, job: Any, timeout_s: float) -> Any:
        sent = time.monotonic()
        reply = None
        try:
            reply = self.runner.call(job, timeout_s)
            return reply
        finally:
            call_s = time.monotonic() - sent
            # the job's own seconds in the worker; the rest of the call is the transfer
            self.note(job, sent, call_s, getattr(reply, "worker_s", call_s) if reply is not None else call_s)

    def note(self, job: Any, sent: float, call_s: float, worker_s: float) -> None:
        sizes = ",".join(f"{k}={v}" for k, v in sorted(job.sizes.items()) if k in ("M", "N", "K")) \
            or ",".join(f"{k}={v}" for k, v in sorted(job.sizes.items()))[:40]
        self.records.append(JobRecord(self.name, job.op, sizes, sent, call_s, worker_s))

    def close(self) -> None:
        self.runner.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc; 0 where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _label(frame: Any) -> str:
    code = frame.f_code
    path = code.co_filename
    for marker in ("/porter/", "/tools/", "/python3.", "/site-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{code.co_name}"


def _group(name: str) -> str:
    for prefix in ("porter-pool", "porter-prepare", "porter-helper", "porter-assemble", "porter-lane"):
        if name.startswith(prefix):
            return prefix
    return "main" if name == "MainThread" else "other"


@dataclass
class Sampler:
    """The parent's threads' stacks, every ``interval_s``."""

    interval_s: float = 0.004
    samples: int = 0
    late_s: float = 0.0  # how much later than asked the sampler woke, summed
    own: Counter[tuple[str, str]] = field(default_factory=Counter)
    cumulative: Counter[tuple[str, str]] = field(default_factory=Counter)
    threads: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="round-profile-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            asked = time.monotonic() + self.interval_s
            if self._stop.wait(self.interval_s):
                return
            self.late_s += max(0.0, time.monotonic() - asked)
            names = {t.ident: t.name for t in threading.enumerate()}
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                group = _group(names.get(ident, ""))
                self.threads[group] += 1
                self.own[(group, _label(frame))] += 1
                seen = set()
                while frame is not None:
                    seen.add(_label(frame))
                    frame = frame.f_back
                for label in seen:
                    self.cumulative[(group, label)] += 1


class NvidiaSmi:
    """GPU utilisation samples (percent of time a kernel ran), every 100 ms, where nvidia-smi exists."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.values: list[float] = []

    def start(self) -> None:
        if shutil.which("nvidia-smi") is None:
            return
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu,utilization.memory",
                                      "--format=csv,noheader,nounits", "-lms", "100", "-i", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        for line in out.splitlines():
            try:
                self.values.append(float(line.split(",")[0]))
            except ValueError:
                continue


class RoundProfile:
    """Measures one round (``with profile.round(): ...``); :meth:`report` says where it went."""

    def __init__(self, runners: list[JobClock], leases: dict[int, Any]) -> None:
        self.runners, self.leases = runners, leases
        self.records: list[JobRecord] = []
        for r in runners:
            r.records = self.records
        self.sampler = Sampler()
        self.smi = NvidiaSmi()
        self.wall = 0.0
        self.start = 0.0
        self.parent_cpu = 0.0
        self.children_cpu = 0.0
        self.worker_cpu: dict[str, float] = {}

    @contextmanager
    def round(self):
        for lease in self.leases.values():
            lease.windows.clear()
        self.records.clear()
        pids = {r.name: r.pid for r in self.runners if r.pid}
        before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        self.smi.start()
        self.sampler.start()
        self.start = time.monotonic()
        try:
            yield
        finally:
            self.wall = time.monotonic() - self.start
            self.sampler.stop()
            self.smi.stop()
            own1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            self.parent_cpu = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
            self.children_cpu = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
            self.worker_cpu = {name: _cpu_seconds(pid) - before[name] for name, pid in pids.items()}

    def report(self) -> str:
        w = self.wall
        lines = [f"round: {w:.2f} s wall"]
        lines.append(f"parent CPU {self.parent_cpu:.2f} s ({self.parent_cpu / w:.0%} of one core), ptxas and other "
                     f"children {self.children_cpu:.2f} s")
        for name, cpu in sorted(self.worker_cpu.items()):
            jobs = [r for r in self.records if r.worker == name]
            in_jobs = sum(r.worker_s for r in jobs)
            calls = sum(r.call_s for r in jobs)
            lines.append(f"worker {name}: CPU {cpu:.2f} s; {len(jobs)} jobs, {in_jobs:.2f} s in the worker "
                         f"({in_jobs / w:.0%} of the round), {calls - in_jobs:.2f} s more in the calls (pipe, "
                         f"pickling, the parent's GIL)")
        by_op: dict[str, list[JobRecord]] = {}
        for r in self.records:
            by_op.setdefault(f"{r.op} {r.sizes}", []).append(r)
        lines.append("jobs by kind (count, seconds in the worker, seconds in the call):")
        for key, rs in sorted(by_op.items(), key=lambda kv: -sum(r.worker_s for r in kv[1])):
            lines.append(f"  {key:40} {len(rs):4} {sum(r.worker_s for r in rs):7.2f} {sum(r.call_s for r in rs):7.2f}")
        for device, lease in self.leases.items():
            lines += _lease_lines(device, lease.windows, self.start, w)
        if self.smi.values:
            v = self.smi.values
            lines.append(f"nvidia-smi utilization.gpu: mean {sum(v) / len(v):.0f}% over {len(v)} samples")
        s = self.sampler
        if s.samples:
            lines.append(f"sampler: {s.samples} samples, woke {1000 * s.late_s / s.samples:.1f} ms late on average "
                         f"(asked every {1000 * s.interval_s:.0f} ms; late means the GIL was busy)")
            lines.append("thread-samples by group: " + ", ".join(f"{g} {n}" for g, n in s.threads.most_common()))
            for group in ("porter-pool", "porter-prepare", "main"):
                total = s.threads.get(group, 0)
                if not total:
                    continue
                lines.append(f"{group}: on the stack (share of that group's thread-samples), cumulative:")
                top = [(label, n) for (g, label), n in s.cumulative.most_common() if g == group][:40]
                lines += [f"  {n / total:6.1%} {label}" for label, n in top]
                lines.append(f"{group}: top of the stack:")
                top = [(label, n) for (g, label), n in s.own.most_common() if g == group][:25]
                lines += [f"  {n / total:6.1%} {label}" for label, n in top]
        return "\n".join(lines)


def _lease_lines(device: int, windows: list[Any], start: float, wall: float) -> list[str]:
    """How the round's time on one GPU's lease divides: held by timing alone, held by cases (any
    number at once), held by none."""
    if not windows:
        return []
    exclusive = sum(x.end - x.start for x in windows if x.exclusive)
    spans = sorted((max(x.start, start), x.end) for x in windows if not x.exclusive)
    shared = 0.0
    cur_start, cur_end = None, None
    for a, b in spans:
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                shared += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        shared += cur_end - cur_start
    depth = sum(x.end - x.start for x in windows if not x.exclusive) / shared if shared else 0.0
    idle = max(0.0, wall - exclusive - shared)
    return [f"GPU {device} lease: timing alone {exclusive:.2f} s ({sum(x.exclusive for x in windows)} windows), "
            f"cases {shared:.2f} s (on average {depth:.2f} jobs at once), no job {idle:.2f} s"]
