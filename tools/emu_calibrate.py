"""Calibrate porter's PTX emulator against a GPU: the same kernel, inputs and shapes, both ways.

Run on a machine with an NVIDIA GPU and CuPy (an H200 for the sm_80 and sm_90a kernels):

    PYTHONPATH=$PWD python tools/emu_calibrate.py emu_calibration.json

For every runnable example kernel (and Triton fixture) at a small size set of its spec, it
draws the gate's inputs (porter.gate.inputs.make_args), runs the kernel in the emulator
(porter.emu) and on the GPU (a cubin assembled by porter's toolchain, launched through CuPy with
the same arguments and, for TMA kernels, CUtensorMaps encoded by porter.gate.runner.tensormap),
and prints per output: bitwise agreement, the largest difference, the reference tolerance (the
spec's, against its float64 reference) for scale, and the emulation's seconds. The JSON holds
the same rows. Columns: emu/ref (the emulation within the spec's tolerance of its float64
reference), bitwise (share of output elements equal to the GPU's bit for bit), max|emu-gpu|, the
largest distance in ulps (both over the elements the gate judges: the reference finite in the
output's dtype), "in bound" (there, |emu - gpu| within the spec's atol + rtol * |gpu|: the bound
the gate holds kernels to; the notes count the elements left out of every verdict where the two
differ, and show the first out of bound). Without a GPU (or with --emu-only) it runs the emulator
side alone, against the spec's reference. Last come the cases of the emulator's instruction
corpus (tests/emu_corpus.py: small nvcc-compiled kernels, each with a NumPy model of the ISA),
held to the GPU bit for bit or within each case's ulps; tensor-core float sums, which the hardware
truncates where the emulator rounds to nearest, within the bound a topic's ``BOUNDS`` gives per
element (docs/emulator.md, "Calibration").

The bridge from a porter spec to the emulator (:func:`emu_case`, :func:`run_emulated`, ...) is
porter.gate.emulated, which ``porter check --emulate`` uses too.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from porter.emu import EmuResult, emulate  # noqa: E402
from porter.gate.emulated import Case, emu_case, outputs, reference, run_emulated, within  # noqa: E402
from porter.gate.summary import output_limit  # noqa: E402

# ----------------------------------------------------------------------------- the GPU side

EXAMPLES = ROOT / "examples"
TRITON_H200 = ROOT / "tests" / "data" / "compiled" / "triton_h200"

# (spec folder, PTX file in it, sizes): every sm_80 / sm_90a kernel of the project with a spec, small.
KERNELS: list[tuple[Path, str, dict[str, int]]] = [
    (EXAMPLES / "vector_add", "kernel.ptx", {"n": 1000}),
    (EXAMPLES / "softmax", "kernel.ptx", {"rows": 5, "cols": 1000}),
    (EXAMPLES / "softmax", "kernel.ptx", {"rows": 3, "cols": 4097}),
    (EXAMPLES / "gemm_bf16", "kernel_sm80.ptx", {"M": 129, "N": 136, "K": 72}),
    (EXAMPLES / "gemm_bf16", "kernel_sm90a.ptx", {"M": 200, "N": 264, "K": 136}),
    (EXAMPLES / "gemm_bf16", "kernel_sm90a.ptx", {"M": 256, "N": 256, "K": 128}),
    (EXAMPLES / "gemm_bt_tile", "kernel_sm80.ptx", {"M": 128, "N": 192, "K": 256}),
    (EXAMPLES / "gemm_bt_tile", "kernel_sm90a.ptx", {"M": 128, "N": 192, "K": 256}),
    (EXAMPLES / "attention_fwd", "kernel_sm80.ptx", {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}),
    (EXAMPLES / "attention_fwd", "kernel_sm80.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}),
    (EXAMPLES / "attention_fwd", "kernel_sm90a.ptx", {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}),
    (EXAMPLES / "attention_fwd", "kernel_sm90a.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}),
    (EXAMPLES / "attention_bwd", "kernel_sm80.ptx", {"B": 1, "H": 1, "S": 77, "D": 64, "causal": 1}),
    (EXAMPLES / "attention_bwd", "kernel_sm90a.ptx", {"B": 1, "H": 1, "S": 77, "D": 64, "causal": 1}),
    (EXAMPLES / "triton_matmul", "matmul_kernel.ptx", {"M": 144, "N": 208, "K": 80}),
    (EXAMPLES / "triton_attention", "attn_fwd.ptx", {"Z": 1, "H": 3, "N_CTX": 256}),
    (TRITON_H200 / "matmul", "matmul_kernel.ptx", {"M": 144, "N": 208, "K": 80}),
    (TRITON_H200 / "attn_fwd", "attn_fwd_kernel.ptx", {"BH": 3, "S": 80}),
]


class Gpu:
    """The kernels of one PTX file on the GPU through CuPy: assembled by porter's toolchain for the
    device (the driver's JIT when there is no ptxas), launched with the emulator's arguments."""

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self.sm = f"sm_{cupy.cuda.Device().compute_capability}"  # CuPy gives it as a string: "90"
        self.modules: dict[str, Any] = {}

    def module(self, ptx: str, folder: Path) -> Any:
        from porter.ptx.parser import parse_ptx
        from porter.ptx.toolchain import find_toolchain

        if ptx in self.modules:
            return self.modules[ptx]
        target = parse_ptx(ptx).arch
        arch = target if target.endswith("a") else self.sm
        try:
            result = find_toolchain().assemble(ptx, arch)
        except Exception as err:  # no ptxas here: let the driver JIT the PTX
            print(f"  (no cubin: {err}; the driver JIT compiles the PTX)")
            module = self._jit(ptx, folder)
        else:
            if not result.ok or result.cubin is None:
                raise RuntimeError(f"ptxas failed for {arch}: {result.log[:400]}")
            path = folder / f"k{len(self.modules)}.cubin"
            path.write_bytes(result.cubin)
            module = self.cp.RawModule(path=str(path))
        self.modules[ptx] = module
        return module

    def _jit(self, ptx: str, folder: Path) -> Any:
        path = folder / f"k{len(self.modules)}.ptx"
        path.write_text(ptx)
        return self.cp.RawModule(path=str(path))

    def run(self, case: Case, values: dict[str, Any], folder: Path) -> None:
        """Every step of the hot loop on the GPU over device copies of ``values`` (written back into them)."""
        from porter.gate.runner.launch import _scalar_arg
        from porter.gate.runner.tensormap import encode_tiled

        cp = self.cp
        module = self.module(case.ptx, folder)
        device: dict[str, Any] = {}
        for name, v in values.items():
            if isinstance(v, np.ndarray):
                device[name] = cp.asarray(v.reshape(-1).view(np.uint8))
        for step in case.steps:
            if not step.entry:
                for name in step.zero:
                    device[name].fill(0)
                continue
            if step.cluster != (1, 1, 1):
                raise RuntimeError("cluster launches are not available through CuPy")
            args = []
            for name in step.args:
                p = case.spec.param(name)
                if p.kind == "tensormap":
                    assert p.tensormap is not None
                    target = case.spec.param(p.tensormap.tensor)
                    assert target.dtype is not None
                    args.append(encode_tiled(device[target.name].data.ptr, target.dtype.name, target.dtype.itemsize,
                                             case.spec.tensormap_geometry(p, case.sizes)))
                elif p.kind in ("buffer", "scratch"):
                    args.append(np.uint64(device[name].data.ptr if name in device else 0))
                else:
                    assert p.dtype is not None
                    args.append(_scalar_arg(p.dtype, values[name]))
            fn = module.get_function(step.entry)
            if step.shared > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = step.shared
            fn(step.grid, step.block, tuple(args), shared_mem=step.shared)
        cp.cuda.Device().synchronize()
        for name, arr in device.items():
            values[name].reshape(-1).view(np.uint8)[...] = arr.get()

    def run_plain(self, ptx: str, entry: str, grid: tuple[int, ...], threads: int | tuple[int, ...], shared: int,
                  args: list[Any], folder: Path) -> None:
        """One launch with emulator-style arguments (arrays, scalars, None), results back into the arrays."""
        cp = self.cp
        device = [cp.asarray(a.reshape(-1).view(np.uint8)) if isinstance(a, np.ndarray) else None for a in args]
        kernel_args = tuple(np.uint64(d.data.ptr) if d is not None else (np.uint64(0) if a is None else a)
                            for a, d in zip(args, device, strict=True))
        fn = self.module(ptx, folder).get_function(entry)
        if shared > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = shared
        block = (threads,) if isinstance(threads, int) else tuple(threads)
        fn(tuple(grid) + (1,) * (3 - len(grid)), block + (1,) * (3 - len(block)), kernel_args, shared_mem=shared)
        cp.cuda.Device().synchronize()
        for a, d in zip(args, device, strict=True):
            if d is not None:
                a.reshape(-1).view(np.uint8)[...] = d.get()


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between two float arrays of one dtype (flat);
    elements NaN in both are equal, whatever their payloads (the GPU's NaN is 0x7FFFFFFF, NumPy's
    0x7FC00000)."""
    if a.dtype.kind != "f" and a.dtype.itemsize != 2:
        return 0
    with np.errstate(invalid="ignore"):
        keep = ~(np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64)))
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    x = a.view(bits)[keep].astype(np.int64)
    y = b.view(bits)[keep].astype(np.int64)
    # Map the sign-magnitude bit patterns onto a line where neighbouring floats differ by one.
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    x = np.where(x < 0, -(x & (top - 1)), x)
    y = np.where(y < 0, -(y & (top - 1)), y)
    return int(np.abs(x - y).max()) if x.size else 0


