"""porter check --emulate: the candidate run in porter's PTX emulator at small size sets, on this
CPU machine, as the `emulation` gate. Emulation is evidence, never a pass: a candidate only
emulated is `not run` (exit 3); a wrong result in emulation is `failed` (exit 1); an instruction
the emulator lacks leaves the gate `not run`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.emu import Diagnostic, EmuResult
from porter.gate import emulated
from porter.gate.check import CheckOptions, run_check
from porter.gate.evidence import Equivalence, equivalence, outcome_words
from porter.gate.plan import total_buffer_bytes
from porter.gate.spec import declared_spec, load_spec
from porter.gate.verdict import Verdict, judge
from porter.jsonable import from_jsonable, to_jsonable

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
GEMM = ROOT / "examples" / "gemm_bf16"


def check(candidate: Path, folder: Path, toolchain, **options) -> Verdict:
    return run_check(candidate, load_spec(folder), CheckOptions(timing=False, **options), toolchain=toolchain,
                     runner=None)


@pytest.fixture
def wrong_vector_add(tmp_path: Path) -> Path:
    """examples/vector_add with x * alpha + y computed as x - y."""
    folder = tmp_path / "vector_add"
    shutil.copytree(VECTOR_ADD, folder)
    kernel = folder / "kernel.ptx"
    text = kernel.read_text()
    assert "fma.rn.f32 \t%f4, %f2, %f1, %f3;" in text
    kernel.write_text(text.replace("fma.rn.f32 \t%f4, %f2, %f1, %f3;", "sub.f32 \t%f4, %f2, %f3;"))
    return folder


def test_vector_add_is_equivalent_in_emulation_and_still_not_run(toolchain) -> None:
    verdict = check(VECTOR_ADD / "kernel.ptx", VECTOR_ADD, toolchain, emulate=True, seeds=(7, 8))
    gate = verdict.gate("emulation")
    assert gate is not None and gate.status == "passed", gate
    drawn = emulated.drawn_emulated_sizes(load_spec(VECTOR_ADD), [{"n": 1}, {"n": 33}, {"n": 1000}], 7)
    assert drawn is not None
    assert gate.summary == ("equivalent in emulation (8 cases, shapes n=1; n=33; n=1000; "
                            f"drawn for this check: n={drawn['n']}; values wide)")
    # Each case is listed (the run record and PORT_REPORT.md show them), with its seed and error;
    # porter's wider values run at the drawn size set too.
    assert [d.split("]")[0] for d in gate.details] == [
        *(f"[n={n}; seed {s}" for n in (1, 33, 1000) for s in (7, 8)), f"[n={drawn['n']}; seed 7",
        f"[n={drawn['n']}; seed 7; values wide"]
    assert all("] equivalent (out: max abs err " in d and ", rel L2 " in d for d in gate.details)
    assert verdict.status == "not run" and judge(verdict).exit_code == 3  # never passed without the GPU
    assert equivalence(verdict) == Equivalence("yes", True, gate.summary)
    assert outcome_words(verdict.status, verdict) == "equivalent in emulation, not run"
    assert verdict.gate("equivalence").status == "not run"
    assert verdict.seeds == (7, 8)
    assert from_jsonable(Verdict, to_jsonable(verdict)) == verdict


def test_without_a_gpu_emulation_runs_by_default_and_no_emulate_turns_it_off(toolchain) -> None:
    assert check(VECTOR_ADD / "kernel.ptx", VECTOR_ADD, toolchain).gate("emulation").status == "passed"
    assert check(VECTOR_ADD / "kernel.ptx", VECTOR_ADD, toolchain, emulate=False).gate("emulation") is None


def test_a_wrong_kernel_fails_in_emulation(wrong_vector_add: Path, toolchain) -> None:
    verdict = check(wrong_vector_add / "kernel.ptx", wrong_vector_add, toolchain, emulate=True)
    gate = verdict.gate("emulation")
    assert gate is not None and gate.status == "failed"
    assert gate.summary.startswith("at n=1; seed ") and "out:" in gate.summary and "wrong" in gate.summary
    assert verdict.status == "failed" and judge(verdict).exit_code == 1
    assert verdict.reason.startswith("emulation: ")
    assert from_jsonable(Verdict, to_jsonable(verdict)) == verdict
    assert equivalence(verdict).label == "no (emulated)" and outcome_words(verdict.status, verdict) == "failed"


def test_an_unsupported_instruction_leaves_the_gate_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    unsupported = Diagnostic("unsupported", 49, "instruction not emulated: frobnicate.f32", fatal=True)
    monkeypatch.setattr(emulated, "emulate", lambda *a, **k: EmuResult(buffers={}, diagnostics=[unsupported]))
    spec = load_spec(VECTOR_ADD)
    gate = emulated.emulation_gate(spec, (VECTOR_ADD / "kernel.ptx").read_text(), (1, 2))
    assert gate.status == "not run" and "not emulated: frobnicate.f32" in gate.summary


def test_emulate_size_sets_of_the_spec_replace_the_default_choice() -> None:
    spec = load_spec(VECTOR_ADD)
    assert emulated.emulated_size_sets(spec) == [{"n": 1}, {"n": 33}, {"n": 1000}]
    declared = replace(spec, emulate=({"n": 77},))
    assert emulated.emulated_size_sets(declared) == [{"n": 77}]
    gate = emulated.emulation_gate(declared, (VECTOR_ADD / "kernel.ptx").read_text(), (1, 2))
    drawn = emulated.drawn_emulated_sizes(declared, [{"n": 77}], 1)
    assert drawn is not None and drawn["n"] != 77
    assert gate.summary == f"equivalent in emulation (4 cases, shapes n=77; drawn for this check: n={drawn['n']}; values wide)"
    # A spec that opts out of unannounced sizes gets none drawn, and the gate says so.
    opted_out = replace(declared, inputs_spec=replace(declared.inputs_spec, unannounced=False))
    gate = emulated.emulation_gate(opted_out, (VECTOR_ADD / "kernel.ptx").read_text(), (1, 2))
    assert gate.status == "passed" and gate.summary.startswith("equivalent in emulation (3 cases, shapes n=77;")
    assert gate.details[-1] == "no size set drawn for this check: only the sizes the spec lists were emulated"


def test_the_sm100a_gemm_is_equivalent_in_emulation(toolchain) -> None:
    kernel = GEMM / "kernel_sm100a.ptx"
    spec, _ = declared_spec(load_spec(GEMM), kernel.read_text(), source=kernel.name)
    assert [s["M"] for s in emulated.emulated_size_sets(spec)] == [1, 77, 128]  # smallest, most ragged, one tile
    verdict = check(kernel, GEMM, toolchain, emulate=True, arch="sm_100a")
    gate = verdict.gate("emulation")
    assert gate is not None and gate.status == "passed", gate
    assert gate.summary.startswith("equivalent in emulation (8 cases, shapes M=1, N=8, K=8; M=77, N=77, K=40;")
    assert "; drawn for this check: M=" in gate.summary
    assert verdict.status == "not run" and judge(verdict).exit_code == 3


def test_the_cli_prints_the_gate(wrong_vector_add: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "porter", "check", str(wrong_vector_add / "kernel.ptx"), "--emulate",
                        "--no-gpu"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED - emulation: at n=1" in r.stdout
    assert any(line.split()[:2] == ["emulation", "failed"] for line in r.stdout.splitlines()), r.stdout
    right = subprocess.run([sys.executable, "-m", "porter", "check", str(VECTOR_ADD / "kernel.ptx"), "--no-gpu"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert right.returncode == 3, right.stdout + right.stderr
    listed = right.stdout.split("emulated cases (porter's PTX emulator on this CPU; not hardware):\n")[1].splitlines()
    assert [line.split(";")[0] for line in listed[:6]] == ["  [n=1"] * 2 + ["  [n=33"] * 2 + ["  [n=1000"] * 2
    assert listed[6].startswith("  [n=")  # the size set drawn for this check


def test_on_a_gpu_emulation_runs_only_when_asked_and_its_failure_fails(wrong_vector_add: Path, toolchain) -> None:
    """The fake GPU computes the reference for any kernel: there the wrong kernel passes, and only
    --emulate (extra evidence where the GPU runs the candidate) catches it."""
    from porter.gate.runner.fake import FakeGpu

    spec = load_spec(wrong_vector_add)
    kernel = wrong_vector_add / "kernel.ptx"
    gpu = FakeGpu()
    plain = run_check(kernel, spec, CheckOptions(timing=False), toolchain=toolchain, runner=gpu.runner())
    assert plain.status == "passed" and plain.gate("emulation") is None
    asked = run_check(kernel, spec, CheckOptions(timing=False, emulate=True), toolchain=toolchain, runner=gpu.runner())
    assert asked.gate("equivalence").status == "passed" and asked.gate("emulation").status == "failed"
    assert asked.status == "failed" and judge(asked).exit_code == 1
    assert equivalence(asked).label == "yes"  # the GPU ran it: its answer, not the emulator's, and no marker


def test_references_in_threads_never_find_cupy_and_leave_it_as_it_was(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool checks in threads; each emulated case hides CuPy from its reference (without a GPU a
    CuPy reference raises). Several at once: none of them finds CuPy, and CuPy is back afterwards."""
    import threading
    import types

    folder = tmp_path / "vector_add"
    shutil.copytree(VECTOR_ADD, folder)
    (folder / "ref.py").write_text(
        "import time\n"
        "import numpy as np\n\n"
        "def vector_add(args, sizes):\n"
        "    for _ in range(20):  # asked again and again while the other threads come and go\n"
        "        try:\n"
        "            import cupy  # noqa: F401\n"
        "        except ImportError:\n"
        "            time.sleep(0.001)\n"
        "            continue\n"
        "        raise RuntimeError('CuPy was importable inside an emulated reference')\n"
        "    n = int(sizes['n'])\n"
        "    return {'out': float(args['alpha']) * np.asarray(args['x'], np.float64)[:n]"
        " + np.asarray(args['y'], np.float64)[:n]}\n")
    cupy = types.ModuleType("cupy")
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    spec = load_spec(folder)
    cases = [emulated.case_of(spec, (VECTOR_ADD / "kernel.ptx").read_text(), {"n": 33}, seed) for seed in range(8)]
    errors: list[BaseException] = []

    def run(case: emulated.Case) -> None:
        try:
            emulated.reference(case)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=run, args=(case,)) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sys.modules["cupy"] is cupy


