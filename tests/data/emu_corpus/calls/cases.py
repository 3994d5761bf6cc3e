"""Device-function calls (PTX ISA: call, ret, .param arguments and return values, the ABI's stack
frames in .local): the models are the C++ functions themselves, in Python. The double-precision
functions are held to NumPy within the CUDA Programming Guide's documented maximum errors
(its "Mathematical Functions" appendix: sin and pow 2 ulps, exp and log1p 1 ulp)."""

from __future__ import annotations

from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 96  # three warps
F32 = np.float32


def _floats(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(-8, 8, n).astype(F32)


def _noinline_args(rng: np.random.Generator) -> list[Any]:
    return [_floats(rng, N), _floats(rng, N), np.zeros(N, F32), np.int32(N - 5)]


def _noinline_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y, n = args[0], args[1], int(args[3])
    out = np.zeros(N, F32)
    out[:n] = ((x * y + F32(1.5)) - (y * F32(0.25) + x))[:n]  # float32 NumPy: each operation rounded once
    return {2: out}


def _aggregates_args(rng: np.random.Generator) -> list[Any]:
    v = _floats(rng, 4 * N)
    v[:4] = [0.0, -0.0, 1.0, -3.0]
    return [v, np.zeros(4 * N, F32), np.zeros(2 * N, F32), np.zeros(N, np.int32), np.zeros(N, np.float64)]


def _aggregates_expect(args: list[Any]) -> dict[int, np.ndarray]:
    scale = (F32(0.5) + np.arange(N, dtype=F32)).astype(F32)
    v = (args[0].reshape(N, 4) * scale[:, None]).astype(F32)
    d = v.astype(np.float64)
    lohi = np.stack([v.min(axis=1), v.max(axis=1)], axis=1)
    counts = (v > 0).sum(axis=1).astype(np.int32) + np.arange(N, dtype=np.int32)
    sums = (d[:, 0] + d[:, 1]) + (d[:, 2] + d[:, 3])
    return {1: v.reshape(-1), 2: lohi.reshape(-1), 3: counts, 4: sums}


def _c_rem(a: int, b: int) -> int:
    """C's %: the remainder takes the dividend's sign."""
    return a - b * int(a / b)


def _frames_args(rng: np.random.Generator) -> list[Any]:
    return [rng.integers(-1000, 1000, N).astype(np.int32), np.zeros(2 * N, np.int32)]


def _frames_expect(args: list[Any]) -> dict[int, np.ndarray]:
    out = np.zeros(2 * N, np.int32)
    for i in range(N):
        n, seed = 5 + i % 8, int(args[0][i])
        scratch = [_c_rem(seed + 7 * j, 23) for j in range(n)]
        arr = [scratch[(j * 5) % n] * scratch[j] for j in range(n)]
        out[2 * i] = sorted(arr)[i % n]
        out[2 * i + 1] = arr[(i * 3) % n]
    return {1: out}


def _frames_nested_args(rng: np.random.Generator) -> list[Any]:
    return [rng.integers(-1000, 1000, N).astype(np.int32), np.zeros(N, np.int32)]


def _frames_nested_expect(args: list[Any]) -> dict[int, np.ndarray]:
    out = np.zeros(N, np.int32)
    for i in range(N):
        n, seed = 1 + i % 8, int(args[0][i])
        mine = [seed ^ (j * 13) for j in range(n)]
        doubled = [2 * v for v in mine]
        out[i] = sum((j + 1) * doubled[(j * 3) % n] for j in range(n)) - mine[(seed & 0x7FFF) % n]
    return {1: out}


def _leaf(x: int) -> int:
    return (x * 2654435761 + (x >> 7)) & 0xFFFFFFFF


def _middle(x: int) -> int:
    return _leaf(x) ^ (_leaf((x + 1) & 0xFFFFFFFF) >> 3)


def _nested_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x[:2] = [0, 0xFFFFFFFF]
    return [x, np.zeros(N, np.uint32)]


def _nested_expect(args: list[Any]) -> dict[int, np.ndarray]:
    return {1: np.array([(_middle(int(x)) + 3 * _middle(int(x) >> 1)) & 0xFFFFFFFF for x in args[0]], np.uint32)}


def _collatz(x: int, cap: int) -> int:
    if x <= 1:
        return 0
    steps = 0
    while x != 1 and steps < cap:
        x = 3 * x + 1 if x & 1 else x // 2
        steps += 1
    return steps


def _digit_sum(x: int) -> int:
    return -1 if x < 0 else sum(int(c) for c in str(x))


def _divergent_args(rng: np.random.Generator) -> list[Any]:
    x = rng.integers(-50, 10000, N).astype(np.int32)
    x[:4] = [0, 1, 27, -1]  # 27 takes 111 steps; 0 and 1 none
    return [x, np.zeros(N, np.int32)]


def _divergent_expect(args: list[Any]) -> dict[int, np.ndarray]:
    out = np.zeros(N, np.int32)
    for i, v in enumerate(int(x) for x in args[0]):
        r = _collatz(v, 200) if i % 3 == 0 else _digit_sum(v)
        out[i] = r + sum(_digit_sum(v + j) for j in range(i % 4))
    return {1: out}


def _math_args(rng: np.random.Generator) -> list[Any]:
    x = rng.uniform(-10, 10, N)
    # Past 2**31 sin reduces its argument by a call (__internal_trig_reduction_slowpathd).
    big = [3e9, -2.5e9, 1e10, -7.5e15, 1e22, -3.3e100, 1.7e308, 2.0**31, 1e6, -123456.789]
    x[: len(big)] = big
    x[len(big) : len(big) + 3] = [0.0, -0.0, 1e-300]
    y = rng.uniform(-6, 6, N)
    y[:6] = [700.0, -745.0, 0.5, -0.0, 1e-17, 35.5]  # exp near overflow and underflow
    return [x, y, np.zeros(4 * N)]


def _math_expect(args: list[Any]) -> dict[int, np.ndarray]:
    x, y = args[0], args[1]
    with np.errstate(all="ignore"):
        out = np.stack([np.sin(x), np.exp(y), np.power(np.abs(x), y), np.log1p(np.abs(y))], axis=1)
    return {2: out.reshape(-1)}


CASES = [
    CorpusCase("noinline_float", 1, N, _noinline_args, (2,), _noinline_expect),
    CorpusCase("aggregates", 1, N, _aggregates_args, (1, 2, 3, 4), _aggregates_expect),
    CorpusCase("frames", 1, N, _frames_args, (1,), _frames_expect),
    CorpusCase("frames_nested", 1, N, _frames_nested_args, (1,), _frames_nested_expect),
    CorpusCase("nested", 1, N, _nested_args, (1,), _nested_expect),
    CorpusCase("divergent", 1, N, _divergent_args, (1,), _divergent_expect),
    CorpusCase("math_f64", 1, N, _math_args, (2,), _math_expect, ulps=2),
]
