"""The gate's defences against candidates that cheat, in the parts a CPU can hold: the plan of
cases, unpredictable inputs, the judgement of runs from different initial states, the hold of
timed launches to verified ones, the native-work share, module globals and golden manifests.

The GPU half (each attack kernel failing on the H200 for its own reason) is tests/test_attacks_gpu.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.equivalence import fault_reason, judge_case
from porter.gate.golden import check_golden, load_golden
from porter.gate.inputs import fresh_seed, make_args
from porter.gate.native import instruction_flops, judge_native
from porter.gate.nsight import opcode_bases, parse_source_csv
from porter.gate.plan import BUDGET_BYTES, Case, plan_cases, plan_seeds
from porter.gate.runner import WorkerFault
from porter.gate.runner.client import DeviceInfo
from porter.gate.runner.cubin import module_globals
from porter.gate.runner.protocol import (
    INITIAL_STATES,
    CaseJob,
    CaseReply,
    Job,
    RepeatJob,
    RepeatReply,
    Reply,
    TimeJob,
    TimeReply,
)
from porter.gate.runner.state import state_moves
from porter.gate.spec import load_spec
from porter.gate.timing import drawn_timed_sizes, timed_outputs_problems

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"
GEMM = ROOT / "examples" / "gemm_bf16"


def spec_with(tmp_path: Path, example: Path, old: str, new: str):
    """A copy of an example's folder whose porter.toml has ``old`` replaced by ``new``."""
    folder = tmp_path / example.name
    shutil.copytree(example, folder)
    text = (folder / "porter.toml").read_text()
    assert old in text
    (folder / "porter.toml").write_text(text.replace(old, new, 1))
    return folder


# --- unpredictable inputs --------------------------------------------------------------------

def test_fresh_seeds_differ_and_given_seeds_are_kept() -> None:
    assert plan_seeds((5, 6)) == (5, 6)
    a, b = plan_seeds(), plan_seeds()
    assert a != b and len(a) == 2 and a[1] == a[0] + 1
    assert fresh_seed() != fresh_seed()


def test_inputs_at_one_size_are_no_prefix_of_the_inputs_at_another() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    small, large = make_args(spec, {"n": 33}, 7), make_args(spec, {"n": 1000}, 7)
    assert not np.array_equal(small["x"], large["x"][:33])
    again = make_args(spec, {"n": 33}, 7)
    assert np.array_equal(small["x"], again["x"]) and small["alpha"] == again["alpha"]


def test_a_ranged_scalar_is_drawn_per_case_and_rounded_as_the_kernel_gets_it() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    alphas = {make_args(spec, {"n": 33}, seed)["alpha"] for seed in range(20)}
    assert len(alphas) == 20 and all(-2.0 <= a <= 2.0 for a in alphas)
    assert all(float(np.float32(a)) == a for a in alphas)  # the f32 the kernel receives, not a float64


def test_the_wide_value_case_widens_float_fills(tmp_path: Path) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    wide = spec.value_case("wide")
    sizes = spec.value_case_sizes(wide)
    bulk = [np.sort(np.abs(make_args(spec, sizes, seed, "wide")["x"]))[:-8] for seed in range(6)]  # less the mixture
    assert all(x.max() <= 4.0 for x in bulk) and any(x.max() > 2.0 for x in bulk)  # the default fill: [-1, 1]
    assert spec.fill_bounds("x", sizes, values="wide") == (-4.0, 4.0)
    off = load_spec(spec_with(tmp_path, VECTOR_ADD, "[[params]]", "[inputs]\nwide = 1\n\n[[params]]") / "porter.toml")
    assert [c.name for c in off.value_cases()] == []


