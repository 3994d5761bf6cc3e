"""The GPU worker: a child process that owns the CUDA context and runs untrusted kernels.

It receives jobs over a pipe (see ``client.Runner``) and answers each with a dict. Everything that
touches the GPU lives here, so the parent never imports CuPy.

A candidate is treated as an adversary that would pass by remembering, recognising or skipping.
Every launch starts with its inputs uploaded afresh, its outputs set to an initial state (NaN
poison, or random finite values: each case runs under both), scratch random and every SM's
shared memory overwritten with random words. Consecutive cases at the same sizes reuse the same
buffers with new data, and module ``.global`` variables carry from case to case, as in a program
that calls the kernel again and again; before every timed launch they are restored to their
load-time image. Where buffers lie is drawn per run from one family for every kind of launch
(:mod:`porter.gate.layout`); inputs are handed over read-only where fenced; random guard bytes
surround every buffer, and every buffer is scrubbed before it is freed,
so that no kernel can find another kernel's results (the reference's above all) in recycled
memory. Timed launches are digested, so that what was timed can be held to what was verified.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from porter.gate import layout
from porter.gate.layout import Placement
from porter.gate.runner.protocol import (
    CaseJob,
    CaseReply,
    Job,
    OutputsJob,
    OutputsReply,
    Reference,
    Reply,
    TimeJob,
    TimeReply,
)
from porter.gate.runner.transfer import Parking, parking_directory
from porter.gate.spec import DEFAULT_ALIGN
from porter.gate.usercode import load_callable
from porter.install import install_hint

SCRUB = 0x3C

# CUDA errors that leave the context usable: the worker carries on after them. Any other CUDA
# error (illegal address, misaligned access, a trap) poisons the context: the worker must restart.
_NON_STICKY = {
    "CUDA_ERROR_INVALID_VALUE",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "CUDA_ERROR_NOT_FOUND",
    "CUDA_ERROR_INVALID_IMAGE",
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "CUDA_ERROR_INVALID_PTX",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
}

INPUT_CACHE_BYTES = 1 << 30  # host inputs a worker keeps between jobs

REPEAT_LAUNCHES = 64  # consecutive untimed launches after the timing loop, globals carried over



def _nbytes(args: dict[str, Any]) -> int:
    return sum(v.nbytes for v in args.values() if isinstance(v, np.ndarray))


def _same_bytes(run: dict[str, np.ndarray], first: dict[str, np.ndarray]) -> bool:
    """Every output of ``run`` bit-identical to ``first``'s (NaNs at the same places included)."""
    return run.keys() == first.keys() and all(
        run[k].shape == first[k].shape and run[k].dtype == first[k].dtype
        and np.array_equal(run[k].reshape(-1).view(np.uint8), first[k].reshape(-1).view(np.uint8)) for k in run)


def _error_name(err: BaseException) -> str:
    text = str(err)
    for token in text.replace(":", " ").split():
        if token.startswith(("CUDA_ERROR_", "cudaError")):
            return token
    return ""


def is_sticky(err: BaseException) -> bool:
    name = _error_name(err)
    return bool(name) and name not in _NON_STICKY


class DeviceBuffer:
    """A device allocation laid out as ``placement`` says (see :mod:`porter.gate.layout`):
    ``[lead | data | tail]``, the lead and tail holding a random pattern (new for every buffer, so
    a kernel cannot write "the canary" back) that is compared after each launch.

    A ``fenced`` allocation sits in its own reservation of unmapped address space
    (``porter.gate.runner.isolated``): an access beyond the mapped pages faults at any distance.
    With ``read_only`` too, the kernel gets ``kernel_ptr``, a mapping through which it can only read.
    A ``plain`` one comes from CuPy's pool, near porter's other buffers.
    """

    def __init__(self, cp: Any, nbytes: int, placement: Placement, seed: int, *, read_only: bool = False) -> None:
        self.cp = cp
        self.nbytes = nbytes
        self.lead = placement.lead
        self._fence = None
        total = placement.size(nbytes)
        if placement.family == "fenced":
            from porter.gate.runner.isolated import IsolatedAllocation

            self._fence = IsolatedAllocation(total, cp.cuda.Device().id)
            memory = cp.cuda.UnownedMemory(self._fence.ptr, self._fence.size, self._fence)
            self.raw = cp.ndarray((self._fence.size,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))
        else:
            self.raw = cp.empty(total, dtype=cp.uint8)
        self.data = self.raw[self.lead : self.lead + nbytes]
        # What the kernel is handed: for an input, a read-only mapping of the same memory.
        self.kernel_ptr = (self._fence.read_only_alias() + self.lead if self._fence is not None and read_only
                           else self.ptr)
        end = self.lead + nbytes
        self.patterns = (random_bytes(cp, self.lead, seed), random_bytes(cp, self.raw.size - end, seed + 1))
        self.fill_guards()

    @property
    def ptr(self) -> int:
        return int(self.raw.data.ptr) + self.lead

    def fill_guards(self) -> None:
        before, after = self.patterns
        self.raw[: self.lead] = before
        self.raw[self.lead + self.nbytes :] = after

    def upload(self, host: np.ndarray) -> None:
        if self.nbytes:
            self.data.set(np.ascontiguousarray(host).reshape(-1).view(np.uint8))

    def copy_from(self, device_bytes: Any) -> None:
        if self.nbytes:
            self.data[...] = device_bytes

    def download(self) -> np.ndarray:
        """The data, as host bytes."""
        return self.data.get()

    def guard_violation(self, name: str) -> str:
        """Writes into the guard bytes, described, or '' when they are intact (compared on the GPU)."""
        problems = []
        before, after = self.patterns
        if before.size:
            bad = self.cp.flatnonzero(self.raw[: self.lead] != before)
            if bad.size:
                problems.append(f"{int(bad.size)} bytes written before its start (nearest {self.lead - int(bad[-1])} bytes before)")
        if after.size:
            bad = self.cp.flatnonzero(self.raw[self.lead + self.nbytes :] != after)
            if bad.size:
                problems.append(f"{int(bad.size)} bytes written past its end (first at byte +{int(bad[0])} after the last element)")
        return f"{name}: " + "; ".join(problems) if problems else ""

    def scrub(self) -> None:
        self.raw.fill(SCRUB)
        if self._fence is not None:
            self.cp.cuda.Device().synchronize()
            self.data = self.raw = None
            self._fence.free()
            self._fence = None


