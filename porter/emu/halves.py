"""16-bit floats in 32-bit registers: ``f16``, ``bf16`` and their packed pairs ``f16x2`` and
``bf16x2`` (element 0 in the low half), opened to float32 and closed again rounding to nearest
even. Two 16-bit values added (or subtracted) in float32 and rounded to 16 bits give the correctly
rounded sum: the exact sum either fits float32's 24 bits or lies too far from a 16-bit tie for
float32's rounding to make one; so does a product outside float32's subnormal range (the exact
product has at most 22 significant bits)."""

from __future__ import annotations

import numpy as np

from porter.emu import ptxtypes


def is_half(t: str) -> bool:
    return t in ("f16", "bf16", "f16x2", "bf16x2")


def split(bits: np.ndarray, t: str) -> list[np.ndarray]:
    """The float32 value of each element of registers ``bits`` of type ``t``, low half first."""
    u = np.asarray(bits).astype(np.uint32)
    parts = [u & 0xFFFF, u >> 16] if t.endswith("x2") else [u & 0xFFFF]
    if t.startswith("bf"):
        return [ptxtypes.bf16_to_f32(p) for p in parts]
    return [p.astype(np.uint16).view(np.float16).astype(np.float32) for p in parts]


def join(values: list[np.ndarray], t: str) -> np.ndarray:
    """Registers of type ``t`` holding ``values`` (float32, low half first), each rounded to nearest even."""
    close = ptxtypes.f32_to_bf16 if t.startswith("bf") else ptxtypes.f32_to_f16
    bits = [close(np.asarray(v, np.float32)).astype(np.uint32) for v in values]
    if len(bits) == 2:
        return bits[0] | (bits[1] << 16)
    return bits[0].astype(np.uint16)
