"""A candidate may not read what tells one launch from another (#28, "no observable fingerprint"):
the clocks, the global timer, the launch id, the driver's environment registers, the performance
counters, the executing graph. porter cannot make these read in a check as they read in production,
so a candidate reading one that its source does not is refused at the interface, before anything
runs; a source's own reading carries over to its ports."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from porter.gate.check import CheckOptions, run_check
from porter.gate.source import environment_problems, environment_reads
from porter.gate.spec import load_spec
from porter.ptx import parse_ptx

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
KERNEL = (VECTOR_ADD / "kernel.ptx").read_text()

WIDE = ["%clock64", "%globaltimer", "%gridid", "%current_graph_exec"] + [f"%pm{i}_64" for i in range(8)]
NARROW = (["%clock", "%clock_hi", "%globaltimer_lo", "%globaltimer_hi"] + [f"%envreg{i}" for i in range(32)]
          + [f"%pm{i}" for i in range(8)])
HARMLESS = ["%tid.x", "%ctaid.y", "%laneid", "%nctaid.x", "%smid", "%dynamic_smem_size", "%lanemask_lt"]


def reading(register: str, *, guarded: bool = False, text: str = KERNEL) -> str:
    """vector_add with one more instruction that reads ``register`` (under a predicate if ``guarded``)."""
    width, reg = ("u64", "%rd1") if register in WIDE else ("u32", "%r2")
    guard = "@%p1 " if guarded else ""
    line = f"\t{guard}mov.{width} \t{reg}, {register};\n"
    anchor = "\tld.param.u64 \t%rd1, [vector_add_param_0];\n"
    assert anchor in text
    return text.replace(anchor, anchor + line, 1)


@settings(max_examples=60, deadline=None)
@given(register=st.sampled_from(WIDE + NARROW), in_source=st.booleans(), guarded=st.booleans(),
       other=st.sampled_from(WIDE + NARROW + HARMLESS))
def test_a_candidate_reading_a_launch_telling_register_fails_unless_its_source_reads_it(
        register: str, in_source: bool, guarded: bool, other: str) -> None:
    candidate = parse_ptx(reading(register, guarded=guarded))
    source = parse_ptx(reading(register) if in_source else reading(other))
    problems = environment_problems(candidate, source)
    refused = register != other and not in_source
    assert bool(problems) == refused, problems
    if refused:
        assert f"reads {register}, which its source does not" in problems[0]
    # Without a source to compare with, every such read is refused.
    assert environment_problems(candidate, None)


@settings(max_examples=30, deadline=None)
@given(register=st.sampled_from(HARMLESS))
def test_registers_the_same_in_every_launch_are_free_to_read(register: str) -> None:
    assert environment_reads(parse_ptx(reading(register))) == {}


def test_comments_and_longer_names_are_no_reads() -> None:
    text = KERNEL.replace("\tret;", "\t// mov.u64 %rd1, %globaltimer;\n\tret;", 1)
    assert environment_reads(parse_ptx(text)) == {}


def test_porter_check_refuses_a_time_bomb_at_the_interface_on_any_machine(tmp_path: Path) -> None:
    """A kernel right for its first seconds (the timer read) fails before anything runs, with the line."""
    candidate = tmp_path / "kernel.ptx"
    candidate.write_text(reading("%globaltimer"))
    spec = load_spec(VECTOR_ADD / "porter.toml")
    from porter.ptx.toolchain import find_toolchain

    verdict = run_check(candidate, spec, CheckOptions(arch="sm_90", speed_baseline=VECTOR_ADD / "kernel.ptx"),
                        toolchain=find_toolchain(), runner=None)
    assert verdict.status == "failed"
    interface = next(g for g in verdict.gates if g.name == "interface")
    assert interface.status == "failed" and any("reads %globaltimer, which its source does not" in d
                                                  for d in interface.details), interface


def test_the_time_bomb_attack_is_refused_without_a_gpu() -> None:
    """tests/data/attacks/va_time_bomb.ptx (nvcc's output: the timer read in inline asm)."""
    from porter.ptx import read_ptx

    attack = read_ptx(ROOT / "tests" / "data" / "attacks" / "va_time_bomb.ptx")
    problems = environment_problems(attack, read_ptx(VECTOR_ADD / "kernel.ptx"))
    assert len(problems) == 1 and "reads %globaltimer, which its source does not" in problems[0]


HEAP_DECLARATIONS = """
.extern .func  (.param .b64 func_retval0) malloc
(
	.param .b64 malloc_param_0
)
;
.extern .func free
(
	.param .b64 free_param_0
)
;
"""


def taking_from_the_heap(*, free: bool = False) -> str:
    """vector_add that takes 64 bytes from the device heap, and gives them back if ``free`` (ptxas
    takes a system call's address for no call through a register: a call names it)."""
    give_back = "\tst.param.b64 [param0], %heap1;\n\tcall.uni free, (param0);\n" if free else ""
    body = ("\t{\n\t.reg .b64 %heap<2>;\n\t.param .b64 param0;\n\tst.param.b64 [param0], 64;\n"
            "\t.param .b64 retval0;\n\tcall.uni (retval0), malloc, (param0);\n\tld.param.b64 %heap1, [retval0];\n"
            f"{give_back}\t}}\n")
    anchor = "\tld.param.u64 \t%rd1, [vector_add_param_0];\n"
    text = KERNEL.replace(".address_size 64\n", ".address_size 64\n" + HEAP_DECLARATIONS, 1)
    return text.replace(anchor, anchor + body, 1)


@settings(max_examples=20, deadline=None)
@given(free=st.booleans(), in_source=st.booleans())
def test_a_candidate_using_the_device_heap_fails_unless_its_source_does(free: bool, in_source: bool) -> None:
    """Memory from the device heap outlives a launch (porter restores globals, outputs and shared
    memory, not the heap): a candidate could keep an earlier launch's results there and skip the
    work when timed. Refused with the line, unless the source uses the heap."""
    candidate = parse_ptx(taking_from_the_heap(free=free))
    source = parse_ptx(taking_from_the_heap() if in_source else KERNEL)
    problems = environment_problems(candidate, source)
    assert bool(problems) != in_source, problems
    if not in_source:
        assert "calls malloc, which its source does not" in problems[0]
        assert any("calls free, which its source does not" in p for p in problems) == free
    assert environment_problems(candidate, None)


def test_the_heap_taking_candidate_is_real_ptx_and_porter_check_refuses_it(tmp_path: Path) -> None:
    from porter.ptx.toolchain import find_toolchain

    toolchain = find_toolchain()
    text = taking_from_the_heap(free=True)
    assert toolchain.assemble(text, "sm_90").ok  # ptxas takes it: only porter's rule refuses it
    candidate = tmp_path / "kernel.ptx"
    candidate.write_text(text)
    verdict = run_check(candidate, load_spec(VECTOR_ADD / "porter.toml"),
                        CheckOptions(arch="sm_90", speed_baseline=VECTOR_ADD / "kernel.ptx"), toolchain=toolchain,
                        runner=None)
    interface = next(g for g in verdict.gates if g.name == "interface")
    assert verdict.status == "failed" and any("calls malloc, which its source does not" in d
                                              for d in interface.details), interface
