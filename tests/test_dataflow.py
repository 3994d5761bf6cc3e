"""The dataflow that porter spec reads kernels with: which pointer reaches which access, at what
element width and type. Small kernels written for one behaviour each, then real compiler output."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from porter.ptx import parse_ptx, read_ptx
from porter.ptx.dataflow import PointerFacts, entry_facts

COMPILED = Path(__file__).parent / "data" / "compiled"


def kernel(body: str, params: str = ".param .u64 p0, .param .u64 p1, .param .u32 n") -> tuple[PointerFacts, ...]:
    text = f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k({params})\n{{\n{body}\n}}\n"
    module = parse_ptx(text)
    return entry_facts(module, module.kernels[0]).pointers


def test_loads_stores_and_the_element_width_from_the_index_scale() -> None:
    p0, p1 = kernel("""
        ld.param.u64 %rd1, [p0];
        ld.param.u64 %rd2, [p1];
        cvta.to.global.u64 %rd3, %rd1;
        cvta.to.global.u64 %rd4, %rd2;
        mov.u32 %r1, %tid.x;
        mul.wide.s32 %rd5, %r1, 4;
        add.s64 %rd6, %rd3, %rd5;
        ld.global.f32 %f1, [%rd6];
        shl.b64 %rd7, %rd5, 1;
        add.s64 %rd8, %rd4, %rd7;
        st.global.f32 [%rd8+4], %f1;
        ret;""")
    assert (p0.role, p0.element_bytes, p0.dtype[0]) == ("in", 4, "f32")
    assert p0.loads == (14,) and p0.stores == ()
    assert (p1.role, p1.stores, p1.loads) == ("out", (17,), ())


def test_a_pointer_handed_to_a_call_or_split_has_no_role() -> None:
    p0, p1 = kernel("""
        ld.param.u64 %rd1, [p0];
        ld.param.u64 %rd2, [p1];
        st.param.b64 [param0], %rd1;
        call.uni f, (param0);
        mov.b64 {%r1, %r2}, %rd2;
        ret;""")
    assert p0.role is None and "st.param.b64" in str(p0.escapes[0])
    assert p1.role is None and "mov.b64" in str(p1.escapes[0])


def test_generic_accesses_atomics_and_async_copies_count() -> None:
    p0, p1, p2 = kernel("""
        ld.param.u64 %rd1, [p0];
        ld.param.u64 %rd2, [p1];
        ld.param.u64 %rd3, [p2];
        ld.u32 %r1, [%rd1];
        cp.async.cg.shared.global [%r5], [%rd2+16], 16;
        cp.async.bulk.global.shared::cta.bulk_group [%rd3], [%r6], 256;
        atom.global.add.u32 %r2, [%rd1], 1;
        ret;""", params=".param .u64 p0, .param .u64 p1, .param .u64 p2")
    assert (p0.role, p0.dtype[0]) == ("inout", "u32")  # atomics are read-modify-write
    assert p1.role == "in" and p2.role == "out"


def test_types_from_what_consumes_a_load_and_what_makes_a_store() -> None:
    p0, p1 = kernel("""
        ld.param.u64 %rd1, [p0];
        ld.param.u64 %rd2, [p1];
        mul.wide.u32 %rd3, %r9, 2;
        add.s64 %rd4, %rd1, %rd3;
        ld.global.v2.b32 {%r1, %r2}, [%rd4];
        mov.b32 {%rs1, %rs2}, %r1;
        cvt.f32.bf16 %r3, %rs1;
        cvt.rn.f16x2.f32 %r4, %r3, %r3;
        mov.b32 %r5, %r4;
        add.s64 %rd5, %rd2, %rd3;
        st.global.b32 [%rd5], %r5;
        ret;""")
    assert (p0.element_bytes, p0.dtype[0]) == (2, "bf16")
    assert "cvt.f32.bf16" in p0.dtype[1].what
    assert (p1.element_bytes, p1.dtype[0]) == (2, "f16")


def test_a_loaded_value_that_indexes_is_an_integer() -> None:
    p0, p1 = kernel("""
        ld.param.u64 %rd1, [p0];
        ld.param.u64 %rd2, [p1];
        ld.global.b32 %r1, [%rd1];
        mul.wide.s32 %rd3, %r1, 4;
        add.s64 %rd4, %rd2, %rd3;
        ld.global.f32 %f1, [%rd4];
        ret;""")
    assert p0.dtype[0] == "i32" and p1.dtype[0] == "f32"


def test_a_pointer_never_read_by_ld_param_is_untouched() -> None:
    p0, p1 = kernel("ld.param.u64 %rd1, [p0];\nld.global.f32 %f1, [%rd1];\nret;")
    assert p0.touched and not p1.touched and p1.role is None


def test_scalars_that_bound_and_that_stride() -> None:
    text = """.version 8.0\n.target sm_90a\n.address_size 64