def test_spec_value_cases_and_ranges_are_checked(tmp_path: Path) -> None:
    folder = spec_with(tmp_path, VECTOR_ADD, "[[params]]", '[[inputs.cases]]\nname = "big"\nfill = { x = "uniform(-1000, 1000)" }\n'
                       'at = { n = 4097 }\natol_scale = 1000\n\n[[params]]')
    spec = load_spec(folder / "porter.toml")
    assert [c.name for c in spec.value_cases()] == ["big", "wide"]
    assert spec.value_case_sizes(spec.value_case("big")) == {"n": 4097}
    bad = spec_with(tmp_path / "b", VECTOR_ADD, "[[params]]", '[[inputs.cases]]\nname = "big"\nfill = { out = "uniform(0, 1)" }\n\n[[params]]')
    with pytest.raises(InputError, match=r"inputs.cases\[0\].fill.out: not an input buffer"):
        load_spec(bad / "porter.toml")
    both = spec_with(tmp_path / "c", VECTOR_ADD, "range = [-2.0, 2.0]", "range = [-2.0, 2.0]\nvalue = 1")
    with pytest.raises(InputError, match="not both"):
        load_spec(both / "porter.toml")
    empty = spec_with(tmp_path / "d", VECTOR_ADD, "range = [-2.0, 2.0]", "range = [2.0, 2.0]")
    with pytest.raises(InputError, match=r"params\[3\].range: needs lo < hi"):
        load_spec(empty / "porter.toml")


# --- the plan: what is timed or profiled is verified -------------------------------------------

def test_the_plan_checks_the_timed_and_profiled_sizes_and_the_value_cases() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    timed = [spec.default_sizes(), spec.timing_sizes({"n": 4096})]
    plan = plan_cases(spec, (11, 12), timed=timed, profiled=spec.default_sizes())
    sweep = [c for c in plan if c.why == "sweep"]
    assert len(sweep) == 2 * len(spec.size_sets())
    # every timed size set under every seed: timing rotates through the input sets checked there
    assert [(c.sizes, c.seed) for c in plan if c.why == "timed"] == [
        ({"n": 16777216}, 11), ({"n": 16777216}, 12), ({"n": 4096}, 11), ({"n": 4096}, 12)]
    assert not [c for c in plan if c.why == "profiled"]  # the default sizes are already planned
    assert [c.values for c in plan if c.values] == ["wide"]
    assert len({c.key() for c in plan}) == len(plan)


# --- judging runs from each initial state -------------------------------------------------------

def _reply(spec, case: Case, outs: list[np.ndarray], *, guards=(), modified=()) -> CaseReply:
    args = make_args(spec, case.sizes, case.seed, case.values)
    expected = {"out": float(args["alpha"]) * args["x"].astype(np.float64) + args["y"].astype(np.float64)}
    return CaseReply(outputs=[None if o is None else {"out": o} for o in outs], initials=list(INITIAL_STATES[: len(outs)]),
                     reference=expected, guards=list(guards), modified=list(modified))


def _right(spec, case: Case) -> np.ndarray:
    args = make_args(spec, case.sizes, case.seed)
    return (np.float32(args["alpha"]) * args["x"] + args["y"]).astype(np.float32)


def test_every_case_runs_from_poison_from_random_values_and_from_zeros() -> None:
    """What a caller's memory most often holds before a kernel writes it: garbage that is NaN,
    garbage that is finite, and zeros (memset, torch.zeros)."""
    assert INITIAL_STATES == ("poison", "random", "zeros")
    assert CaseJob(cubin=b"", entry="k", spec_path="s", sizes={}, seed=1, reference=None).initials == INITIAL_STATES  # type: ignore[arg-type]


def test_outputs_right_unless_they_start_as_zeros_fail_as_initial_state_dependence() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3)
    right = _right(spec, case)
    half = right.copy()
    half[500:] = 0.0  # writes only where the output is not zero yet: from zeros, half stays 0
    reply = _reply(spec, case, [right, None, half])
    result = judge_case(spec, case, reply)
    assert result.status == "failed"
    # (elements whose reference is not finite, from the inputs' special values, are left out)
    wrong = int(np.count_nonzero(np.isfinite(reply.reference["out"][500:])))
    assert wrong > 490
    assert f"out: {wrong} of 1000 elements wrong when the output starts as zeros but right when it starts as NaN poison" \
        in result.reason, result.reason


def test_outputs_right_from_poison_but_wrong_from_random_values_fail_as_initial_state_dependence() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3)
    right = _right(spec, case)
    skipped = np.random.default_rng(0).uniform(-1, 1, 1000).astype(np.float32)  # kept its random start
    result = judge_case(spec, case, _reply(spec, case, [right, skipped]))
    assert result.status == "failed"
    assert "depends on the output's initial contents" in result.reason
    assert "random finite values" in result.reason


def test_identical_runs_pass_and_differing_correct_runs_are_a_race() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3)
    right = _right(spec, case)
    assert judge_case(spec, case, _reply(spec, case, [right, right.copy()])).status == "passed"
    jitter = right.copy()
    jitter[5] = np.nextafter(jitter[5], np.float32(9))
    raced = judge_case(spec, case, _reply(spec, case, [right, jitter]))
    assert raced.status == "failed" and "nondeterministic" in raced.reason


