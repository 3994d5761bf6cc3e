"""Shared-memory matrix descriptors (wgmma on sm_90a, tcgen05 on sm_100a) and the swizzle.

Field by field, per the PTX ISA ("Matrix Descriptor Format" for wgmma, "Shared Memory
Descriptor" for tcgen05) as summarised, with its evidence, in the async-tensor-core reference
§1-§3.2. The address functions of the canonical layouts (§2.2) give, for element (mn, k) of an
operand, the pre-swizzle byte address; the swizzle is applied to that absolute shared address:
``phys = a ^ ((((a >> 7) - base_offset) & (2^b - 1)) << 4)`` for spans of 32, 64, 128 bytes
(b = 1, 2, 3). TMA writes with the same function and base offset 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_SM90_LAYOUT = {0: 0, 1: 128, 2: 64, 3: 32}
_SM100_LAYOUT = {0: 0, 2: 128, 4: 64, 6: 32}  # 1 = 128B with 32-byte atoms: not emulated


class DescriptorError(ValueError):
    """A descriptor that cannot describe a valid layout (the message says which field)."""


@dataclass(frozen=True)
class SmemDesc:
    start: int  # byte address (the 18-bit shared address the field keeps)
    lbo: int  # bytes
    sbo: int  # bytes
    base_offset: int
    span: int  # swizzle span in bytes: 0 (none / interleave), 32, 64, 128


def _field(v: int, lo: int, width: int) -> int:
    return (v >> lo) & ((1 << width) - 1)


def decode(desc: int, arch: str) -> SmemDesc:
    """Decode a 64-bit descriptor for ``arch`` ("sm_90a" layout or "sm_100a" layout)."""
    start = _field(desc, 0, 14) << 4
    lbo = _field(desc, 16, 14) << 4
    sbo = _field(desc, 32, 14) << 4
    base = _field(desc, 49, 3)
    if arch == "sm_100":
        version = _field(desc, 46, 3)
        if version != 1:
            raise DescriptorError(f"bits [46,49) are {version:#05b}; a tcgen05 shared-memory descriptor needs 0b001 "
                                  "(an sm_90 wgmma descriptor used on sm_100?)")
        code = _field(desc, 61, 3)
        if code not in _SM100_LAYOUT:
            raise DescriptorError(f"layout field [61,64) is {code}: " + (
                "128B with 32-byte atoms is not emulated" if code == 1 else "not a valid swizzle mode"))
        if _field(desc, 52, 1):
            raise DescriptorError("bit 52 (LBO mode: absolute address) is sm_103a only")
        span = _SM100_LAYOUT[code]
    else:
        if _field(desc, 46, 3):
            raise DescriptorError(f"bits [46,49) are {_field(desc, 46, 3):#05b}; wgmma descriptors keep them 0")
        span = _SM90_LAYOUT[_field(desc, 62, 2)]
    return SmemDesc(start, lbo, sbo, base, span)


def swizzle(addr: np.ndarray, span: int, base_offset: int = 0) -> np.ndarray:
    """Physical byte addresses for pre-swizzle addresses ``addr`` (int64) in a ``span``-byte swizzle."""
    if span == 0:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[span]
    key = ((addr >> 7) - base_offset) & ((1 << bits) - 1)
    return addr ^ (key << 4)


def operand_addresses(d: SmemDesc, mn: int, k: int, elem: int, mn_major: bool) -> np.ndarray:
    """Byte addresses ``(mn, k)`` of an MN x K operand slab (one instruction's K) per §2.2."""
    m = np.arange(mn, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    t = 16 // elem
    w = d.span
    if not mn_major:
        if w == 0:
            a = d.start + (m // 8) * d.sbo + (kk // t) * d.lbo + (m % 8) * 16 + (kk % t) * elem
        else:
            if k * elem > w:
                raise DescriptorError(f"a K-major slab of {k * elem} bytes does not fit the {w}-byte swizzle row")
            a = d.start + (m // 8) * d.sbo + (m % 8) * w + kk * elem
    elif w == 0:
        a = d.start + (m // t) * d.sbo + (kk // 8) * d.lbo + (kk % 8) * 16 + (m % t) * elem
    else:
        per = w // elem
        a = d.start + (m // per) * d.lbo + (kk // 8) * d.sbo + (kk % 8) * w + (m % per) * elem
    return swizzle(a, w, d.base_offset)