_EXAMPLES = ("vector_add", "softmax", "gemm_bf16", "gemm_bt_tile", "attention_fwd", "attention_bwd")


@settings(max_examples=60, deadline=None)
@given(example=st.sampled_from(_EXAMPLES), seed=st.integers(0, 2**48 - 1))
def test_the_drawn_size_set_is_the_specs_own_no_listed_one_and_no_dearer(example: str, seed: int) -> None:
    """By construction, for every seed: the size set drawn for a check is one the spec takes, none
    of the fixed emulated sets (a kernel cannot know it from the spec), and it moves no more bytes
    than the largest of them (emulation stays as cheap)."""
    spec = load_spec(ROOT / "examples" / example)
    sets = emulated.emulated_size_sets(spec)
    drawn = emulated.drawn_emulated_sizes(spec, sets, seed)
    assert drawn is not None
    spec.check_sizes(drawn)
    assert drawn not in sets
    assert total_buffer_bytes(spec, drawn) <= max(total_buffer_bytes(spec, s) for s in sets)
    assert emulated.drawn_emulated_sizes(spec, sets, seed) == drawn  # the verdict's seed replays it


def test_seeds_draw_many_size_sets() -> None:
    spec = load_spec(VECTOR_ADD)
    sets = emulated.emulated_size_sets(spec)
    assert len({emulated.drawn_emulated_sizes(spec, sets, seed)["n"] for seed in range(16)}) >= 8