def test_a_wide_case_whose_reference_overflows_is_not_judged_rather_than_failed() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3, "wide", why="wide")
    reply = replace(_reply(spec, case, [np.zeros(1000, np.float32)]), reference={"out": np.full(1000, 1e39)})
    result = judge_case(spec, case, reply)
    assert result.status == "not run" and "not finite" in result.reason


def test_elements_whose_reference_is_not_finite_are_left_out_and_the_rest_judged() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3)
    right = _right(spec, case)
    reference = _reply(spec, case, [right]).reference
    assert reference is not None
    reference["out"][:10] = [np.nan, np.inf, -np.inf, 1e39, -1e39, np.nan, 1e300, np.inf, np.nan, 5e38]
    garbage = right.copy()
    garbage[:10] = 7.0  # anything where the reference says nothing
    result = judge_case(spec, case, replace(_reply(spec, case, [garbage]), reference=reference))
    inside = int(np.count_nonzero(np.abs(reference["out"]) <= np.finfo(np.float32).max))
    assert inside <= 990 and result.status == "passed" and result.outputs[0].judged == inside
    garbage[500] = 7.0  # a judged element wrong fails the case
    failed = judge_case(spec, case, replace(_reply(spec, case, [garbage]), reference=reference))
    assert failed.status == "failed" and failed.outputs[0].mismatches == 1


# --- timed launches are held to the verified ones ------------------------------------------------

def test_timed_launches_must_reproduce_the_verified_digests() -> None:
    key = Case({"n": 8}, 1).key()
    reply = TimeReply(names=["candidate", "library"], times_ms=[[1.0] * 4] * 2, digests=[[7, 7, 7, 9], None],
                      outputs_per_launch=1, guards=[[], []], seeds=[1])
    repeat = RepeatReply(digests=[7], guards=[])
    problems = timed_outputs_problems(reply, repeat, [key], {key: [7]}, "n=8")
    assert len(problems) == 1 and "1 of 4 timed launches" in problems[0] and "launch 4" in problems[0]
    assert timed_outputs_problems(replace(reply, digests=[[7] * 4, None]), repeat, [key], {key: [7]}, "n=8") == []
    guarded = replace(reply, digests=[[7] * 4, None], guards=[["out: 4 bytes written past its end"], []])
    assert "during the timed launches" in timed_outputs_problems(guarded, repeat, [key], {key: [7]}, "n=8")[0]
    # a write out of bounds in the launches in a row counts as one in the timed launches
    wild = RepeatReply(digests=[7], guards=["out: 1 bytes written past its end"])
    assert "out: 1 bytes written" in timed_outputs_problems(replace(reply, digests=[[7] * 4, None]), wild, [key],
                                                             {key: [7]}, "n=8")[0]
    assert "could not be held" in timed_outputs_problems(reply, repeat, [key], {}, "n=8")[0]


def test_each_timed_launch_is_held_to_the_input_set_it_ran_on() -> None:
    """Launch r ran on set r % 2: a kernel that gives set 0's answer on set 1 (it cached it) fails."""
    first, second = Case({"n": 8}, 1).key(), Case({"n": 8}, 2).key()
    verified = {first: [7], second: [5]}
    rotating = TimeReply(names=["candidate"], times_ms=[[1.0] * 4], digests=[[7, 5, 7, 5]], outputs_per_launch=1,
                         guards=[[]], seeds=[1, 2])
    repeat = RepeatReply(digests=[7, 7], guards=[])
    assert timed_outputs_problems(rotating, repeat, [first, second], verified, "n=8") == []
    cached = replace(rotating, digests=[[7, 7, 7, 7]])
    problems = timed_outputs_problems(cached, repeat, [first, second], verified, "n=8")
    assert len(problems) == 1 and "2 of 4 timed launches" in problems[0] and "launch 2" in problems[0]
    # the launches in a row run on the first set only
    assert "repeated launches" in timed_outputs_problems(rotating, RepeatReply(digests=[7, 5], guards=[]),
                                                          [first, second], verified, "n=8")[0]


