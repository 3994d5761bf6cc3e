"""Calibrate porter's PTX emulator against a GPU: the same kernel, inputs and shapes, both ways.

Run on a machine with an NVIDIA GPU and CuPy (an H200 for the sm_80 and sm_90a kernels):

    PYTHONPATH=$PWD python tools/emu_calibrate.py emu_calibration.json

For every runnable example kernel (and Triton fixture) at a small size set of its spec, it
draws the gate's inputs (porter.gate.inputs.make_args), runs the kernel in the emulator
(porter.emu) and on the GPU (a cubin assembled by porter's toolchain, launched through CuPy with
the same arguments and, for TMA kernels, CUtensorMaps encoded by porter.gate.runner.tensormap),
and prints per output: bitwise agreement, the largest difference, the reference tolerance (the
spec's, against its float64 reference) for scale, and the emulation's seconds. The JSON holds
the same rows. Without a GPU (or with --emu-only) it runs the emulator side alone, against the
spec's reference.

:func:`emu_case` is the bridge from a porter spec to the emulator's arguments; it is written here
(porter.emu must not import porter.gate) and is what ``porter check`` would call to emulate.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from porter.emu import TensorMap, emulate  # noqa: E402
from porter.emu.run import EmuResult  # noqa: E402
from porter.gate.inputs import make_args  # noqa: E402
from porter.gate.spec import Spec, declared_spec, load_spec  # noqa: E402
from porter.gate.usercode import load_callable  # noqa: E402


@dataclass
class Step:
    """One launch of the hot loop (or a zeroing of buffers, ``entry`` empty)."""

    entry: str
    args: tuple[str, ...]
    zero: tuple[str, ...]
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)


@dataclass
class Case:
    """A run of the hot loop as the gate would make it: buffers and scalars by name, the steps."""

    spec: Spec
    ptx: str
    sizes: dict[str, int]
    values: dict[str, Any]  # buffers (arrays in memory shape), scalars, TensorMaps' geometry, by param name
    steps: list[Step]
    host: dict[str, Any]  # make_args' inputs and scalars, for the reference

    def arguments(self, step: Step) -> list[Any]:
        """The emulator's arguments of one step, in the entry's parameter order."""
        out: list[Any] = []
        for name in step.args:
            p = self.spec.param(name)
            if p.kind == "tensormap":
                assert p.tensormap is not None
                target = self.spec.param(p.tensormap.tensor)
                assert target.dtype is not None
                out.append(TensorMap.from_geometry(step.args.index(target.name), target.dtype.itemsize,
                                                   self.spec.tensormap_geometry(p, self.sizes)))
            else:
                out.append(self.values[name])
        return out


def emu_case(example: Path, ptx_file: Path, sizes: dict[str, int] | None = None, seed: int = 1) -> Case:
    """The emulator's view of ``ptx_file`` run under the spec in ``example`` at ``sizes``."""
    spec = load_spec(example)
    text = ptx_file.read_text()
    spec, _ = declared_spec(spec, text, source=ptx_file.name)
    sizes = spec.timing_sizes(sizes) if sizes is not None else spec.default_sizes()  # derived sizes filled in
    host = make_args(spec, sizes, seed)
    values: dict[str, Any] = {}
    for p in spec.params:
        if p.kind == "buffer":
            assert p.dtype is not None
            memory = spec.memory_shape(p, sizes)
            if p.role == "out":
                word = np.dtype(f"u{p.dtype.itemsize}")
                values[p.name] = np.full(memory, p.dtype.poison_bits, word).view(p.dtype.numpy)
            else:
                view = np.asarray(host[p.name])
                arr = np.zeros(memory, view.dtype)
                arr[tuple(slice(0, s) for s in view.shape)] = view
                values[p.name] = arr
        elif p.kind == "scratch":
            n = spec.scratch_bytes(p, sizes)
            values[p.name] = np.zeros(n, np.uint8) if n else None
        elif p.kind == "scalar":
            values[p.name] = host[p.name]
    steps = []
    for step in spec.sequence():
        if not step.entry:
            steps.append(Step("", (), tuple(step.zero)))
            continue
        dims = spec.launch_dims(sizes, step=step)
        steps.append(Step(step.entry, tuple(step.args), (), dims.grid, dims.block, dims.shared,
                          dims.cluster or (1, 1, 1)))
    return Case(spec, text, sizes, values, steps, host)


def run_emulated(case: Case, **kw: Any) -> list[EmuResult]:
    """Every step of the hot loop in the emulator, in order; stops after a step that failed."""
    results = []
    for step in case.steps:
        if not step.entry:
            for name in step.zero:
                case.values[name][...] = 0
            continue
        res = emulate(case.ptx, step.entry, step.grid, step.block, case.arguments(step), dynamic_smem=step.shared,
                      cluster=step.cluster, **kw)
        results.append(res)
        if not res.ok:
            break
    return results


def outputs(case: Case) -> dict[str, np.ndarray]:
    """The output buffers (their views, without padding) after a run, by name."""
    out = {}
    for p in case.spec.params:
        if p.is_output:
            shape = case.spec.shape(p, case.sizes)
            out[p.name] = np.asarray(case.values[p.name])[tuple(slice(0, s) for s in shape)]
    return out


def reference(case: Case) -> dict[str, np.ndarray]:
    ref = case.spec.reference
    assert ref is not None and ref.callable is not None
    fn = load_callable(str(ref.callable.path), ref.callable.function)
    given = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.host.items()}
    for p in case.spec.params:
        if p.kind == "buffer" and p.role == "inout":
            given[p.name] = np.asarray(case.values[p.name]).copy()
    # References use CuPy when it imports; at these sizes NumPy is quick, and it needs no GPU.
    hidden = sys.modules.get("cupy")
    sys.modules["cupy"] = None  # type: ignore[assignment]  # makes `import cupy` raise ImportError
    try:
        result = fn(given, dict(case.sizes))
    finally:
        if hidden is None:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = hidden
    return {k: np.asarray(v, np.float64) for k, v in result.items()}


def within(case: Case, name: str, got: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    atol, rtol = case.spec.tolerance(name, case.sizes)
    g = got.astype(np.float64)
    ok = bool(np.all(np.abs(g - ref) <= atol + rtol * np.abs(ref)))
    return ok, float(np.nanmax(np.abs(g - ref))) if g.size else 0.0
