"""What the emulator keeps between launches and what a launch may not write, as the GPU gate has it:
a module's ``.global`` variables live as long as the module (the same bytes, at the same address),
and an input handed over read-only faults on a store (plain, atomic, generic or TMA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.emu import ModuleGlobals, emulate

DATA = Path(__file__).resolve().parent / "data" / "compiled"

# Each launch writes the counter it found, then counts itself, and writes its variable's address.
_COUNTER = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 g_count = 5;
.visible .entry k(.param .u64 out, .param .u64 other)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [g_count];
    add.u32 %r2, %r1, 1;
    st.global.u32 [g_count], %r2;
    mov.u64 %rd3, g_count;
    cvta.global.u64 %rd4, %rd3;
    st.global.u64 [%rd2], %rd4;
    st.global.u32 [%rd2+8], %r1;
    ret;
}
"""


def _launch(module: ModuleGlobals | None, seed: int, other_words: int, **kw) -> tuple[int, int]:
    out = np.zeros(2, np.uint64)
    res = emulate(_COUNTER, "k", 1, 1, [out, np.zeros(other_words, np.uint32)], seed=seed, module=module, **kw)
    assert res.ok, [str(d) for d in res.diagnostics]
    return int(out[0]), int(out[1])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 64)), min_size=1, max_size=6))
def test_a_module_variable_keeps_its_bytes_and_its_address_from_launch_to_launch(launches) -> None:
    module = ModuleGlobals()
    seen = [_launch(module, seed, words) for seed, words in launches]
    assert [count for _, count in seen] == list(range(5, 5 + len(launches)))
    assert len({address for address, _ in seen}) == 1  # a kernel cannot tell launches apart by it


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=4))
def test_without_a_module_each_launch_starts_from_the_initializer(seeds) -> None:
    assert {_launch(None, seed, 4)[1] for seed in seeds} == {5}


def test_several_schedules_start_from_the_same_state_and_the_module_moves_on_once() -> None:
    module = ModuleGlobals()
    _launch(module, 1, 4)
    assert _launch(module, 2, 4, schedule=("minpc", "random:3", "round_robin"))[1] == 6
    assert _launch(module, 3, 4)[1] == 7


def test_two_modules_are_independent() -> None:
    one, two = ModuleGlobals(), ModuleGlobals()
    _launch(one, 1, 4)
    _launch(one, 2, 4)
    assert _launch(two, 3, 4)[1] == 5
    assert _launch(one, 4, 4)[1] == 7


_STORE_INTO = {
    "st.global": "cvta.to.global.u64 %rd2, %rd1;\n    st.global.f32 [%rd2+4], %f1;",
    "generic st": "st.f32 [%rd1+4], %f1;",
    "atom.global": "cvta.to.global.u64 %rd2, %rd1;\n    atom.global.add.f32 %f2, [%rd2+4], %f1;",
    "red.global": "cvta.to.global.u64 %rd2, %rd1;\n    red.global.add.f32 [%rd2+4], %f1;",
}


def _writer(store: str) -> str:
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 x, .param .u64 out)
{{
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd5, [out];
    cvta.to.global.u64 %rd6, %rd5;
    cvta.to.global.u64 %rd3, %rd1;
    ld.global.f32 %f1, [%rd3];
    st.global.f32 [%rd6], %f1;
    {store}
    ret;
}}
"""


@pytest.mark.parametrize("how", sorted(_STORE_INTO))
def test_a_store_into_a_read_only_input_is_fatal_and_names_it(how: str) -> None:
    ptx = _writer(_STORE_INTO[how])
    x, out = np.full(4, 2.0, np.float32), np.zeros(4, np.float32)
    res = emulate(ptx, "k", 1, 1, [x, out], read_only={0})
    (finding,) = res.fatal
    assert finding.kind == "read-only" and "arg0 (x)" in finding.message
    assert x[1] == 2.0  # the store did not land

    named = emulate(ptx, "k", 1, 1, [np.full(4, 2.0, np.float32), out], read_only={0}, names={0: "lhs"})
    assert "store to lhs," in named.fatal[0].message  # the caller's name for it (the gate: the spec's)

    writable = emulate(ptx, "k", 1, 1, [np.full(4, 2.0, np.float32), out])  # the same kernel, x writable
    assert writable.ok, [str(d) for d in writable.diagnostics]


def test_reading_a_read_only_input_is_fine() -> None:
    x, out = np.full(4, 2.0, np.float32), np.zeros(4, np.float32)
    res = emulate(_writer(""), "k", 1, 1, [x, out], read_only={0})
    assert res.ok and out[0] == 2.0


def test_a_tma_store_into_a_read_only_buffer_is_fatal() -> None:
    ptx = (DATA / "triton" / "copy_tma.ptx").read_text()
    m = n = 64
    x = np.random.default_rng(1).uniform(-1, 1, (m, n)).astype(np.float32)

    def run(read_only: set[int]):
        out = np.full((m, n), np.nan, np.float32)
        scratch = np.zeros(256, np.uint8)
        return emulate(ptx, "copy_tma", (1, 1), 128, [x, out, np.int32(m), np.int32(n), scratch, None],
                       dynamic_smem=16392, read_only=read_only), out

    res, _ = run({1})
    assert [d.kind for d in res.fatal] == ["read-only"] and "arg1" in res.fatal[0].message
    res, out = run({0})  # its input read through a tensor map: fine
    assert res.ok and np.array_equal(out, 2 * x)
