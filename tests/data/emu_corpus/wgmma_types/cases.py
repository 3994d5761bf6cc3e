"""wgmma.mma_async with fp8 (e4m3/e5m2), integer (s8/u8, .satfinite) and f16-accumulator kinds,
operands through shared-memory descriptors (no-swizzle A, 128B-swizzled B) or A in registers.

Each kernel runs four K-steps of 32 bytes on accumulators loaded from C. The model is the ISA's
D = A B + D per instruction, each instruction's sums exact and rounded once to the accumulator's
type (s32: wrapped, or clamped with .satfinite, per instruction; f16: past 65504, infinity), with
the kernel's scale immediates (-1 negates that operand). D is stored in its own type.

The GPU keeps only about 14 bits in the fp8 sums (docs/emulator.md, "Calibration"): ``BOUNDS``
gives, per fp8 case, how far it may be from the exact sums, per element, over the four
instructions (porter.emu.tensorcore.hardware_sum_bound of each instruction's |D| plus its
|products|, added up); tools/emu_calibrate.py holds the GPU to it, and the emulator to the model
bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

from porter.emu.tensorcore import HARDWARE_BITS, hardware_sum_bound

E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
ROW_BYTES, N = 128, 16
FP8 = {"e4m3": E4M3, "e5m2": E5M2}
D_TYPES: dict[str, Any] = {"f32": np.float32, "f16": np.float16, "s32": np.int32}
BOUNDS: dict[str, Callable[[list[Any]], dict[int, np.ndarray]]] = {}


def _matrix(rng: np.random.Generator, t: str, rows: int) -> np.ndarray:
    """``rows`` rows of 128 bytes of type ``t``, as the values (float64 or int64)."""
    if t in FP8:
        codes = rng.integers(0, 256, (rows, ROW_BYTES)).astype(np.uint8)
        codes[~np.isfinite(codes.view(FP8[t]).astype(np.float64))] = 0x3C
        return codes.view(FP8[t])
    if t == "f16":
        return (rng.integers(-64, 64, (rows, ROW_BYTES // 2)) / 16).astype(np.float16)
    return rng.integers(-128, 128, (rows, ROW_BYTES)).astype(np.int8) if t == "s8" else \
        rng.integers(0, 256, (rows, ROW_BYTES)).astype(np.uint8)


def _acc(rng: np.random.Generator, t: str) -> np.ndarray:
    if t == "s32":  # near the ends of the range: the four steps' sums overflow
        big = rng.integers(2**31 - 1_500_000, 2**31, (64, N))
        return np.where(rng.random((64, N)) < 0.5, -big, big).astype(np.int32)
    return rng.uniform(-64, 64, (64, N)).astype(np.float32 if t == "f32" else np.float16)


def _case(entry: str, types: str, scale_a: int = 1, scale_b: int = 1, sat: bool = False) -> CorpusCase:
    d_t, a_t, b_t = types.split(".")

    def make(rng: np.random.Generator) -> list[Any]:
        a, bt, c = _matrix(rng, a_t, 64), _matrix(rng, b_t, N), _acc(rng, d_t)
        return [a.view(np.uint8).reshape(-1), bt.view(np.uint8).reshape(-1), c.view(np.uint32).reshape(-1),
                np.zeros(c.size, D_TYPES[d_t])]

    def steps(args: list[Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """D after each of the four instructions (each rounded once) and each one's magnitude,
        |D before| + the sum of its |products|, per element."""
        def values(raw: np.ndarray, t: str, rows: int) -> np.ndarray:
            v = raw.view({**FP8, "f16": np.float16, "s8": np.int8, "u8": np.uint8}[t])
            return v.reshape(rows, -1).astype(np.int64 if t in ("s8", "u8") else np.float64)

        a, bt = values(args[0], a_t, 64) * scale_a, values(args[1], b_t, N) * scale_b
        d = args[2].view(D_TYPES[d_t]).reshape(64, N)
        k = a.shape[1] // 4
        ds, magnitudes = [], []
        for s in range(4):
            part_a, part_b = a[:, s * k:(s + 1) * k], bt[:, s * k:(s + 1) * k]
            acc = d.astype(np.int64 if d_t == "s32" else np.float64) + part_a @ part_b.T
            magnitudes.append(np.abs(d.astype(np.float64)) + np.abs(part_a) @ np.abs(part_b).T)
            if d_t == "s32":
                d = (np.clip(acc, -(2**31), 2**31 - 1) if sat else acc).astype(np.int32)
            else:
                with np.errstate(over="ignore"):  # an f16 sum past 65504 is infinity
                    d = acc.astype(d.dtype)
            ds.append(d)
        return ds, magnitudes

    def expect(args: list[Any]) -> dict[int, np.ndarray]:
        return {3: steps(args)[0][-1].reshape(-1)}

    def bound(args: list[Any]) -> dict[int, np.ndarray]:
        k = 32  # fp8 elements per instruction (32 bytes of K)
        bits = HARDWARE_BITS["wgmma.fp8", d_t]
        return {3: sum(hardware_sum_bound(m, k + 1, bits) for m in steps(args)[1]).reshape(-1)}

    if a_t in FP8:
        BOUNDS[entry] = bound
    return CorpusCase(entry, 1, 128, make, (3,), expect, arch="sm_90a")


CASES = [
    _case("wgmma_e4m3_f32", "f32.e4m3.e4m3"),
    _case("wgmma_e5m2e4m3_f16", "f16.e5m2.e4m3"),
    _case("wgmma_e4m3_rs_f32", "f32.e4m3.e4m3", scale_b=-1),
    _case("wgmma_s8_s32", "s32.s8.s8"),
    _case("wgmma_u8s8_sat", "s32.u8.s8", sat=True),
    _case("wgmma_f16_f16", "f16.f16.f16", scale_a=-1),
]
