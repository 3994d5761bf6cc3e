"""The GPU worker: a child process that owns the CUDA context and runs untrusted kernels.

It receives jobs over a pipe (see ``client.Runner``) and answers each with a dict. Everything that
touches the GPU lives here, so the parent never imports CuPy. Buffers carry guard bands on both
sides (checked for out-of-bounds writes), outputs are poisoned before each launch, and every
buffer is scrubbed before it is freed, so that no kernel can find another kernel's results (the
reference's above all) in recycled memory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

GUARD_BYTES = 64 * 1024
CANARY = 0xA5
SCRUB = 0x3C

# CUDA errors after which the context is unusable: the worker must be restarted.
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
    """A device allocation with guard bands: [guard | data | guard], data 64 KiB-aligned from the base."""

    def __init__(self, cp: Any, nbytes: int, guard: int = GUARD_BYTES) -> None:
        self.cp = cp
        self.nbytes = nbytes
        self.guard = guard
        self.raw = cp.empty(nbytes + 2 * guard, dtype=cp.uint8)
        self.raw.fill(CANARY)
        self.data = self.raw[guard : guard + nbytes]

    @property
    def ptr(self) -> int:
        return self.raw.data.ptr + self.guard

    def upload(self, host: np.ndarray) -> None:
        if self.nbytes:
            self.data.set(np.ascontiguousarray(host).reshape(-1).view(np.uint8))

    def poison(self, bits: int, itemsize: int) -> None:
        if self.nbytes:
            word = {1: self.cp.uint8, 2: self.cp.uint16, 4: self.cp.uint32, 8: self.cp.uint64}[itemsize]
            self.data.view(word).fill(bits)

    def download(self) -> np.ndarray:
        """The whole allocation, guards included, as host bytes."""
        return self.raw.get()

    def scrub(self) -> None:
        self.raw.fill(SCRUB)


def guard_violation(name: str, host_raw: np.ndarray, nbytes: int) -> str:
    """Describe writes into the guard bands of one buffer, or return '' when they are intact."""
    before = host_raw[:GUARD_BYTES]
    after = host_raw[GUARD_BYTES + nbytes :]
    problems = []
    bad_before = np.flatnonzero(before != CANARY)
    if bad_before.size:
        problems.append(f"{bad_before.size} bytes written before its start (nearest {GUARD_BYTES - bad_before[-1]} bytes before)")
    bad_after = np.flatnonzero(after != CANARY)
    if bad_after.size:
        problems.append(f"{bad_after.size} bytes written past its end (first at byte +{bad_after[0]} after the last element)")
    return f"{name}: " + "; ".join(problems) if problems else ""


def _load_callable(path: str, function: str) -> Any:
    module_name = "porter_user_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if fn is None:
        raise RuntimeError(f"{path} has no function {function!r}")
    return fn


class WorkerState:
    """What the worker keeps between jobs: loaded kernels, parsed specs, cached reference outputs."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.kernels: dict[tuple[str, str], Any] = {}
        self.specs: dict[str, Any] = {}
        self.references: dict[tuple, dict[str, np.ndarray]] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="porter-worker-"))
        self._flush: Any = None

    def spec(self, path: str, launch: dict[str, Any] | None = None) -> Any:
        """The spec at ``path`` (parsed once per file version), with a candidate's own launch if given."""
        from porter.spec import load_spec, with_launch

        key = path + ":" + str(os.stat(path).st_mtime_ns)
        if key not in self.specs:
            self.specs[key] = load_spec(Path(path))
        spec = self.specs[key]
        return with_launch(spec, launch, source="candidate") if launch else spec

    def kernel(self, cubin: bytes, entry: str, shared: int) -> Any:
        digest = hashlib.sha256(cubin).hexdigest()
        key = (digest, entry)
        if key not in self.kernels:
            path = self.tmp / f"{digest}.cubin"
            path.write_bytes(cubin)
            module = self.cp.RawModule(path=str(path))
            self.kernels[key] = module.get_function(entry)
        fn = self.kernels[key]
        if shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared:
            fn.max_dynamic_shared_size_bytes = shared
        return fn

    def flush_buffer(self) -> Any:
        """A buffer twice the L2's size: writing it evicts whatever the last launch left cached."""
        if self._flush is None:
            l2 = self.cp.cuda.Device().attributes.get("L2CacheSize", 50 * 1024 * 1024)
            self._flush = self.cp.empty(max(2 * l2, 256 * 1024 * 1024), dtype=self.cp.uint8)
        return self._flush