def _right_only_where_listed(folder: Path) -> Path:
    """examples/vector_add's kernel, right at the sizes its spec lists for emulation (n = 1, 33,
    1000) and storing y alone at every other n: the attack a fixed plan invites."""
    text = (VECTOR_ADD / "kernel.ptx").read_text()
    text = text.replace("\t.reg .b64 \t%rd<11>;\n", "\t.reg .b64 \t%rd<11>;\n\t.reg .pred \t%q<4>;\n")
    fma = "\tfma.rn.f32 \t%f4, %f2, %f1, %f3;\n"
    assert fma in text and "%q<4>" in text
    text = text.replace(fma, fma + "\tsetp.ne.s32 \t%q1, %r2, 1;\n\tsetp.ne.s32 \t%q2, %r2, 33;\n"
                        "\tsetp.ne.s32 \t%q3, %r2, 1000;\n\tand.pred \t%q1, %q1, %q2;\n\tand.pred \t%q1, %q1, %q3;\n"
                        "\t@%q1 mov.f32 \t%f4, %f3;\n")
    kernel = folder / "kernel.ptx"
    kernel.write_text(text)
    return kernel


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**48 - 2))
def test_a_kernel_right_only_at_the_listed_sizes_fails_in_emulation(seed: int, tmp_path_factory) -> None:
    kernel = _right_only_where_listed(tmp_path_factory.mktemp("attack"))
    gate = emulated.emulation_gate(load_spec(VECTOR_ADD), kernel.read_text(), (seed, seed + 1))
    assert gate.status == "failed", gate
    assert "a size set drawn for this check" in gate.summary