def random_bytes(cp: Any, nbytes: int, seed: int) -> Any:
    """``nbytes`` random bytes made on the GPU (a guard pattern of a few megabytes costs no upload)."""
    return cp.random.RandomState(seed).randint(0, 256, size=nbytes, dtype=cp.uint8)


_SUPPORT_SOURCE = r"""
// Random words (a 64-bit mix of the key and the word's place): nothing a kernel could recognise.
extern "C" __global__ void porter_scrub_shared(unsigned int words, unsigned long long key) {
    extern __shared__ unsigned int porter_shared[];
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) {
        unsigned long long z = key + (blockIdx.x * (unsigned long long)words + i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        porter_shared[i] = (unsigned int)(z ^ (z >> 31));
    }
}

// A position-weighted 64-bit sum of n bytes (wrapping): equal contents give equal digests, in
// any launch order; slot picks where in ``out`` it lands (one slot per timed launch).
extern "C" __global__ void porter_digest(const unsigned char* data, unsigned long long n,
                                         unsigned long long* out, unsigned int slot) {
    unsigned long long words = n / 4, acc = 0;
    const unsigned int* w = reinterpret_cast<const unsigned int*>(data);
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        acc += ((unsigned long long)w[i] + 1ull) * ((i * 0x9E3779B97F4A7C15ull) | 1ull);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long i = words * 4; i < n; ++i) {
            acc += ((unsigned long long)data[i] + 1ull) * (((i + (1ull << 40)) * 0x9E3779B97F4A7C15ull) | 1ull);
        }
    }
    atomicAdd(out + slot, acc);
}
"""


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

        self.module = module
        self._functions: dict[str, tuple[Any, int]] = {}  # entry -> (function, opt-in shared bytes)
        self.globals: list[tuple[Any, Any]] = []
        for var in module_globals(cubin):
            if var.size <= 0:
                continue
            view = cp.ndarray((var.size,), dtype=cp.uint8, memptr=module.get_global(var.name))
            self.globals.append((view, view.copy()))

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


