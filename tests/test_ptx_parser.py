"""parse_ptx on real nvcc output, a Triton-style module, hand-written edge cases, errors and fuzzing.

The nvcc fixtures were made by CUDA 13.0 from the .cu files beside them with
``nvcc -ptx -arch=sm_90 -lineinfo`` (plus ``-rdc=true`` for rdc_cluster, and ``-G -rdc=true``
instead of ``-lineinfo`` for indirect_debug). triton_matmul_sm90a.ptx and edge_cases.ptx are
hand-written. ptxas 13.0 accepts every .ptx fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.ptx import Directive, Instruction, Param, PtxModule, parse_ptx

DATA = Path(__file__).parent / "data" / "ptx"
FIXTURES = sorted(p.name for p in DATA.glob("*.ptx"))


def load(name: str) -> str:
    return (DATA / name).read_text()


def parse(name: str) -> PtxModule:
    return parse_ptx(load(name), filename=name)


def at(module: PtxModule, line: int) -> list[Instruction]:
    return [i for i in module.instructions() if i.line == line]


def naive_count(text: str, first: int, last: int) -> int:
    """Instructions in lines first..last, for files with one `;`-terminated instruction per line."""
    lines = text.splitlines()[first - 1 : last]
    return sum(
        1 for ln in lines if ln.split("//")[0].rstrip().endswith(";") and not ln.strip().startswith(".")
    )


# -- every fixture ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_every_instruction_is_on_its_line(name: str) -> None:
    """Each recorded opcode (and guard) really is on the line the parser gives for it."""
    module = parse(name)
    lines = load(name).splitlines()
    assert module.entries
    for e in module.entries:
        assert e.line < e.end_line
        assert lines[e.end_line - 1].strip() == "}"
        for ins in e.instructions:
            assert e.line < ins.line < e.end_line
            text = lines[ins.line - 1]
            assert ins.opcode in text, (ins, text)
            if ins.predicate:
                assert ins.predicate.replace("@", "@ ") in text or ins.predicate in text


def test_fixture_set() -> None:
    assert set(FIXTURES) == {
        "edge_cases.ptx",
        "indirect_debug.ptx",
        "rdc_cluster.ptx",
        "reduce_asm.ptx",
        "triton_matmul_sm90a.ptx",
        "vector_add.ptx",
    }
    for name in FIXTURES:  # the nvcc ones keep their source beside them
        assert (
            name in ("edge_cases.ptx", "triton_matmul_sm90a.ptx") or (DATA / name).with_suffix(".cu").exists()
        )


# -- nvcc ------------------------------------------------------------------------------------


def test_nvcc_vector_add() -> None:
    m = parse("vector_add.ptx")
    assert (m.version, m.target, m.arch, m.address_size) == ("7.8", ("sm_90",), "sm_90", 64)
    assert (m.version_line, m.target_line) == (9, 10)
    (k,) = m.kernels
    assert (k.name, k.kind, k.line, k.end_line, k.visible) == ("vector_add", "entry", 15, 64, True)
    assert [(p.name, p.type, p.line) for p in k.params] == [
        ("vector_add_param_0", ".u64", 16),
        ("vector_add_param_1", ".u64", 17),
        ("vector_add_param_2", ".u64", 18),
        ("vector_add_param_3", ".u32", 19),
    ]
    assert not any(p.is_ptr for p in k.params)
    assert k.directives == ()
    assert len(k.instructions) == 22 == naive_count(load("vector_add.ptx"), 15, 64)
    assert k.instructions[0] == Instruction(29, "ld.param.u64")
    assert at(m, 40) == [Instruction(40, "bra", predicate="@%p1")]
    assert at(m, 52)[0].opcode == "ld.global.nc.f32"
    assert k.instructions[-1] == Instruction(62, "ret")
    # .reg declarations, .loc lines and the $L__BB0_2 label are not instructions
    assert at(m, 22) == at(m, 33) == at(m, 60) == []
    assert not any(i.in_inline_asm for i in k.instructions)


def test_nvcc_shared_launch_bounds_inline_asm_and_device_function() -> None:
    m = parse("reduce_asm.ptx")
    assert [(e.name, e.kind, e.visible) for e in m.entries] == [
        ("_Z5scaleff", "func", False),
        ("block_reduce", "entry", True),
        ("dynamic_smem_copy", "entry", True),
    ]
    assert [k.name for k in m.kernels] == ["block_reduce", "dynamic_smem_copy"]
    scale = m.entry("_Z5scaleff")
    assert scale.returns == (Param("func_retval0", ".b32", 16),)
    assert scale.params == (Param("_Z5scaleff_param_0", ".b32", 17),)
    assert [i.opcode for i in scale.instructions] == ["ld.param.f32", "fma.rn.f32", "st.param.f32", "ret"]

    k = m.entry("block_reduce")
    blob = k.params[2]
    assert blob == Param("block_reduce_param_2", ".b8", 35, align=4, array_size=32)
    assert blob.size_bytes == 32
    assert k.directives == (Directive("maxntid", (256, 1, 1), 38), Directive("minnctapersm", (2,), 39))
    assert k.directive("minnctapersm") == Directive("minnctapersm", (2,), 39)
    assert k.directive("reqntid") is None
    assert (k.line, k.end_line) == (32, 240)
    # the inline-asm `{ .reg .pred p; ... }` scope
    asm = [i for i in k.instructions if i.in_inline_asm]
    assert [(i.line, i.opcode) for i in asm] == [(223, "and.b32"), (224, "setp.ne.u32"), (225, "selp.u32")]
    # the `{ // callseq 0, 0` block is compiler-made: not inline asm; the call spans lines 95-99
    assert at(m, 93) == [Instruction(93, "st.param.f32")]
    assert at(m, 95) == [Instruction(95, "call.uni")]
    assert at(m, 96) == at(m, 99) == []
    assert at(m, 100) == [Instruction(100, "ld.param.f32")]
    assert sum(i.opcode == "bar.sync" for i in k.instructions) == 9
    assert m.entry("dynamic_smem_copy").directives == (Directive("maxntid", (128, 1, 1), 246),)


def test_nvcc_rdc_extern_declarations_clusters_and_debug_section() -> None:
    m = parse("rdc_cluster.ptx")
    # the two `.extern .func` declarations (no body) are not entries
    assert [e.name for e in m.entries] == ["_Z5twicef", "cluster_kernel", "bounded_kernel", "capped_kernel"]
    twice = m.entry("_Z5twicef")
    assert (twice.kind, twice.visible, twice.line) == ("func", True, 28)
    c = m.entry("cluster_kernel")
    assert c.directives == (
        Directive("explicitcluster", (), 51),
        Directive("reqnctapercluster", (2, 1, 1), 52),
    )
    assert c.params[1] == Param("cluster_kernel_param_1", ".f32", 49)
    # brace-less inline asm between `// begin inline asm` and `// end inline asm`
    assert at(m, 65) == [Instruction(65, "mov.u32", in_inline_asm=True)]
    assert not at(m, 69)[0].in_inline_asm
    b = m.entry("bounded_kernel")
    assert [(d.name, d.values) for d in b.directives] == [
        ("maxntid", (256, 1, 1)),
        ("minnctapersm", (1,)),
        ("maxclusterrank", (4,)),
    ]
    assert [i.opcode for i in b.instructions].count("call.uni") == 2
    assert m.entry("capped_kernel").directive("maxnreg") == Directive("maxnreg", (64,), 161)
    with pytest.raises(KeyError):
        m.entry("external_op")


def test_nvcc_debug_build_prototypes_templates_and_dwarf() -> None:
    m = parse("indirect_debug.ptx")
    assert m.target == ("sm_90", "debug")
    names = [e.name for e in m.entries]
    assert len(names) == len(set(names)) == 10  # the forward declarations at the top add nothing
    assert [(k.name, k.visible) for k in m.kernels] == [
        ("_Z5applyIfEvPT_i", True),  # .weak
        ("_Z5applyIdEvPT_i", True),
        ("_Z8tex_useryPf", True),
        ("__nv_static_37__f11aac5c_17_indirect_debug_cu__Z2sqf__Z15internal_kernelPi", False),
    ]
    apply = m.entry("_Z5applyIfEvPT_i")
    assert (apply.line, apply.end_line, len(apply.instructions)) == (213, 265, 22)
    assert at(m, 246) == []  # prototype_2 : .callprototype ...;
    assert at(m, 247) == [Instruction(247, "call")]  # an indirect call over six lines
    assert all(at(m, n) == [] for n in range(248, 253))
    assert m.entries[-1].name == "__iAtomicAdd"
    assert m.entries[-1].end_line < 425  # the DWARF sections that follow are skipped


# -- Triton ----------------------------------------------------------------------------------


def test_triton_matmul() -> None:
    text = load("triton_matmul_sm90a.ptx")
    m = parse("triton_matmul_sm90a.ptx")
    assert (m.version, m.target, m.arch, m.address_size) == ("8.4", ("sm_90a",), "sm_90a", 64)
    (k,) = m.entries
    assert (k.name, k.kind, k.line, k.end_line) == ("matmul_kernel", "entry", 12, 203)
    assert len(k.params) == 11
    for i in (0, 1, 2, 9, 10):  # a, b, c, then the global-scratch and profile-scratch pointers
        assert k.params[i] == Param(f"matmul_kernel_param_{i}", ".u64", 13 + i, True, ".global", 1)
        assert k.params[i].size_bytes == 8
    for i in range(3, 9):
        assert k.params[i] == Param(f"matmul_kernel_param_{i}", ".u32", 13 + i)
    assert k.directives == (Directive("reqntid", (128, 1, 1), 25),)
    assert len(k.instructions) == 125 == naive_count(text, 12, 203)

    (mma,) = [i for i in k.instructions if i.base == "wgmma" and "mma_async" in i.opcode]
    assert mma == Instruction(144, "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16", in_inline_asm=True)
    assert at(m, 139) == [Instruction(139, "wgmma.fence.sync.aligned")]
    assert at(m, 137) == [Instruction(137, "fence.proxy.async.shared::cta")]
    assert at(m, 124) == [Instruction(124, "ld.global.v4.b32", "@%p5", in_inline_asm=True)]
    assert at(m, 47) == [Instruction(47, "mov.u32", in_inline_asm=True)]
    assert at(m, 156) == [Instruction(156, "bra", "@%p8")]
    assert at(m, 114) == []  # .pragma "nounroll";
    assert at(m, 142) == []  # .reg .pred inside the inline-asm scope
    stores = [i for i in k.instructions if i.opcode == "st.global.v2.b32"]
    assert [(i.line, i.predicate, i.in_inline_asm) for i in stores] == [
        (185, "@%p13", True),
        (188, "@%p14", True),
        (193, "@%p13", True),
        (196, "@%p14", True),
    ]
    assert sum(i.in_inline_asm for i in k.instructions) == 14


# -- hand-written edge cases -----------------------------------------------------------------


def test_edge_cases_fixture() -> None:
    m = parse("edge_cases.ptx")
    assert m.target == ("sm_80", "texmode_independent")
    assert m.arch == "sm_80"
    assert [e.name for e in m.entries] == ["helper", "trap_always", "edge_kernel"]

    helper = m.entry("helper")
    assert (helper.kind, helper.visible) == ("func", True)  # .weak
    assert helper.returns == (Param("ret", ".b32", 15),)
    assert helper.params == (Param("x", ".b32", 16), Param("blob", ".b8", 16, align=8, array_size=16))
    # three instructions on one line
    assert [i.opcode for i in at(m, 20)] == ["ld.param.b32", "ld.param.b32", "add.s32"]

    trap = m.entry("trap_always")
    assert (trap.visible, trap.params, trap.directives) == (False, (), (Directive("noreturn", (), 25),))

    k = m.entry("edge_kernel")
    assert k.visible is False  # no .visible
    assert k.params == (
        Param("out", ".u64", 30, True, ".global", 16),
        Param("generic", ".u64", 30, True, None, 8),
        Param("n", ".u32", 31),
    )
    assert k.directives == (Directive("reqntid", (64,), 32), Directive("minnctapersm", (4,), 33))
    # a multi-line /* */ comment between two instructions, hiding a fake instruction and braces
    assert at(m, 41) == [Instruction(41, "mov.u32")]
    assert at(m, 42) == [Instruction(42, "setp.ge.u32")]
    assert all(i.opcode != "mov.u32" or i.line != 42 for i in k.instructions)
    assert at(m, 44) == [Instruction(44, "add.u32", "@!%p1")]
    assert at(m, 55) == [Instruction(55, "bra.uni", "@%p2")]  # `@ %p2` with a space
    # nested scopes, two deep, and two instructions on one line
    assert at(m, 48) == [Instruction(48, "setp.eq.u32", in_inline_asm=True)]
    assert at(m, 50) == [Instruction(50, "mov.b32", in_inline_asm=True)] * 2
    assert at(m, 53) == [Instruction(53, "add.u32")]  # after `LOOP:` on the same line
    assert at(m, 60) == [Instruction(60, "st.global.v2.u32")]  # operand braces over two lines
    assert k.instructions[-1] == Instruction(63, "ret")
    assert len(k.instructions) == 19


def test_line_endings_and_bom() -> None:
    lf = load("edge_cases.ptx")
    want = parse_ptx(lf)
    for variant in (lf.replace("\n", "\r\n"), lf.replace("\n", "\r"), "\ufeff" + lf):
        got = parse_ptx(variant)
        assert got.entries == want.entries
        assert (got.version_line, got.target_line) == (want.version_line, want.target_line)
    assert parse_ptx(lf).text == lf


MINIMAL = ".version 8.0\n.target sm_90\n.address_size 64\n"


def test_strings_keep_comment_markers_and_braces() -> None:
    text = MINIMAL + '.file 1 "a//b/*c*/{d};e.cu"\n.entry k()\n{\n.pragma "x//y;";\nret; // done\n}\n'
    m = parse_ptx(text)
    assert m.entry("k").instructions == (Instruction(8, "ret"),)


def test_defaults_and_header_variants() -> None:
    m = parse_ptx(".version 7.8\n.target sm_89\n.entry k {\n exit;\n}\n")
    assert m.address_size == 32  # PTX's default without .address_size
    assert m.entry("k").params == ()
    both = parse_ptx(MINIMAL + ".entry k() .maxntid 128 .reqntid 128, 1 {\n ret;\n}\n")
    assert [d.values for d in both.entry("k").directives] == [(128,), (128, 1)]
    decl_only = parse_ptx(MINIMAL + ".extern .func (.param .b32 r) f (.param .b32 a);\n.func g();\n")
    assert decl_only.entries == ()
    vec = parse_ptx(
        MINIMAL + ".visible .entry k(.param .align 64 .b8 t[128], .param .u64 .ptr .shared::cta p)\n{\n}\n"
    )
    t, p = vec.entry("k").params
    assert (t.align, t.array_size, t.size_bytes) == (64, 128, 128)
    assert (p.is_ptr, p.state_space) == (True, ".shared::cta")


def test_labels_before_closing_brace_and_scopes() -> None:
    text = MINIMAL + ".entry k()\n{\nL0: L1:\n{\n$x: nop;\n}\nret;\n$L__end:\n}\n"
    k = parse_ptx(text).entry("k")
    assert k.instructions == (Instruction(8, "nop", in_inline_asm=True), Instruction(10, "ret"))
    assert k.end_line == 12


# -- errors ----------------------------------------------------------------------------------

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "kernel.ptx: empty file"),
        ("  \n\t\n", "kernel.ptx: empty file"),
        ("\x7fELF\x02\x01\x00\x00", "kernel.ptx: not PTX text (contains NUL bytes"),
        ("hello world\n", "kernel.ptx:1: expected a PTX directive, got 'hello'"),
        ("int main() { return 0; }\n", "kernel.ptx:1: expected a PTX directive, got 'int'"),
        ("// just a comment\n", "kernel.ptx: no .version directive"),
        (".target sm_90\n", "kernel.ptx: no .version directive"),
        (".version 8.0\n", "kernel.ptx: no .target directive"),
        (".version 8.0\n\n.target\n", "kernel.ptx:3: bad .target"),
        (".version 8.0\n.target foo\n", "kernel.ptx:2: bad .target (no sm_XX"),
        (".version 8.0\n.target sm_90 sm_80\n", "kernel.ptx:2: bad .target"),
        (".version 8.0\n.target sm_90,\n", "kernel.ptx:2: bad .target"),
        (".version eight\n", "kernel.ptx:1: bad .version"),
        (".version 8.0\n.version 8.1\n", "kernel.ptx:2: duplicate .version (first at line 1)"),
        (".version 8.0\n.target sm_90\n.target sm_80\n", "kernel.ptx:3: duplicate .target"),
        (".version 8.0\n.target sm_90\n.address_size 48\n", "kernel.ptx:3: bad .address_size"),
        (HEADER + "ret;\n}\n}\n", "kernel.ptx:8: unbalanced '}'"),
        (HEADER + "ret;\n", "kernel.ptx:5: unbalanced '{'"),
        (HEADER + "{\nret;\n", "kernel.ptx:6: unbalanced '{'"),
        (HEADER + "/* never closed\nret;\n}\n", "kernel.ptx:6: unterminated /* comment"),
        (HEADER + '.pragma "open;\n}\n', "kernel.ptx:6: unterminated string"),
        (HEADER + "ret\n}\n", "kernel.ptx:7: expected ';' before '}' (statement at line 6)"),
        (HEADER + "st.global.v2.u32 [p], {%r1, %r2;\n}\n", "kernel.ptx:6: unbalanced '{'"),
        (HEADER + "%r1 = add;\n}\n", "kernel.ptx:6: expected an instruction, got '%r1'"),
        (HEADER + "@ ;\n}\n", "kernel.ptx:6: bad predicate guard"),
        (HEADER + "@%p1 ;\n}\n", "kernel.ptx:6: expected an instruction, got ';'"),
        (HEADER + "\n\n(ret);\n}\n", "kernel.ptx:8: expected an instruction, got '('"),
        (MINIMAL + "{\n}\n", "kernel.ptx:4: unexpected '{' outside a function body"),
        (MINIMAL + ".entry k(.param x)\n{\n}\n", "kernel.ptx:4: bad parameter 'x'"),
        (MINIMAL + ".entry k(\n.param .u32 a\n.param .u32 b)\n{\n}\n", "kernel.ptx:6: expected ',' or ')'"),
        (MINIMAL + ".entry k(.param .u32 .f32 a) {\n}\n", "kernel.ptx:4: parameter has two types"),
        (MINIMAL + ".entry k(.param .b8 a[x]) {\n}\n", "kernel.ptx:4: expected an array size, got 'x'"),
        (MINIMAL + ".entry k(.param .b8 a[4) {\n}\n", "kernel.ptx:4: expected ']'"),
        (MINIMAL + ".entry k(.param .u32 .align a) {\n}\n", "kernel.ptx:4: expected an alignment"),
        (MINIMAL + ".entry 9k() {\n}\n", "kernel.ptx:4: bad .entry name '9k'"),
        (MINIMAL + ".entry {\n}\n", "kernel.ptx:4: expected a function name before '{'"),
        (MINIMAL + ".entry k()\n.maxntid 128,\n{\n}\n", "kernel.ptx:5: expected a value for .maxntid"),
        (
            MINIMAL + ".entry k()\nmaxntid 128\n{\n}\n",
            "kernel.ptx:5: unexpected 'maxntid' before the function body",
        ),
        (MINIMAL + ".entry k()\n.maxntid 1" + "0" * 30 + "\n{\n}\n", "kernel.ptx:5: unexpected '1000"),
        (MINIMAL + ".global .u32 x\n", "kernel.ptx:4: expected ';' after 'x'"),
        (MINIMAL + ".section .debug_str {\n.b8 0\n", "kernel.ptx:4: unbalanced '{' (unterminated .section)"),
    ],
)
def test_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_ptx(text, filename="kernel.ptx")
    assert str(info.value).startswith(message), str(info.value)
    assert info.value.exit_code == 2


def test_non_string_input() -> None:
    with pytest.raises(InputError, match="expected PTX text, got bytes"):
        parse_ptx(b".version 8.0", filename="kernel.ptx")  # type: ignore[arg-type]


# -- fuzzing: a PtxModule or an InputError, never anything else -------------------------------


def check_robust(text: str) -> None:
    try:
        module = parse_ptx(text, filename="fuzz.ptx")
    except InputError as e:
        message = str(e)
        assert message.startswith("fuzz.ptx")
        assert "\n" not in message
    else:
        assert isinstance(module, PtxModule)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PTX_ALPHABET = st.sampled_from([*'{}();:,.@!%$[]/*"\\\n\r\t =+-|<>_', "//", "/*", "*/", ".entry", ".func"])


@FUZZ
@given(st.text())
def test_fuzz_any_text(text: str) -> None:
    check_robust(text)


@FUZZ
@given(st.binary())
def test_fuzz_binary_garbage(data: bytes) -> None:
    check_robust(data.decode("latin-1"))


@FUZZ
@given(st.lists(PTX_ALPHABET | st.text(max_size=3)).map("".join))
def test_fuzz_ptx_punctuation(text: str) -> None:
    check_robust(MINIMAL + text)


@FUZZ
@given(name=st.sampled_from(FIXTURES), data=st.data())
def test_fuzz_mutated_fixture(name: str, data: st.DataObject) -> None:
    lines = load(name).splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        action = data.draw(st.sampled_from(["delete", "duplicate", "insert", "truncate", "swap"]))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "insert":
            pos = data.draw(st.integers(0, len(lines[i])), label="column")
            junk = data.draw(PTX_ALPHABET | st.text(min_size=1, max_size=4), label="junk")
            lines[i] = lines[i][:pos] + junk + lines[i][pos:]
        elif action == "truncate":
            pos = data.draw(st.integers(0, len(lines[i])), label="column")
            lines[i] = lines[i][:pos]
            del lines[i + 1 :]
        else:
            j = data.draw(st.integers(0, len(lines) - 1), label="other line")
            lines[i], lines[j] = lines[j], lines[i]
    check_robust("".join(lines))