def agreement(emu: np.ndarray, gpu: np.ndarray, atol: float, rtol: float,
              judged: np.ndarray | None = None) -> dict[str, Any]:
    """How an emulated output compares with the GPU's: bit for bit, in value, in ulps, in bound.
    ``judged`` marks the elements the gate judges (the reference finite in the output's dtype: see
    :func:`judged_elements`); "in bound" is over those, as a verdict is, and the elements outside
    them where the two differ are counted apart (an inf - inf that one side orders otherwise)."""
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[emu.dtype.itemsize]
    # The emulator's outputs come in the spec's shape, the GPU's as the flat buffer: compare flat.
    emu, gpu = emu.reshape(-1), gpu.reshape(-1)
    if emu.size != gpu.size or emu.dtype.itemsize != gpu.dtype.itemsize:
        raise ValueError(f"the emulated output ({emu.size} x {emu.dtype}) and the GPU's ({gpu.size} x {gpu.dtype}) differ")
    judged = np.ones(emu.size, dtype=bool) if judged is None else judged.reshape(-1)
    same = emu.view(word)
    other = gpu.view(word)
    with np.errstate(invalid="ignore"):
        e, g = emu.astype(np.float64), gpu.astype(np.float64)
        both_nan = np.isnan(e) & np.isnan(g)
        diff = np.where(both_nan, 0.0, np.abs(e - g))
        close = np.isfinite(diff) & (diff <= atol + rtol * np.abs(g))  # an infinity is close only to itself,
        in_bound = close | (same == other) | both_nan  # which the bit patterns compare
    outside = np.flatnonzero(judged & ~in_bound)
    unjudged = np.flatnonzero(~judged & ~in_bound)
    return {
        "bitwise_equal_fraction": float(np.mean(same == other)) if same.size else 1.0,
        "bitwise_equal": bool(np.array_equal(same, other)),
        "max_abs_emu_vs_gpu": float(np.nanmax(np.where(judged, diff, 0.0))) if diff.size else 0.0,
        "max_ulps_emu_vs_gpu": _ulps(emu[judged], gpu[judged]),
        "emu_vs_gpu_within_bound": not outside.size,
        "outside_bound": [(int(i), float(e[i]), float(g[i])) for i in outside[:5]],
        "unjudged_elements": int((~judged).sum()),
        "unjudged_differing": int(unjudged.size),
    }