class ScriptedRunner:
    """An in-process stand-in for the GPU worker: 'runs' vector_add by computing the right answer
    (or a scripted wrong one) so that the gate's own logic can be driven on a CPU."""

    def __init__(self, *, time_reply=None, time_fault: str = "", wrong_digest: bool = False,
                 wrong_repeat: bool = False) -> None:
        self.time_reply, self.time_fault, self.wrong_digest = time_reply, time_fault, wrong_digest
        self.wrong_repeat = wrong_repeat
        self.cases: list[CaseJob] = []
        self.info: DeviceInfo | None = None  # a GpuRunner's: known once started (the check starts it)
        self.restarts = 0

    def start(self) -> DeviceInfo:
        return DeviceInfo("NVIDIA H200", "sm_90", "9.0", 132, 60 << 20, 227 << 10, "13.0", "13.0", "14.2")

    def close(self) -> None:
        pass

    def call(self, job: Job, timeout_s: float) -> Reply:
        spec = load_spec(Path(job.spec_path))
        if isinstance(job, CaseJob):
            self.cases.append(job)
            case = Case(job.sizes, job.seed, job.values)
            reply = _reply(spec, case, [_right(spec, case)] * 2)
            first = reply.outputs[0]
            assert first is not None
            return replace(reply, reference={"out": first["out"].astype(np.float64)}, digests=[42])
        if isinstance(job, RepeatJob):
            return RepeatReply(digests=[41 if self.wrong_repeat and i == 3 else 42 for i in range(job.launches)],
                               guards=[])
        assert isinstance(job, TimeJob)
        if self.time_fault:
            raise WorkerFault(self.time_fault, kind="fault")
        names = [c.name for c in job.contenders]
        times = self.time_reply or [[1.0] * 10 for _ in names]
        digests = [[41 if self.wrong_digest and i == 9 else 42 for i in range(10)] if c.kind == "kernel" else None
                   for c in job.contenders]
        return TimeReply(names=names, times_ms=times, digests=digests, outputs_per_launch=1,
                         guards=[[] for _ in names], seeds=list(job.seeds))


def _check(toolchain, runner, **options):
    spec = load_spec(VECTOR_ADD / "porter.toml")
    return run_check(VECTOR_ADD / "kernel.ptx", spec, CheckOptions(**options), toolchain=toolchain, runner=runner)


def test_the_check_verifies_its_timed_size_and_records_its_seeds(toolchain) -> None:
    runner = ScriptedRunner()
    verdict = _check(toolchain, runner, time_at=({"n": 5000},))
    assert verdict.status == "passed", verdict.reason
    checked = {(tuple(j.sizes.items()), j.values) for j in runner.cases}
    assert ((("n", 5000),), "") in checked and any(values == "wide" for _, values in checked)
    assert len(verdict.seeds) == 2 and {j.seed for j in runner.cases} == set(verdict.seeds)
    again = _check(toolchain, ScriptedRunner(), seeds=verdict.seeds, timing=False)
    assert again.seeds == verdict.seeds


class TunedRunner(ScriptedRunner):
    """The candidate as fast as the source at [sizes] and ten times slower elsewhere; records the timing jobs."""

    def __init__(self) -> None:
        super().__init__()
        self.timed: list[TimeJob] = []

    def call(self, job: Job, timeout_s: float) -> Reply:
        if isinstance(job, TimeJob):
            self.timed.append(job)
            slow = 1.0 if job.sizes == load_spec(VECTOR_ADD / "porter.toml").default_sizes() else 10.0
            self.time_reply = [[slow if c.name == "candidate" else 1.0] * 10 for c in job.contenders]
        return super().call(job, timeout_s)


def test_speed_is_also_measured_at_a_drawn_size_and_the_headline_is_the_lowest(toolchain) -> None:
    runner = TunedRunner()
    spec = load_spec(VECTOR_ADD / "porter.toml")
    verdict = run_check(VECTOR_ADD / "kernel.ptx", spec, CheckOptions(against=VECTOR_ADD / "kernel.ptx"),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    named, drawn = runner.timed
    assert named.sizes == spec.default_sizes() and named.seeds == tuple(verdict.seeds)  # rotates through both
    # One checked seed there: its set is timed twice, flush and drawn, as its checked runs lay.
    assert drawn.sizes != spec.default_sizes() and drawn.seeds == (verdict.seeds[0], verdict.seeds[0])
    assert drawn.sizes in [c.sizes for c in verdict.cases if c.seed == verdict.seeds[0]]  # it was checked
    assert len({t.sizes for t in verdict.timings}) == 2
    assert verdict.speedup_vs_source == pytest.approx(0.1)  # the lower of 1.0 and 0.1
    assert "lowest" in " ".join(verdict.gate("timing").details)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**40))
