"""Control flow and synchronisation: bra, exit, bar/barrier, barrier.cluster, mbarrier, fences.

Named barriers count arrivals per warp (PTX executes ``bar`` per warp: a warp's arrival counts
all its threads); without a thread count a barrier waits for every warp not yet exited.
``bar.red`` also counts the arriving threads' predicates, and when the barrier completes writes
the reduction (popc, and, or) of its whole generation to every thread that arrived with it.

An mbarrier (PTX ISA "mbarrier"; async-tensor-core reference §4) holds its phase, the pending
and expected arrival counts and the transaction count. A phase completes when pending and tx are
both 0, after an arrive, a complete_tx or an expect_tx (the H200 completed a phase on an
expect_tx that brought tx back to 0). ``try_wait`` blocks the thread until the phase with the
other parity completes: the emulator retries it whenever some barrier changed, and reports a
deadlock, with the counts, when nothing can change any more. Barriers live in a dict keyed by
their shared-memory offset; their 8 bytes in shared memory are marked written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from porter.emu.access import shared_target
from porter.emu.context import Context, Exec, Exit, Jump, Wait, Yield, builder, trap
from porter.emu.decode import Op, Sink
from porter.emu.memory import RANK_SHIFT, SHARED_OFFSET_MASK
from porter.emu.state import Cta


@builder("bra", "brx")
def _bra(op: Op, ctx: Context) -> Exec:
    if op.parts[0] == "brx":
        raise ValueError("brx.idx")
    target = ctx.target(op, op.operands[0])
    jump = Jump(target)
    return lambda cta, idx: jump


@builder("exit", "ret")
def _exit(op: Op, ctx: Context) -> Exec:
    out = Exit()
    return lambda cta, idx: out


@builder("trap")
def _trap(op: Op, ctx: Context) -> Exec:
    def run(cta: Cta, idx: np.ndarray) -> None:
        raise trap(cta, op, "trap", f"trap executed by thread {int(idx[0])}")

    return run


@builder("membar", "fence", "setmaxnreg", "griddepcontrol", "pmevent", "nanosleep")
def _noop(op: Op, ctx: Context) -> Exec:
    if op.parts[0] == "nanosleep":
        y = Yield(lambda: "nanosleep in a loop that nothing else can end")
        return lambda cta, idx: y
    return lambda cta, idx: None


# ----------------------------------------------------------------------------- named barriers


@dataclass
class _Bar:
    generation: int = 0
    warps: set[int] = field(default_factory=set)
    expected: int | None = None  # threads; None: every warp not exited
    # bar.red in this generation: threads whose predicate was true, threads that voted, and
    # each arrival's writer of the reduced value (run when the barrier completes)
    true: int = 0
    votes: int = 0
    deliveries: list[Callable[[int, int], None]] = field(default_factory=list)


def _warp_sizes(cta: Cta) -> np.ndarray:
    n = cta.nthreads
    return np.array([min(32, n - 32 * w) for w in range((n + 31) // 32)])


def _live_warps(cta: Cta) -> set[int]:
    ex = cta.exited
    return {w for w in range((cta.nthreads + 31) // 32) if not ex[32 * w : 32 * w + 32].all()}


def _bar_done(cta: Cta, b: _Bar) -> bool:
    sizes = _warp_sizes(cta)
    if b.expected is None:
        return _live_warps(cta) <= b.warps
    return sum(int(sizes[w]) for w in b.warps) >= b.expected


def _bars(cta: Cta) -> dict[int, _Bar]:
    return cta.ext.setdefault("bars", {})


_BAR_KINDS = ("sync", "arrive", "red")


@builder("bar", "barrier")
def _bar(op: Op, ctx: Context) -> Exec:
    if op.parts[1] == "warp":
        return lambda cta, idx: None
    if op.parts[1] == "cluster":
        return _cluster_barrier(op, ctx)
    kind = next((p for p in op.parts[1:] if p in _BAR_KINDS), "sync")  # bar{.cta}.sync ...
    ops = op.operands
    vote = _vote(op, ctx) if kind == "red" else None
    if vote is not None:
        ops = ops[1:-1]  # bar.red d, a{, b}, {!}c
    bar_id = ctx.read(ops[0], "u32") if ops else None
    count = ctx.read(ops[1], "u32") if len(ops) > 1 else None
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> Wait | None:
        bid = int(np.asarray(bar_id(cta, idx)).reshape(-1)[0]) if bar_id is not None else 0
        b = _bars(cta).setdefault(bid, _Bar())
        b.expected = int(np.asarray(count(cta, idx)).reshape(-1)[0]) if count is not None else None
        b.warps |= set((idx // 32).tolist())
        if vote is not None:
            vote(cta, idx, b)
        if _bar_done(cta, b):
            _release(cta, b)
            return None
        if kind == "arrive":
            return None
        gen = b.generation

        def ready() -> bool:
            if b.generation == gen and _bar_done(cta, b):
                _release(cta, b)
            return b.generation > gen

        def reason() -> str:
            sizes = _warp_sizes(cta)
            arrived = sum(int(sizes[w]) for w in b.warps)
            want = b.expected if b.expected is not None else sum(int(sizes[w]) for w in _live_warps(cta))
            return (f"barrier {bid} (line {line}) waits for {want} threads; {arrived} arrived "
                    f"(warps {sorted(b.warps)})")

        return Wait(idx, reason, ready, kind="bar")

    return run


def _vote(op: Op, ctx: Context) -> Callable[[Cta, np.ndarray, _Bar], None]:
    """bar.red's own part: count the arriving threads' predicates into the barrier, and leave
    the writer of their destination, which gets popc (.popc.u32), all (.and.pred) or any
    (.or.pred) of the whole generation when the barrier completes."""
    how = next(p for p in op.parts if p in ("popc", "and", "or"))
    dest = ctx.write(op.operands[0], "u32" if how == "popc" else "pred")
    pred = ctx.read(op.operands[-1], "pred")

    def reduced(true: int, votes: int) -> np.uint32 | np.bool_:
        if how == "popc":
            return np.uint32(true)
        return np.bool_(true == votes if how == "and" else true > 0)

    def vote(cta: Cta, idx: np.ndarray, b: _Bar) -> None:
        b.true += int(np.broadcast_to(pred(cta, idx), idx.shape).sum())
        b.votes += idx.size
        b.deliveries.append(lambda true, votes: dest(cta, idx, np.full(idx.size, reduced(true, votes))))

    return vote


def _release(cta: Cta, b: _Bar) -> None:
    for deliver in b.deliveries:
        deliver(b.true, b.votes)
    b.true = b.votes = 0
    b.deliveries = []
    b.generation += 1
    b.warps = set()
    cta.launch.version += 1


@dataclass
class _ClusterBar:
    generation: int = 0
    arrived: dict[int, np.ndarray] = field(default_factory=dict)  # rank -> bool per thread
    arrive_gen: dict[int, np.ndarray] = field(default_factory=dict)  # rank -> generation each thread arrived in


def _cluster_state(cta: Cta) -> _ClusterBar:
    first = cta.cluster_ctas[0]
    state = first.ext.get("cluster.bar")
    if state is None:
        state = first.ext["cluster.bar"] = _ClusterBar()
        for c in cta.cluster_ctas:
            state.arrived[c.rank] = np.zeros(c.nthreads, bool)
            state.arrive_gen[c.rank] = np.full(c.nthreads, -1, np.int64)
    return state


def _cluster_try_complete(cta: Cta, s: _ClusterBar) -> None:
    if all((s.arrived[c.rank] | c.exited).all() for c in cta.cluster_ctas):
        s.generation += 1
        for c in cta.cluster_ctas:
            s.arrived[c.rank][:] = False
        cta.launch.version += 1


def _cluster_barrier(op: Op, ctx: Context) -> Exec:
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} / barrier.cluster.wait{.acquire}{.aligned}."""
    what = op.parts[2]

    def arrive(cta: Cta, idx: np.ndarray) -> None:
        s = _cluster_state(cta)
        s.arrived[cta.rank][idx] = True
        s.arrive_gen[cta.rank][idx] = s.generation
        _cluster_try_complete(cta, s)

    def wait(cta: Cta, idx: np.ndarray) -> Wait | None:
        s = _cluster_state(cta)
        gens = s.arrive_gen[cta.rank][idx]
        if (gens < s.generation).all():
            return None

        def ready() -> bool:
            _cluster_try_complete(cta, s)
            return bool((s.arrive_gen[cta.rank][idx] < s.generation).all())

        def reason() -> str:
            missing = sum(int((~(s.arrived[c.rank] | c.exited)).sum()) for c in cta.cluster_ctas)
            return f"barrier.cluster.wait: {missing} threads of the cluster have not arrived"

        return Wait(idx, reason, ready, kind="bar")

    if what == "arrive":
        return arrive
    if what == "wait":
        return wait

    def both(cta: Cta, idx: np.ndarray) -> Wait | None:
        arrive(cta, idx)
        return wait(cta, idx)

    return both


