"""What the GPU worker keeps between jobs: loaded modules, parsed specs, drawn inputs, cached
references, porter's own kernels (memory scrubs, digest) and each run's case buffers."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from porter.gate import layout
from porter.gate.layout import Placement
from porter.gate.runner.digestkey import digest_key
from porter.gate.runner.launch import Launch
from porter.gate.runner.localmem import LocalScrub
from porter.gate.runner.mix import MIX_SOURCE
from porter.gate.runner.pinned import host_empty
from porter.gate.runner.protocol import PREFETCH_DEPTH

# A size set as a key: its (name, value) pairs, sorted.
SizesKey = tuple[tuple[str, int], ...]
# The kernel a case launches: its cubin, its entry and its launch's repr.
KernelKey = tuple[bytes, str, str]
InputKey = tuple[str, int, SizesKey, int, str]  # a case's inputs: the spec's file and version, sizes, seed, value case

INPUT_CACHE_BYTES = 1 << 30  # host inputs a worker keeps between jobs


def _nbytes(args: dict[str, Any]) -> int:
    return sum(v.nbytes for v in args.values() if isinstance(v, np.ndarray))


_SUPPORT_SOURCE = MIX_SOURCE + r"""
// Random words (a mix of the key and the word's place): nothing a kernel could recognise.
extern "C" __global__ void porter_scrub_shared(unsigned int words, unsigned long long key) {
    extern __shared__ unsigned int porter_shared[];
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) {
        porter_shared[i] = (unsigned int)porter_mix(key, blockIdx.x * (unsigned long long)words + i);
    }
}

// n random bytes (a mix of the key and the byte's place): a guard band's pattern, made again from
// its key wherever the band is compared byte by byte.
extern "C" __global__ void porter_fill_random(unsigned char* out, unsigned long long n, unsigned long long key) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        out[i] = (unsigned char)porter_mix(key, i);
    }
}

// A weighted 64-bit sum of n bytes (wrapping), each 32-bit word's weight an odd mix of its place
// and the run's secret key (porter.gate.runner.digestkey), the tail bytes' of places no word has:
// equal contents give equal digests, in any launch order, and a kernel that does not know the key
// cannot write other bytes of the same digest. slot picks where in ``out`` it lands (one slot
// per timed launch).
extern "C" __global__ void porter_digest(const unsigned char* data, unsigned long long n,
                                         unsigned long long* out, unsigned int slot, unsigned long long key) {
    unsigned long long words = n / 4, acc = 0;
    const unsigned int* w = reinterpret_cast<const unsigned int*>(data);
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        acc += ((unsigned long long)w[i] + 1ull) * (porter_mix(key, i) | 1ull);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long i = words * 4; i < n; ++i) {
            acc += ((unsigned long long)data[i] + 1ull) * (porter_mix(key, i + (1ull << 40)) | 1ull);
        }
    }
    atomicAdd(out + slot, acc);
}
"""


class _Support(NamedTuple):
    """porter's own kernels in a worker, and what their launches need."""

    scrub: Any
    digest: Any
    fill: Any
    most: int  # opt-in shared memory per block, bytes
    sms: int
    local: LocalScrub


