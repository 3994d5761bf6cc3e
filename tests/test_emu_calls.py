"""Calls the emulator runs or declines: printf's text and return value, a failed assert, recursion,
a call through a register, the inlining limit, guarded calls and what decode cannot read.

The nvcc-compiled kernels are the calls corpus topic's (tests/data/emu_corpus/calls); the
hand-written PTX covers forms nvcc does not emit for these sources."""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from porter.emu import calls, emulate
from porter.emu.printf import render

TOPIC = Path(__file__).resolve().parent / "data" / "emu_corpus" / "calls"
PTX = (TOPIC / "kernels.ptx").read_text()
SOURCE = (TOPIC / "kernels.cu").read_text()


def _call_line(target: str, inside: str = "") -> int:
    """The 1-based PTX line of the first ``call`` to ``target`` (nvcc writes the target on the
    line after the call), in the body of the function ``inside`` if given."""
    lines = PTX.split("\n")
    start = next(i for i, line in enumerate(lines) if f" {inside}(" in line) if inside else 0
    for i in range(start, len(lines) - 1):
        if lines[i].strip().startswith("call") and lines[i + 1].strip().rstrip(",") == target:
            return i + 1
    raise AssertionError(f"no call to {target}")


def _source_line(fragment: str) -> int:
    return next(i for i, line in enumerate(SOURCE.split("\n"), 1) if fragment in line)


def test_printf_prints_what_the_hosts_c_library_would() -> None:
    x = np.array([3, -17, 255, 100000], np.int32)
    f = np.array([1.5, -0.25, 1e10, 3.14159], np.float32)
    name = np.frombuffer(b"emu\0", np.uint8).copy()
    res = emulate(PTX, "say", 1, 4, [x, f, name])
    assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
    assert res.printed == [
        "thread 0 of 4: x=    3 hex=0x3 oct=3 f=1.500 e=1.500000e+00 g=1.5 c=a s=emu\n",
        "thread 1 of 4: x=  -17 hex=0xffffffef oct=37777777757 f=-0.250 e=-2.500000e-01 g=-0.25 c=b s=emu\n",
        "thread 2 of 4: x=  255 hex=0xff oct=377 f=10000000000.000 e=1.000000e+10 g=1e+10 c=c s=emu\n",
        "thread 3 of 4: x=100000 hex=0x186a0 oct=303240 f=3.142 e=3.141590e+00 g=3.14159 c=d s=emu\n",
        "-5 1099511627776 7 18446744073709551615 -3  | FF -1.23e+03      3.142 %\n",
    ]


def test_printf_returns_the_number_of_arguments_it_parsed() -> None:
    out = np.full(2, -99, np.int32)
    res = emulate(PTX, "say_count", 1, 1, [out])
    assert res.ok
    assert res.printed == ["7 ab|  2.2\n", "no arguments\n"]
    assert out.tolist() == [3, 0]  # CUDA's printf: arguments parsed, not characters (C's would be 11, 13)


def test_a_failed_assert_stops_the_launch_with_its_message_file_and_line() -> None:
    x = np.array([1, 2, 300, 4], np.int32)
    out = np.zeros(4, np.int32)
    res = emulate(PTX, "checked", 1, 4, [x, out])
    assert not res.ok
    (d,) = res.fatal
    assert d.kind == "assert"
    assert d.line == _call_line("__assertfail")
    assert d.details["message"] == "x[i] < 100"
    assert d.details["file"] == "kernels.cu"
    assert d.details["line"] == _source_line("assert(x[i] < 100);")
    assert d.details["function"] == "void checked(const int *, int *)"
    assert d.details["thread"] == (2, 0, 0)
    assert "Assertion `x[i] < 100` failed" in d.message

    res = emulate(PTX, "checked", 1, 4, [np.array([1, 2, 3, 99], np.int32), out])
    assert res.ok and not res.diagnostics
    assert out.tolist() == [2, 4, 6, 198]


def test_an_asserts_message_is_shown_as_printable_text_whatever_the_kernel_wrote() -> None:
    """The message is the kernel's bytes: an escape sequence or backticks there must reach a terminal
    or a pull request's comment as text, not as commands or Markdown."""
    message = "{120, 91, 105, 93, 32, 60, 32, 49, 48, 48}"
    assert message in PTX
    hostile = PTX.replace(message, "{27, 91, 50, 74, 96, 96, 96, 10, 35, 32}")
    res = emulate(hostile, "checked", 1, 4, [np.array([1, 2, 300, 4], np.int32), np.zeros(4, np.int32)])
    (d,) = res.fatal
    assert d.kind == "assert" and d.details["message"] == "\\x1b[2J```\\x0a# "
    assert all(0x20 <= ord(c) < 0x7F for c in d.message)