# ----------------------------------------------------------------------------- mbarrier


@dataclass
class MBarrier:
    expected: int
    pending: int
    phase: int = 0
    tx: int = 0
    line: int = 0  # where it was initialised

    def maybe_complete(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
            return True
        return False

    def arrive(self, count: int) -> None:
        while count > 0:
            take = min(count, self.pending)
            self.pending -= take
            count -= take
            if not self.maybe_complete():
                if count:  # more arrivals than pending while tx is outstanding: they are lost
                    self.pending -= count
                break

    def describe(self) -> str:
        return (f"phase {self.phase} (parity {self.phase & 1}), {self.pending} of {self.expected} arrivals pending, "
                f"tx-count {self.tx} bytes")


def _mbars(cta: Cta) -> dict[int, MBarrier]:
    return cta.ext.setdefault("mbar", {})


def barrier_at(cta: Cta, addr: int, op: Op, *, cluster: bool = False) -> tuple[Cta, MBarrier]:
    """The mbarrier at shared address ``addr`` (another CTA's with ``cluster`` and a rank in the address)."""
    target, offs = shared_target(cta, np.array([addr], np.int64), 8, op.line, cluster=cluster)
    off = int(offs[0])
    bar = _mbars(target).get(off)
    if bar is None:
        raise trap(cta, op, "deadlock", f"mbarrier at shared offset 0x{off:x} used before mbarrier.init")
    return target, bar


def _changed(cta: Cta) -> None:
    cta.launch.version += 1


def arrive_on(cta: Cta, addr: int, count: int, op: Op, *, tx: int = 0, cluster: bool = True) -> None:
    """Arrive ``count`` times (after adding ``tx`` expected bytes) on the mbarrier at ``addr``."""
    _, bar = barrier_at(cta, addr, op, cluster=cluster)
    bar.tx += tx
    bar.arrive(count)
    _changed(cta)


def complete_tx(cta: Cta, addr: int, nbytes: int, op: Op) -> None:
    """A TMA or bulk copy's completion: tx -= bytes, then the phase check."""
    _, bar = barrier_at(cta, addr, op, cluster=True)
    bar.tx -= nbytes
    bar.maybe_complete()
    _changed(cta)


def per_address(addrs: np.ndarray) -> dict[int, int]:
    vals, counts = np.unique(addrs.astype(np.int64), return_counts=True)
    return {int(v): int(c) for v, c in zip(vals, counts, strict=True)}


@builder("mbarrier")
def _mbarrier(op: Op, ctx: Context) -> Exec:
    what = op.parts[1]
    cluster = "shared::cluster" in op.parts
    ops = op.operands
    if what == "init":
        addr = ctx.address(ops[0], "shared")
        count = ctx.read(ops[1], "u32")

        def init(cta: Cta, idx: np.ndarray) -> None:
            a = addr(cta, idx)
            n = np.broadcast_to(np.asarray(count(cta, idx)), (idx.size,))
            for i, ad in enumerate(a.tolist()):
                target, offs = shared_target(cta, np.array([ad], np.int64), 8, op.line, cluster=False)
                off = int(offs[0])
                _mbars(target)[off] = MBarrier(int(n[i]), int(n[i]), line=op.line)
                target.smem[off : off + 8] = 0
                target.smem_written[off : off + 8] = True
            _changed(cta)

        return init
    if what == "inval":
        addr = ctx.address(ops[0], "shared")

        def inval(cta: Cta, idx: np.ndarray) -> None:
            for ad in addr(cta, idx).tolist():
                _mbars(cta).pop(int(ad) & SHARED_OFFSET_MASK, None)

        return inval
    if what in ("arrive", "arrive_drop"):
        return _arrive(op, ctx, cluster)
    if what in ("expect_tx", "complete_tx"):
        addr = ctx.address(ops[0], "shared")
        tx = ctx.read(ops[1], "u32")

        def txop(cta: Cta, idx: np.ndarray) -> None:
            a = addr(cta, idx)
            n = np.broadcast_to(np.asarray(tx(cta, idx)), (idx.size,))
            for i, ad in enumerate(a.tolist()):
                _, bar = barrier_at(cta, int(ad), op, cluster=True)
                bar.tx += int(n[i]) if what == "expect_tx" else -int(n[i])
                bar.maybe_complete()
            _changed(cta)

        return txop
    if what in ("test_wait", "try_wait"):
        return _wait(op, ctx, blocking=what == "try_wait")
    if what == "pending_count":
        raise ValueError("mbarrier.pending_count")
    raise ValueError(f"mbarrier.{what}")


def _arrive(op: Op, ctx: Context, cluster: bool) -> Exec:
    ops = op.operands
    has_state = not (len(ops) and not isinstance(ops[0], Sink) and _is_address(ops[0]))
    state = ctx.write(ops[0], "b64") if has_state else None
    rest = ops[1:] if has_state else ops
    addr = ctx.address(rest[0], "shared::cluster" if cluster else "shared")
    expect = "expect_tx" in op.parts
    drop = op.parts[1] == "arrive_drop"
    arg = ctx.read(rest[1], "u32") if len(rest) > 1 else None

    def run(cta: Cta, idx: np.ndarray) -> None:
        a = addr(cta, idx).astype(np.int64)
        if not cluster:
            a = (a & SHARED_OFFSET_MASK) | (cta.rank << RANK_SHIFT)
        n = np.broadcast_to(np.asarray(arg(cta, idx)), (idx.size,)).astype(np.int64) if arg is not None else None
        tokens = np.zeros(idx.size, np.uint64)
        for i, ad in enumerate(a.tolist()):
            _, bar = barrier_at(cta, ad, op, cluster=True)
            tokens[i] = bar.phase
            if expect:
                assert n is not None
                bar.tx += int(n[i])
                count = 1
            else:
                count = int(n[i]) if n is not None else 1
            if drop:
                bar.expected -= count
            bar.arrive(count)
        _changed(cta)
        if state is not None:
            state(cta, idx, tokens)

    return run


def _is_address(operand: object) -> bool:
    from porter.emu.decode import Addr

    return isinstance(operand, Addr)


def _wait(op: Op, ctx: Context, *, blocking: bool) -> Exec:
    ops = op.operands
    d = ctx.write(ops[0], "pred")
    addr = ctx.address(ops[1], "shared")
    parity = "parity" in op.parts
    arg = ctx.read(ops[2], "u32" if parity else "b64")

    def done(cta: Cta, idx: np.ndarray) -> tuple[np.ndarray, list[MBarrier]]:
        a = addr(cta, idx)
        want = np.broadcast_to(np.asarray(arg(cta, idx)), (idx.size,)).astype(np.int64)
        ok = np.zeros(idx.size, bool)
        bars = []
        for i, ad in enumerate(a.tolist()):
            _, bar = barrier_at(cta, int(ad) & SHARED_OFFSET_MASK | (cta.rank << RANK_SHIFT), op, cluster=True)
            bars.append(bar)
            if parity:
                ok[i] = (int(want[i]) & 1) != (bar.phase & 1)
            else:
                ok[i] = bar.phase != int(want[i])  # the state token of an arrive in the current phase
        return ok, bars

    def run(cta: Cta, idx: np.ndarray) -> Wait | Yield | None:
        ok, bars = done(cta, idx)
        d(cta, idx, ok)
        if ok.all():
            return None
        waiting = idx[~ok]
        bar = bars[int(np.argmax(~ok))]
        want = int(np.asarray(arg(cta, idx)).reshape(-1)[0])

        def reason() -> str:
            what = f"parity {want & 1}" if parity else "its phase"
            tx = f"; {bar.tx} expected bytes never delivered" if bar.tx > 0 else ""
            return (f"mbarrier (initialised at line {bar.line}) waited on for {what} by {waiting.size} thread(s): "
                    f"{bar.describe()}{tx}")

        # try_wait may suspend the thread until the phase completes (fast: the min-PC schedule does)
        # or return False after a time limit (the per-warp schedules do, so that a kernel which
        # does not loop on a False is caught); test_wait always returns at once.
        if blocking and not cta.launch.deferred:
            return Wait(waiting, reason, None, kind="mbarrier")
        return Yield(reason)

    return run