def judged_elements(case: Case, name: str, ref: np.ndarray) -> np.ndarray:
    """The elements of output ``name`` the gate judges: its reference finite and inside the
    output's dtype (the rest are left out of every comparison: docs/spec.md, "Values")."""
    limit = output_limit(case.spec, name)
    with np.errstate(invalid="ignore"):
        r = np.asarray(ref, dtype=np.float64).reshape(-1)
        return np.isfinite(r) & (np.abs(r) <= (np.inf if limit is None else limit))


def calibrate(gpu: Gpu | None, folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for spec_dir, ptx_name, sizes in KERNELS:
        label = f"{spec_dir.relative_to(ROOT)}/{ptx_name}"
        shown = ",".join(f"{k}={v}" for k, v in sizes.items())
        try:
            case = emu_case(spec_dir, spec_dir / ptx_name, sizes)
            initial = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.values.items()}
            started = time.perf_counter()
            results = run_emulated(case)
            seconds = time.perf_counter() - started
        except Exception as err:  # a row that says why, and go on
            rows.append({"kernel": label, "sizes": shown, "error": f"{type(err).__name__}: {err}"})
            continue
        diagnostics = [str(d) for r in results for d in r.diagnostics]
        emulated = outputs(case)
        ref = reference(case)
        gpu_out: dict[str, np.ndarray] = {}
        gpu_error = ""
        if gpu is not None:
            try:
                case.values = initial
                gpu.run(case, initial, folder)
                gpu_out = outputs(case)
            except Exception as err:
                gpu_error = f"{type(err).__name__}: {err}"
        for name, emu in emulated.items():
            atol, rtol = case.spec.tolerance(name, case.sizes)
            row: dict[str, Any] = {
                "kernel": label, "sizes": shown, "output": name, "emu_seconds": round(seconds, 3),
                "emu_steps": sum(r.steps for r in results), "emu_diagnostics": diagnostics,
                "bound": {"atol": atol, "rtol": rtol},
                "emu_vs_reference_ok": within(case, name, emu, ref[name])[0],
                "emu_vs_reference_max_abs": within(case, name, emu, ref[name])[1],
            }
            if name in gpu_out:
                g = gpu_out[name]
                try:  # one row's problem is that row's, not the end of the table
                    row.update(agreement(emu, g, atol, rtol, judged_elements(case, name, ref[name])))
                    row["gpu_vs_reference_ok"] = within(case, name, g, ref[name])[0]
                except ValueError as err:
                    row["gpu_error"] = str(err)
            elif gpu is not None:
                row["gpu_error"] = gpu_error
            rows.append(row)
    return rows