@pytest.mark.parametrize(("entry", "caller", "callee", "cycle"), [
    ("recursive", "_Z3fibi", "_Z3fibi", "_Z3fibi -> _Z3fibi"),
    ("mutual", "_Z4pongii", "_Z4pingii", "_Z4pingii -> _Z4pongii -> _Z4pingii"),
])
def test_recursion_is_unsupported_where_it_is_reached(entry: str, caller: str, callee: str, cycle: str) -> None:
    x = np.array([5, 6, 7, 8], np.int32)
    out = np.zeros(4, np.int32)
    res = emulate(PTX, entry, 1, 4, [x, out])
    (d,) = res.fatal
    assert d.kind == "unsupported"
    assert f"recursive call to {callee} ({cycle})" in d.message
    assert d.line == _call_line(callee, inside=caller)


def test_recursion_not_reached_does_not_stop_the_launch() -> None:
    x = np.array([5, 6], np.int32)
    out = np.zeros(2, np.int32)
    res = emulate(PTX, "recursive", 1, 2, [x, out])  # threads 0 and 1 do not call fib
    assert res.ok and out.tolist() == [5, 6]


def test_a_call_through_a_register_is_unsupported() -> None:
    res = emulate(PTX, "indirect", 1, 4, [np.arange(4, dtype=np.int32), np.zeros(4, np.int32)])
    (d,) = res.fatal
    assert d.kind == "unsupported" and "indirect call" in d.message
    assert d.line == _call_line("%rd10", inside="indirect")


def _chain(depth: int) -> str:
    """f0 calls f1 twice, f1 calls f2 twice ... f{depth} returns 3x: f0(x) = sum over the
    2**depth paths of 3 (x + number of right turns)."""
    funcs = [f""".func (.param .b32 r) f{depth}(.param .b32 a)
{{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    mul.lo.s32 %r2, %r1, 3;
    st.param.b32 [r], %r2;
    ret;
}}"""]
    for k in range(depth - 1, -1, -1):
        funcs.append(f""".func (.param .b32 r) f{k}(.param .b32 a)
{{
    .reg .b32 %r<6>;
    ld.param.b32 %r1, [a];
    {{
    .param .b32 p;
    .param .b32 q;
    st.param.b32 [p], %r1;
    call.uni (q), f{k + 1}, (p);
    ld.param.b32 %r2, [q];
    }}
    add.s32 %r3, %r1, 1;
    {{
    .param .b32 p;
    .param .b32 q;
    st.param.b32 [p], %r3;
    call.uni (q), f{k + 1}, (p);
    ld.param.b32 %r4, [q];
    }}
    add.s32 %r5, %r2, %r4;
    st.param.b32 [r], %r5;
    ret;
}}""")
    return f""".version 8.0
.target sm_80
.address_size 64
{chr(10).join(funcs)}
.visible .entry chain(.param .u64 out)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {{
    .param .b32 p;
    .param .b32 q;
    st.param.b32 [p], %r1;
    call.uni (q), f0, (p);
    ld.param.b32 %r2, [q];
    }}
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}}
"""


def test_calls_inline_up_to_the_limit_and_past_it_are_unsupported() -> None:
    out = np.zeros(8, np.int32)
    res = emulate(_chain(6), "chain", 1, 8, [out])
    assert res.ok, [str(d) for d in res.diagnostics]
    assert out.tolist() == [3 * (64 * x + 6 * 32) for x in range(8)]  # 64 leaves, 6 * 32 right turns

    text = _chain(20)  # 2**20 leaves: past calls.MAX_INLINED
    res = emulate(text, "chain", 1, 8, [out])
    (d,) = res.fatal
    assert d.kind == "unsupported" and f"limit of {calls.MAX_INLINED} inlined instructions" in d.message
    assert d.line == text.split("\n").index("    call.uni (q), f0, (p);") + 1  # the entry's own call
    assert res.seconds < 30