.visible .entry k(.param .u64 p0, .param .u32 n, .param .u32 ld)
{
    ld.param.u64 %rd1, [p0];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [ld];
    mov.u32 %r3, %tid.x;
    setp.ge.s32 %p1, %r3, %r1;
    mul.lo.s32 %r4, %r3, %r2;
    mul.wide.s32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    @!%p1 ld.global.f32 %f1, [%rd3];
    ret;
}
"""
    module = parse_ptx(text)
    n, ld = entry_facts(module, module.kernels[0]).scalars
    assert n.compared is not None and n.scales == ()
    assert ld.compared is None and [name for name, _ in ld.scales] == ["p0"]


def test_dynamic_shared_memory_is_per_entry() -> None:
    module = read_ptx(COMPILED / "nvcc" / "kernels.ptx")
    used = {e.name: entry_facts(module, e).dynamic_shared for e in module.kernels}
    assert used["_Z7row_sumPK6__halfPfii"] is not None and used["_Z7row_sumPK6__halfPfii"].what == "partial"
    assert all(v is None for k, v in used.items() if k != "_Z7row_sumPK6__halfPfii")


def test_wgmma_and_mma_types_are_the_kernels_float_types() -> None:
    module = read_ptx(COMPILED / "triton" / "matmul_kernel.ptx")
    facts = entry_facts(module, module.kernels[0])
    assert [d for d, _ in facts.float_types[2]] == ["f16"]
    assert any("wgmma.mma_async" in e.what and ".f16.f16" in e.what for e in facts.tensor_core)


_BODY_LINES = st.sampled_from([
    "ld.param.u64 %rd1, [p0];", "ld.param.u64 %rd2, [p1];", "cvta.to.global.u64 %rd3, %rd1;",
    "add.s64 %rd4, %rd3, %rd5;", "mul.wide.s32 %rd5, %r1, 2;", "shl.b64 %rd5, %rd6, 3;",
    "ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd4+0];", "st.global.b16 [%rd4], %rs1;", "mov.b32 {%rs1, %rs2}, %r1;",
    "cvt.f32.f16 %r7, %rs1;", "atom.global.add.f32 %r8, [%rd2], %r7;", "selp.b64 %rd6, %rd1, %rd2, %p1;",
    "mov.b64 %rd1, %rd4;", "setp.lt.s32 %p1, %r1, %r2;", "st.param.b64 [x], %rd2;", "red.global.add.u32 [%rd3], 1;",
    "cp.async.ca.shared.global [%r1], [%rd4], 16;", "mad.wide.s32 %rd4, %r1, 4, %rd3;", "@%p1 bra L;",
])


@settings(max_examples=200, deadline=None)
@given(st.lists(_BODY_LINES, max_size=25))
def test_any_mix_of_instructions_gives_facts_and_never_raises(lines: list[str]) -> None:
    pointers = kernel("\n".join(lines) + "\nret;")
    for p in pointers:
        assert p.role in (None, "in", "out", "inout")
        assert p.element_bytes in (None, 1, 2, 4, 8)
        if p.role is not None:
            assert p.touched


def test_the_parser_keeps_every_operand_as_written() -> None:
    """For every one-line instruction of the compiled fixtures, the operands joined by commas are
    the source's operand text without blanks (the parser splits only at top-level commas)."""
    checked = 0
    for path in sorted(COMPILED.rglob("*.ptx")):
        module = read_ptx(path)
        lines = module.text.splitlines()
        for ins in module.instructions():
            source = lines[ins.line - 1].split("//", 1)[0].strip()
            if not source.endswith(";") or source.count(";") != 1 or source.startswith("{"):
                continue
            body = source[:-1].split(ins.opcode, 1)[1]
            assert ",".join(ins.operands) == "".join(body.split()), (path.name, ins.line)
            checked += 1
    assert checked > 5000