def _alpha_fixed(folder: Path) -> Path:
    """examples/vector_add with alpha a fixed constant of the spec (1.5) instead of drawn per case,
    and a kernel that folds that constant in: right for every case of the default fills."""
    shutil.copytree(VECTOR_ADD, folder)
    toml = folder / "porter.toml"
    text = toml.read_text()
    drawn = 'range = [-2.0, 2.0]                # drawn per case: a kernel must read it, not assume it'
    assert drawn in text
    toml.write_text(text.replace(drawn, 'value = "1.5"'))
    kernel = folder / "kernel.ptx"
    ptx = kernel.read_text()
    load = "\tld.param.f32 \t%f1, [vector_add_param_3];\n"
    assert load in ptx
    kernel.write_text(ptx.replace(load, "\tmov.f32 \t%f1, 0f3FC00000;\n"))  # 1.5, whatever alpha is
    return folder


def test_a_kernel_with_a_fixed_constant_folded_in_fails_in_emulation(tmp_path: Path) -> None:
    """Porter's value case perturbs the spec's fixed float constants; it runs in emulation too."""
    folder = _alpha_fixed(tmp_path / "vector_add")
    spec = load_spec(folder)
    assert spec.perturbed() == ("alpha",)
    honest = emulated.emulation_gate(spec, (VECTOR_ADD / "kernel.ptx").read_text(), (5, 6))
    assert honest.status == "passed" and honest.summary.endswith("; values wide)"), honest
    folded = emulated.emulation_gate(spec, (folder / "kernel.ptx").read_text(), (5, 6))
    assert folded.status == "failed", folded
    assert "; values wide, a size set drawn for this check: out: " in folded.summary


_RACY_VECTOR_ADD = """
.version 7.0
.target sm_80
.address_size 64

.visible .entry vector_add(
	.param .u64 vector_add_param_0,
	.param .u64 vector_add_param_1,
	.param .u64 vector_add_param_2,
	.param .f32 vector_add_param_3,
	.param .u32 vector_add_param_4
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<6>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<12>;
	.shared .align 4 .f32 stage[256];

	ld.param.u64 	%rd1, [vector_add_param_0];
	ld.param.u64 	%rd2, [vector_add_param_1];
	ld.param.u64 	%rd3, [vector_add_param_2];
	ld.param.f32 	%f1, [vector_add_param_3];
	ld.param.u32 	%r2, [vector_add_param_4];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mul.lo.s32 	%r6, %r3, %r4;
	add.s32 	%r1, %r6, %r5;
	mov.f32 	%f4, 0f00000000;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__skip;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.nc.f32 	%f2, [%rd6];
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.nc.f32 	%f3, [%rd8];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
$L__skip:
	mov.u32 	%r7, stage;
	shl.b32 	%r8, %r5, 2;
	add.s32 	%r9, %r7, %r8;
	st.shared.f32 	[%r9], %f4;
	xor.b32 	%r10, %r5, 32;
	shl.b32 	%r8, %r10, 2;
	add.s32 	%r9, %r7, %r8;
	ld.shared.f32 	%f5, [%r9];
	add.s32 	%r11, %r6, %r10;
	setp.ge.s32 	%p2, %r11, %r2;
	@%p2 bra 	$L__done;
	cvta.to.global.u64 	%rd9, %rd3;
	mul.wide.s32 	%rd10, %r11, 4;
	add.s64 	%rd11, %rd9, %rd10;
	st.global.f32 	[%rd11], %f5;
$L__done:
	ret;
}
"""


