"""Half-precision instructions: arithmetic, min/max, abs/neg, comparisons and the ``.approx``
functions on ``f16``, ``bf16`` and their packed pairs (PTX ISA 9.7.4 and 9.7.7).

A register of a pair holds element 0 in its low half. Each element is opened to float64 (where
the sum, difference and product of two halves and an fma's product are exact or, with the error
:func:`porter.emu.fp.two_sum` gives, exactly known) and closed again by one rounding to nearest
even: the exact value is first rounded to float32 toward zero with its inexactness kept in the
last bit ("round to odd", which leaves a second rounding to 8 or 11 bits correct), then to the
16-bit format. Rounding through float32 to nearest twice would turn a value just past a 16-bit
tie into the tie (an fma's ``a*b + c`` with a tiny ``c``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from porter.emu import ptxtypes
from porter.emu.context import Context, Exec, Reader, bool_op, pred_pair_writers, type_suffix, types_of
from porter.emu.decode import Op
from porter.emu.fp import round_f32, two_sum
from porter.emu.state import Cta

Lanes = list[np.ndarray]  # the uint16 bits of each element, low half first
NAN = np.uint16(0x7FFF)  # the canonical NaN of both formats
SIGN = np.uint16(0x8000)
MAGNITUDE = np.uint16(0x7FFF)
TYPES = frozenset({"f16", "bf16", "f16x2", "bf16x2"})


@dataclass(frozen=True)
class Format:
    """One of the four types: which 16-bit float, and whether a register holds a pair."""

    bf: bool
    pair: bool

    @staticmethod
    def of(t: str) -> Format:
        return Format(t.startswith("bf"), t.endswith("x2"))

    @property
    def bits(self) -> str:
        return "b32" if self.pair else "b16"

    @property
    def one(self) -> np.uint16:
        return np.uint16(0x3F80 if self.bf else 0x3C00)

    def value(self, h: np.ndarray) -> np.ndarray:
        """Elements (their bits) as float64."""
        if self.bf:
            return ptxtypes.bf16_to_f32(h).astype(np.float64)
        return h.astype(np.uint16).view(np.float16).astype(np.float64)

    def rounded(self, s: np.ndarray, e: np.ndarray | float = 0.0) -> np.ndarray:
        """The bits of the exact value ``s + e`` (a float64 and its error) rounded once to nearest even."""
        s = np.asarray(s, np.float64)
        e = np.broadcast_to(np.asarray(e, np.float64), s.shape)
        toward_zero = round_f32(s, e, "rz")
        inexact = ((toward_zero.astype(np.float64) != s) | (e != 0)) & np.isfinite(toward_zero)
        odd = (toward_zero.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)
        return ptxtypes.f32_to_bf16(odd) if self.bf else ptxtypes.f32_to_f16(odd)

    def flush(self, h: np.ndarray) -> np.ndarray:
        """Subnormals to zero of the same sign (``.ftz``)."""
        exponent = np.uint16(0x7F80 if self.bf else 0x7C00)
        return np.where((h & exponent) == 0, h & SIGN, h).astype(np.uint16)

    def is_nan(self, h: np.ndarray) -> np.ndarray:
        return (h & MAGNITUDE) > np.uint16(0x7F80 if self.bf else 0x7C00)

    def split(self, raw: np.ndarray) -> Lanes:
        u = raw.astype(np.uint32)
        if self.pair:
            return [(u & 0xFFFF).astype(np.uint16), (u >> 16).astype(np.uint16)]
        return [u.astype(np.uint16)]

    def join(self, lanes: Lanes) -> np.ndarray:
        if self.pair:
            return lanes[0].astype(np.uint32) | (lanes[1].astype(np.uint32) << np.uint32(16))
        return lanes[0].astype(np.uint16)


def _read_lanes(ctx: Context, op: Op, fmt: Format, first: int, n: int) -> Callable[[Cta, np.ndarray], list[Lanes]]:
    """Readers of sources ``first .. first+n-1``, giving each as its elements' bits."""
    rs: list[Reader] = [ctx.read(o, fmt.bits) for o in op.operands[first : first + n]]
    raw = ptxtypes.dtype(fmt.bits)

    def read(cta: Cta, idx: np.ndarray) -> list[Lanes]:
        return [fmt.split(np.broadcast_to(np.asarray(r(cta, idx), raw), idx.shape)) for r in rs]

    return read


