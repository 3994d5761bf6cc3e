"""The emulator's instruction corpus: small kernels written in CUDA C++ (or inline PTX), compiled
by nvcc, each with a NumPy model of what the PTX ISA says it computes.

Each topic is a folder of ``tests/data/emu_corpus``: ``kernels.cu`` (the source), ``kernels.ptx``
(what ``nvcc -ptx`` made of it; the command is the file's first comment line) and ``cases.py``,
whose ``CASES`` lists :class:`CorpusCase`. ``tests/test_emu_corpus.py`` runs every case in the
emulator and holds its outputs to the model; ``tools/emu_calibrate.py`` runs the same cases on a
GPU and holds the emulator to the hardware, bit for bit or within the case's ulps.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CORPUS = Path(__file__).resolve().parent / "data" / "emu_corpus"


@dataclass(frozen=True)
class CorpusCase:
    """One launch of one corpus kernel.

    ``make_args(rng)`` builds the launch's arguments as :func:`porter.emu.emulate` takes them
    (arrays for pointers, NumPy scalars for scalars); ``outputs`` are the indices of the arrays
    to compare; ``expect(args)`` is the model: the value of each output, from the arguments as
    made (before the launch). ``ulps`` is how far (in units in the last place of the output's
    dtype) an output may be from the model and from the GPU: 0 where the ISA defines the result
    exactly, more for ``.approx`` functions (their documented bound). An output of integer dtype
    is compared bit for bit.
    """

    entry: str
    grid: int | tuple[int, ...]
    block: int | tuple[int, ...]
    make_args: Callable[[np.random.Generator], list[Any]]
    outputs: tuple[int, ...]
    expect: Callable[[list[Any]], dict[int, np.ndarray]]
    ulps: int = 0
    dynamic_smem: int = 0
    arch: str = "sm_90"  # the oldest GPU the kernel runs on (fp8 mma needs sm_89, wgmma sm_90a)


@dataclass(frozen=True)
class Topic:
    name: str
    ptx: str
    cases: tuple[CorpusCase, ...]


def topics() -> list[Topic]:
    """Every topic of the corpus, in name order."""
    found = []
    for folder in sorted(p for p in CORPUS.iterdir() if (p / "cases.py").is_file()):
        spec = importlib.util.spec_from_file_location(f"emu_corpus_{folder.name}", folder / "cases.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.append(Topic(folder.name, (folder / "kernels.ptx").read_text(), tuple(module.CASES)))
    return found


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, how many representable values of the float dtype lie between a and b (both
    NaN: 0, whatever their payloads; one NaN: the dtype's whole range). Integer arrays: 0 where
    the bits agree, else the dtype's range."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if a.dtype != b.dtype:
        raise ValueError(f"{a.dtype} against {b.dtype}")
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    far = np.iinfo(np.int64).max
    if a.dtype.kind != "f" and not _is_ml_float(a.dtype):
        return np.where(a.view(word) == b.view(word), 0, far).astype(np.int64)
    bits = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    with np.errstate(invalid="ignore"):
        na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    x, y = a.view(bits).astype(np.int64), b.view(bits).astype(np.int64)
    top = (1 << (8 * a.dtype.itemsize - 1)) - 1
    # sign-magnitude onto a line where neighbouring floats are one apart (+0 and -0 coincide)
    x = np.where(x < 0, -(x & top), x)
    y = np.where(y < 0, -(y & top), y)
    with np.errstate(over="ignore"):  # float64s of opposite signs: saturate rather than wrap
        apart = np.where((x < 0) != (y < 0), np.minimum(np.abs(x).astype(np.uint64) + np.abs(y).astype(np.uint64),
                                                        np.uint64(far)).astype(np.int64), np.abs(x - y))
    return np.where(na & nb, 0, np.where(na | nb, far, apart))


def _is_ml_float(dtype: np.dtype) -> bool:
    return dtype.kind == "V" or dtype.name.startswith(("bfloat16", "float8", "float6", "float4"))