def _scalar_arg(dtype: Any, value: float | int) -> Any:
    """A kernel argument of exactly the param's width (16-bit and 8-bit floats travel as raw bits)."""
    host = np.asarray(value).astype(dtype.numpy)
    if dtype.kind == "float" and dtype.itemsize <= 2:
        return host.view({1: np.uint8, 2: np.uint16}[dtype.itemsize])[()]
    return host[()]


class Launch:
    """The buffers and arguments of one launch of ``kernel`` on one size set."""

    def __init__(self, state: WorkerState, spec: Any, sizes: dict[str, int], host_args: dict[str, Any],
                 guard: int = GUARD_BYTES) -> None:
        """``guard=0`` gives exact-size allocations, for compute-sanitizer's bounds checks."""
        cp = state.cp
        self.spec, self.sizes, self.host_args = spec, sizes, host_args
        self.buffers: dict[str, DeviceBuffer] = {}
        self.args: list[Any] = []
        for p in spec.params:  # buffers first: a tensormap may describe a buffer listed after it
            if p.kind == "buffer":
                shape = spec.shape(p, sizes)
                self.buffers[p.name] = DeviceBuffer(cp, int(np.prod(shape, dtype=np.int64)) * p.dtype.itemsize, guard)
        for p in spec.params:
            if p.kind == "buffer":
                self.args.append(np.uint64(self.buffers[p.name].ptr))
            elif p.kind == "tensormap":
                from porter.runner.tensormap import encode_tiled

                target = spec.param(p.tensormap.tensor)
                self.args.append(encode_tiled(self.buffers[target.name].ptr, target.dtype.name,
                                              target.dtype.itemsize, spec.tensormap_geometry(p, sizes)))
            elif p.kind == "scratch":
                nbytes = spec.scratch_bytes(p, sizes)
                if nbytes <= 0:
                    self.args.append(np.uint64(0))
                else:
                    buf = DeviceBuffer(cp, nbytes, guard)
                    self.buffers[p.name] = buf
                    self.args.append(np.uint64(buf.ptr))
            else:
                self.args.append(_scalar_arg(p.dtype, spec.scalar_value(p, sizes)))
        self.grid, self.block, self.shared, _cluster = spec.launch_dims(sizes)

    def reset(self) -> None:
        """Inputs uploaded afresh, outputs poisoned: the state before every checked launch."""
        for p in self.spec.params:
            if p.kind != "buffer":
                continue
            buf = self.buffers[p.name]
            if p.role == "out":
                buf.poison(p.dtype.poison_bits, p.dtype.itemsize)
            else:
                buf.upload(self.host_args[p.name])

    def run(self, kernel: Any) -> None:
        kernel(tuple(self.grid), tuple(self.block), tuple(self.args), shared_mem=int(self.shared))

    def collect(self) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
        """Outputs (host), guard violations, and inputs that the kernel modified."""
        outputs: dict[str, np.ndarray] = {}
        guards: list[str] = []
        modified: list[str] = []
        for p in self.spec.params:
            buf = self.buffers.get(p.name)
            if buf is None:
                continue
            raw = buf.download()
            problem = guard_violation(p.name, raw, buf.nbytes)
            if problem:
                guards.append(problem)
            if p.kind != "buffer":
                continue
            data = raw[GUARD_BYTES : GUARD_BYTES + buf.nbytes]
            if p.role == "in":
                expected = np.ascontiguousarray(self.host_args[p.name]).reshape(-1).view(np.uint8)
                changed = np.flatnonzero(data != expected)
                if changed.size:
                    modified.append(f"{p.name}: {changed.size} bytes changed (first at byte {changed[0]})")
            else:
                shape = self.spec.shape(p, self.sizes)
                outputs[p.name] = data.view(p.dtype.numpy).reshape(shape).copy()
        return outputs, guards, modified

    def release(self) -> None:
        for buf in self.buffers.values():
            buf.scrub()
        self.buffers.clear()


