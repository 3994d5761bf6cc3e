"""Running the threads of one cluster: groups of threads at one PC, and who runs next.

Threads that share a PC (and, in the per-warp schedules, a warp) form a *group* and run
together, vectorised. A divergent branch splits a group; groups at the same PC merge again. The
group to run is the one with the lowest PC among those of the chosen unit (the "min-PC" rule:
for structured code the threads that fell behind catch up with the ones waiting at the join,
so the halves of a divergent ``if`` meet at its end, and the threads that left a loop wait for
those still in it).

Schedules:

- ``"minpc"``: one unit, the whole cluster; groups of several warps run together (fastest);
  asynchronous operations (TMA, bulk copies, tcgen05.mma, tcgen05.commit) complete when issued.
- ``"round_robin"``: each warp its own unit; at every sync point (a wait, an exit, a yield) the
  next warp in turn runs; asynchronous operations complete at the next scheduling decision, in
  issue order.
- ``"random:SEED"``: each warp its own unit; at every sync point a seeded random runnable warp;
  asynchronous operations complete at the next scheduling decision in a seeded random order (a
  thread's tcgen05 operations stay in issue order: a commit first runs the MMAs before it).

A group runs until it blocks, exits, yields, diverges or takes a branch; between sync points a
warp keeps running, so the schedules differ in the order of the stretches between sync points,
which is where an ordering race shows.

A thread that polls (``nanosleep``, a failed ``mbarrier.test_wait``) waits until something else
changes; when nothing else can run it goes on with what it saw. Only when the cluster comes back
to a state it was already in at such a moment (the same registers, PCs and memory) is it a spin
loop that can never end, reported as a deadlock.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np

from porter.emu.context import Exec, Exit, Jump, Reader, Wait, Yield
from porter.emu.decode import Program
from porter.emu.diagnostics import Diagnostic, EmuTrap
from porter.emu.state import Cta


@dataclass(eq=False)
class Group:
    cta: Cta
    pc: int
    idx: np.ndarray  # sorted thread indices within the CTA
    unit: int  # scheduling unit: 0 (min-PC) or the warp (rank * 4096 + warp)
    wait: Wait | None = None
    version: int = -1  # launch.version when a retry wait blocked


class Scheduler:
    def __init__(self, program: Program, execs: list[Exec], guards: list[Reader | None], ctas: list[Cta],
                 schedule: str, max_steps: int) -> None:
        self.program = program
        self.execs = execs
        self.guards = guards
        self.ctas = ctas
        self.per_warp = schedule != "minpc"
        self.rng = random.Random(int(schedule.split(":", 1)[1])) if schedule.startswith("random") else None
        if schedule not in ("minpc", "round_robin") and self.rng is None:
            raise ValueError(f"unknown schedule {schedule!r} (minpc, round_robin or random:SEED)")
        self.max_steps = max_steps
        self.groups: list[Group] = []
        for cta in ctas:
            if self.per_warp:
                for w in range((cta.nthreads + 31) // 32):
                    idx = np.arange(32 * w, min(32 * w + 32, cta.nthreads))
                    self.groups.append(Group(cta, 0, idx, cta.rank * 4096 + w))
            else:
                self.groups.append(Group(cta, 0, np.arange(cta.nthreads), 0))
        self.last_unit = -1
        self.keep_unit = False
        self.idle_states: set[bytes] = set()  # states in which only polling threads could go on
        for cta in ctas:
            cta.launch.deferred = self.per_warp
        # Warpgroup-collective instructions: the warps of a warpgroup meet there (see _rendezvous).
        self.warpgroup_ops = {i for i, op in enumerate(program.ops) if op.parts[0] == "wgmma"}

    # -- choosing ---------------------------------------------------------------------------

    def _runnable(self) -> list[Group]:
        launch = self.ctas[0].launch
        out = []
        for g in self.groups:
            if g.wait is not None:
                if g.wait.ready is not None:
                    if g.wait.ready():
                        g.wait = None
                        g.pc += 1
                elif g.wait.kind != "warpgroup" and g.version != launch.version:
                    g.wait = None  # retry the check
            if g.wait is None:
                out.append(g)
        return out

    def _rendezvous(self) -> None:
        """Warps waiting at a warpgroup instruction go on as one group once every live warp of
        their warpgroup is there."""
        waiting: dict[tuple[int, int, int], list[Group]] = {}
        for g in self.groups:
            if g.wait is not None and g.wait.kind == "warpgroup":
                waiting.setdefault((id(g.cta), g.pc, int(g.idx[0]) // 128), []).append(g)
        for (_, _, wg), groups in waiting.items():
            cta = groups[0].cta
            idx = np.unique(np.concatenate([g.idx for g in groups]))
            lo, hi = 128 * wg, min(128 * wg + 128, cta.nthreads)
            live = np.arange(lo, hi)[~cta.exited[lo:hi]]
            if np.isin(live, idx).all():
                first = groups[0]
                first.idx, first.wait = idx, None
                first.unit = min(g.unit for g in groups)
                for g in groups[1:]:
                    self.groups.remove(g)

    def _merge(self, runnable: list[Group]) -> list[Group]:
        seen: dict[tuple[int, int, int], Group] = {}
        keep: list[Group] = []
        for g in runnable:
            key = (id(g.cta), g.pc, g.unit)
            other = seen.get(key)
            if other is None:
                seen[key] = g
                keep.append(g)
                continue
            other.idx = np.union1d(other.idx, g.idx)
            self.groups.remove(g)
        return keep

    def _complete_async(self) -> None:
        launch = self.ctas[0].launch
        while launch.pending:
            batch, launch.pending = launch.pending, []
            if self.rng is not None:
                self.rng.shuffle(batch)
            for complete in batch:
                complete()
            launch.version += 1

    def pick(self) -> Group | None:
        self._complete_async()
        self._rendezvous()
        runnable = self._merge(self._runnable())
        if self.rng is not None:
            # A random schedule may also let a thread whose poll failed go on at once, before
            # anything changes: the order in which a kernel that ignores the failure goes wrong.
            polls = [g for g in self.groups if g.wait is not None and g.wait.kind == "poll"]
            if polls and runnable and self.rng.random() < 0.5:
                chosen = self.rng.choice(polls)
                chosen.wait = None
                runnable.append(chosen)
        if not runnable:
            runnable = self._merge(self._wake_polls())
        if not runnable:
            return None
        fresh = runnable
        units = sorted({g.unit for g in fresh})
        if self.keep_unit and self.last_unit in units:
            unit = self.last_unit
        elif self.rng is not None:
            unit = self.rng.choice(units)
        else:
            later = [u for u in units if u > self.last_unit]
            unit = later[0] if later else units[0]
        self.last_unit = unit
        return min((g for g in fresh if g.unit == unit), key=lambda g: g.pc)

    def _wake_polls(self) -> list[Group]:
        """Polling threads, let go on because nothing else can run (a sleep ends, a poll returns
        False); none the second time the cluster is in the same state here: the same poll would
        follow again, forever."""
        polls = [g for g in self.groups if g.wait is not None and g.wait.kind == "poll"]
        if not polls:
            return []
        state = self._state()
        if state in self.idle_states:
            return []
        self.idle_states.add(state)
        for g in polls:
            g.wait = None
        return polls

    def _state(self) -> bytes:
        """A digest of what the cluster's next steps depend on: every group's PC, threads and
        wait, every register, and the launch's version (which every store and barrier change
        bumps, so it stands for memory)."""
        h = hashlib.blake2b(digest_size=16)
        h.update(self.ctas[0].launch.version.to_bytes(8, "little", signed=True))
        rank = {id(c): i for i, c in enumerate(self.ctas)}
        for g in self.groups:
            h.update(f"{rank[id(g.cta)]}:{g.pc}:{g.wait.kind if g.wait else ''}".encode())
            h.update(g.idx.tobytes())
        for cta in self.ctas:
            for name in sorted(cta.regs):
                h.update(name.encode())
                h.update(cta.regs[name].tobytes())
        return h.digest()

    # -- running ----------------------------------------------------------------------------

    def run(self) -> None:
        while self.groups:
            g = self.pick()
            if g is None:
                self._deadlock()
                return
            self.keep_unit = self._step(g)
        self._complete_async()

    def _step(self, g: Group) -> bool:
        """Run ``g`` until it stops; True when the same unit may go on (a branch, not a sync point)."""
        ops = self.program.ops
        execs, guards = self.execs, self.guards
        cta = g.cta
        launch = cta.launch
        nops = len(ops)
        # PCs where another runnable group of this unit waits: stop there, so that pick() merges them.
        meet = {o.pc for o in self.groups if o is not g and o.cta is cta and o.unit == g.unit and o.wait is None}
        first = True
        while True:
            pc = g.pc
            if pc in meet and not first:
                return True
            first = False
            if pc >= nops:
                self._exit(g, g.idx)
                return False
            idx = g.idx
            guard = guards[pc]
            if guard is not None:
                mask = np.broadcast_to(guard(cta, idx), idx.shape)
                sub = idx[mask]
                if sub.size == 0:
                    g.pc = pc + 1
                    continue
            else:
                mask = None
                sub = idx
            if pc in self.warpgroup_ops and not self._whole_warpgroups(cta, sub):
                def reason(sub: np.ndarray = sub) -> str:
                    return (f"warps {sorted(set((sub // 32).tolist()))} wait for the rest of "
                            "their warpgroup at a warpgroup instruction")

                warpgroup_wait = Wait(sub, reason, None, kind="warpgroup")
                going = np.setdiff1d(idx, sub, assume_unique=True)
                if going.size:
                    self.groups.append(Group(cta, pc, sub, g.unit, warpgroup_wait, launch.version))
                    g.idx, g.pc = going, pc + 1
                    return True
                g.wait, g.version = warpgroup_wait, launch.version
                return False
            cta.current = sub
            launch.steps += 1
            if launch.steps > self.max_steps:
                raise EmuTrap(Diagnostic("trap", ops[pc].line, f"step budget of {self.max_steps} instruction "
                                         "executions exceeded (an endless loop?)", cta.ctaid, True))
            out = execs[pc](cta, sub)
            if out is None:
                g.pc = pc + 1
                continue
            if isinstance(out, Jump):
                if mask is None or sub.size == idx.size:
                    g.pc = out.target
                    return True
                g.idx = idx[~mask]
                g.pc = pc + 1
                self.groups.append(Group(cta, out.target, sub, g.unit))
                return True
            if isinstance(out, Exit):
                self._exit(g, sub)
                return False
            if isinstance(out, Wait):
                waiting = out.waiting
                going = np.setdiff1d(idx, waiting, assume_unique=True)
                if going.size:
                    self.groups.append(Group(cta, pc, waiting, g.unit, out, launch.version))
                    g.idx = going
                    g.pc = pc + 1
                    return True
                g.wait = out
                g.version = launch.version
                return False
            if isinstance(out, Yield):
                g.pc = pc + 1
                g.wait = Wait(sub, out.reason, None, kind="poll", line=ops[pc].line)
                g.version = launch.version
                return False
            raise TypeError(f"bad outcome {out!r}")

    @staticmethod
    def _whole_warpgroups(cta: Cta, idx: np.ndarray) -> bool:
        for wg in np.unique(idx // 128):
            lo, hi = 128 * int(wg), min(128 * int(wg) + 128, cta.nthreads)
            live = np.arange(lo, hi)[~cta.exited[lo:hi]]
            if not np.isin(live, idx).all():
                return False
        return True

    def _exit(self, g: Group, threads: np.ndarray) -> None:
        g.cta.exited[threads] = True
        g.cta.launch.version += 1
        rest = np.setdiff1d(g.idx, threads, assume_unique=True)
        if rest.size:
            g.idx = rest
            g.pc += 1
        else:
            self.groups.remove(g)

    def _deadlock(self) -> None:
        findings = self.ctas[0].launch.findings
        for g in self.groups:
            assert g.wait is not None
            op = self.program.ops[g.pc]
            line = g.wait.line or op.line
            text = next((o.text for o in self.program.ops if o.line == line), op.text)
            findings.add(Diagnostic(
                "deadlock", line, f"{g.idx.size} thread(s) (first {int(g.idx[0])}) wait forever at "
                f"`{text}`: {g.wait.reason()}", g.cta.ctaid, True,
                {"threads": g.idx.tolist()[:64], "kind": g.wait.kind}))
        raise Deadlocked()


class Deadlocked(Exception):
    """Every remaining thread waits on something that can no longer happen."""