def test_the_drawn_timed_size_is_the_timed_shape_at_a_size_the_check_drew_and_verified(seed: int) -> None:
    """Speed beside the timed size is measured at a size set of the same kind, drawn per check and
    checked first: every varied symbol between half its timed value and about the timed value,
    never the large case's one long symbol (there a library's split-K made an honest GEMM's
    headline speed-up 0.00x vs cuBLAS on the H100, 2026-12-05, and timing it took 2.4 s)."""
    for folder in ("vector_add", "gemm_bf16", "attention_fwd", "softmax", "gemm_bt_tile"):
        spec = load_spec(VECTOR_ADD.parent / folder / "porter.toml")
        timed = [spec.default_sizes()]
        plan = plan_cases(spec, (seed, seed + 1), timed=timed, thorough=True)
        drawn = drawn_timed_sizes(spec, plan, timed, seed)
        assert drawn is not None, folder
        assert drawn not in timed and drawn not in spec.size_sets()
        assert any(c.sizes == drawn and c.seed == seed and c.why == "timed-drawn" for c in plan)
        for name, value in timed[0].items():
            if isinstance(spec.sizes[name], int):
                assert value // 2 - spec.max_tile <= drawn[name] <= value + spec.max_tile, (folder, name, drawn)
        assert (spec.flops(drawn) or 0) <= 1.3 * (spec.flops(timed[0]) or 0), (folder, drawn)
        assert sum(spec.buffer_bytes(p, drawn) for p in spec.params if p.kind == "buffer") <= BUDGET_BYTES


def test_a_timing_run_that_faults_makes_the_verdict_not_passed(toolchain) -> None:
    verdict = _check(toolchain, ScriptedRunner(time_fault="CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"))
    assert verdict.status == "error"
    assert verdict.gate("timing").status == "error" and "LAUNCH_FAILED" in verdict.reason


def test_a_timed_launch_that_leaves_other_outputs_fails(toolchain) -> None:
    verdict = _check(toolchain, ScriptedRunner(wrong_digest=True))
    assert verdict.status == "failed"
    assert "did not do the verified work" in verdict.gate("timing").summary


def test_a_launch_in_a_row_that_leaves_other_outputs_fails_the_timing_gate(toolchain) -> None:
    """The launches in a row after the timing run are a job of their own (they share the GPU): one
    of them leaving other outputs (a kernel that counts its calls) still fails the check."""
    verdict = _check(toolchain, ScriptedRunner(wrong_repeat=True))
    assert verdict.status == "failed"
    assert "repeated launches (globals kept)" in verdict.gate("timing").summary


def test_faster_than_the_roofline_fails_unless_the_cost_is_approximate(toolchain, tmp_path) -> None:
    quick = [[1e-4] * 10]  # 16M elements in 0.1 us: far beyond any memory system
    verdict = _check(toolchain, ScriptedRunner(time_reply=quick))
    assert verdict.status == "failed" and "roofline" in verdict.gate("timing").summary
    folder = spec_with(tmp_path, VECTOR_ADD, 'bytes = "12*n"', 'bytes = "12*n"\napproximate = true')
    spec = load_spec(folder / "porter.toml")
    lenient = run_check(folder / "kernel.ptx", spec, CheckOptions(), toolchain=toolchain,
                        runner=ScriptedRunner(time_reply=quick))
    assert lenient.status == "passed" and "approximate" in lenient.gate("timing").details[0]


# --- native means the work runs there --------------------------------------------------------------

def test_instruction_flops_read_the_shape_off_the_opcode() -> None:
    assert instruction_flops("HGMMA.64x128x16.F32.BF16") == 2 * 64 * 128 * 16 / 4  # per warp of a warpgroup
    assert instruction_flops("HMMA.16816.F32.BF16") == 2 * 16 * 8 * 16
    assert instruction_flops("HMMA.1688.F32.TF32") == 2 * 16 * 8 * 8
    assert instruction_flops("IMMA.16832.S32.S8.S8") == 2 * 16 * 8 * 32
    assert instruction_flops("LDSM.16.M88.4") is None