GUARDED = """
.version 8.0
.target sm_80
.address_size 64
.func (.param .b32 r) twice_or_minus(.param .b32 x, .param .b64 mark)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.b32 %r1, [x];
    ld.param.u64 %rd1, [mark];
    st.global.u32 [%rd1], 1;
    mov.u32 %r3, -1;
    st.param.b32 [r], %r3;
    setp.gt.u32 %p1, %r1, 2;
    @%p1 ret;
    shl.b32 %r2, %r1, 1;
    st.param.b32 [r], %r2;
    ret;
}
.func store_pair(.param .b64 dst, .param .align 8 .b8 pair[8])
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [dst];
    ld.param.v2.u32 {%r1, %r2}, [pair];
    st.v2.u32 [%rd1], {%r2, %r1};
    ret;
}
.visible .entry guarded(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 100;
    setp.lt.u32 %p1, %r1, 5;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    add.s64 %rd2, %rd6, 96;
    {
    .param .b32 a;
    .param .b64 m;
    .param .b32 b;
    st.param.b32 [a], %r1;
    st.param.b64 [m], %rd2;
    @%p1 call.uni (b), twice_or_minus, (a, m);
    @%p1 ld.param.b32 %r2, [b];
    }
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    add.s32 %r3, %r1, 1000;
    {
    .param .b64 d;
    .param .align 8 .b8 v[8];
    st.param.b64 [d], %rd4;
    st.param.v2.u32 [v], {%r2, %r3};
    call.uni store_pair, (d, v);
    }
    add.s32 %r4, %r1, %r3;
    st.global.u32 [%rd6+64], %r4;
    ret;
}
"""


def test_guarded_calls_early_returns_byval_arrays_and_the_callers_registers() -> None:
    out = np.zeros(32, np.int32)
    res = emulate(GUARDED, "guarded", 1, 8, [out])
    assert res.ok, [str(d) for d in res.diagnostics]
    assert out[24:].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]  # only threads 0-4 ran the guarded call
    pairs = out[:16].reshape(8, 2)
    # those above 2 returned early with -1; threads 5-7 kept 100
    assert pairs[:, 1].tolist() == [0, 2, 4, -1, -1, 100, 100, 100]
    assert pairs[:, 0].tolist() == [1000 + t for t in range(8)]  # the pair stored swapped
    # the callees' %r1, %r2, %r3 are theirs: the caller's %r1 (tid) and %r3 survive both calls
    assert out[16:24].tolist() == [1000 + 2 * t for t in range(8)]


UNREADABLE = """
.version 8.0
.target sm_80
.address_size 64
.global .align 4 .b32 table[4] = {1, 2, 3, 4};
.visible .entry odd(.param .u64 out, .param .u32 take)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [take];
    setp.ne.u32 %p1, %r1, 1;
    @%p1 bra DONE;
    ld.global.u32 %r2, [table+4*2];
    st.global.u32 [%rd1], %r2;
DONE:
    setp.eq.u32 %p1, %r1, 2;
    @%p1 bra NOWHERE;
    ret;
}
"""


@pytest.mark.parametrize(("take", "fragment"), [(1, "[table+4*2]"), (2, "bra NOWHERE")])
def test_an_instruction_decode_cannot_read_is_unsupported_when_reached(take: int, fragment: str) -> None:
    out = np.zeros(1, np.int32)
    res = emulate(UNREADABLE, "odd", 1, 1, [out, np.uint32(take)])
    (d,) = res.fatal
    assert d.kind == "unsupported"
    assert d.line == next(i for i, line in enumerate(UNREADABLE.split("\n"), 1) if fragment in line)


def test_an_instruction_decode_cannot_read_is_harmless_where_not_reached() -> None:
    out = np.full(1, 7, np.int32)
    res = emulate(UNREADABLE, "odd", 1, 1, [out, np.uint32(0)])
    assert res.ok and not res.diagnostics and out[0] == 7


def _libc_snprintf() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        pytest.skip("no C library to compare with")
    return ctypes.CDLL(name).snprintf


def _rendered(fmt: bytes, packed: bytes) -> bytes:
    """porter's rendering of ``fmt`` over an argument buffer packed as nvcc packs it."""
    pos = 0

    def fetch(size: int) -> int:
        nonlocal pos
        pos = (pos + size - 1) // size * size
        value = int.from_bytes(packed[pos : pos + size], "little")
        pos += size
        return value

    return render(fmt, fetch, lambda address: b"text").text