def test_a_missing_barrier_fails_in_emulation_though_lockstep_hides_it() -> None:
    """Each thread stores its element through shared memory and the thread of the other warp
    writes it out, with no bar.sync between: in lockstep (every warp at one PC) the result is
    right, so the fixed size sets pass; the drawn size set also runs the warps in a seeded random
    order, where a warp can read before its partner wrote, and the gate names the race."""
    spec = load_spec(VECTOR_ADD)
    gate = emulated.emulation_gate(spec, _RACY_VECTOR_ADD, (21, 22))
    assert gate.status == "failed", gate
    assert ", a size set drawn for this check: the emulator: vector_add: race: out differs between schedules " \
           "minpc and random:21 (" in gate.summary, gate.summary
    assert gate.details and all("] equivalent (" in d for d in gate.details)  # every fixed case was right


@pytest.mark.parametrize("name", ["va_emu_fingerprint", "va_aligned_256"])
def test_a_kernel_right_only_for_pointers_shaped_as_the_emulators_were_fails_emulation(toolchain, name: str) -> None:
    """tests/data/emulation_attacks: each passed every emulated check and was wrong on an H100."""
    kernel = ROOT / "tests" / "data" / "emulation_attacks" / f"{name}.ptx"
    verdict = check(kernel, VECTOR_ADD, toolchain, emulate=True, seeds=(7, 8))
    gate = verdict.gate("emulation")
    assert gate is not None and gate.status == "failed" and "elements wrong" in gate.summary


@pytest.mark.parametrize("name", ["va_fmax_poison", "va_skip_if_written", "va_skip_where_zero", "va_trap_if_written"])
def test_a_kernel_right_only_when_its_outputs_start_as_nan_fails_emulation(toolchain, name: str) -> None:
    """Outputs start as the GPU gate's three initial states, drawn per case (poison alone until
    2026-12-06: these attacks passed emulation, and failed only the GPU gate)."""
    kernel = ROOT / "tests" / "data" / "attacks" / f"{name}.ptx"
    verdict = check(kernel, VECTOR_ADD, toolchain, emulate=True, seeds=(7, 8))
    gate = verdict.gate("emulation")
    assert gate is not None and gate.status == "failed", gate


@pytest.mark.parametrize(("name", "said"), [
    ("va_latch_alpha", "elements wrong"),  # its first case's alpha, latched in a module variable
    ("va_oob_unless_first_launch", "out-of-bounds: global access of 4 bytes at 0x"),  # "launched before"
    ("va_input_scratch", "read-only: store to x, an input the kernel may only read"),
    # wrong from the third launch on the same buffers: the key they remember moves at every launch
    ("va_first_launches", "left module variable g_key other than it found it"),
    ("va_trap_after_n", "left module variable g_key other than it found it"),
    ("va_trap_after_many", "left module variable g_count other than it found it"),  # at the 100th launch
])
def test_a_kernel_honest_only_in_a_fresh_module_or_to_its_inputs_end_state_fails_emulation(toolchain, name: str,
                                                                                           said: str) -> None:
    """One module for every case of the gate, as the GPU worker has, and inputs read-only (until
    2026-12-06 each case started a fresh module and inputs were compared after the launch only:
    these attacks passed emulation, and failed only the GPU gate)."""
    kernel = ROOT / "tests" / "data" / "attacks" / f"{name}.ptx"
    for seeds in ((7, 8), (1, 2)):
        gate = check(kernel, VECTOR_ADD, toolchain, emulate=True, seeds=seeds).gate("emulation")
        assert gate is not None and gate.status == "failed" and said in gate.summary, gate


def test_each_initial_state_of_an_output_is_drawn_for_some_case() -> None:
    spec = load_spec(VECTOR_ADD)
    ptx = (VECTOR_ADD / "kernel.ptx").read_text()
    seen = set()
    for seed in range(40):
        out = emulated.case_of(spec, ptx, {"n": 100}, seed).values["out"]
        seen.add("poison" if np.isnan(out).all() else "zeros" if not out.any() else "random")
        assert np.isnan(out).all() or np.isfinite(out).all()
    assert seen == {"poison", "zeros", "random"}