def _reference(state: WorkerState, spec: Any, sizes: dict[str, int], seed: int, host_args: dict[str, Any],
               reference: dict[str, Any]) -> dict[str, np.ndarray]:
    # The spec is part of the key: two specs may share a ref.py but fill their inputs differently.
    key = (reference.get("key", ""), id(spec), tuple(sorted(sizes.items())), seed)
    if key in state.references:
        return state.references[key]
    kind = reference["kind"]
    if kind == "python":
        fn = _load_callable(reference["path"], reference["function"])
        inputs = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in host_args.items()}
        result = fn(inputs, dict(sizes))
        outs = {name: np.asarray(result[name]) for name in (p.name for p in spec.outputs)}
    elif kind == "source":
        if reference.get("launch"):  # a source that is itself a port declares its own launch
            spec = state.spec(str(spec.path), reference["launch"])
        kernel = state.kernel(reference["cubin"], reference["entry"], spec.launch_dims(sizes)[2])
        launch = Launch(state, spec, sizes, host_args)
        try:
            launch.reset()
            launch.run(kernel)
            state.cp.cuda.Device().synchronize()
            outs, guards, modified = launch.collect()
        finally:
            launch.release()
        if guards or modified:
            raise RuntimeError("the source kernel used as reference misbehaves: " + "; ".join(guards + modified))
    elif kind == "golden":
        with np.load(reference["path"]) as data:
            outs = {name: data[name] for name in data.files}
    else:
        raise RuntimeError(f"unknown reference kind {kind!r}")
    if len(state.references) > 64:
        state.references.clear()
    state.references[key] = outs
    return outs


def job_case(state: WorkerState, *, cubin: bytes, entry: str, spec_path: str, sizes: dict[str, int], seed: int,
             reference: dict[str, Any], runs: int = 2, launch: dict[str, Any] | None = None) -> dict[str, Any]:
    """One case of the sweep: launch the candidate ``runs`` times on the same fresh inputs.

    ``launch`` is the candidate's own launch directive; the reference (a source kernel included)
    always runs with the spec's own launch.
    """
    from porter.inputs import make_args

    source_spec = state.spec(spec_path)
    spec = state.spec(spec_path, launch)
    host_args = make_args(spec, sizes, seed)
    kernel = state.kernel(cubin, entry, spec.launch_dims(sizes)[2])
    candidate = Launch(state, spec, sizes, host_args)
    per_run: list[dict[str, np.ndarray]] = []
    guards: list[str] = []
    modified: list[str] = []
    start = time.perf_counter()
    try:
        for _ in range(runs):
            candidate.reset()
            candidate.run(kernel)
            state.cp.cuda.Device().synchronize()
            outs, g, m = candidate.collect()
            per_run.append(outs)
            guards += [x for x in g if x not in guards]
            modified += [x for x in m if x not in modified]
    finally:
        candidate.release()
    kernel_s = time.perf_counter() - start
    ref = _reference(state, source_spec, sizes, seed, host_args, reference)
    return {"outputs": per_run, "reference": ref, "guards": guards, "modified": modified, "kernel_s": kernel_s}


def _baseline_args(cp: Any, spec: Any, sizes: dict[str, int], launch: Launch) -> dict[str, Any]:
    """CuPy views of the launch's buffers, for a library baseline callable."""
    views: dict[str, Any] = {}
    for p in spec.params:
        if p.kind == "buffer":
            shape = spec.shape(p, sizes)
            try:
                dtype = cp.dtype(p.dtype.numpy)
                cp.empty(0, dtype=dtype)
            except Exception:  # bf16 / fp8: CuPy has no such dtype; hand over the raw bits
                dtype = {1: cp.uint8, 2: cp.uint16}[p.dtype.itemsize]
            views[p.name] = launch.buffers[p.name].data.view(dtype).reshape(shape)
        elif p.kind == "scalar":
            views[p.name] = spec.scalar_value(p, sizes)
    return views


