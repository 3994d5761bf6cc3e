"""The element types a spec may name, with their sizes, poison patterns and default tolerances.

numpy and ml_dtypes are imported only when :attr:`DType.numpy` is read, so that parsing a spec
(and ``porter --help``) stays light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from porter.errors import InputError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class DType:
    """One element type.

    ``poison_bits`` is the bit pattern written into every element of an output before a launch,
    so that an element the kernel never writes cannot pass by accident: a NaN for floats (NaN
    compares unequal to everything) and ``0x5A`` repeated for integers (a value no small test
    input produces, easy to spot in a hex dump).
    """

    name: str
    itemsize: int
    kind: str  # "float" | "int" | "uint"
    poison_bits: int
    atol: float
    rtol: float
    numpy_name: str  # numpy's (or ml_dtypes') name for the type
    max_finite: float = 0.0  # largest finite value, floats only

    @property
    def numpy(self) -> np.dtype:
        import numpy as np

        if self.numpy_name in _ML_DTYPES:
            import ml_dtypes

            scalar: type[np.generic] = getattr(ml_dtypes, self.numpy_name)
            return np.dtype(scalar)
        return np.dtype(self.numpy_name)

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def poison_bytes(self) -> bytes:
        """One element of poison, little-endian as the GPU stores it."""
        return self.poison_bits.to_bytes(self.itemsize, "little")

    @property
    def tolerance(self) -> tuple[float, float]:
        """The default ``(atol, rtol)`` for an output of this type; integers compare exactly."""
        return self.atol, self.rtol

    @property
    def value_range(self) -> tuple[int | float, int | float]:
        """The smallest and largest finite values the type holds."""
        if self.kind == "float":
            return -self.max_finite, self.max_finite
        if self.kind == "uint":
            return 0, 2**self.bits - 1
        return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1

    def __str__(self) -> str:
        return self.name


_ML_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2"})


def _float(
    name: str, itemsize: int, nan: int, atol: float, rtol: float, numpy_name: str, top: float
) -> DType:
    return DType(name, itemsize, "float", nan, atol, rtol, numpy_name, top)


def _integer(name: str, itemsize: int, kind: str) -> DType:
    return DType(
        name, itemsize, kind, int.from_bytes(b"\x5a" * itemsize, "little"), 0.0, 0.0, f"{kind}{itemsize * 8}"
    )


# NaN patterns: all-ones mantissa with a clear sign bit. For e4m3 (float8_e4m3fn) 0x7F is the only
# positive NaN; for e5m2, 0x7D..0x7F are NaNs and 0x7C is +inf.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _float("f64", 8, 0x7FFF_FFFF_FFFF_FFFF, 1e-12, 1e-9, "float64", 1.7976931348623157e308),
        _float("f32", 4, 0x7FFF_FFFF, 1e-5, 1e-4, "float32", 3.4028234663852886e38),
        _float("f16", 2, 0x7FFF, 1e-3, 1e-2, "float16", 65504.0),
        _float("bf16", 2, 0x7FFF, 1e-2, 2e-2, "bfloat16", 3.3895313892515355e38),
        _float("e4m3", 1, 0x7F, 0.125, 0.125, "float8_e4m3fn", 448.0),
        _float("e5m2", 1, 0x7F, 0.25, 0.25, "float8_e5m2", 57344.0),
        _integer("i8", 1, "int"),
        _integer("i16", 2, "int"),
        _integer("i32", 4, "int"),
        _integer("i64", 8, "int"),
        _integer("u8", 1, "uint"),
        _integer("u16", 2, "uint"),
        _integer("u32", 4, "uint"),
        _integer("u64", 8, "uint"),
    )
}

# Bare "float" and "int" are left out on purpose: "float" is f32 in C but f64 in numpy, and "int"
# is 32 bits in C but 64 in numpy.
ALIASES: dict[str, str] = {
    "float64": "f64",
    "fp64": "f64",
    "double": "f64",
    "float32": "f32",
    "fp32": "f32",
    "float16": "f16",
    "fp16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "fp8_e4m3": "e4m3",
    "fp8e4m3": "e4m3",
    "f8e4m3": "e4m3",
    "float8_e4m3": "e4m3",
    "float8_e4m3fn": "e4m3",
    "e4m3fn": "e4m3",
    "fp8_e5m2": "e5m2",
    "fp8e5m2": "e5m2",
    "f8e5m2": "e5m2",
    "float8_e5m2": "e5m2",
    **{f"int{b}": f"i{b}" for b in (8, 16, 32, 64)},
    **{f"s{b}": f"i{b}" for b in (8, 16, 32, 64)},
    **{f"uint{b}": f"u{b}" for b in (8, 16, 32, 64)},
}


def parse_dtype(name: object, where: str = "") -> DType:
    """The dtype called ``name`` (canonical or alias, any case); InputError naming ``where`` otherwise."""
    if isinstance(name, str):
        key = name.strip().lower()
        found = DTYPES.get(ALIASES.get(key, key))
        if found is not None:
            return found
    prefix = f"{where}: " if where else ""
    raise InputError(
        f"{prefix}unknown dtype {name!r} (valid: {' '.join(DTYPES)}; aliases such as float32, fp8_e4m3 "
        "and int32 work too)"
    )
