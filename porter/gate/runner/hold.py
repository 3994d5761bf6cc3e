"""Outputs declared nondeterministic (``deterministic = false``), held to the reference on the GPU.

An output accumulated with atomics differs in its last bits from launch to launch, so a timed
launch cannot be held to the verified one by a digest. It is held to the reference instead: after
every timed (and repeated) launch, the elements outside the spec's tolerance are counted on the
GPU, and that count, which must be 0, takes the output's digest slot. A kernel that skips work on
a later launch is caught as surely as by a digest; only the last bits are free.

The reference stays on the host: it is uploaded for each comparison, after the launch completed,
and the comparison's memory is zeroed before the next launch (``memory.scrubbed``), so
no candidate kernel runs while the reference, or a difference from it, is on the device (where a
wild write could make it match, or a wild read copy it into the output).

The functions take the array module (``xp``: CuPy in the worker, NumPy in the tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.gate.elementwise import judge_everywhere


def elements(raw: Any, dtype: Any) -> Any:
    """Contiguous bytes as one array element per value: of the dtype itself, or for 8- and
    16-bit floats their bit patterns as unsigned words (what :func:`decoder` decodes)."""
    if dtype.itemsize >= 4 or not dtype.is_float:
        return raw.view(dtype.numpy)
    return raw.view({1: np.uint8, 2: np.uint16}[dtype.itemsize])


def float32_as_float64(xp: Any, values: Any) -> Any:
    """float32 values as float64, exactly, by their bits: CuPy's kernels flush float32 subnormals
    to zero in a cast (seen on the H200, 2026-12-05: a float32 reference of 9e-41 read as 0 on the
    device and as itself on the host), so the cast is made in integers and float64, which is never
    flushed: sign, exponent rebiased, mantissa moved up; a subnormal as its mantissa times 2^-149."""
    u = xp.uint64  # every constant typed: no promotion of unsigned words to float, in any array module
    bits = xp.ascontiguousarray(values).view(xp.uint32).astype(u)
    sign = (bits >> u(31)) << u(63)
    exponent = (bits >> u(23)) & u(0xFF)
    mantissa = bits & u(0x7FFFFF)
    rebiased = xp.where(exponent == u(0xFF), u(0x7FF), exponent + u(1023 - 127))
    whole = (sign | (rebiased << u(52)) | (mantissa << u(29))).view(xp.float64)
    small = mantissa.astype(xp.float64) * 2.0**-149
    small = xp.where(sign != u(0), -small, small)
    return xp.where(exponent == u(0), small, whole)


def decoder(xp: Any, dtype: Any, tables: dict[str, Any]) -> Callable[[Any], Any]:
    """Elements (see :func:`elements`) to float64 values, exactly (no subnormal flushed to zero).
    An 8- or 16-bit float's table (a few hundred kilobytes at most) is made here, at once, so that
    it is never made among the temporaries of a judgement that are scrubbed when it ends
    (``porter.gate.runner.judge``)."""
    if dtype.is_float and dtype.itemsize == 4:
        return lambda values: float32_as_float64(xp, values)
    if dtype.itemsize >= 4 or not dtype.is_float:
        return lambda values: values.astype(xp.float64)
    words = {1: np.uint8, 2: np.uint16}[dtype.itemsize]
    if dtype.name not in tables:
        every = np.arange(2 ** (8 * dtype.itemsize), dtype=np.int64).astype(words)
        with np.errstate(invalid="ignore"):  # the NaN patterns stay NaN
            tables[dtype.name] = xp.asarray(every.view(dtype.numpy).astype(np.float64))
    table = tables[dtype.name]
    return lambda patterns: table[patterns.astype(xp.int32)]


@dataclass(frozen=True)
class HeldOutput:
    """The reference of one output (float64, flat, on the host) and its tolerance there."""

    reference: np.ndarray
    atol: float
    rtol: float

    def outside(self, xp: Any, values: Any) -> Any:
        """How many of ``values`` (float64, flat, on the device) are outside the tolerance: a 0-d
        device array. The reference is uploaded for the comparison: call it inside
        ``memory.scrubbed``, which zeroes it, and every temporary, afterwards."""
        ok = judge_everywhere(xp, values, xp.asarray(self.reference), self.atol, self.rtol)[0]
        return xp.count_nonzero(~ok)