class WorkerState:
    """What the worker keeps between jobs: loaded kernels, parsed specs, cached reference outputs.
    Its files (cubins) live in a folder of its own, inside ``folder`` when given (the worker's
    parking directory, which the parent removes even when it has to kill the worker); ``close``
    removes it."""

    def __init__(self, cp: Any, *, fenced: bool = True, folder: str | Path | None = None) -> None:
        self.cp = cp
        self.modules: dict[str, LoadedModule] = {}
        self.specs: dict[str, Any] = {}
        self.references: dict[tuple, dict[str, np.ndarray]] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="porter-worker-", dir=folder))
        self._flush: Any = None
        self._support: Any = None
        self._cases: dict[int, tuple[tuple, Launch]] = {}  # run -> (key, its buffers)
        self._inputs: dict[tuple, dict[str, Any]] = {}  # oldest first, at most INPUT_CACHE_BYTES
        if fenced:
            from porter.gate.runner.isolated import available

            self.fence_note = available(cp.cuda.Device().id)
        else:
            self.fence_note = "exact-size allocations (for compute-sanitizer)"
        self.fenced = fenced and not self.fence_note

    def close(self) -> None:
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

    def inputs(self, spec: Any, sizes: dict[str, int], seed: int, values: str = "") -> dict[str, Any]:
        """``make_args`` for one case, kept for later jobs: the timing run draws the inputs of the
        timed case that was just checked (at 4096^3, three 16M-element draws), and the candidates of
        a port run share their seeds, so each case's inputs are drawn once per worker. The arrays are
        only ever read or copied."""
        from porter.gate.inputs import make_args

        key = (str(spec.path), os.stat(spec.path).st_mtime_ns, tuple(sorted(sizes.items())), seed, values)
        found = self._inputs.pop(key, None)
        if found is None:
            found = make_args(spec, sizes, seed, values)
        self._inputs[key] = found  # now the newest
        held = sum(_nbytes(args) for args in self._inputs.values())
        while held > INPUT_CACHE_BYTES and len(self._inputs) > 1:
            oldest = next(iter(self._inputs))
            held -= _nbytes(self._inputs.pop(oldest))
        return found

    def case_launch(self, spec: Any, sizes: dict[str, int], host_args: dict[str, Any], seed: int,
                    kernel_key: tuple, run: int = 0) -> Launch:
        """The candidate's buffers for run ``run`` of a case (the first flush, the others drawn:
        see :mod:`porter.gate.layout`): those of the same run of the last case when it ran the same
        kernel at the same sizes (rebound to the new inputs), so that consecutive cases are
        consecutive calls on the same memory with new data; fresh ones otherwise."""
        key = (kernel_key, str(spec.path), os.stat(spec.path).st_mtime_ns, tuple(sorted(sizes.items())))
        held = self._cases.get(run)
        if held is not None and held[0] == key:
            held[1].rebind(host_args, seed)
            return held[1]
        if held is not None:
            held[1].release()
        launch = Launch(self, spec, sizes, host_args, seed, "flush" if run == 0 else "drawn")
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

    def _support_module(self) -> tuple[Any, Any, int, int]:
        """porter's own kernels (shared-memory scrub, digest), the opt-in shared size, the SM count."""
        if self._support is None:
            module = self.cp.RawModule(code=_SUPPORT_SOURCE)
            attributes = self.cp.cuda.Device().attributes  # a query of every attribute: once
            most = int(attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
            scrub = module.get_function("porter_scrub_shared")
            scrub.max_dynamic_shared_size_bytes = most
            self._support = (scrub, module.get_function("porter_digest"), most,
                             int(attributes["MultiProcessorCount"]))
        return self._support

    def scrub_shared(self) -> None:
        """Overwrite the shared memory of every SM with random words, new for every launch, so that
        nothing a launch left there is read by the next (shared memory is not cleared between
        kernels) and no kernel can recognise porter's harness by what it finds there."""
        scrub, _, most, sms = self._support_module()
        key = np.uint64(int.from_bytes(os.urandom(8), "little"))
        scrub((2 * sms,), (256,), (np.uint32(most // 4), key), shared_mem=most)

    def digest(self, data: Any, out: Any, slot: int) -> None:
        """Add the digest of the bytes ``data`` into ``out[slot]`` (a uint64 device array, zeroed)."""
        _, digest, _, sms = self._support_module()
        digest((2 * sms,), (256,), (data, np.uint64(data.size), out, np.uint32(slot)))


# (mantissa bits, exponent bits) of the IEEE-like float types: an all-ones exponent is inf or NaN.
_FLOAT_FIELDS = {"f64": (52, 11), "f32": (23, 8), "f16": (10, 5), "bf16": (7, 8), "e5m2": (2, 5)}


def random_finite(cp: Any, dtype: Any, nbytes: int, seed: int) -> Any:
    """``nbytes`` of random finite values of ``dtype``, made on the GPU: random bit patterns (every
    magnitude from subnormal to the largest finite), with the few that would be inf or NaN moved to
    the next exponent down. An output's initial contents that no kernel can tell from a result."""
    raw = random_bytes(cp, nbytes, seed)
    if not dtype.is_float or nbytes % dtype.itemsize:
        return raw
    words = raw.view({1: cp.uint8, 2: cp.uint16, 4: cp.uint32, 8: cp.uint64}[dtype.itemsize])
    if dtype.name == "e4m3":  # only S.1111.111 is NaN in e4m3fn
        words ^= ((words & words.dtype.type(0x7F)) == words.dtype.type(0x7F)).astype(words.dtype)
        return raw
    mantissa, exponent = _FLOAT_FIELDS[dtype.name]
    ones = words.dtype.type((1 << exponent) - 1)
    special = ((words >> words.dtype.type(mantissa)) & ones) == ones
    words ^= special.astype(words.dtype) << words.dtype.type(mantissa)
    return raw


def _scalar_arg(dtype: Any, value: float | int) -> Any:
    """A kernel argument of exactly the param's width (16-bit and 8-bit floats travel as raw bits)."""
    host = np.asarray(value).astype(dtype.numpy)
    if dtype.kind == "float" and dtype.itemsize <= 2:
        return host.view({1: np.uint8, 2: np.uint16}[dtype.itemsize])[()]
    return host[()]


class Launch:
    """The buffers and arguments of one run of the hot loop on one size set (one kernel, or the
    spec's sequence of kernels and zero steps), and the state before each run.

    ``seed`` drives everything random around the inputs: guard patterns, the padding of padded
    buffers, the outputs' random initial contents and the scratch contents (the inputs themselves
    come with ``host_args``).
    """

    def __init__(self, state: WorkerState, spec: Any, sizes: dict[str, int], host_args: dict[str, Any],
                 seed: int, placing: str = "flush") -> None:
        """``placing`` says where the buffers lie (see :mod:`porter.gate.layout`): ``flush`` (each
        ends at unmapped memory), ``drawn`` (a family and offsets drawn from ``seed``) or ``exact``
        (plain allocations of exactly the data, for compute-sanitizer's bounds checks)."""
        from porter.gate.inputs import GUARDS, stream
        from porter.gate.runner.padding import Padding

        cp = state.cp
        self.state, self.spec, self.sizes, self.seed = state, spec, sizes, seed
        self.buffers: dict[str, DeviceBuffer] = {}
        self.padding: dict[str, Padding] = {}
        self.held: dict[str, Any] = {}  # nondeterministic outputs held to the reference (see hold)
        self._pristine: dict[str, Any] = {}
        self._tables: dict[str, Any] = {}
        where = stream(seed, GUARDS, sizes, "layout")
        family = layout.draw_family(where, state.fenced)
        for p in spec.params:  # buffers first: a tensormap may describe a buffer listed after it
            nbytes = 0
            align = p.alignment() if p.kind == "buffer" else DEFAULT_ALIGN
            if p.kind == "buffer":
                memory = spec.memory_shape(p, sizes)
                nbytes = int(np.prod(memory, dtype=np.int64)) * p.dtype.itemsize
                padding = Padding.of(memory, spec.shape(p, sizes), p.dtype.itemsize)
                if padding is not None:
                    self.padding[p.name] = padding
            elif p.kind == "scratch":
                nbytes = spec.scratch_bytes(p, sizes)
            if p.kind == "buffer" or (p.kind == "scratch" and nbytes > 0):
                placement = state.placement(placing, nbytes, align, where, family)
                self.buffers[p.name] = DeviceBuffer(cp, nbytes, placement, int(where.integers(2**62)),
                                                    read_only=p.kind == "buffer" and p.role == "in")
        self.steps = spec.sequence()
        self.dims = [spec.launch_dims(sizes, step=step) if step.entry else None for step in self.steps]
        self.rebind(host_args, seed)

    def rebind(self, host_args: dict[str, Any], seed: int) -> None:
        """New inputs and scalars in the same buffers: the next case of the same sizes runs where
        the last one ran, as a program calls a kernel again and again on new data. What else the
        state before a launch holds (padding patterns, the outputs' random contents, scratch) is
        drawn from ``seed``, so that a case's launches are the same wherever its buffers came from."""
        from porter.gate.inputs import GUARDS, stream

        cp = self.state.cp
        self.host_args = host_args
        if seed != self.seed or not self._pristine:
            self.seed = seed
            self._pristine = {}
            for index, p in enumerate(self.spec.params):
                if p.name in self.padding:
                    rng = stream(seed, GUARDS, self.sizes, index, "padding")
                    pattern = rng.integers(0, 256, self.buffers[p.name].nbytes, dtype=np.uint8)
                    self._pristine[f"padding:{p.name}"] = (pattern, cp.asarray(pattern))
        self._pristine = {k: v for k, v in self._pristine.items()
                          if k.startswith(("initial:", "scratch:", "padding:"))}
        args: dict[str, Any] = {}
        for p in self.spec.params:
            if p.kind in ("buffer", "scratch"):
                buf = self.buffers.get(p.name)
                args[p.name] = np.uint64(buf.kernel_ptr if buf is not None else 0)
            elif p.kind == "tensormap":
                from porter.gate.runner.tensormap import encode_tiled

                target = self.spec.param(p.tensormap.tensor)
                args[p.name] = encode_tiled(self.buffers[target.name].kernel_ptr, target.dtype.name,
                                            target.dtype.itemsize, self.spec.tensormap_geometry(p, self.sizes))
            else:
                args[p.name] = _scalar_arg(p.dtype, host_args[p.name])
        self.args = [tuple(args[name] for name in step.args) for step in self.steps]

    def reset(self, initial: str = "poison") -> None:
        """The state before a launch: inputs uploaded afresh, outputs set to ``initial`` (see
        INITIAL_STATES), the padding of padded buffers to its pattern, scratch random, every SM's
        shared memory overwritten. Guard bands are written once and checked after each launch.
        The module's globals are left as the last launch left them, as in a program (a timed
        launch restores them first: see job_time)."""
        for index, p in enumerate(self.spec.params):
            buf = self.buffers.get(p.name)
            if buf is None:
                continue
            if p.kind == "scratch":
                buf.copy_from(self._device_pattern(p.name, index, buf.nbytes))
            elif p.role == "out":
                buf.copy_from(self._initial(p, index, initial))
            else:
                if p.name not in self._pristine:
                    self._pristine[p.name] = self.state.cp.asarray(self._input_image(p))
                buf.copy_from(self._pristine[p.name])
        self.state.scrub_shared()

    def _initial(self, p: Any, index: int, initial: str) -> Any:
        """An output's whole buffer before a launch: the view poisoned or random, the padding its pattern."""
        from porter.gate.inputs import INITIAL, stream

        cp = self.state.cp
        key = f"initial:{p.name}:{initial}"
        if key not in self._pristine:
            padding = self.padding.get(p.name)
            nbytes = padding.view_bytes if padding is not None else self.buffers[p.name].nbytes
            if initial == "poison":
                word = {1: cp.uint8, 2: cp.uint16, 4: cp.uint32, 8: cp.uint64}[p.dtype.itemsize]
                view = cp.empty(nbytes, dtype=cp.uint8)
                view.view(word).fill(p.dtype.poison_bits)
            else:
                rng = stream(self.seed, INITIAL, self.sizes, index, initial)
                view = random_finite(cp, p.dtype, nbytes, int(rng.integers(2**62)))
            if padding is not None:
                view = padding.image(cp, view, self._pristine[f"padding:{p.name}"][1])
            self._pristine[key] = view
        return self._pristine[key]

    def _input_image(self, p: Any) -> np.ndarray:
        """An input's whole buffer as host bytes: its values, in the padding's pattern if padded."""
        host = np.ascontiguousarray(self.host_args[p.name]).reshape(-1).view(np.uint8)
        padding = self.padding.get(p.name)
        if padding is None:
            return host
        return padding.image(np, host, self._pristine[f"padding:{p.name}"][0])

    def _device_pattern(self, name: str, index: int, nbytes: int) -> Any:
        from porter.gate.inputs import INITIAL, stream

        key = f"scratch:{name}"
        if key not in self._pristine:
            rng = stream(self.seed, INITIAL, self.sizes, index, "scratch")
            self._pristine[key] = self.state.cp.asarray(rng.integers(0, 256, nbytes, dtype=np.uint8))
        return self._pristine[key]

    def run(self, module: LoadedModule) -> None:
        """One run of the hot loop: every step in order, with nothing between them (no sync, no
        reset), as the program runs them."""
        for step, dims, args in zip(self.steps, self.dims, self.args, strict=True):
            if dims is None:
                for name in step.zero:
                    self._zero(name)
                continue
            fn = module.function(step.entry, dims.shared)
            fn(tuple(dims.grid), tuple(dims.block), args, shared_mem=int(dims.shared))

    def _zero(self, name: str) -> None:
        buf = self.buffers[name]
        padding = self.padding.get(name)
        if padding is None:
            buf.data.fill(0)
        else:
            padding.fill_view(buf.data, 0)

    def guard_problems(self) -> list[str]:
        """Writes into the guard bands, and into the padding of padded buffers, described."""
        problems = [problem for name, buf in self.buffers.items() if (problem := buf.guard_violation(name))]
        for name, padding in self.padding.items():
            changed = padding.changes(self.state.cp, self.buffers[name].data, self._pristine[f"padding:{name}"][1],
                                      name, self.spec.memory_shape(name, self.sizes)[-1])
            if changed:
                problems.append(changed)
        return problems

    def hold(self, reference: dict[str, np.ndarray]) -> None:
        """Hold the nondeterministic outputs to ``reference`` (see :mod:`porter.gate.runner.hold`)
        from now on: their digest slots get the count of elements outside the tolerance."""
        from porter.gate.runner.hold import HeldOutput

        cp = self.state.cp
        for p in self.spec.outputs:
            if not p.deterministic:
                atol, rtol = self.spec.tolerance(p.name, self.sizes)
                ref = cp.asarray(np.asarray(reference[p.name], dtype=np.float64).reshape(-1))
                self.held[p.name] = HeldOutput(ref, atol, rtol)

    def digest_outputs(self, out: Any, first_slot: int) -> None:
        """One number per output into consecutive slots of ``out``, from ``first_slot``: the
        digest of its buffer, or for a nondeterministic output the count of its elements outside
        the tolerance of the reference it is held to (0 when it is held to none)."""
        from porter.gate.runner.hold import decode

        cp = self.state.cp
        for k, p in enumerate(self.spec.outputs):
            buf = self.buffers[p.name]
            if p.deterministic:
                self.state.digest(buf.data, out, first_slot + k)
            elif p.name in self.held:
                padding = self.padding.get(p.name)
                raw = padding.view(cp, buf.data) if padding is not None else buf.data
                count = self.held[p.name].outside(cp, decode(cp, raw, p.dtype, self._tables))
                out[first_slot + k: first_slot + k + 1] = count.astype(cp.uint64)

    def collect(self) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
        """Outputs (host, the view of padded ones), guard violations, and inputs that the kernel modified."""
        outputs: dict[str, np.ndarray] = {}
        modified: list[str] = []
        guards = self.guard_problems()
        for p in self.spec.params:
            buf = self.buffers.get(p.name)
            if buf is None or p.kind != "buffer":
                continue
            data = buf.download()
            if p.role == "in":
                expected = self._input_image(p)
                changed = np.flatnonzero(data != expected)
                if changed.size:
                    modified.append(f"{p.name}: {changed.size} bytes changed (first at byte {changed[0]})")
            else:
                padding = self.padding.get(p.name)
                view = padding.view(np, data) if padding is not None else data
                outputs[p.name] = view.view(p.dtype.numpy).reshape(self.spec.shape(p, self.sizes)).copy()
        return outputs, guards, modified

    def release(self) -> None:
        for buf in self.buffers.values():
            buf.scrub()
        self.buffers.clear()
        self._pristine.clear()


def output_digests(state: WorkerState, launch: Launch) -> list[int]:
    """The digest of each output of the last launch (as the timing loop computes them)."""
    out = state.cp.zeros(len(launch.spec.outputs), dtype=state.cp.uint64)
    launch.digest_outputs(out, 0)
    return [int(x) for x in out.get()]


def _reference_array(result: dict[str, Any], p: Any) -> np.ndarray:
    """One output of a Python reference. For outputs of 16 bits or fewer, float32 holds the
    reference far beyond the output's own rounding and halves what crosses the pipe."""
    if p.name not in result:
        raise RuntimeError(f"the reference returned no output {p.name!r}")
    ref = np.asarray(result[p.name])
    if p.dtype.is_float and p.dtype.itemsize <= 2 and ref.dtype == np.float64:
        return ref.astype(np.float32)
    return ref


def _reference(state: WorkerState, spec: Any, sizes: dict[str, int], seed: int, values: str,
               host_args: dict[str, Any], reference: Reference) -> dict[str, np.ndarray]:
    # The spec is part of the key: two specs may share a ref.py but fill their inputs differently.
    key = (reference.key, id(spec), tuple(sorted(sizes.items())), seed, values)
    if key in state.references:
        return state.references[key]
    kind = reference.kind
    if kind == "python":
        fn = load_callable(reference.path, reference.function)
        inputs = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in host_args.items()}
        result = fn(inputs, dict(sizes))
        outs = {p.name: _reference_array(result, p) for p in spec.outputs}
    elif kind == "source":
        # A source that is itself a port declares its own launch; the source's entry is launched.
        spec = state.spec(str(spec.path), reference.launch, reference.entry or None)
        module = state.module(reference.cubin)
        launch = Launch(state, spec, sizes, host_args, seed)
        try:
            launch.reset()
            launch.run(module)
            state.cp.cuda.Device().synchronize()
            outs, guards, modified = launch.collect()
        finally:
            launch.release()
        if guards or modified:
            raise RuntimeError("the source kernel used as reference misbehaves: " + "; ".join(guards + modified))
    elif kind == "golden":
        with np.load(reference.path) as data:
            outs = {name: data[name] for name in data.files}
    else:
        raise RuntimeError(f"unknown reference kind {kind!r}")
    if len(state.references) > 64:
        state.references.clear()
    state.references[key] = outs
    return outs


def job_case(state: WorkerState, job: CaseJob) -> CaseReply:
    """One case of the sweep: run the candidate's hot loop once per initial output state on the
    same fresh inputs, each run from a fully restored state (see ``Launch.reset``) and in buffers
    of its own: the first run's end at unmapped memory, the second's lie as the case's seed draws
    (see :mod:`porter.gate.layout`).

    ``launch`` is the candidate's own launch directive (or its own sequence of kernels); the
    reference (a source kernel included) always runs with the spec's own launch; ``first`` marks
    a check's first case. ``entry`` is the candidate's entry as the caller read it; the kernels
    run are those of the spec with the directive applied. The reply carries each run's outputs,
    the digests of the first run's outputs (which timed launches must reproduce; 0 for an output
    declared nondeterministic, which the caller compares with the reference instead) and the
    memory-safety findings.
    """
    sizes, seed, values, initials = job.sizes, job.seed, job.values, job.initials
    source_spec = state.spec(job.spec_path)
    spec = state.spec(job.spec_path, job.launch, job.entry)
    host_args = state.inputs(spec, sizes, seed, values)
    module = state.module(job.cubin)
    if job.first:  # a check starts from the module as loaded, whatever an earlier check left in it
        module.restore()
    kernel_key = (job.cubin, job.entry, repr(job.launch))
    per_run: list[dict[str, np.ndarray] | None] = []
    guards: list[str] = []
    modified: list[str] = []
    digests: list[int] = []
    start = time.perf_counter()
    try:
        for k, initial in enumerate(initials):
            candidate = state.case_launch(spec, sizes, host_args, seed, kernel_key, k)
            candidate.reset(initial)
            try:
                candidate.run(module)
                state.cp.cuda.Device().synchronize()
            except Exception as err:
                if k == 0:
                    raise
                # Keep the CUDA error's name in the text: it decides whether the worker restarts.
                raise RuntimeError(f"{type(err).__name__}: {err} (in the launch whose outputs started as {initial}, "
                                   f"its buffers placed otherwise; the launch from {initials[0]} completed: the kernel "
                                   "depends on the output's initial contents or on where its buffers lie)") from err
            if k == 0:
                digests = output_digests(state, candidate)
            outs, g, m = candidate.collect()
            # A later run bit-identical to the first is sent as None: the parent judges it with the
            # first, and the outputs cross the pipe once.
            per_run.append(None if per_run and _same_bytes(outs, per_run[0]) else outs)
            guards += [x for x in g if x not in guards]
            modified += [x for x in m if x not in modified]
    except BaseException:
        try:
            state.drop_case_launch()
        except Exception:
            state._cases.clear()
        raise
    if guards:  # the patterns are spent: the next case gets fresh buffers
        state.drop_case_launch()
    kernel_s = time.perf_counter() - start
    # A reference the parent already holds for this case (a port run's earlier candidate) is
    # neither computed nor sent again.
    ref = None if job.reference.kind == "held" else _reference(state, source_spec, sizes, seed, values,
                                                               host_args, job.reference)
    return CaseReply(outputs=per_run, initials=list(initials), reference=ref, guards=guards, modified=modified,
                     digests=digests, kernel_s=kernel_s, fence=state.fence_note)


def _baseline_args(cp: Any, spec: Any, sizes: dict[str, int], launch: Launch) -> dict[str, Any]:
    """CuPy views of the launch's buffers, for a library baseline callable."""
    views: dict[str, Any] = {}
    for p in spec.params:
        if p.kind == "buffer":
            shape = tuple(spec.shape(p, sizes))
            try:
                dtype = cp.dtype(p.dtype.numpy)
                cp.empty(0, dtype=dtype)
            except Exception:  # bf16 / fp8: CuPy has no such dtype; hand over the raw bits
                dtype = {1: cp.uint8, 2: cp.uint16}[p.dtype.itemsize]
            memory = launch.buffers[p.name].data.view(dtype).reshape(spec.memory_shape(p, sizes))
            views[p.name] = memory[..., : shape[-1]] if memory.shape != shape else memory
        elif p.kind == "scalar":
            views[p.name] = launch.host_args[p.name]
    views.update({v.name: launch.host_args[v.name] for v in spec.values})
    return views


def job_time(state: WorkerState, job: TimeJob) -> TimeReply:
    """Time contenders interleaved: for each repetition, each contender once, L2 flushed before each.

    Interleaving makes ratios between contenders survive clock and thermal drift. Repetition ``r``
    runs on input set ``r % len(seeds)`` (each set drawn from its seed, each checked by the caller),
    so no launch finds the inputs the last one had. Every timed launch starts from the same restored
    state as a checked one (fresh poison in the outputs, inputs and module globals restored, shared
    memory overwritten: all outside the timed events) in buffers placed as a checked case's first
    run places them, and a kernel contender's outputs are digested after every launch, so the
    caller can hold each timed launch to the outputs verified for its set. Then the candidate runs
    a repeat phase (see below), and the guard bytes are checked. A contender's launch is one run of
    its hot loop, every kernel of a sequence inside the timed events. With ``references`` (one per
    seed, as the case jobs had them), the candidate's nondeterministic outputs are held to them (see
    :mod:`porter.gate.runner.hold`).
    """
    cp = state.cp
    state.drop_case_launch()
    spec_path, sizes, seeds, contenders = job.spec_path, job.sizes, job.seeds, job.contenders
    spec = state.spec(spec_path)
    inputs = [state.inputs(spec, sizes, seed) for seed in seeds]
    flush = state.flush_buffer()
    # steps[contender][set]: (its launch, its module or None for a library callable, one run)
    steps: list[list[tuple[Launch, LoadedModule | None, Any]]] = []
    launches: list[Launch] = []
    try:
        for c in contenders:
            own = state.spec(spec_path, c.launch, c.entry or None)
            steps.append([])
            for seed, host_args in zip(seeds, inputs, strict=True):
                launch = Launch(state, own, sizes, host_args, seed)
                launches.append(launch)
                if c.kind == "kernel":
                    module = state.module(c.cubin)
                    steps[-1].append((launch, module, lambda launch=launch, module=module: launch.run(module)))
                else:
                    fn = load_callable(c.path, c.function)
                    views = _baseline_args(cp, spec, sizes, launch)
                    steps[-1].append((launch, None, lambda fn=fn, views=views: fn(views, dict(sizes))))

        if job.references and any(not p.deterministic for p in spec.outputs):
            for (launch, _, _), seed, host_args, reference in zip(steps[0], seeds, inputs, job.references,
                                                                  strict=True):
                if reference is not None:
                    launch.hold(_reference(state, spec, sizes, seed, "", host_args, reference))

        def prepare(launch: Launch, kernel: LoadedModule | None) -> None:
            # Module globals back to their load-time image: nothing a kernel remembered (a cache
            # of results, a launch count) survives into a timed launch.
            if kernel is not None:
                kernel.restore()
            launch.reset()
            flush.fill(0)

        # Warm-up (module load, cuBLAS handle, clocks), then estimate one round's time.
        for _ in range(2):
            t0 = time.perf_counter()
            for own_steps in steps:
                launch, kernel, run = own_steps[0]
                prepare(launch, kernel)
                run()
            cp.cuda.Device().synchronize()
        round_s = max(time.perf_counter() - t0, 1e-6)
        reps = int(min(job.max_reps, max(job.min_reps, job.budget_s / round_s)))
        events = [[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)] for _ in steps]
        outputs = len(spec.outputs)
        digests = [cp.zeros(reps * outputs, dtype=cp.uint64) if c.kind == "kernel" else None for c in contenders]
        for r in range(reps):
            order = range(len(steps)) if r % 2 == 0 else reversed(range(len(steps)))
            for i in order:
                launch, kernel, run = steps[i][r % len(seeds)]
                prepare(launch, kernel)
                start, end = events[i][r]
                start.record()
                run()
                end.record()
                if digests[i] is not None:
                    launch.digest_outputs(digests[i], r * outputs)
        cp.cuda.Device().synchronize()
        times = [[cp.cuda.get_elapsed_time(s, e) for s, e in evs] for evs in events]
        # The repeat phase (not timed): the candidate launched again and again on the first set
        # without restoring its globals, as a program calls it, each launch from fresh poison and
        # digested: a kernel that counts its calls and skips (or breaks) after a few is caught here.
        launch, kernel, run = steps[0][0]
        repeats = min(reps, REPEAT_LAUNCHES)
        repeat = cp.zeros(repeats * outputs, dtype=cp.uint64)
        for r in range(repeats):
            launch.reset()
            run()
            launch.digest_outputs(repeat, r * outputs)
        cp.cuda.Device().synchronize()
        guards = [[g for launch, _, _ in own_steps for g in launch.guard_problems()] for own_steps in steps]
        digest_lists = [None if d is None else [int(x) for x in d.get()] for d in digests]
        repeat_list = [int(x) for x in repeat.get()]
    finally:
        for launch in launches:
            launch.release()
    return TimeReply(names=[c.name for c in contenders], times_ms=times, digests=digest_lists,
                     repeat_digests=repeat_list, outputs_per_launch=len(spec.outputs), guards=guards,
                     seeds=list(seeds))


def job_outputs(state: WorkerState, job: OutputsJob) -> OutputsReply:
    """Run a kernel once and return its outputs (for ``porter record``), with its own launch if declared."""
    spec = state.spec(job.spec_path)
    source = Reference("source", key=hashlib.sha256(job.cubin).hexdigest(), cubin=job.cubin, entry=job.entry,
                       launch=job.launch)
    host_args = state.inputs(spec, job.sizes, job.seed, job.values)
    return OutputsReply(_reference(state, spec, job.sizes, job.seed, job.values, host_args, source))


def run(state: WorkerState, job: Job) -> Reply:
    """The worker's answer to ``job``."""
    if isinstance(job, CaseJob):
        return job_case(state, job)
    if isinstance(job, TimeJob):
        return job_time(state, job)
    return job_outputs(state, job)


def _device_info(cp: Any, device: int) -> dict[str, Any]:
    props = cp.cuda.runtime.getDeviceProperties(device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    major, minor = props["major"], props["minor"]
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    return {
        "name": name,
        "arch": f"sm_{major}{minor}",
        "compute_capability": f"{major}.{minor}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "max_shared_optin": int(props.get("sharedMemPerBlockOptin", 0)),
        "driver": f"{drv // 1000}.{drv % 1000 // 10}",
        "runtime": f"{rt // 1000}.{rt % 1000 // 10}",
        "cupy": cp.__version__,
        "device_count": int(cp.cuda.runtime.getDeviceCount()),
        "index": device,
        "pci": _pci_address(cp, device),
    }


def _pci_address(cp: Any, device: int) -> str:
    """The GPU's PCI address, or '' where CuPy cannot say (then no lock across processes is taken)."""
    try:
        return str(cp.cuda.Device(device).pci_bus_id)
    except Exception:
        return ""


def _no_gpu_message(err: BaseException) -> str:
    name = _error_name(err)
    if isinstance(err, ImportError):
        return f"no usable GPU: CuPy is not installed ({install_hint('cupy')})"
    if name == "cudaErrorInsufficientDriver":
        return "no usable GPU: no NVIDIA driver on this machine (or one older than this CuPy needs)"
    if name in ("cudaErrorNoDevice", "cudaErrorInvalidDevice"):
        return "no usable GPU: no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES)"
    return f"no usable GPU: {type(err).__name__}: {err}"


def serve(conn: Any, device: int) -> None:
    """The worker's loop: one job in, one reply out, until told to exit or the pipe closes."""
    import signal

    # Ctrl-C in the terminal reaches this process too; it is the parent's to act on (it records the
    # port as interrupted and closes this worker). A worker killed by it would make the candidate
    # it was running look as if it had crashed the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import cupy as cp

        cp.cuda.Device(device).use()
        cp.cuda.Device(device).synchronize()
        info = _device_info(cp, device)
    except Exception as err:  # no CuPy, no driver, no device
        conn.send({"ok": False, "error": _no_gpu_message(err)})
        return
    with Parking(parking_directory()) as parking:
        conn.send({"ok": True, "device": info, "parking": parking.directory})
        state = WorkerState(cp, folder=parking.directory)
        try:
            _serve_jobs(conn, state, parking)
        finally:
            state.close()


def _serve_jobs(conn: Any, state: WorkerState, parking: Parking) -> None:
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if not isinstance(msg, CaseJob | TimeJob | OutputsJob):  # {"op": "exit"}, or nothing porter sends
            return
        try:
            began = time.perf_counter()
            reply = run(state, msg)
            # The job's own seconds: what a call took beyond them is the transfer (tools/bench_gate.py).
            reply = replace(reply, worker_s=time.perf_counter() - began)
            conn.send({"ok": True, "reply": parking.park(reply)})
        except Exception as err:
            sticky = is_sticky(err)
            conn.send({"ok": False, "error": f"{type(err).__name__}: {err}", "sticky": sticky, "kind": "fault"})
            if sticky:
                return