def _elementwise(op: Op, ctx: Context, n_in: int, fn: Callable[[Lanes], np.ndarray]) -> Exec:
    """An instruction whose result's element k is ``fn`` of the sources' elements k."""
    fmt = Format.of(type_suffix(op))
    d = ctx.write(op.operands[0], fmt.bits)
    read = _read_lanes(ctx, op, fmt, 1, n_in)

    def run(cta: Cta, idx: np.ndarray) -> None:
        ins = read(cta, idx)
        d(cta, idx, fmt.join([fn([src[k] for src in ins]) for k in range(len(ins[0]))]))

    return run


def arithmetic(op: Op, ctx: Context) -> Exec:
    """add, sub, mul, fma with ``.ftz`` (f16), ``.sat`` (f16: into [0, 1], NaN to +0) and
    ``.relu`` (fma: a negative result to +0, NaN to the canonical NaN)."""
    kind = op.parts[0]
    fmt = Format.of(type_suffix(op))
    parts = set(op.parts)
    if parts & {"rz", "rm", "rp", "oob"}:
        raise ValueError(f"{kind} with {sorted(parts & {'rz', 'rm', 'rp', 'oob'})} on halves")
    ftz, sat, relu = "ftz" in parts, "sat" in parts, "relu" in parts

    def exact(v: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | float]:
        with np.errstate(all="ignore"):
            if kind == "add":
                return two_sum(v[0], v[1])
            if kind == "sub":
                return two_sum(v[0], -v[1])
            if kind == "mul":
                return v[0] * v[1], 0.0
            return two_sum(v[0] * v[1], v[2])  # the product of two halves is exact in float64

    def lane(ins: Lanes) -> np.ndarray:
        if ftz:
            ins = [fmt.flush(h) for h in ins]
        r = fmt.rounded(*exact([fmt.value(h) for h in ins]))
        if ftz:
            r = fmt.flush(r)
        if sat:
            v = fmt.value(r)
            r = np.where(np.isnan(v) | (v <= 0), np.uint16(0), np.where(v >= 1, fmt.one, r))
        if relu:
            r = np.where(fmt.is_nan(r), NAN, np.where(fmt.value(r) < 0, np.uint16(0), r))
        return r.astype(np.uint16)

    return _elementwise(op, ctx, 3 if kind == "fma" else 2, lane)


def extreme(fmt: Format, a: np.ndarray, b: np.ndarray, is_max: bool) -> np.ndarray:
    """The bits of the larger (``is_max``) or smaller of two elements: +0 above -0, one NaN gives
    the other operand, two give the canonical NaN (min/max, and atom/red .min/.max)."""
    va, vb = fmt.value(a), fmt.value(b)
    neg_a = (a & SIGN) != 0
    with np.errstate(invalid="ignore"):
        tie = va == vb  # +0 and -0 tie: max takes +0, min -0
        take_a = (va > vb) | (tie & ~neg_a) if is_max else (va < vb) | (tie & neg_a)
    na, nb = fmt.is_nan(a), fmt.is_nan(b)
    r = np.where(na, b, np.where(nb, a, np.where(take_a, a, b)))
    return np.where(na & nb, NAN, r)


def minmax(op: Op, ctx: Context) -> Exec:
    """min/max ``{.ftz}{.NaN}{.xorsign.abs}``: +0 is above -0; one NaN gives the other operand
    (``.NaN``: the canonical NaN); ``.xorsign.abs`` compares magnitudes and gives the result the
    XOR of the operands' signs."""
    fmt = Format.of(type_suffix(op))
    is_max = op.parts[0] == "max"
    ftz, nan_wins, xorsign = "ftz" in op.parts, "NaN" in op.parts, "xorsign" in op.parts

    def lane(ins: Lanes) -> np.ndarray:
        a, b = (fmt.flush(h) for h in ins) if ftz else ins
        sign = (a ^ b) & SIGN
        if xorsign:
            a, b = a & MAGNITUDE, b & MAGNITUDE
        r = extreme(fmt, a, b, is_max)
        if nan_wins:
            r = np.where(fmt.is_nan(a) | fmt.is_nan(b), NAN, r)
        if xorsign:
            r = np.where(fmt.is_nan(r), r, (r & MAGNITUDE) | sign)
        return (fmt.flush(r) if ftz else r).astype(np.uint16)

    return _elementwise(op, ctx, 2, lane)