class LoadedModule:
    """A candidate's module: its kernels by entry, its ``.global`` variables and their load-time images.

    Across the cases of a check the globals carry over, as across the calls of a real program:
    a kernel that latches the first case's scalars or counts its launches goes wrong in a later
    case. :meth:`restore` puts them back as they were when the module loaded: at the start of
    each check (so checks are reproducible) and before every timed launch (so nothing a kernel
    remembered, a cache of results above all, is timed). The kernels of a hot loop of several
    share one module, and so its globals, as in the program.
    """

    def __init__(self, cp: Any, module: Any, cubin: bytes) -> None:
        from porter.gate.runner.cubin import module_globals

        self.cp, self.module = cp, module
        self._functions: dict[str, tuple[Any, int]] = {}  # entry -> (function, opt-in shared bytes)
        self.globals: list[tuple[Any, Any]] = []
        self.names: list[str] = []  # the variables' names, in the order of ``globals``
        # no launch since it loaded or was restored: the next may set its variables for good (see state_moves)
        self.fresh = True
        for var in module_globals(cubin):
            if var.size <= 0:
                continue
            view = cp.ndarray((var.size,), dtype=cp.uint8, memptr=module.get_global(var.name))
            self.globals.append((view, view.copy()))
            self.names.append(var.name)

    def function(self, entry: str, shared: int) -> Any:
        """The kernel ``entry``, allowed ``shared`` bytes of dynamic shared memory (asked of the
        driver once: a hot loop's launches follow each other without a query between them)."""
        fn, allowed = self._functions.get(entry, (None, 48 * 1024))
        if fn is None:
            fn = self.module.get_function(entry)
        if shared > allowed:
            if fn.max_dynamic_shared_size_bytes < shared:
                fn.max_dynamic_shared_size_bytes = shared
            allowed = shared
        self._functions[entry] = (fn, allowed)
        return fn

    def restore(self) -> None:
        for view, image in self.globals:
            view[...] = image
        self.fresh = True

    def snapshot(self) -> list[Any]:
        """A copy of each variable's bytes, made on the device in stream order: what :meth:`moved`
        compares with. (A copy, not porter's digest: a variable may start at any byte, and the
        digest reads words.)"""
        return [view.copy() for view, _ in self.globals]

    def moved(self, snapshot: list[Any]) -> Any:
        """1 for each variable whose bytes differ from ``snapshot``'s, else 0, as a uint64 device
        array computed in stream order and not read."""
        flags = [(view != kept).any() for (view, _), kept in zip(self.globals, snapshot, strict=True)]
        return self.cp.stack(flags).astype(self.cp.uint64) if flags else self.cp.zeros(0, dtype=self.cp.uint64)


def state_moves(names: list[str], moved: np.ndarray) -> dict[str, int]:
    """The module variables (``names``) that a launch moved, each with the first row of ``moved``
    (one row of :meth:`LoadedModule.moved` flags a launch, or a case, in order) that says so.

    Why the gate holds a module to this: it checks a few launches, and a program makes many. A
    kernel that leaves its module's variables as it found them starts every later launch from a
    state a checked launch started from, so what was checked holds for them; one whose state moves
    (a launch counter, a cache keyed on its arguments) can break at the launch after the last
    one checked, whatever that number is. Only a module's first launch (after it loaded or was
    restored) may set a variable for good: the rows start after it."""
    if not names:
        return {}
    moved = moved.reshape(-1, len(names))
    return {name: int(np.argmax(column != 0)) for name, column in zip(names, moved.T, strict=True) if column.any()}


