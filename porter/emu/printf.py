"""The text a device-side ``printf`` (nvcc's ``vprintf(format, args)``) prints.

The kernel hands ``vprintf`` the format string and a buffer holding the arguments one after
another, each aligned to its own size (C's default promotions apply: a ``float`` is passed as a
``double``, a ``char`` or ``short`` as an ``int``). The buffer carries no types, so the
conversions say what to read: 4 bytes for ``%d %i %u %x %X %o %c`` (8 with ``l``, ``ll``, ``j``,
``z``, ``t``), 8 for the floating conversions, ``%s`` and ``%p``, and a ``*`` width or precision
reads an ``int``. The CUDA Programming Guide ("Formatted Output") has the final formatting done
by the host's C library, so the text follows C99 / glibc: flags ``-+ #0``, widths, precisions,
``inf``/``nan``, ``(null)`` and ``(nil)``. ``printf`` returns the number of arguments it parsed
(not the characters, unlike C), -1 for a NULL format; past 32 arguments the conversions are
printed as written, as the guide says.
"""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

MAX_ARGS = 32  # the guide: arguments past 32 are ignored and their format specifiers printed as is

_DIRECTIVE = re.compile(
    rb"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?(?P<len>hh|h|ll|l|j|z|t|L)?(?P<conv>[diouxXcspfFeEgGaA%])?"
)
_LONG = (b"l", b"ll", b"j", b"z", b"t")


@dataclass
class Printed:
    """What one ``printf`` printed, how many arguments it parsed, and what it could not format."""

    text: bytes
    args: int
    unformatted: list[str]


@dataclass(frozen=True)
class _Spec:
    flags: str
    width: int | None
    precision: int | None
    length: bytes
    conv: str


def render(fmt: bytes, fetch: Callable[[int], int], string: Callable[[int], bytes]) -> Printed:
    """``fmt`` formatted with arguments read by ``fetch(size)`` (the next argument of ``size``
    bytes, little-endian, unsigned) and strings by ``string(address)``."""
    out = bytearray()
    unformatted: list[str] = []
    args = 0
    pos = 0
    for m in _DIRECTIVE.finditer(fmt):
        out += fmt[pos : m.start()]
        pos = m.end()
        conv = m.group("conv")
        if conv is None:
            unformatted.append(fmt[m.start() : m.end() + 1].decode("latin-1"))
            out += m.group()
            continue
        if conv == b"%":
            out += b"%"
            continue
        if args >= MAX_ARGS:
            out += m.group()
            continue
        spec, used = _spec(m, fetch)
        args += used + 1
        out += _convert(spec, fetch, string)
    out += fmt[pos:]
    return Printed(bytes(out), args, unformatted)


def _star(fetch: Callable[[int], int]) -> int:
    v = fetch(4)
    return v - (1 << 32) if v >= 1 << 31 else v


def _spec(m: re.Match[bytes], fetch: Callable[[int], int]) -> tuple[_Spec, int]:
    """The conversion's fields, a ``*`` width or precision read from the arguments (how many)."""
    flags = m.group("flags").decode()
    used = 0
    width: int | None = None
    if m.group("width") == b"*":
        width, used = _star(fetch), used + 1
        if width < 0:
            flags, width = flags + "-", -width
    elif m.group("width"):
        width = int(m.group("width"))
    precision: int | None = None
    if m.group("prec") == b"*":
        precision, used = _star(fetch), used + 1
        if precision < 0:
            precision = None
    elif m.group("prec") is not None:
        precision = int(m.group("prec") or 0)
    return _Spec(flags, width, precision, m.group("len") or b"", m.group("conv").decode()), used


def _convert(spec: _Spec, fetch: Callable[[int], int], string: Callable[[int], bytes]) -> bytes:
    c = spec.conv
    if c in "diouxX":
        size = 8 if spec.length in _LONG else 4
        return _integer(spec, fetch(size), size)
    if c in "fFeEgGaA":
        return _floating(spec, struct.unpack("<d", fetch(8).to_bytes(8, "little"))[0])
    if c == "c":
        return _pad(_spaces(spec), bytes([fetch(4) & 0xFF]))
    if c == "s":
        address = fetch(8)
        if address == 0:
            return _pad(_spaces(spec), b"(null)" if spec.precision is None or spec.precision >= 6 else b"")
        text = string(address)
        return _pad(_spaces(spec), text if spec.precision is None else text[: spec.precision])
    address = fetch(8)  # %p: glibc's "(nil)", else a hex number after the sign flag and 0x
    if address == 0:
        return _pad(_spaces(spec), b"(nil)")
    digits = b"%x" % address
    if spec.precision is not None:
        digits = digits.rjust(spec.precision, b"0")
        spec = _spaces(spec)
    return _pad(spec, digits, _sign(spec, False) + b"0x")