@pytest.mark.parametrize("conv", ["d", "i", "u", "x", "X", "o", "ld", "llu", "hd", "hhx", "f", "e", "E", "g", "G",
                                  "a", "A"])
def test_printf_conversions_match_the_c_library(conv: str) -> None:
    """Every flag, width and precision combination against the host's snprintf, which formats
    CUDA's printf output (the CUDA Programming Guide, "Formatted Output")."""
    snprintf = _libc_snprintf()
    floating = conv[-1] in "feEgGaA"
    wide = conv.startswith("l")
    values: list[float] | list[int]
    if floating:
        values = [0.0, -0.0, 1.5, -2.5, 0.1, 123456.789, 1e-5, 1e300, 5e-324, math.inf, -math.inf, math.nan, 0.5]
    else:
        values = [0, 1, -1, 255, -(2**31), 2**31 - 1, 2**40 + 5] if wide else [0, 1, -1, 255, -(2**31), 2**31 - 1]
    buf = ctypes.create_string_buffer(512)
    for flags, width, precision in itertools.product(["", "-", "+", " ", "#", "0", "-0", "+0", "#0"],
                                                      ["", "1", "12"], ["", ".0", ".3", "."]):
        fmt = f"%{flags}{width}{precision}{conv}".encode()
        for v in values:
            if floating:
                snprintf(buf, 512, fmt, ctypes.c_double(v))
                packed = struct.pack("<d", v)
            elif wide:
                snprintf(buf, 512, fmt, ctypes.c_longlong(int(v)))
                packed = (int(v) % 2**64).to_bytes(8, "little")
            else:
                snprintf(buf, 512, fmt, ctypes.c_int(int(v)))
                packed = (int(v) % 2**32).to_bytes(4, "little")
            assert _rendered(fmt, packed) == buf.value, (fmt, v)


def test_printf_star_widths_strings_and_the_argument_limit() -> None:
    packed = struct.pack("<iiii", 6, 42, -5, 7) + struct.pack("<QQd", 0xABC, 0x1000, 2.5)
    assert _rendered(b"[%*d|%-*d|%s|%p|%.1f]", packed) == b"[    42|7    |text|0x1000|2.5]"
    ints = b"".join(struct.pack("<i", k) for k in range(40))
    text = _rendered(b"%d " * 33, ints)
    assert text == (" ".join(str(k) for k in range(32)) + " %d ").encode()  # past 32 arguments: as written


EXTERN = """
.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);
.visible .entry grab(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 3;
    @!%p1 bra DONE;
    {
    .param .b64 param0;
    st.param.b64 [param0], 64;
    .param .b64 retval0;
    call.uni (retval0), malloc, (param0);
    ld.param.b64 %rd2, [retval0];
    }
DONE:
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def test_a_function_without_a_body_is_unsupported_when_reached() -> None:
    out = np.zeros(1, np.int32)
    res = emulate(EXTERN, "grab", 1, 2, [out])  # thread 3 does not exist: nobody calls malloc
    assert res.ok and not res.diagnostics
    res = emulate(EXTERN, "grab", 1, 4, [out])
    (d,) = res.fatal
    assert d.kind == "unsupported" and "call to malloc, a function without a body" in d.message
    assert d.line == EXTERN.split("\n").index("    call.uni (retval0), malloc, (param0);") + 1


def test_printf_chars_strings_and_pointers_match_the_c_library() -> None:
    """%c, %s and %p under every flag, width and precision against the host's snprintf: the 0 flag
    pads none of them with zeros but a pointer's digits, and + or a space signs a pointer."""
    snprintf = _libc_snprintf()
    buf = ctypes.create_string_buffer(512)
    for flags, width, precision in itertools.product(["", "-", "+", " ", "#", "0", "-0", "+0"], ["", "1", "12"],
                                                      ["", ".0", ".3", ".8"]):
        for conv, values in (("c", [65]), ("s", [0x1000]), ("p", [0, 0x1234, 0xABCDEF012345])):
            fmt = f"%{flags}{width}{precision}{conv}".encode()
            for v in values:
                if conv == "c":
                    snprintf(buf, 512, fmt, ctypes.c_int(v))
                    packed = v.to_bytes(4, "little")
                else:
                    snprintf(buf, 512, fmt, ctypes.c_char_p(b"text") if conv == "s" else ctypes.c_void_p(v))
                    packed = v.to_bytes(8, "little")
                assert _rendered(fmt, packed) == buf.value, (fmt, v)