class WorkerState:
    """What the worker keeps between jobs: loaded kernels, parsed specs, cached reference outputs.
    Its files (cubins) live in a folder of its own, inside ``folder`` when given (the worker's
    parking directory, which the parent removes even when it has to kill the worker); ``close``
    removes it."""

    def __init__(self, cp: Any, *, fenced: bool = True, folder: str | Path | None = None) -> None:
        self.cp = cp
        self.modules: dict[str, LoadedModule] = {}
        self.specs: dict[str, Any] = {}
        self.references: dict[tuple[str, int, SizesKey, int, str], dict[str, np.ndarray]] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="porter-worker-", dir=folder))
        self._flush: Any = None
        self._support: _Support | None = None
        # The run's key, which every process whose digests are compared with these has.
        self._digest_key = np.uint64(digest_key())
        self._cases: dict[int, tuple[tuple[KernelKey, str, int, SizesKey], Launch]] = {}  # run -> (key, its buffers)
        self._inputs: dict[InputKey, dict[str, Any]] = {}  # oldest first, at most INPUT_CACHE_BYTES
        self._drawing: dict[InputKey, Future[dict[str, Any]]] = {}  # a coming case's inputs, being drawn
        self._drawer: ThreadPoolExecutor | None = None
        if fenced:
            from porter.gate.runner.isolated import available

            self.fence_note = available(cp.cuda.Device().id)
        else:
            self.fence_note = "exact-size allocations (for compute-sanitizer)"
        self.fenced = fenced and not self.fence_note

    def close(self) -> None:
        if self._drawer is not None:
            self._drawer.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def placement(self, placing: str, nbytes: int, align: int, rng: np.random.Generator,
                  family: layout.Family) -> Placement:
        """Where a buffer of ``nbytes`` lies in a launch placed ``placing`` (see ``Launch``); plain
        with random guards where fences are unavailable."""
        if placing == "exact":
            return layout.exact()
        if not self.fenced:
            return layout.drawn(rng, nbytes, align, 1, "plain")
        from porter.gate.runner.isolated import granularity

        page = granularity(self.cp.cuda.Device().id)
        if placing == "flush":
            return layout.flush(nbytes, align, page)
        return layout.drawn(rng, nbytes, align, page, family)

    @staticmethod
    def _input_key(spec: Any, sizes: dict[str, int], seed: int, values: str) -> InputKey:
        return str(spec.path), os.stat(spec.path).st_mtime_ns, tuple(sorted(sizes.items())), seed, values

    def prefetch(self, spec: Any, sizes: dict[str, int], seed: int, values: str = "") -> None:
        """Start drawing a coming case's inputs in a thread of the worker's own, so that the draw
        (NumPy's generators release the GIL; a large draw uses every core) overlaps this case's
        launches, judgement and reference. :data:`PREFETCH_DEPTH` draws ahead at most, in the order
        asked: an older one not yet asked for is forgotten (a check that stopped at a fault never
        asks)."""
        from porter.gate.inputs import make_args

        key = self._input_key(spec, sizes, seed, values)
        if key in self._inputs or key in self._drawing:
            return
        if self._drawer is None:
            # The thread allocates page-locked memory (porter.gate.runner.pinned): on the worker's own
            # GPU, not in a context it would otherwise make on device 0.
            self._drawer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="porter-inputs",
                                              initializer=self.cp.cuda.Device().use)
        self._drawing[key] = self._drawer.submit(make_args, spec, dict(sizes), seed, values, empty=host_empty(self.cp))
        while len(self._drawing) > PREFETCH_DEPTH:
            self._drawing.pop(next(iter(self._drawing))).cancel()

    def inputs(self, spec: Any, sizes: dict[str, int], seed: int, values: str = "") -> dict[str, Any]:
        """``make_args`` for one case, kept for later jobs: the timing run draws the inputs of the
        timed case that was just checked (at 4096^3, three 16M-element draws), and the candidates of
        a port run share their seeds, so each case's inputs are drawn once per worker; drawn ahead
        where :meth:`prefetch` was asked for them (an error in that draw is raised here, as if the
        draw were made now). The arrays are only ever read or copied."""
        from porter.gate.inputs import make_args

        key = self._input_key(spec, sizes, seed, values)
        found = self._inputs.pop(key, None)
        if found is None:
            pending = self._drawing.pop(key, None)
            found = (pending.result() if pending is not None
                     else make_args(spec, sizes, seed, values, empty=host_empty(self.cp)))
        self._inputs[key] = found  # now the newest
        held = sum(_nbytes(args) for args in self._inputs.values())
        while held > INPUT_CACHE_BYTES and len(self._inputs) > 1:
            oldest = next(iter(self._inputs))
            held -= _nbytes(self._inputs.pop(oldest))
        return found

    def case_launch(self, spec: Any, sizes: dict[str, int], host_args: dict[str, Any], seed: int,
                    kernel_key: KernelKey, run: int = 0) -> Launch:
        """The candidate's buffers for run ``run`` of a case (the first flush, the others drawn:
        see :mod:`porter.gate.layout`; each run in buffers of its own, so that a case's runs all
        launch before any is read): those of the same run of the last case when it ran the same
        kernel at the same sizes (rebound to the new inputs), so that consecutive cases are
        consecutive calls on the same memory with new data; fresh ones otherwise."""
        key = (kernel_key, str(spec.path), os.stat(spec.path).st_mtime_ns, tuple(sorted(sizes.items())))
        held = self._cases.get(run)
        if held is not None and held[0] == key:
            if held[1].host_args is not host_args or held[1].seed != seed:
                held[1].rebind(host_args, seed)
            return held[1]
        if held is not None:
            held[1].release()
        launch = Launch(self, spec, sizes, host_args, seed, layout.run_placing(run))
        self._cases[run] = (key, launch)
        return launch

    def drop_case_launch(self) -> None:
        """Release every run's buffers (even after a fault: each is forgotten before it is released)."""
        while self._cases:
            _, (_, launch) = self._cases.popitem()
            launch.release()

    def spec(self, path: str, launch: dict[str, Any] | None = None, entry: str | None = None) -> Any:
        """The spec at ``path`` (parsed once per file version), with a candidate's own launch if
        given, launching ``entry`` where the spec has one kernel (the entry ``check --entry`` chose,
        or a source's own, may not be the spec's ``kernel.entry``)."""
        from dataclasses import replace

        from porter.gate.spec import load_spec, with_launch

        key = path + ":" + str(os.stat(path).st_mtime_ns)
        if key not in self.specs:
            self.specs[key] = load_spec(Path(path))
        if not launch and not entry:
            return self.specs[key]
        # One object per (file version, launch, entry): the reference cache keys on the spec's identity.
        variant = f"{key}:{launch!r}:{entry}"
        if variant not in self.specs:
            spec = self.specs[key]
            spec = with_launch(spec, launch, source="candidate") if launch else spec
            self.specs[variant] = replace(spec, entry=entry) if entry and not spec.kernels else spec
        return self.specs[variant]

    def module(self, cubin: bytes) -> LoadedModule:
        """The module of ``cubin``, loaded once per worker."""
        digest = hashlib.sha256(cubin).hexdigest()
        if digest not in self.modules:
            path = self.tmp / f"{digest}.cubin"
            path.write_bytes(cubin)
            self.modules[digest] = LoadedModule(self.cp, self.cp.RawModule(path=str(path)), cubin)
        return self.modules[digest]

    def flush_buffer(self) -> Any:
        """A buffer twice the L2's size: writing it evicts whatever the last launch left cached."""
        if self._flush is None:
            l2 = self.cp.cuda.Device().attributes.get("L2CacheSize", 50 * 1024 * 1024)
            self._flush = self.cp.empty(max(2 * l2, 256 * 1024 * 1024), dtype=self.cp.uint8)
        return self._flush

    def _support_module(self) -> _Support:
        """porter's own kernels, the opt-in shared size, the SM count."""
        if self._support is None:
            module = self.cp.RawModule(code=_SUPPORT_SOURCE)
            attributes = self.cp.cuda.Device().attributes  # a query of every attribute: once
            most = int(attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
            scrub = module.get_function("porter_scrub_shared")
            scrub.max_dynamic_shared_size_bytes = most
            sms = int(attributes["MultiProcessorCount"])
            self._support = _Support(scrub, module.get_function("porter_digest"),
                                     module.get_function("porter_fill_random"), most, sms,
                                     LocalScrub(self.cp, sms, int(attributes["MaxThreadsPerMultiProcessor"])))
        return self._support

    def scrub_kernel_memory(self) -> None:
        """Overwrite the memory every kernel has without a buffer, new random words for every launch,
        so that nothing a launch left there is read by the next and no kernel can recognise porter's
        harness by what it finds there: the shared memory of every SM (not cleared between kernels)
        and the local memory of every thread slot (:mod:`porter.gate.runner.localmem`)."""
        support = self._support_module()
        key = np.uint64(int.from_bytes(os.urandom(8), "little"))
        support.scrub((2 * support.sms,), (256,), (np.uint32(support.most // 4), key), shared_mem=support.most)
        support.local()

    def kernel_memory_held(self) -> None:
        """Raise unless every local-memory scrub so far held the whole GPU (see
        :class:`~porter.gate.runner.localmem.LocalScrub`): a launch after one that did not may
        have found what an earlier launch left in its frame."""
        if self._support is not None and (missed := self._support.local.missed()):
            raise RuntimeError(f"porter's local-memory scrub could not hold every SM at once ({missed} blocks "
                               "waited out their time: other work shares this GPU), so a launch may have read "
                               "what an earlier one left in local memory; this is porter's failure, not the kernel's")

    def fill_random(self, data: Any, key: int) -> None:
        """Fill the bytes ``data`` (a contiguous device array) with the random bytes of ``key``: one
        launch of porter's own kernel, the same bytes for the same key."""
        support = self._support_module()
        support.fill((2 * support.sms,), (256,), (data, np.uint64(data.size), np.uint64(key)))

    def digest(self, data: Any, out: Any, slot: int) -> None:
        """Add the digest of the bytes ``data`` into ``out[slot]`` (a uint64 device array, zeroed),
        keyed by the run's secret (:mod:`porter.gate.runner.digestkey`)."""
        support = self._support_module()
        support.digest((2 * support.sms,), (256,), (data, np.uint64(data.size), out, np.uint32(slot), self._digest_key))