def _spaces(spec: _Spec) -> _Spec:
    """The spec without the 0 flag: glibc pads with spaces where C leaves the 0 flag undefined
    (%c, %s, "(nil)") and where a precision gives the digits (integers)."""
    return dataclasses.replace(spec, flags=spec.flags.replace("0", ""))


def _pad(spec: _Spec, body: bytes, prefix: bytes = b"") -> bytes:
    """``prefix + body`` to the width: spaces left (right with ``-``), or zeros after the prefix
    with ``0`` (which C ignores for an integer with a precision: the caller drops it)."""
    fill = (spec.width or 0) - len(prefix) - len(body)
    if fill <= 0:
        return prefix + body
    if "-" in spec.flags:
        return prefix + body + b" " * fill
    if "0" in spec.flags:
        return prefix + b"0" * fill + body
    return b" " * fill + prefix + body


def _integer(spec: _Spec, raw: int, size: int) -> bytes:
    bits = {b"hh": 8, b"h": 16}.get(spec.length, 8 * size)
    value = raw & ((1 << bits) - 1)
    signed = spec.conv in "di"
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    digits = b"%d" % abs(value) if spec.conv in "diu" else (b"%o" % value if spec.conv == "o" else b"%x" % value)
    if spec.conv == "X":
        digits = digits.upper()
    if spec.precision is not None:
        digits = b"" if spec.precision == 0 and value == 0 else digits.rjust(spec.precision, b"0")
    prefix = b""
    if signed:
        prefix = b"-" if value < 0 else b"+" if "+" in spec.flags else b" " if " " in spec.flags else b""
    elif "#" in spec.flags and spec.conv == "o" and not digits.startswith(b"0"):
        digits = b"0" + digits
    elif "#" in spec.flags and spec.conv in "xX" and value != 0:
        prefix = b"0" + spec.conv.encode()
    if spec.precision is not None:
        spec = _spaces(spec)
    return _pad(spec, digits, prefix)


def _sign(spec: _Spec, negative: bool) -> bytes:
    return b"-" if negative else b"+" if "+" in spec.flags else b" " if " " in spec.flags else b""


def _floating(spec: _Spec, x: float) -> bytes:
    sign = _sign(spec, math.copysign(1.0, x) < 0)
    if not math.isfinite(x):
        word = b"inf" if math.isinf(x) else b"nan"
        body = word.upper() if spec.conv.isupper() else word
        return _pad(_Spec(spec.flags.replace("0", ""), spec.width, None, b"", spec.conv), body, sign)
    if spec.conv in "aA":
        body = _hex_float(abs(x), spec.precision, "#" in spec.flags)
        return _pad(spec, body.upper() if spec.conv == "A" else body, sign + (b"0X" if spec.conv == "A" else b"0x"))
    flags = "#" if "#" in spec.flags else ""
    precision = 6 if spec.precision is None else spec.precision
    # Python's printf-style float formatting is C's for these conversions; the sign, width and
    # padding are done here, as for every other conversion.
    body = (f"%{flags}.{precision}{spec.conv}" % abs(x)).encode()
    return _pad(spec, body, sign)


def _hex_float(x: float, precision: int | None, point: bool) -> bytes:
    """``%a`` without the ``0x``: glibc's ``1.8p+1`` (shortest exact digits, or rounded to
    ``precision`` hex digits, half to even; a subnormal as ``0.xxxp-1022``)."""
    if x == 0:
        lead, frac, exp = 0, 0, 0
    else:
        mant, exp = math.frexp(x)  # x = mant * 2**exp, 0.5 <= mant < 1
        if exp < -1021:  # subnormal: glibc prints 0.<52 bits>p-1022
            lead, frac, exp = 0, int(math.ldexp(x, 1074)), -1022
        else:
            lead, frac, exp = 1, int(math.ldexp(mant * 2 - 1, 52)), exp - 1
    digits = 13
    if precision is not None and precision < digits:
        drop = 4 * (digits - precision)
        q, r = divmod(lead << 52 | frac, 1 << drop)  # the lead digit takes part in the tie
        half = 1 << (drop - 1)
        if r > half or (r == half and q & 1):
            q += 1
        lead, frac, digits = q >> (4 * precision), q & ((1 << (4 * precision)) - 1), precision
    text = f"{frac:0{digits}x}" if digits else ""
    if precision is None:
        text = text.rstrip("0")
    elif precision > digits:
        text += "0" * (precision - digits)
    point_text = "." if text or point else ""
    return f"{lead}{point_text}{text}p{exp:+d}".encode()