def job_time(state: WorkerState, *, spec_path: str, sizes: dict[str, int], seed: int,
             contenders: list[dict[str, Any]], budget_s: float = 2.0, max_reps: int = 200,
             min_reps: int = 10) -> dict[str, Any]:
    """Time contenders interleaved: for each repetition, each contender once, L2 flushed before each.

    Interleaving makes ratios between contenders survive clock and thermal drift.
    """
    from porter.inputs import make_args

    cp = state.cp
    spec = state.spec(spec_path)
    host_args = make_args(spec, sizes, seed)
    flush = state.flush_buffer()
    runs = []
    launches = []
    try:
        for c in contenders:
            launch = Launch(state, state.spec(spec_path, c.get("launch")), sizes, host_args)
            launches.append(launch)
            launch.reset()
            if c["kind"] == "kernel":
                kernel = state.kernel(c["cubin"], c["entry"], launch.shared)
                runs.append(lambda launch=launch, kernel=kernel: launch.run(kernel))
            else:
                fn = _load_callable(c["path"], c["function"])
                views = _baseline_args(cp, spec, sizes, launch)
                runs.append(lambda fn=fn, views=views: fn(views, dict(sizes)))
        # Warm-up (module load, cuBLAS handle, clocks), then estimate one round's time.
        for run in runs:
            run()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for run in runs:
            flush.fill(0)
            run()
        cp.cuda.Device().synchronize()
        round_s = max(time.perf_counter() - t0, 1e-6)
        reps = int(min(max_reps, max(min_reps, budget_s / round_s)))
        events = [[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)] for _ in runs]
        for r in range(reps):
            order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
            for i in order:
                flush.fill(0)
                start, end = events[i][r]
                start.record()
                runs[i]()
                end.record()
        cp.cuda.Device().synchronize()
        times = [[cp.cuda.get_elapsed_time(s, e) for s, e in evs] for evs in events]
    finally:
        for launch in launches:
            launch.release()
    return {"times_ms": times, "names": [c["name"] for c in contenders]}


def job_outputs(state: WorkerState, *, cubin: bytes, entry: str, spec_path: str, sizes: dict[str, int],
                seed: int, launch: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a kernel once and return its outputs (for ``porter record``), with its own launch if declared."""
    from porter.inputs import make_args

    spec = state.spec(spec_path)
    source = {"kind": "source", "cubin": cubin, "entry": entry, "launch": launch,
              "key": hashlib.sha256(cubin).hexdigest()}
    return {"outputs": _reference(state, spec, sizes, seed, make_args(spec, sizes, seed), source)}


JOBS = {"case": job_case, "time": job_time, "outputs": job_outputs}


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
    }


def _no_gpu_message(err: BaseException) -> str:
    name = _error_name(err)
    if isinstance(err, ImportError):
        return "no usable GPU: CuPy is not installed (pip install 'porter-kernels[cuda13]')"
    if name == "cudaErrorInsufficientDriver":
        return "no usable GPU: no NVIDIA driver on this machine (or one older than this CuPy needs)"
    if name in ("cudaErrorNoDevice", "cudaErrorInvalidDevice"):
        return "no usable GPU: no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES)"
    return f"no usable GPU: {type(err).__name__}: {err}"


def serve(conn: Any, device: int) -> None:
    """The worker's loop: one job in, one reply out, until told to exit or the pipe closes."""
    try:
        import cupy as cp

        cp.cuda.Device(device).use()
        cp.cuda.Device(device).synchronize()
        info = _device_info(cp, device)
    except Exception as err:  # no CuPy, no driver, no device
        conn.send({"ok": False, "error": _no_gpu_message(err)})
        return
    conn.send({"ok": True, "device": info})
    state = WorkerState(cp)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        op = msg.pop("op")
        if op == "exit":
            return
        try:
            conn.send({"ok": True, **JOBS[op](state, **msg)})
        except Exception as err:
            sticky = is_sticky(err)
            conn.send({"ok": False, "error": f"{type(err).__name__}: {err}", "sticky": sticky, "kind": "fault"})
            if sticky:
                return
