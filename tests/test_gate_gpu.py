"""The gate on a real GPU: every example passes, every broken kernel fails for the right reason,
and the runner keeps working after each crash or hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.spec import load_spec
from porter.gate.verdict import size_label

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

BROKEN = ROOT / "tests" / "data" / "broken"
VECTOR_ADD = EXAMPLES / "vector_add"
EXAMPLE_KERNELS = sorted(p for p in EXAMPLES.glob("*/kernel*.ptx") if (p.parent / "porter.toml").is_file())


def runs_here(kernel: Path, runner) -> None:
    """Skip a kernel whose target this GPU cannot run (the Blackwell GEMM on the H200); sm_80 PTX
    runs here, assembled for the device."""
    from porter.ptx import read_ptx
    from porter.ptx.arch import ptx_runs_on

    target, device = read_ptx(kernel).arch, runner.start()
    if not ptx_runs_on(target, device.arch)[0]:
        pytest.skip(f"{kernel.name} targets {target}; this GPU is {device.arch}")


def check(kernel: Path, runner, toolchain, spec_dir: Path | None = None, **options):
    spec = load_spec((spec_dir or kernel.parent) / "porter.toml")
    return run_check(kernel, spec, CheckOptions(**options), toolchain=toolchain, runner=runner)


@pytest.mark.parametrize("kernel", EXAMPLE_KERNELS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_passes_against_its_reference(kernel, runner, toolchain):
    runs_here(kernel, runner)
    verdict = check(kernel, runner, toolchain)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("equivalence").status == "passed"
    timing = verdict.gate("timing")
    assert timing is not None and timing.status == "passed", timing
    assert verdict.timings[0].median_ms > 0


@pytest.mark.parametrize("kernel", EXAMPLE_KERNELS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_passes_against_its_source(kernel, runner, toolchain):
    runs_here(kernel, runner)
    verdict = check(kernel, runner, toolchain, against=kernel)
    assert verdict.status == "passed", verdict.reason
    # The same kernel timed against itself in one interleaved run: the ratio must be near 1.
    assert verdict.speedup_vs_source is not None
    assert 0.9 < verdict.speedup_vs_source < 1.1


BROKEN_CASES = {
    "partial": "never written",
    "oob": "past its end",
    # Inputs are handed over read-only: the write faults, and the fault names the read-only mapping.
    "writes_input": "read-only",
    "hang": "timeout",
    "illegal": "illegal",
    "constant": "constant",
    "race": "nondeterministic",
    "reads_unwritten": "nan",
    "ragged": "n=33",
}


@pytest.mark.parametrize("variant", sorted(BROKEN_CASES))
def test_broken_kernel_fails_for_the_right_reason(variant, runner, toolchain):
    options = {"case_timeout_s": 10.0} if variant == "hang" else {}
    verdict = check(BROKEN / f"{variant}.ptx", runner, toolchain, spec_dir=VECTOR_ADD, **options)
    assert verdict.status == "failed", verdict.reason
    evidence = json.dumps([verdict.reason, [g.details for g in verdict.gates],
                           [(c.reason, [o.summary for o in c.outputs]) for c in verdict.cases]]).lower()
    assert BROKEN_CASES[variant].lower() in evidence, evidence[:2000]
    # After each broken kernel, a good one still checks: the worker survived or was restarted.
    good = check(VECTOR_ADD / "kernel.ptx", runner, toolchain, timing=False)
    assert good.status == "passed", good.reason


def test_ragged_kernel_passes_aligned_sizes(runner, toolchain):
    verdict = check(BROKEN / "ragged.ptx", runner, toolchain, spec_dir=VECTOR_ADD, timing=False)
    by_n = {c.sizes["n"]: c.status for c in verdict.cases}
    assert by_n[1048576] == "passed" and by_n[33] == "failed"


def test_record_then_check_against_golden(tmp_path, runner, toolchain):
    from porter.gate.check import runnable_cubin
    from porter.gate.golden import record
    from porter.ptx import read_ptx

    spec = load_spec(VECTOR_ADD / "porter.toml")
    kernel = VECTOR_ADD / "kernel.ptx"
    device = runner.start()
    cubin, _ = runnable_cubin(read_ptx(kernel), None, device, toolchain, kernel.name)
    manifest = record(kernel, spec, tmp_path / "golden", seeds=(0, 1), runner=runner, cubin=cubin,
                      device=device.describe())
    # The plan a check runs: the sweep x seeds, the timed [sizes], the unannounced and large size sets, the wide case.
    assert [(c["sizes"], c["seed"]) for c in manifest["cases"]][: 2 * len(spec.size_sets())] == [
        (s, seed) for s in spec.size_sets() for seed in (0, 1)]
    assert {c["values"] for c in manifest["cases"]} == {"", "wide"}
    assert (spec.default_sizes(), 0) in [(c["sizes"], c["seed"]) for c in manifest["cases"]]
    with pytest.raises(InputError, match="itself"):  # the source's own outputs are no reference for it
        check(kernel, runner, toolchain, golden=tmp_path / "golden", timing=False)
    copy = tmp_path / "kernel.ptx"  # the same kernel, another file: the hash check is a tripwire, not a proof
    copy.write_text(kernel.read_text() + "\n// a copy\n")
    good = check(copy, runner, toolchain, spec_dir=VECTOR_ADD, golden=tmp_path / "golden", timing=False)
    assert good.status == "passed", good.reason
    assert any("replayable" in w for w in good.warnings)
    bad = check(BROKEN / "constant.ptx", runner, toolchain, spec_dir=VECTOR_ADD, golden=tmp_path / "golden",
                timing=False)
    assert bad.status == "failed"


def test_the_blackwell_gemm_is_not_run_here_and_says_why(runner, toolchain):
    verdict = check(EXAMPLES / "gemm_bf16" / "kernel_sm100a.ptx", runner, toolchain, native=True)
    assert verdict.status == "not run"
    assert verdict.gate("assemble").status == "passed" and verdict.signature_sass.get("UTCHMMA", 0) > 0
    assert "needs a sm_100a gpu" in verdict.gate("equivalence").summary.lower()
    assert verdict.native is not None and verdict.native.state == "not measured"


def test_a_target_absent_here_is_not_run_never_passed(runner, toolchain):
    kernel = EXAMPLES / "gemm_bf16" / "kernel_sm80.ptx"
    verdict = check(kernel, runner, toolchain, arch="sm_100a")
    assert verdict.status == "not run"
    assert verdict.gate("assemble").status == "passed"
    assert "needs a sm_100a gpu" in verdict.gate("equivalence").summary.lower()


NATIVE = ROOT / "tests" / "data" / "native"


def test_wgmma_kernel_reports_hgmma_executed(runner, toolchain):
    verdict = check(NATIVE / "wgmma.ptx", runner, toolchain, native=True, timing=False)
    assert verdict.status == "passed", verdict.reason
    assert verdict.native is not None and verdict.native.state == "executed", verdict.native
    assert verdict.native.executed_counts.get("HGMMA", 0) > 0


def test_wgmma_behind_a_never_taken_branch_is_present_but_never_executed(runner, toolchain):
    verdict = check(NATIVE / "wgmma_never.ptx", runner, toolchain, native=True, timing=False)
    assert verdict.native is not None
    assert verdict.native.state == "present but never executed", verdict.native
    assert verdict.gate("native").status == "failed"
    assert "branch" in verdict.native.summary


def test_hmma_only_kernel_is_absent_against_sm90a(runner, toolchain):
    kernel = EXAMPLES / "gemm_bf16" / "kernel_sm80.ptx"
    verdict = check(kernel, runner, toolchain, arch="sm_90a", native=True, timing=False)
    assert verdict.gate("equivalence").status == "passed"  # correct, just not a Hopper port
    assert verdict.native is not None and verdict.native.state == "absent"
    assert verdict.status == "failed"


def test_sanitizers_catch_a_planted_oob_write_and_a_shared_memory_race(runner, toolchain):
    oob = check(BROKEN / "oob.ptx", runner, toolchain, spec_dir=VECTOR_ADD, sanitize=True, timing=False)
    memcheck = next(r for r in oob.sanitizer if r.tool == "memcheck")
    assert memcheck.ran and memcheck.errors > 0, memcheck
    # i <= n reads x[n] first: memcheck reports that out-of-bounds read, at its SASS offset.
    assert any("Invalid __global__" in f.message and f.function == "vector_add" and f.sass for f in memcheck.findings)
    race = check(BROKEN / "smem_race.ptx", runner, toolchain, spec_dir=VECTOR_ADD, sanitize=True, timing=False)
    # The race may or may not change a checked run's result (shared memory holds random words, new
    # for every launch, and each case runs from three initial states); where it does, the
    # equivalence gate says where. Either way racecheck sees it.
    equivalence = race.gate("equivalence")
    assert equivalence.status == "passed" or "elements wrong" in equivalence.summary, equivalence
    racecheck = next(r for r in race.sanitizer if r.tool == "racecheck")
    assert racecheck.ran and racecheck.errors > 0, racecheck
    assert race.status == "failed"
    clean = check(VECTOR_ADD / "kernel.ptx", runner, toolchain, sanitize=True, timing=False)
    assert clean.gate("sanitize").status == "passed", clean.gate("sanitize")


def test_a_candidate_with_its_own_entry_and_launch_runs_and_times_against_the_source(runner, toolchain, tmp_path):
    tile = EXAMPLES / "gemm_bt_tile"
    text = (tile / "kernel_sm90a.ptx").read_text().replace("gemm_bt_tile", "gemm_bt_tile_hopper")
    candidate = tmp_path / "ported.ptx"
    candidate.write_text('// porter-launch: entry = "gemm_bt_tile_hopper", grid = ["N // 64", "M // 64", 1], '
                         "block = [256, 1, 1]\n" + text)
    verdict = run_check(candidate, load_spec(tile / "porter.toml"),
                        CheckOptions(speed_baseline=tile / "kernel_sm80.ptx", native=True),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.entry == "gemm_bt_tile_hopper" and verdict.native.state == "executed"
    assert verdict.speedup_vs_source is not None  # the source ran under its own entry name


GEMM_SPEC = EXAMPLES / "gemm_bf16" / "porter.toml"


def test_the_tma_wgmma_gemm_passes_executes_hgmma_and_outruns_the_sm80_kernel(runner, toolchain):
    """The family's Hopper kernel takes two TMA descriptors that porter builds from its
    porter-param lines; it must match the sm_80 kernel over the ragged sweep and beat it."""
    verdict = run_check(EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx", load_spec(GEMM_SPEC),
                        CheckOptions(against=EXAMPLES / "gemm_bf16" / "kernel_sm80.ptx", native=True),
                        toolchain=toolchain, runner=runner)
    assert verdict.status == "passed", verdict.reason
    assert verdict.native is not None and verdict.native.executed_counts.get("HGMMA", 0) > 0
    # It outruns the sm_80 kernel at the spec's size (4096^3). The headline speed-up is the lowest
    # over that and a size set the check drew, one symbol large and the others small (M ~ 3.3M,
    # N = K = 8: a 128-wide wgmma tile does 16 times the work there), so it may be below 1.
    timings = [(t.name, t.sizes, round(t.median_ms, 4)) for t in verdict.timings]
    named = {t.name: t for t in verdict.timings if t.sizes == size_label(load_spec(GEMM_SPEC).default_sizes())}
    assert named["source"].median_ms / named["candidate"].median_ms > 1.2, timings
    assert verdict.speedup_vs_source is not None and verdict.speedup_vs_library is not None
    assert verdict.speedup_vs_source <= named["source"].median_ms / named["candidate"].median_ms * 1.0001, timings


def test_a_tensor_map_over_the_wrong_extents_is_caught_by_the_sweep(runner, toolchain, tmp_path):
    """A descriptor that covers K columns of B instead of N reads zeros past column K: the
    ragged cases (N != K) fail, which a square-only test would miss."""
    text = (EXAMPLES / "gemm_bf16" / "kernel_sm90a.ptx").read_text()
    wrong = text.replace('tensor = "B", dims = ["K", "N"]', 'tensor = "B", dims = ["K", "K"]')
    assert wrong != text
    candidate = tmp_path / "wrong_extents.ptx"
    candidate.write_text(wrong)
    verdict = run_check(candidate, load_spec(GEMM_SPEC), CheckOptions(timing=False), toolchain=toolchain,
                        runner=runner)
    assert verdict.status == "failed"
    failing = [c for c in verdict.cases if c.status == "failed"]
    assert failing and all(c.sizes["N"] != c.sizes["K"] for c in failing)