def _stateful_vector_add(counting: str, threads: int = 4096) -> str:
    """The vector_add example's kernel with one module variable, ``g_state`` (a u32 a thread, for
    the first ``threads`` threads), that each of those threads updates by ``counting`` (PTX on
    %r7, what it found, into %r8) before its element; it does its element only while what it found
    is below ``LIMIT`` (replaced by the caller)."""
    head, body = (VECTOR_ADD / "kernel.ptx").read_text().split("\tmad.lo.s32 \t%r1, %r3, %r4, %r5;\n")
    work = body.split("\tcvta.to.global.u64 \t%rd4, %rd1;\n")[1]
    head = head.replace(".address_size 64\n", ".address_size 64\n\n.global .align 4 .b8 g_state[16384];\n")
    head = head.replace(".reg .pred \t%p<2>;", ".reg .pred \t%p<4>;").replace(".reg .b32 \t%r<6>;", ".reg .b32 \t%r<10>;")
    head = head.replace(".reg .b64 \t%rd<11>;", ".reg .b64 \t%rd<14>;")
    return head + f"""\tmad.lo.s32 \t%r1, %r3, %r4, %r5;
\tsetp.ge.s32 \t%p1, %r1, %r2;
\t@%p1 bra \t$L__BB0_2;
\tsetp.ge.u32 \t%p3, %r1, {threads};
\t@%p3 bra \t$L__work;
\tmov.u64 \t%rd11, g_state;
\tmul.wide.u32 \t%rd12, %r1, 4;
\tadd.s64 \t%rd13, %rd11, %rd12;
\tld.global.u32 \t%r7, [%rd13];
\t{counting}
\tst.global.u32 \t[%rd13], %r8;
\tsetp.ge.u32 \t%p2, %r7, LIMIT;
\t@%p2 bra \t$L__BB0_2;
$L__work:
\tcvta.to.global.u64 \t%rd4, %rd1;
{work}"""


@settings(max_examples=12, deadline=None)
@given(limit=st.integers(1, 1 << 31), step=st.sampled_from(["add.s32 \t%r8, %r7, 1;", "xor.b32 \t%r8, %r7, 1;",
                                                               "mul.lo.s32 \t%r8, %r7, 3;"]),
       seed=st.integers(1, 1000))
def test_a_kernel_whose_module_state_moves_after_its_first_launch_fails_emulation(limit: int, step: str,
                                                                                 seed: int) -> None:
    """Whatever launch it breaks at, a kernel that counts its launches in a module variable (or
    moves it any other way) fails: from the second case on, a launch must leave the module's
    variables as it found them. Where it breaks within the cases emulated, its wrong outputs fail
    it first; past them (the attacks first_launches and trap_after_n broke at the third launch on
    the same buffers, which emulation never made), the moved variable does."""
    ptx = _stateful_vector_add(step).replace("LIMIT", str(limit))
    if step.startswith("mul"):  # a variable that starts at zero stays zero: start it at one
        ptx = ptx.replace(".b8 g_state[16384];", ".u32 g_state[4096] = {1};")
    gate = emulated.emulation_gate(load_spec(VECTOR_ADD), ptx, (seed, seed + 1))
    assert gate.status == "failed", gate
    assert "elements wrong" in gate.summary or "left module variable g_state other than it found it" in gate.summary


def test_a_module_variable_may_be_set_for_good_at_the_first_launch_only() -> None:
    """A one-time flag (thread 0 stores 1 where the first launch found 0) starts every later launch
    from the state a checked one started from: equivalent, as the plain kernel is. A flag a
    thread, which a launch over more elements than the first one's sets anew, is not: the launch
    that sets it starts from a state no checked launch did, and later ones from another."""
    spec = load_spec(VECTOR_ADD)
    once = _stateful_vector_add("mov.u32 \t%r8, 1;", threads=1).replace("LIMIT", str(1 << 31))
    assert emulated.emulation_gate(spec, once, (7, 8)).status == "passed"
    each = _stateful_vector_add("mov.u32 \t%r8, 1;").replace("LIMIT", str(1 << 31))
    gate = emulated.emulation_gate(spec, each, (7, 8))
    assert gate.status == "failed" and "left module variable g_state" in gate.summary, gate
