"""SIMD within a register. The CUDA Math API's SIMD intrinsics lane by lane as documented (wrap or
saturate, signed or unsigned lanes, all-ones or 1 per true comparison, sums of absolute
differences); dp4a/dp2a, sad, min/max .relu and add/min/max on 16-bit pairs per the PTX ISA; and
the video instructions per PTX ISA 9.7.18.2: lanes chosen from the pool {b, a} by the
selectors (``.h10``: lane 1 from half-word 1, lane 0 from half-word 0), combined, clamped with
``.sat``, then merged into c under the destination's mask or, with ``.add``, summed onto c."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from emu_corpus import CorpusCase

N = 96
EDGES = [0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80808080, 0x7F7F7F7F, 0x80007FFF, 0x00FF00FF, 0x01010101, 0xFFFF0000]


def _words(rng: np.random.Generator, shift: int) -> np.ndarray:
    w = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    edges = np.array(EDGES, np.uint32)
    w[: edges.size] = np.roll(edges, shift)
    return w


def _args(words: int, sources: int) -> Callable[[np.random.Generator], list[Any]]:
    def make(rng: np.random.Generator) -> list[Any]:
        xs = [_words(rng, k) for k in range(sources)]
        xs[1][20:30] = xs[0][20:30]  # equal lanes
        return [*xs, np.zeros(words * N, np.uint32)]

    return make


def _lanes(v: int, n: int, signed: bool) -> list[int]:
    bits = 32 // n
    out = [(v >> (bits * k)) & ((1 << bits) - 1) for k in range(n)]
    return [x - (1 << bits) if signed and x >> (bits - 1) else x for x in out]


def _word(lanes: list[int]) -> int:
    bits = 32 // len(lanes)
    return sum((x & ((1 << bits) - 1)) << (bits * k) for k, x in enumerate(lanes))


def _clamp(x: int, bits: int, signed: bool) -> int:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return min(max(x, lo), hi)


def _avg_signed(x: int, y: int) -> int:
    return (x + y + 1) >> 1 if x + y >= 0 else (x + y) >> 1


# -- the intrinsics: name -> (lanes, signed lanes, lane function, how lanes make the result) -------

def _lanewise(n: int, signed: bool, fn: Callable[..., int]) -> Callable[..., int]:
    def word(*vs: int) -> int:
        return _word([fn(*xs) for xs in zip(*(_lanes(v, n, signed) for v in vs), strict=True)])

    return word


def _summed(n: int, signed: bool) -> Callable[[int, int], int]:
    return lambda a, b: sum(abs(x - y) for x, y in zip(_lanes(a, n, signed), _lanes(b, n, signed), strict=True))


_CMPS: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "ge": lambda x, y: x >= y, "gt": lambda x, y: x > y,
    "le": lambda x, y: x <= y, "lt": lambda x, y: x < y,
}


def _intrinsic(name: str) -> Callable[..., int]:
    n = int(name[-1])
    bits = 32 // n
    stem = name[1:-1]
    signed = stem in ("abs", "absss", "neg", "negss", "absdiffs", "addss", "avgs", "maxs", "mins", "subss")
    if stem.startswith("cmp") or stem.startswith("set"):
        cmp = _CMPS[stem[3:5]]
        true = (1 << bits) - 1 if stem.startswith("cmp") else 1
        sign = stem[5:] == "s"
        return _lanewise(n, sign, lambda x, y: true if cmp(x, y) else 0)
    if stem in ("sads", "sadu"):
        return _summed(n, stem == "sads")
    lane: dict[str, Callable[..., int]] = {
        "abs": abs, "absss": lambda x: _clamp(abs(x), bits, True), "neg": lambda x: -x,
        "negss": lambda x: _clamp(-x, bits, True),
        "absdiffs": lambda x, y: abs(x - y), "absdiffu": lambda x, y: abs(x - y),
        "add": lambda x, y: x + y, "addss": lambda x, y: _clamp(x + y, bits, True),
        "addus": lambda x, y: _clamp(x + y, bits, False), "avgs": _avg_signed,
        "avgu": lambda x, y: (x + y + 1) >> 1, "haddu": lambda x, y: (x + y) >> 1,
        "maxs": max, "maxu": max, "mins": min, "minu": min,
        "sub": lambda x, y: x - y, "subss": lambda x, y: _clamp(x - y, bits, True),
        "subus": lambda x, y: _clamp(x - y, bits, False),
    }
    return _lanewise(n, signed, lane[stem])


UNARY, BINARY = (line.split() for line in (
    "vabs2 vabs4 vabsss2 vabsss4 vneg2 vneg4 vnegss2 vnegss4",
    "vabsdiffs2 vabsdiffs4 vabsdiffu2 vabsdiffu4 vadd2 vadd4 vaddss2 vaddss4 vaddus2 vaddus4 vavgs2 vavgs4 vavgu2 "
    "vavgu4 vhaddu2 vhaddu4 vcmpeq2 vcmpeq4 vcmpges2 vcmpges4 vcmpgeu2 vcmpgeu4 vcmpgts2 vcmpgts4 vcmpgtu2 vcmpgtu4 "
    "vcmples2 vcmples4 vcmpleu2 vcmpleu4 vcmplts2 vcmplts4 vcmpltu2 vcmpltu4 vcmpne2 vcmpne4 vmaxs2 vmaxs4 vmaxu2 "
    "vmaxu4 vmins2 vmins4 vminu2 vminu4 vsads2 vsads4 vsadu2 vsadu4 vseteq2 vseteq4 vsetges2 vsetges4 vsetgeu2 "
    "vsetgeu4 vsetgts2 vsetgts4 vsetgtu2 vsetgtu4 vsetles2 vsetles4 vsetleu2 vsetleu4 vsetlts2 vsetlts4 vsetltu2 "
    "vsetltu4 vsetne2 vsetne4 vsub2 vsub4 vsubss2 vsubss4 vsubus2 vsubus4"))


def _per_thread(args: list[Any], words: list[Callable[..., int]], n_in: list[int], out: int) -> dict[int, np.ndarray]:
    vals = [[int(v) for v in a] for a in args[:out]]
    rows = [[fn(*(vals[k][i] for k in range(n))) & 0xFFFFFFFF for fn, n in zip(words, n_in, strict=True)]
            for i in range(N)]
    return {out: np.array(rows, np.uint32).reshape(-1)}


def _intrinsics_expect(args: list[Any]) -> dict[int, np.ndarray]:
    fns = [_intrinsic(n) for n in UNARY + BINARY]
    return _per_thread(args, fns, [1] * len(UNARY) + [2] * len(BINARY), 2)


# -- dot products, sad, the three-operand min/max intrinsics -------------------------------------

def _s32(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


def _dp4a(a_signed: bool, b_signed: bool) -> Callable[[int, int, int], int]:
    return lambda a, b, c: c + sum(x * y for x, y in zip(_lanes(a, 4, a_signed), _lanes(b, 4, b_signed), strict=True))


def _dp2a(high: bool, a_signed: bool, b_signed: bool) -> Callable[[int, int, int], int]:
    def fn(a: int, b: int, c: int) -> int:
        vb = _lanes(b, 4, b_signed)[2:] if high else _lanes(b, 4, b_signed)[:2]
        return c + sum(x * y for x, y in zip(_lanes(a, 2, a_signed), vb, strict=True))

    return fn


def _relu_pairs(fn: Callable[..., int]) -> Callable[..., int]:
    return _lanewise(2, True, lambda *xs: max(fn(*xs), 0))


DOTS: list[Callable[..., int]] = [
    _dp4a(False, False), _dp4a(True, True), _dp2a(False, False, False), _dp2a(True, False, False),
    _dp2a(False, True, True), _dp2a(True, True, True),
    lambda a, b, c: abs(_s32(a) - _s32(b)) + c, lambda a, b, c: abs(a - b) + c,
    lambda a, b, c: max(_s32((a + b) & 0xFFFFFFFF), _s32(c)), lambda a, b, c: max(a, b, c),
    lambda a, b, c: _relu_pairs(max)(a, b), lambda a, b, c: max(_s32(a), _s32(b)) + (_s32(a) >= _s32(b)),
    _relu_pairs(min),
    _lanewise(2, False, lambda x, y, z: min((x + y) & 0xFFFF, z)),
    _dp4a(True, False), _dp2a(True, False, True),
]


def _dots_expect(args: list[Any]) -> dict[int, np.ndarray]:
    return _per_thread(args, DOTS, [3] * len(DOTS), 3)


# -- the video instructions ------------------------------------------------------------------------

def _video(op: str, n: int, signs: str, *, sat: bool = False, add: bool = False, mask: str = "",
           asel: str = "", bsel: str = "", cmp: str = "") -> Callable[[int, int, int], int]:
    """One video instruction per PTX ISA 9.7.18.2. ``signs``: 's'/'u' for dtype, atype, btype
    (vset: atype, btype); selectors and mask as written, highest lane first."""
    bits = 32 // n
    d_signed, a_signed, b_signed = (s == "s" for s in (("u" + signs) if cmp else signs))
    a_pick = [int(ch) for ch in reversed(asel)] if asel else list(range(n))
    b_pick = [int(ch) for ch in reversed(bsel)] if bsel else list(range(n, 2 * n))
    lanes_on = {int(ch) for ch in mask} if mask else set(range(n))
    ops: dict[str, Callable[[int, int], int]] = {
        "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "avrg": _avg_signed, "absdiff": lambda x, y: abs(x - y),
        "min": min, "max": max, "set": lambda x, y: int(_CMPS[cmp](x, y)),
    }

    def fn(a: int, b: int, c: int) -> int:
        va = [(_lanes(a, n, a_signed) + _lanes(b, n, a_signed))[k] for k in a_pick]
        vb = [(_lanes(a, n, b_signed) + _lanes(b, n, b_signed))[k] for k in b_pick]
        t = [ops[op](x, y) for x, y in zip(va, vb, strict=True)]
        if sat:
            t = [_clamp(x, bits, d_signed) for x in t]
        if add:
            return c + sum(x for k, x in enumerate(t) if k in lanes_on)
        vc = _lanes(c, n, False)
        return _word([t[k] if k in lanes_on else vc[k] for k in range(n)])

    return fn


VIDEO: list[Callable[..., int]] = [
    _video("add", 4, "uuu", sat=True),
    _video("sub", 2, "sss", sat=True),
    _video("max", 4, "sss"),
    _video("avrg", 2, "uuu", add=True),
    _video("set", 4, "uu", cmp="lt"),
    _video("set", 2, "ss", cmp="ne", add=True),
    _video("add", 2, "ssu", sat=True, mask="1", asel="01", bsel="23"),
    _video("min", 4, "sus", add=True, mask="20", asel="0213", bsel="7744"),
    _video("sub", 4, "ssu", sat=True, mask="31", bsel="3210"),
    _video("absdiff", 2, "sss", asel="11", bsel="30"),
    _video("set", 2, "us", cmp="ge", mask="0"),
    _video("avrg", 4, "sss"),
    _lanewise(2, True, lambda x, y: x + y),
    _lanewise(2, False, max),
    lambda a, b: max(min(_s32(a), _s32(b)), 0),
    _relu_pairs(max),
]


def _video_expect(args: list[Any]) -> dict[int, np.ndarray]:
    return _per_thread(args, VIDEO, [3] * 12 + [2] * 4, 3)


CASES = [
    CorpusCase("intrinsics", 1, N, _args(len(UNARY) + len(BINARY), 2), (2,), _intrinsics_expect),
    CorpusCase("dots", 1, N, _args(16, 3), (3,), _dots_expect),
    CorpusCase("video", 1, N, _args(16, 3), (3,), _video_expect),
]