def absneg(op: Op, ctx: Context) -> Exec:
    """abs clears, neg flips each element's sign bit (after ``.ftz`` flushes a subnormal)."""
    fmt = Format.of(type_suffix(op))
    ftz, neg = "ftz" in op.parts, op.parts[0] == "neg"

    def lane(ins: Lanes) -> np.ndarray:
        h = fmt.flush(ins[0]) if ftz else ins[0]
        return (h ^ SIGN if neg else h & MAGNITUDE).astype(np.uint16)

    return _elementwise(op, ctx, 1, lane)


def approx(op: Op, ctx: Context, fn: Callable[[np.ndarray], np.ndarray]) -> Exec:
    """ex2/tanh ``.approx`` on halves: ``fn`` in float64, rounded once (inside the ISA's bound);
    ``.ftz`` (ex2 on bf16) flushes subnormal inputs and results."""
    fmt = Format.of(type_suffix(op))
    ftz = "ftz" in op.parts

    def lane(ins: Lanes) -> np.ndarray:
        h = fmt.flush(ins[0]) if ftz else ins[0]
        with np.errstate(all="ignore"):
            r = fmt.rounded(fn(fmt.value(h)))
        return (fmt.flush(r) if ftz else r).astype(np.uint16)

    return _elementwise(op, ctx, 1, lane)


def compare(op: Op, ctx: Context, test: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Exec:
    """setp/set whose sources are halves: each element compared (``.ftz`` flushes subnormal
    inputs) and combined with the optional predicate. ``setp`` of a pair writes element 0's
    outcome to ``p`` and element 1's to ``q``; ``set`` writes, per element, 1.0 of a half
    destination type or all ones of an integer one (16 bits each for a pair)."""
    fmt = Format.of(type_suffix(op))
    ftz = "ftz" in op.parts
    combine, c = bool_op(op, ctx) or (None, None)
    read = _read_lanes(ctx, op, fmt, 1, 2)

    def outcomes(cta: Cta, idx: np.ndarray) -> list[np.ndarray]:
        a, b = read(cta, idx)
        if ftz:
            a, b = [fmt.flush(h) for h in a], [fmt.flush(h) for h in b]
        with np.errstate(invalid="ignore"):
            out = [np.asarray(test(fmt.value(x), fmt.value(y)), bool) for x, y in zip(a, b, strict=True)]
        if not fmt.pair:
            out.append(~out[0])  # setp's q is BoolOp(!t, c), not the negation of p
        if combine is not None and c is not None:
            cv = np.broadcast_to(c(cta, idx), idx.shape)
            out = [combine(o, cv) for o in out]
        return out

    if op.parts[0] == "setp":
        return _setp(op, ctx, fmt, outcomes)
    return _set(op, ctx, fmt, outcomes)


def _setp(op: Op, ctx: Context, fmt: Format, outcomes: Callable[[Cta, np.ndarray], list[np.ndarray]]) -> Exec:
    p, q = pred_pair_writers(ctx, op.operands[0])

    def run(cta: Cta, idx: np.ndarray) -> None:
        out = outcomes(cta, idx)
        p(cta, idx, out[0])
        if q is not None:
            q(cta, idx, out[1])

    return run


def _set(op: Op, ctx: Context, fmt: Format, outcomes: Callable[[Cta, np.ndarray], list[np.ndarray]]) -> Exec:
    out_t = types_of(op)[0]
    d = ctx.write(op.operands[0], out_t)
    if fmt.pair:
        lane_true = Format.of(out_t).one if out_t in TYPES else np.uint16(0xFFFF)
        return lambda cta, idx: d(cta, idx, fmt.join([np.where(o, lane_true, np.uint16(0))
                                                      for o in outcomes(cta, idx)]))
    true = set_true(out_t)
    return lambda cta, idx: d(cta, idx, np.where(outcomes(cta, idx)[0], true, true.dtype.type(0)))


def set_true(t: str) -> np.generic:
    """What ``set`` writes for True into a destination of type ``t``: 1.0 of a float, all ones of an integer."""
    floats: dict[str, np.generic] = {"f16": np.float16(1.0), "bf16": np.uint16(0x3F80), "f32": np.float32(1.0)}
    if t in floats:
        return floats[t]
    dt = ptxtypes.dtype(t)
    return dt.type(-1 if dt.kind == "i" else (1 << ptxtypes.width(t)) - 1)
