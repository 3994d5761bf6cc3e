"""tcgen05.mma kind::tf32, kind::f8f6f4 (e4m3, e5m2, e2m3, e3m2) and kind::i8 (s8/u8, wrapping or
saturating), the types and flags read from the instruction descriptor (PTX ISA "Instruction
descriptor"; async-tensor-core reference §3.1).

The model is D = A B + D per instruction (four of K = 32 bytes), each one's sums exact and rounded
once to f32, or in int64 then wrapped to s32 or clamped when the descriptor's saturate bit is set.
fp6 elements sit in bits [5:0] of their byte, as cvt's e2m3x2/e3m2x2 write them.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from emu_corpus import CorpusCase

M, N, ROW_BYTES = 128, 32, 128
DTYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e2m3": ml_dtypes.float6_e2m3fn,
          "e3m2": ml_dtypes.float6_e3m2fn, "s8": np.int8, "u8": np.uint8, "tf32": np.float32}
CODES = {"f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4}, "i8": {"u8": 0, "s8": 1}, "tf32": {"tf32": 2}}


def _idesc(kind: str, a_t: str, b_t: str, neg_a: bool, sat: bool) -> int:
    d = 2 if kind == "i8" else 1
    return (sat << 3 | d << 4 | CODES[kind][a_t] << 7 | CODES[kind][b_t] << 10 | neg_a << 13 | (N >> 3) << 17
            | (M >> 4) << 24)


def _rows(rng: np.random.Generator, t: str, rows: int) -> np.ndarray:
    """``rows`` rows of 128 bytes of type ``t`` (raw bytes)."""
    if t == "tf32":  # tf32-exact small dyadic values
        v = rng.integers(-512, 512, (rows, ROW_BYTES // 4)) * 2.0 ** rng.integers(-8, 4, (rows, ROW_BYTES // 4))
        return v.astype(np.float32).view(np.uint8)
    codes = rng.integers(0, 256, (rows, ROW_BYTES)).astype(np.uint8)
    if t in ("e2m3", "e3m2"):
        codes &= 0x3F
    elif t[0] == "e":
        codes[~np.isfinite(codes.view(DTYPES[t]).astype(np.float64))] = 0x30
    return codes


def _values(raw: np.ndarray, t: str, rows: int) -> np.ndarray:
    v = raw.reshape(rows, -1).view(DTYPES[t])
    return v.astype(np.int64 if t in ("s8", "u8") else np.float64)


def _case(entry: str, kind: str, a_t: str, b_t: str, neg_a: bool = False, sat: bool = False) -> CorpusCase:
    integer = kind == "i8"

    def make(rng: np.random.Generator) -> list[Any]:
        if integer:  # near the ends of the range: the four steps' sums overflow
            big = rng.integers(2**31 - 3_000_000, 2**31, (M, N))
            c = np.where(rng.random((M, N)) < 0.5, -big, big).astype(np.int32).view(np.uint32)
        else:
            c = rng.uniform(-64, 64, (M, N)).astype(np.float32).view(np.uint32)
        return [_rows(rng, a_t, M).reshape(-1), _rows(rng, b_t, N).reshape(-1), c.reshape(-1),
                np.zeros(M * N, np.uint32), np.uint32(_idesc(kind, a_t, b_t, neg_a, sat))]

    def expect(args: list[Any]) -> dict[int, np.ndarray]:
        a, bt = _values(args[0], a_t, M) * (-1 if neg_a else 1), _values(args[1], b_t, N)
        d = args[2].view(np.int32 if integer else np.float32).reshape(M, N)
        k = a.shape[1] // 4
        for s in range(4):
            acc = d.astype(np.int64 if integer else np.float64) + a[:, s * k:(s + 1) * k] @ bt[:, s * k:(s + 1) * k].T
            d = (np.clip(acc, -(2**31), 2**31 - 1) if sat else acc).astype(d.dtype)
        return {3: d.reshape(-1).view(np.uint32)}

    return CorpusCase(entry, 1, 128, make, (3,), expect, arch="sm_100a")


CASES = [
    _case("tc_tf32", "tf32", "tf32", "tf32"),
    _case("tc_f8f6f4", "f8f6f4", "e4m3", "e4m3"),
    _case("tc_f8f6f4", "f8f6f4", "e5m2", "e4m3", neg_a=True),
    _case("tc_f8f6f4", "f8f6f4", "e2m3", "e3m2"),
    _case("tc_i8", "i8", "s8", "s8"),
    _case("tc_i8", "i8", "u8", "s8", sat=True),
]
