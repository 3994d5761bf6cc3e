"""Check a Triton example's spec and reference against the kernel's own Triton source, without porter's
GPU gate: draw the inputs porter would draw for the spec's smallest size sets (and its value cases, porter's
wider-range one among them), run the kernel from
tools/make_triton_fixtures.py on them with the spec's grid and scalars, and compare its outputs with
the spec's reference under the spec's tolerances.

On a machine without a GPU the kernel runs under Triton's interpreter (numpy, on the CPU; slow, so
only the smallest size sets); with ``--gpu`` (torch and a CUDA GPU) it is compiled by Triton and run.
Either needs Triton 3.6 importable (its interpreter needs numpy < 2.3: it converts one-element
arrays to ints, which newer numpy refuses), and porter on PYTHONPATH:

    PYTHONPATH=$PWD python tools/check_triton_refs.py examples/triton_matmul examples/triton_attention
    PYTHONPATH=$PWD python tools/check_triton_refs.py --gpu --sets 4 examples/triton_matmul examples/triton_attention

It prints one line per example and size set and exits 1 when any output disagrees. This checks the
spec (shapes, strides, grid, scalars) and the reference together against the source the PTX was
compiled from; it does not run the PTX itself (`porter check` does that).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


class _HostTensor:
    """A numpy array as Triton's interpreter takes a tensor: a pointer, a dtype and a storage."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def untyped_storage(self) -> _HostTensor:
        return self

    def cpu(self) -> _HostTensor:
        return self

    def new_empty(self, *args: Any, **kwargs: Any) -> _HostTensor:
        return _HostTensor(self.array)

    def set_(self, storage: _HostTensor, *args: Any) -> _HostTensor:
        self.array = storage.array
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def copy_(self, other: _HostTensor) -> None:
        if other.array is not self.array:
            np.copyto(self.array, other.array)


def _kernel_for(entry: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The Triton function, its constexprs and its compile options, from the fixture generator."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_triton_fixtures as fixtures

    for fn, _types, constexprs, options, *folder in fixtures.KERNELS:
        if fn.__name__ == entry and not folder:
            return fn, constexprs, options
    raise SystemExit(f"{entry}: not a kernel of tools/make_triton_fixtures.py")


def check_example(folder: Path, *, gpu: bool, sets: int, seed: int) -> bool:
    from porter.gate.compare import compare
    from porter.gate.inputs import make_args
    from porter.gate.spec import load_spec

    spec = load_spec(folder / "porter.toml")
    ref = spec.reference
    assert ref is not None and ref.callable is not None, f"{folder}: the spec needs a python reference"
    loader = importlib.util.spec_from_file_location(f"ref_{folder.name}", ref.callable.path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    reference = getattr(module, ref.callable.function)
    fn, constexprs, options = _kernel_for(spec.entry)
    ok = True
    cases = [(sizes, values) for sizes in sorted(spec.size_sets(), key=lambda s: np.prod(list(s.values())))[:sets]
             for values in ("", *(c.name for c in spec.value_cases()))]
    for sizes, values in cases:
        args = make_args(spec, sizes, seed, values)
        buffers: dict[str, np.ndarray] = {}
        for p in spec.params:
            if p.kind == "buffer":
                shape = spec.shape(p, sizes)
                buffers[p.name] = args[p.name].copy() if p.is_input else np.zeros(shape, dtype=p.dtype.numpy)
        launch: list[Any] = []
        for p in spec.params:
            if p.kind == "buffer":
                launch.append(buffers[p.name])
            elif p.kind == "scalar":
                launch.append(args[p.name])
            # scratch: Triton's launcher adds its two scratch pointers itself
        outputs = _run(fn, launch, constexprs, options, spec.launch_dims(sizes).grid, gpu=gpu)
        expected = reference({k: v for k, v in args.items()}, dict(sizes))
        for p in spec.outputs:
            got = outputs[[q.name for q in spec.params if q.kind in ("buffer", "scalar")].index(p.name)]
            atol, rtol = spec.tolerance(p.name, sizes)
            atol *= spec.value_case(values).atol_scale if values else 1.0
            result = compare(p.name, got, np.asarray(expected[p.name]), atol=atol, rtol=rtol)
            worst = float(np.max(np.abs(got.astype(np.float64) - np.asarray(expected[p.name], dtype=np.float64))))
            print(f"{folder.name} {sizes}{' ' + values if values else ''} {p.name}: {'ok' if result.passed else 'WRONG'} "
                  f"({result.mismatches} of {result.total} outside atol {atol:.1e} rtol {rtol:.1e}; "
                  f"largest difference {worst:.3g})")
            ok &= result.passed
    return ok


def _run(fn: Any, launch: list[Any], constexprs: dict[str, Any], options: dict[str, Any],
         grid: tuple[int, int, int], *, gpu: bool) -> list[Any]:
    if not gpu:
        wrapped = [_HostTensor(a) if isinstance(a, np.ndarray) else a for a in launch]
        fn[grid](*wrapped, **constexprs)
        return launch
    import torch

    def to_torch(a: Any) -> Any:
        if not isinstance(a, np.ndarray):
            return a
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).cuda() if a.dtype.name == "bfloat16" \
            else torch.from_numpy(a).cuda()

    tensors = [to_torch(a) for a in launch]
    fn[grid](*tensors, **constexprs, **options)
    torch.cuda.synchronize()
    out = []
    for t, a in zip(tensors, launch, strict=True):
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif a.dtype.name == "bfloat16":
            out.append(t.view(torch.int16).cpu().numpy().view(a.dtype))
        else:
            out.append(t.cpu().numpy())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--gpu", action="store_true", help="compile with Triton and run on the GPU (needs torch)")
    parser.add_argument("--sets", type=int, default=2, help="how many of the smallest size sets to run")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    if not options.gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    ok = all([check_example(f, gpu=options.gpu, sets=options.sets, seed=options.seed) for f in options.folders])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