# Triton fixtures made on the H200 without a spec: their launch.json (arguments, grid, warps),
# shrunk to a few programs. (folder, argument shapes and scalars to override, grid)
LAUNCHES: list[tuple[str, dict[str, Any], tuple[int, ...]]] = [
    ("softmax", {"x_ptr": [8, 1000], "y_ptr": [8, 1000]}, (8,)),
    ("layernorm", {"x_ptr": [8, 1000], "y_ptr": [8, 1000], "mean_ptr": [8], "rstd_ptr": [8]}, (8,)),
    ("attn_bwd_preprocess", {"o_ptr": [1, 128, 64], "do_ptr": [1, 128, 64], "delta_ptr": [1, 128], "S": 128},
     (1, 1)),
    ("attn_bwd_dq", {n: [1, 128, 64] for n in ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dq_ptr")}
     | {"lse_ptr": [1, 128], "delta_ptr": [1, 128], "S": 128}, (2, 1)),
    ("attn_bwd_dkdv", {n: [1, 128, 64] for n in ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dk_ptr", "dv_ptr")}
     | {"lse_ptr": [1, 128], "delta_ptr": [1, 128], "S": 128}, (2, 1)),
]
_NUMPY = {"float16": np.float16, "float32": np.float32, "bfloat16": "bfloat16", "int32": np.int32}


def launch_args(folder: Path, overrides: dict[str, Any], seed: int = 1) -> tuple[str, str, list[Any], int, int]:
    """(PTX, entry, arguments, threads, shared bytes) of a launch.json fixture, inputs uniform(-1, 1)."""
    from porter.ptx.parser import parse_ptx

    launch = json.loads((folder / "launch.json").read_text())
    entry = launch["kernel"]
    ptx = (folder / f"{entry}.ptx").read_text()
    meta = json.loads((folder / f"{entry}.json").read_text())
    rng = np.random.default_rng(seed)
    args: list[Any] = []
    for name, a in launch["args"].items():
        if a["kind"] == "tensor":
            shape = overrides.get(name, a["shape"])
            dtype = _NUMPY[a["dtype"]]
            values = rng.uniform(-1, 1, shape).astype(np.float32)
            if dtype == "bfloat16":
                bits = values.view(np.uint32)
                args.append(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16))
            else:
                args.append(values.astype(dtype))
        else:
            value = overrides.get(name, a["value"])
            args.append(np.float32(value) if a["python"] == "float" else np.int32(value))
    params = parse_ptx(ptx).entry(entry).params
    args += [None] * (len(params) - len(args))  # Triton's global and profile scratch pointers
    return ptx, entry, args, 32 * int(launch["num_warps"]), int(meta.get("shared", 0))


def triton_fixtures() -> list[tuple[str, tuple[int, ...], Any, tuple[int, ...]]]:
    """The CPU-compiled Triton fixtures the emulator runs (tests/data/compiled/triton): device-side
    tensor maps and a matmul in clusters of two CTAs, with arguments made here (their sources are
    in tools/make_triton_fixtures.py). Each: (label, grid, () -> (ptx, entry, args, threads, shared),
    arguments not to compare: the global scratch, which holds the tensor maps in each side's layout)."""
    triton = ROOT / "tests" / "data" / "compiled" / "triton"
    rng = np.random.default_rng(1)

    def copy_tma() -> tuple[str, str, list[Any], int, int]:
        m, n = 100, 128
        x = rng.uniform(-1, 1, (m, n)).astype(np.float32)
        scratch = np.zeros(256 * 2 * 2, np.uint8)  # global_scratch_size 256 per program
        return ((triton / "copy_tma.ptx").read_text(), "copy_tma",
                [x, np.zeros((m, n), np.float32), np.int32(m), np.int32(n), scratch, None], 128, 16392)

    def matmul_clusters() -> tuple[str, str, list[Any], int, int]:
        m, n, k = 256, 256, 128
        a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
        return ((triton / "num_ctas2" / "matmul_kernel.ptx").read_text(), "matmul_kernel",
                [a, b, np.zeros((m, n), np.float16), *(np.int32(v) for v in (m, n, k, k, n, n)), None, None], 128,
                73728)

    return [("tests/data/compiled/triton/copy_tma (M=100,N=128)", (2, 2), copy_tma, (4,)),
            ("tests/data/compiled/triton/num_ctas2/matmul_kernel (256x256x128, clusters of 2)", (8,),
             matmul_clusters, ())]


def _both_ways(gpu: Gpu | None, folder: Path, ptx: str, entry: str, grid: tuple[int, ...],
               block: int | tuple[int, ...], shared: int, args: list[Any]) -> tuple[EmuResult, float, list[Any], str]:
    """One launch in the emulator (into ``args``) and, with a GPU, on it (into copies made before):
    the emulator's result and seconds, the GPU's arguments, and the GPU's error ("" if none)."""
    on_gpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    started = time.perf_counter()
    res = emulate(ptx, entry, grid, block, args, dynamic_smem=shared)
    seconds = time.perf_counter() - started
    gpu_error = ""
    if gpu is not None:
        try:
            gpu.run_plain(ptx, entry, grid, block, shared, on_gpu, folder)
        except Exception as err:
            gpu_error = f"{type(err).__name__}: {err}"
    return res, seconds, on_gpu, gpu_error


def calibrate_launches(gpu: Gpu | None, folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    runs = [(f"tests/data/compiled/triton_h200/{name} (launch.json)", grid,
             lambda name=name, overrides=overrides: launch_args(TRITON_H200 / name, overrides), ())
            for name, overrides, grid in LAUNCHES] + triton_fixtures()
    for label, grid, make, skip in runs:
        shown = "grid=" + "x".join(map(str, grid))
        try:
            ptx, entry, args, threads, shared = make()
            res, seconds, on_gpu, gpu_error = _both_ways(gpu, folder, ptx, entry, grid, threads, shared, args)
        except Exception as err:
            rows.append({"kernel": label, "sizes": shown, "error": f"{type(err).__name__}: {err}"})
            continue
        for i, arr in enumerate(args):
            if not isinstance(arr, np.ndarray) or i in skip:
                continue
            row: dict[str, Any] = {
                "kernel": label, "sizes": shown, "output": f"arg{i}", "emu_seconds": round(seconds, 3),
                "emu_steps": res.steps, "emu_diagnostics": [str(d) for d in res.diagnostics],
                "emu_vs_reference_ok": res.ok, "emu_vs_reference_max_abs": None,
                "bound": {"atol": 1e-3, "rtol": 1e-2},
            }
            if gpu is not None and not gpu_error:
                try:
                    row.update(agreement(arr, on_gpu[i], 1e-3, 1e-2))
                except ValueError as err:
                    row["gpu_error"] = str(err)
            elif gpu is not None:
                row["gpu_error"] = gpu_error
            rows.append(row)
    return rows


def hardware_bounds(topic: str) -> dict[str, Any]:
    """The ``BOUNDS`` of a corpus topic's cases.py, if it has them: entry -> (arguments as made ->
    {output index: per-element bound}), how far the GPU may be from the exact value where the
    hardware does not round as the ISA's model does (tensor-core sums: docs/emulator.md,
    "Calibration")."""
    import importlib.util

    path = ROOT / "tests" / "data" / "emu_corpus" / topic / "cases.py"
    if not path.is_file():
        return {}
    spec = importlib.util.spec_from_file_location(f"emu_corpus_bounds_{topic}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(getattr(module, "BOUNDS", {}))


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def corpus_agreement(emu: np.ndarray, gpu: np.ndarray, want: np.ndarray, ulps: int,
                     bound: np.ndarray | None) -> dict[str, Any]:
    """A corpus output on the emulator against the GPU's (flat, one dtype), and the GPU's against
    the model ``want``. In bound: bit for bit, within ``ulps``, or (``bound``: per element, how far
    the hardware may be from the exact value) within bound + one ulp of the output type at the
    emulated value (the emulator's own rounding to nearest). An infinity is in bound only of
    itself, a NaN of a NaN (any payload). Integer outputs are compared bit for bit: no ulps."""
    from emu_corpus import ulps_apart

    apart = ulps_apart(emu, gpu)
    with np.errstate(invalid="ignore", over="ignore"):
        e, g, w = (x.astype(np.float64) for x in (emu, gpu, want))
        diff = np.abs(e - g)  # inf - inf and NaNs: NaN, judged by ulps_apart (bits) alone
        inside = apart <= ulps
        from_model = ulps_apart(gpu, want) <= ulps
        fraction = None
        if bound is not None and _is_float(emu):
            b = np.asarray(bound, np.float64).reshape(-1)
            one_ulp = np.spacing(np.abs(emu)).astype(np.float64)
            inside |= np.isfinite(diff) & (diff <= b + one_ulp)
            from_model |= np.isfinite(np.abs(g - w)) & (np.abs(g - w) <= b + np.spacing(np.abs(want)).astype(np.float64))
            judged = np.isfinite(diff) & (b + one_ulp > 0)
            fraction = float(np.max(diff[judged] / (b + one_ulp)[judged], initial=0.0))
    outside = np.flatnonzero(~inside)
    differing = apart != 0
    return {
        "bitwise_equal_fraction": float(np.mean(~differing)) if apart.size else 1.0,
        "bitwise_equal": bool(not differing.any()),
        "differing_elements": int(differing.sum()),
        "max_abs_emu_vs_gpu": float(np.nanmax(diff, initial=0.0)) if diff.size else 0.0,
        # ulps are a float's: for integer outputs (bit patterns, flags) there are none to count
        "max_ulps_emu_vs_gpu": int(apart.max(initial=0)) if _is_float(emu) else None,
        "max_fraction_of_bound": fraction,
        "emu_vs_gpu_within_bound": not outside.size,
        "outside_bound": [(int(k), float(e[k]), float(g[k])) for k in outside[:5]],
        "gpu_vs_reference_ok": bool(from_model.all()),
    }


def calibrate_corpus(gpu: Gpu | None, folder: Path) -> list[dict[str, Any]]:
    """The emulator's instruction corpus (tests/emu_corpus.py): each case's outputs in the
    emulator against its NumPy model of the ISA (emu/ref) and against the GPU (bitwise, ulps), in
    bound when within the case's ulps (0 where the ISA defines the result exactly) or, for the
    cases a topic's ``BOUNDS`` names (tensor-core sums), within the hardware's bound per element."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emu_corpus import topics, ulps_apart

    rows: list[dict[str, Any]] = []
    for topic in topics():
        bounds = hardware_bounds(topic.name)
        for case in topic.cases:
            label = f"tests/data/emu_corpus/{topic.name} {case.entry}"
            grid = (case.grid,) if isinstance(case.grid, int) else tuple(case.grid)
            shown = "grid=" + "x".join(map(str, grid))
            here = gpu if gpu is not None and runs_on(case.arch, gpu.sm) else None
            try:
                args = case.make_args(np.random.default_rng(7))
                model = case.expect([a.copy() if isinstance(a, np.ndarray) else a for a in args])
                bound = bounds[case.entry]([a.copy() if isinstance(a, np.ndarray) else a for a in args]) \
                    if case.entry in bounds else {}
                res, seconds, on_gpu, gpu_error = _both_ways(here, folder, topic.ptx, case.entry, grid, case.block,
                                                             case.dynamic_smem, args)
            except Exception as err:
                rows.append({"kernel": label, "sizes": shown, "error": f"{type(err).__name__}: {err}"})
                continue
            for i in case.outputs:
                emu = np.asarray(args[i]).reshape(-1)
                want = np.asarray(model[i]).reshape(-1).astype(emu.dtype)
                row: dict[str, Any] = {
                    "kernel": label, "sizes": shown, "output": f"arg{i}", "emu_seconds": round(seconds, 3),
                    "emu_steps": res.steps, "emu_diagnostics": [str(d) for d in res.diagnostics],
                    "emu_vs_reference_ok": res.ok and int(ulps_apart(emu, want).max(initial=0)) <= case.ulps,
                    "emu_vs_reference_max_abs": None,
                    "bound": {"ulps": case.ulps} | ({"hardware_sum": True} if i in bound else {}),
                }
                if here is not None and not gpu_error:
                    g = np.asarray(on_gpu[i]).reshape(-1)
                    row.update(corpus_agreement(emu, g, want, case.ulps, bound.get(i)))
                elif here is not None:
                    row["gpu_error"] = gpu_error
                elif gpu is not None:
                    row["gpu_error"] = f"needs {case.arch}: not run on {gpu.sm}"
                rows.append(row)
    return rows


def runs_on(arch: str, sm: str) -> bool:
    """Whether a kernel for ``arch`` (sm_89, sm_90a, ...) runs on a GPU ``sm`` (sm_90): an older
    or equal arch does, an arch-specific one (``a``) only on its own."""
    need, have = int(arch[3:].rstrip("af")), int(sm[3:].rstrip("af"))
    return need == have if arch.endswith("a") else need <= have


def _print(rows: list[dict[str, Any]]) -> None:
    head = f"{'kernel':58} {'sizes':30} {'output':7} {'emu/ref':7} {'bitwise':>8} {'max|emu-gpu|':>13} {'ulps':>6} " \
           f"{'in bound':>8} {'emu s':>6}  notes"
    print(head)
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:58} {r['sizes']:30} ERROR {r['error']}")
            continue
        bit = f"{100 * r['bitwise_equal_fraction']:.1f}%" if "bitwise_equal_fraction" in r else "-"
        mx = f"{r['max_abs_emu_vs_gpu']:.3g}" if "max_abs_emu_vs_gpu" in r else "-"
        ulps = str(r.get("max_ulps_emu_vs_gpu", "-"))
        if "max_ulps_emu_vs_gpu" in r and r["max_ulps_emu_vs_gpu"] is None:
            ulps = "bits"  # an integer output: compared bit for bit, no ulps
        inb = str(r.get("emu_vs_gpu_within_bound", "-"))
        notes = []
        emu_ref = "ok" if r["emu_vs_reference_ok"] else "WRONG"
        if r.get("gpu_vs_reference_ok") is False:
            notes.append("GPU outside spec tolerance")
        if r["emu_diagnostics"]:
            notes.append(f"{len(r['emu_diagnostics'])} diagnostics")
        if r.get("gpu_error"):
            notes.append("GPU: " + r["gpu_error"][:60])
        if r.get("unjudged_differing"):
            notes.append(f"{r['unjudged_differing']} of {r['unjudged_elements']} unjudged elements differ")
        if r.get("max_fraction_of_bound") is not None:
            notes.append(f"hardware-sum bound, at most {r['max_fraction_of_bound']:.2g} of it used")
        if r.get("differing_elements") and ulps == "bits":
            notes.append(f"{r['differing_elements']} elements differ")
        if r.get("outside_bound"):
            notes.append("out of bound (index, emu, gpu): " + ", ".join(f"({i}, {a:.6g}, {b:.6g})"
                                                                   for i, a, b in r["outside_bound"][:3]))
        print(f"{r['kernel']:58} {r['sizes']:30} {r['output']:7} {emu_ref:7} {bit:>8} {mx:>13} {ulps:>6} {inb:>8} "
              f"{r['emu_seconds']:6.2f}  {'; '.join(notes)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", type=Path, help="where to write the rows as JSON")
    parser.add_argument("--emu-only", action="store_true", help="do not use a GPU (emulator vs reference only)")
    args = parser.parse_args(argv)
    gpu = None
    if not args.emu_only:
        try:
            gpu = Gpu()
            print(f"GPU: {gpu.cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} ({gpu.sm})")
        except Exception as err:
            print(f"no GPU ({type(err).__name__}: {err}); emulator against the references only")

    with tempfile.TemporaryDirectory(prefix="emu_calibrate_") as tmp:
        rows = calibrate(gpu, Path(tmp)) + calibrate_launches(gpu, Path(tmp)) + calibrate_corpus(gpu, Path(tmp))
    _print(rows)
    args.json.write_text(json.dumps({"gpu": gpu.sm if gpu else None, "rows": rows}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