def test_the_recorded_h200_wgmma_run_did_all_of_its_flops_on_hgmma() -> None:
    executed = parse_source_csv((ROOT / "tests" / "data" / "ncu" / "h200_wgmma_source.csv").read_text())
    evidence = judge_native("sm_90a", ("HGMMA",), {"HGMMA": 4}, opcode_bases(executed), executed_opcodes=executed,
                            spec_flops=2 * 64 * 64 * 16, required_share=0.9)  # that run's M=64, N=64, K=16
    assert evidence.state == "executed" and evidence.share == pytest.approx(1.0)


def test_a_token_wgmma_beside_mma_sync_math_is_a_minor_share() -> None:
    executed = {"HGMMA.64x64x16.F32.BF16": 4, "HMMA.16816.F32.BF16": 2 * 4096 * 4096 * 4096 // 4096}
    evidence = judge_native("sm_90a", ("HGMMA",), {"HGMMA": 4}, opcode_bases(executed), executed_opcodes=executed,
                            spec_flops=2 * 4096**3, required_share=0.9)
    assert evidence.state == "executed for a minor share"
    assert evidence.share < 1e-6 and "HMMA 100.0%" in evidence.summary
    unmeasurable = judge_native("sm_90a", ("HGMMA",), {"HGMMA": 4}, opcode_bases(executed), executed_opcodes=executed,
                                spec_flops=None, required_share=0.9)
    assert unmeasurable.state == "not measured" and "cost.flops" in unmeasurable.summary


# --- module globals --------------------------------------------------------------------------------

def test_module_globals_are_found_in_a_real_cubin(toolchain) -> None:
    ptx = """.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 launches;
.global .align 4 .b8 cache[4096] = {0, 0, 128, 63};
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, launches;
    atom.global.add.u32 %r1, [%rd2], 1;
    ld.global.u32 %r2, [cache];
    add.u32 %r1, %r1, %r2;
    cvta.to.global.u64 %rd1, %rd1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    result = toolchain.assemble(ptx, "sm_90")
    assert result.ok, result.log
    found = {g.name: g.size for g in module_globals(result.cubin)}
    assert found == {"launches": 4, "cache": 4096}
    assert module_globals(b"not an elf") == ()


# --- golden folders answer for their spec only --------------------------------------------------------

def test_a_golden_folder_with_no_cases_or_another_spec_is_refused(tmp_path: Path) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    folder = tmp_path / "golden"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"spec_sha256": "x", "cases": []}))
    with pytest.raises(InputError, match="holds no cases"):
        load_golden(folder)
    (folder / "case.npz").write_bytes(b"")
    (folder / "manifest.json").write_text(json.dumps({"spec_sha256": "0" * 16,
                                                      "cases": [{"sizes": {"n": 1}, "seed": 1, "file": "case.npz"}]}))
    with pytest.raises(InputError, match="older porter"):  # no digest of its cases: anything could be cut
        check_golden(load_golden(folder), spec)


def test_the_attack_family_golden_folders_are_refused() -> None:
    attacks = ROOT / "tests" / "data" / "attacks"
    spec = load_spec(VECTOR_ADD / "porter.toml")
    with pytest.raises(InputError, match="holds no cases"):
        load_golden(attacks / "golden_empty")
    other = attacks / "golden_other_spec"
    with pytest.raises(InputError, match=r"older porter|another spec"):
        check_golden(load_golden(other), spec)


# --- a size set the spec does not list -------------------------------------------------------------

def test_the_unannounced_size_set_stays_inside_the_contract_the_sweep_implies() -> None:
    from porter.gate.plan import unannounced_sizes

    spec = load_spec(GEMM / "porter.toml")
    listed = [sorted(s.items()) for s in spec.size_sets()]
    drawn = [unannounced_sizes(spec, seed) for seed in range(40)]
    assert all(d is not None and sorted(d.items()) not in listed for d in drawn)
    assert len({tuple(sorted(d.items())) for d in drawn}) > 30  # a new one almost every check
    for d in drawn:  # the kernel's contract: K and every leading dimension a multiple of 8
        assert d["K"] % 8 == 0 and d["lda"] % 8 == 0 and d["ldb"] % 8 == 0 and d["ldc"] % 8 == 0
        assert 1 <= d["M"] <= 4096 and d["lda"] >= d["K"] and d["ldb"] >= d["N"]  # the listed range, [sizes] included
    plan = plan_cases(spec, (5, 6))
    assert [c.why for c in plan].count("unannounced") == 1


def test_a_symbol_the_sweep_never_varies_keeps_its_value(tmp_path: Path) -> None:
    from porter.gate.plan import unannounced_sizes

    folder = spec_with(tmp_path, VECTOR_ADD, "[sizes]\nn = 16777216", "[sizes]\nn = 16777216\nd = 64")
    spec = load_spec(folder / "porter.toml")
    assert all(unannounced_sizes(spec, seed)["d"] == 64 for seed in range(10))
    off = spec_with(tmp_path / "off", VECTOR_ADD, "[[params]]", "[inputs]\nunannounced = false\n\n[[params]]")
    assert unannounced_sizes(load_spec(off / "porter.toml"), 1) is None


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "e4m3", "e5m2", "i32", "u8"])
def test_random_initial_outputs_are_finite_and_cover_every_magnitude(name: str) -> None:
    from porter.gate.dtypes import DTYPES
    from porter.gate.runner.memory import random_finite

    dtype = DTYPES[name]
    raw = random_finite(np, dtype, 4096 * dtype.itemsize, 7)  # NumPy stands in for CuPy: the same calls
    values = raw.view(dtype.numpy).astype(np.float64)
    assert np.isfinite(values).all()
    if dtype.is_float:
        magnitudes = np.abs(values[values != 0])
        assert magnitudes.max() > 1e3 * magnitudes.min()
    assert not np.array_equal(raw, random_finite(np, dtype, raw.size, 8))


def test_seed_options_reproduce_a_verdicts_seeds() -> None:
    from porter.cli.app import _seeds

    assert _seeds("", 5) == (5, 6) and _seeds("7,9") == (7, 9) and _seeds("") == ()
    for bad in (("1", 5), ("-1", None), ("x", None)):
        with pytest.raises(InputError):
            _seeds(*bad)


def test_an_illegal_address_says_what_the_fences_make_of_it() -> None:

    for name in ("cudaRuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
                 "CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"):
        assert "read-only" in fault_reason(WorkerFault(name, kind="fault"))
    assert "read-only" not in fault_reason(WorkerFault("CUDA_ERROR_LAUNCH_FAILED", kind="fault"))


# --- a module's state may not move after its first launch -----------------------------------------

@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 1), min_size=3, max_size=3), min_size=0, max_size=8))
def test_state_moves_names_each_variable_at_the_first_launch_that_moved_it(rows: list[list[int]]) -> None:
    """Whatever the flags (a row a launch, a column a variable), a variable is named exactly when
    some launch moved it, with the first such launch; a module without variables names none."""
    moved = state_moves(["a", "b", "c"], np.array(rows, dtype=np.uint64).reshape(-1))
    for k, name in enumerate("abc"):
        launches = [r for r, row in enumerate(rows) if row[k]]
        assert moved.get(name) == (launches[0] if launches else None)
    assert state_moves([], np.zeros(0, np.uint64)) == {}


def test_a_case_whose_launches_moved_a_module_variable_fails_with_it_named() -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    case = Case({"n": 1000}, 3)
    right = _right(spec, case)
    result = judge_case(spec, case, replace(_reply(spec, case, [right]), moved=["g_count"]))
    assert result.status == "failed"
    assert "left module variable g_count other than it found it: a kernel whose state moves" in result.reason
    assert judge_case(spec, case, _reply(spec, case, [right])).status == "passed"


def test_launches_in_a_row_that_moved_a_module_variable_fail_timing() -> None:
    """Their outputs all right (a counter that would break only at the hundredth launch): the moved
    variable alone fails them."""
    key = Case({"n": 8}, 1).key()
    reply = TimeReply(names=["candidate"], times_ms=[[1.0] * 4], digests=[[7] * 4], outputs_per_launch=1,
                      guards=[[]], seeds=[1])
    counting = RepeatReply(digests=[7] * 64, guards=[], moved=["g_count (moved by launch 2)"])
    problems = timed_outputs_problems(reply, counting, [key], {key: [7]}, "n=8")
    assert problems == ["the launches in a row at n=8: a launch left module variable g_count (moved by launch 2) "
                        "other than it found it: a kernel whose state moves from launch to launch can break at a "
                        "launch after the last one checked; only a module's first launch may set a variable for good"]
    assert timed_outputs_problems(reply, replace(counting, moved=[]), [key], {key: [7]}, "n=8") == []
