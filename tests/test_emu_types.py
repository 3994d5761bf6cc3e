"""The narrow float formats (porter.emu.minifloat) and the tcgen05 instruction descriptor's type
fields, below the corpus: every code decoded as ml_dtypes decodes it, the overflow of each
format without .satfinite, and the descriptors the emulator refuses or does not emulate."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from porter.emu.minifloat import FORMATS, tf32_round
from porter.emu.tcgen05 import NotEmulated, decode_idesc

REFERENCE = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e2m3": ml_dtypes.float6_e2m3fn,
             "e3m2": ml_dtypes.float6_e3m2fn, "e2m1": ml_dtypes.float4_e2m1fn, "ue8m0": ml_dtypes.float8_e8m0fnu}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_every_code_decodes_as_ml_dtypes_and_encodes_back(name: str) -> None:
    fmt = FORMATS[name]
    codes = np.arange(1 << fmt.bits, dtype=np.uint8)
    want = codes.view(REFERENCE[name]).astype(np.float64)
    got = fmt.decode(codes)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    finite = np.isfinite(got) & ~((got == 0) & (codes != 0))  # -0 encodes as itself too
    mode = "rz" if name == "ue8m0" else "rn"
    assert np.array_equal(fmt.encode(got[finite], mode), codes[finite])


def test_overflow_without_satfinite_is_inf_for_e5m2_and_nan_for_e4m3() -> None:
    x = np.array([1e6, -1e6, np.inf, 61440.0, 464.0, 480.0])
    e5m2 = FORMATS["e5m2"].encode(x, satfinite=False)
    assert e5m2[:4].tolist() == [0x7C, 0xFC, 0x7C, 0x7C]  # 61440 ties up to 65536: infinity
    e4m3 = FORMATS["e4m3"].encode(x, satfinite=False)
    assert e4m3.tolist() == [0x7F, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F]  # 464 ties down to 448; 480 is past it
    assert FORMATS["e4m3"].encode(x).tolist() == [0x7E, 0xFE, 0x7E, 0x7E, 0x7E, 0x7E]


def test_ue8m0_rounds_toward_zero_or_up_to_a_power_of_two() -> None:
    x = np.array([1.0, 1.5, 3.0, 2.0**-130, 2.0**127 * 1.5])
    ue = FORMATS["ue8m0"]
    assert ue.encode(x, "rz").tolist() == [127, 127, 128, 0, 254]
    assert ue.encode(x, "rp").tolist() == [127, 128, 129, 0, 254]
    assert ue.encode(x[4:], "rp", satfinite=False).tolist() == [255]
    # no negative values in an unsigned format: they, like zero, give the smallest code (docs/emulator.md)
    assert ue.encode(np.array([-4.0, -0.0, 0.0]), "rp").tolist() == [0, 0, 0]


def test_tf32_rounding_modes_on_a_tie_and_past_the_largest() -> None:
    bits = np.array([0x3F801000, 0x3F803000, 0x7F7FF000, 0xBF801001], np.uint32)
    x = bits.view(np.float32)
    assert tf32_round(x, "rna").tolist() == [0x3F802000, 0x3F804000, 0x7F800000, 0xBF802000]
    assert tf32_round(x, "rn").tolist() == [0x3F800000, 0x3F804000, 0x7F800000, 0xBF802000]
    assert tf32_round(x, "rz").tolist() == [0x3F800000, 0x3F802000, 0x7F7FE000, 0xBF800000]
    assert tf32_round(x, "rna", satfinite=True)[2] == 0x7F7FE000


M128_N32 = (4 << 17) | (8 << 24)


def test_idesc_type_fields_of_the_new_kinds() -> None:
    d = decode_idesc(M128_N32 | 1 << 4 | 1 << 7 | 3 << 10, "f8f6f4")
    assert (d.d_type, d.a_type, d.b_type) == ("f32", "e5m2", "e2m3")
    d = decode_idesc(M128_N32 | 1 << 3 | 2 << 4 | 0 << 7 | 1 << 10, "i8")
    assert (d.d_type, d.a_type, d.b_type, d.saturate) == ("s32", "u8", "s8", True)


@pytest.mark.parametrize(("value", "kind", "message"), [
    (M128_N32 | 1 << 4 | 5 << 7, "f8f6f4", "e2m1"),
    (M128_N32 | 1 << 3 | 1 << 4, "f8f6f4", "saturate"),
    (M128_N32 | 2 << 4 | 1 << 13, "i8", "negate"),
    (M128_N32 | 1 << 4, "i8", "not valid"),
    (M128_N32 | 1 << 4 | 3 << 7 | 1 << 15, "f8f6f4", "fp6 is K-major"),
])
def test_idesc_refusals(value: int, kind: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        decode_idesc(value, kind)
    assert isinstance(err.value, NotEmulated) == (message == "e2m1")


def test_bf16_directed_rounding_goes_to_the_modes_side() -> None:
    """cvt.rm/.rp to bf16 (from f64 and integers on sm_90) ran as .rn before."""
    from porter.emu.ptxtypes import f32_to_bf16

    x = np.array([1.0 + 2.0**-10, -(1.0 + 2.0**-10), 1.0, 3.0e38], np.float32)
    assert f32_to_bf16(x, "rz").tolist() == [0x3F80, 0xBF80, 0x3F80, 0x7F61]
    assert f32_to_bf16(x, "rm").tolist() == [0x3F80, 0xBF81, 0x3F80, 0x7F61]
    assert f32_to_bf16(x, "rp").tolist() == [0x3F81, 0xBF80, 0x3F80, 0x7F62]
