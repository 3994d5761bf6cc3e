"""Parsers for Nsight Compute and compute-sanitizer output, held against recorded H200 output,
and the native-evidence judgement."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.gate.hotspots import replace_profile_table, summarise
from porter.gate.native import judge_native, tensor_flops
from porter.gate.nsight import (
    SourceListing,
    SourcePageMismatch,
    executed_per_launch,
    opcode_bases,
    parse_details_csv,
    parse_sanitizer,
    parse_source_csv,
    parse_source_listings,
    profiled_kernels,
    sass_opcode,
)

NCU = Path(__file__).resolve().parent / "data" / "ncu"


def test_source_counters_give_executed_hgmma_per_opcode() -> None:
    counts = parse_source_csv((NCU / "h200_wg_source.csv").read_text())
    assert counts["HGMMA.64x16x16.F32.BF16"] == 4  # one warpgroup, one HGMMA: 4 warp-level instructions
    assert opcode_bases(counts)["HGMMA"] == 4
    assert "NOP" not in counts  # never executed rows do not count


def test_a_hot_loop_of_three_kernels_counts_each_launch_once() -> None:
    """ncu printed each of the three listings twice; summed as printed, the sm_90a backward's HGMMA
    did 280% of the spec's FLOPs. Counted once per launch it is the 7/5 its dq kernel's recomputed
    products give (recorded on the H200, B=4, H=16, S=4096, D=128)."""
    listings = parse_source_listings((NCU / "h200_attn_bwd_source.csv").read_text())
    kernels = profiled_kernels((NCU / "h200_attn_bwd_details.csv").read_text())
    assert kernels == ["attn_bwd_preprocess", "attn_bwd_dkdv", "attn_bwd_dq"]
    assert [listing.kernel for listing in listings] == [k for k in kernels for _ in range(2)]
    executed = executed_per_launch(listings, kernels)
    tiles = 4 * 16 * (4096 // 64) ** 2  # (key tile, query tile) pairs of every head
    assert executed["HGMMA.64x64x16.F32"] == tiles * 4 * (16 + 16)  # S and dP, in each kernel; 4 warps
    assert executed["HGMMA.64x128x16.F32"] == tiles * 4 * (8 + 4)  # dV, dK; dQ
    spec_flops = 10 * 4 * 16 * 4096 ** 2 * 128
    assert tensor_flops(executed)["HGMMA"] / spec_flops == pytest.approx(1.4)
    assert tensor_flops(parse_source_csv((NCU / "h200_attn_bwd_source.csv").read_text()))["HGMMA"] \
        / spec_flops == pytest.approx(2.8)  # the page as printed: what porter reported before


def test_source_listings_that_do_not_match_the_launches_are_not_guessed() -> None:
    a, b = {"HMMA.16816.F32": 8}, {"HMMA.16816.F32": 6}
    two_launches = [SourceListing("k", a), SourceListing("k", b)]
    assert executed_per_launch(two_launches, ["k", "k"]) == {"HMMA.16816.F32": 14}  # each launch its own
    with pytest.raises(SourcePageMismatch, match="not 2 copies"):
        executed_per_launch(two_launches, ["k"])  # one launch, two different listings
    with pytest.raises(SourcePageMismatch, match="3 source listings for 2 launch"):
        executed_per_launch([*two_launches, SourceListing("k", a)], ["k", "k"])
    with pytest.raises(SourcePageMismatch, match="did not profile: other"):
        executed_per_launch([SourceListing("k", a), SourceListing("other", b)], ["k"])
    with pytest.raises(SourcePageMismatch, match="names no profiled launch"):
        executed_per_launch([SourceListing("k", a)], [])


def test_the_details_of_a_hot_loop_add_its_counters_over_the_launches() -> None:
    text = ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
            '"0","pre","sm__inst_executed_pipe_tensor_op_gmma.sum","inst","0"\n'
            '"0","pre","Duration","us","3"\n'
            '"1","main","sm__inst_executed_pipe_tensor_op_gmma.sum","inst","1,024"\n'
            '"1","main","Duration","us","90"\n')
    assert parse_details_csv(text)["sm__inst_executed_pipe_tensor_op_gmma.sum"] == ("inst", 0.0)
    summed = parse_details_csv(text, summed=True)
    assert summed["sm__inst_executed_pipe_tensor_op_gmma.sum"] == ("inst", 1024.0)
    assert summed["Duration"] == ("us", 3.0)  # not a counter: the first launch's


def test_sass_opcode_drops_predicates() -> None:
    assert sass_opcode("      @!P0 BRA 0x7fdb057a0130") == "BRA"
    assert sass_opcode("HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4], R24, UP0, gsb0 ;") == "HGMMA.64x16x16.F32.BF16"


def test_garbage_is_no_counts() -> None:
    assert parse_source_csv("==PROF== nothing here\n") == {}
    assert parse_details_csv("") == {}


SANITIZER = Path(__file__).resolve().parent / "data" / "sanitizer"


def test_hgmma_executed_and_never_executed_from_recorded_h200_runs() -> None:
    ran = opcode_bases(parse_source_csv((NCU / "h200_wgmma_source.csv").read_text()))
    never = opcode_bases(parse_source_csv((NCU / "h200_wgmma_never_source.csv").read_text()))
    assert ran["HGMMA"] == 4  # 64x64x16: one HGMMA per consumer warp, one warpgroup
    assert never.get("HGMMA", 0) == 0 and never["EXIT"] > 0  # the kernel ran; its wgmma did not
    judged = judge_native("sm_90a", ("HGMMA",), {"HGMMA": 1}, never)
    assert judged.state == "present but never executed"


def test_details_page_and_profile_facts_from_a_recorded_h200_run() -> None:
    metrics = parse_details_csv((NCU / "h200_vector_add_details.csv").read_text())
    assert metrics["Duration"] == ("us", 2.02)
    assert metrics["Registers Per Thread"] == ("register/thread", 16.0)
    facts = summarise(metrics, flops=2.0, nbytes=12.0, peak_tflops=989.0, peak_tbps=4.8)
    assert facts["time_us"] == 2.02 and facts["registers"] == 16 and facts["achieved_occupancy_pct"] == 5.8
    assert facts["top_stalls"][0].startswith("imc_miss ")  # one tiny block: instruction-cache misses dominate
    wgmma = parse_details_csv((NCU / "h200_wgmma_details.csv").read_text())
    assert wgmma["sm__inst_executed_pipe_tensor_op_gmma.sum"] == ("inst", 4.0)


def test_thousands_separators_in_values() -> None:
    text = ('"ID","Metric Name","Metric Unit","Metric Value"\n'
            '"0","sm__inst_executed_pipe_tensor_op_gmma.sum","inst","1,024"\n')
    assert parse_details_csv(text)["sm__inst_executed_pipe_tensor_op_gmma.sum"] == ("inst", 1024.0)


def test_memcheck_finding_with_its_location() -> None:
    errors, findings = parse_sanitizer("memcheck", (SANITIZER / "h200_oob_memcheck.txt").read_text())
    assert errors == 3
    (first,) = findings
    assert first.message == "Invalid __global__ read of size 4 bytes"  # i <= n reads x[n] before writing out[n]
    assert (first.function, first.offset) == ("vector_add", 0xE0)
    assert "out of bounds" in first.detail and "Host Frame" not in first.detail


def test_racecheck_hazard() -> None:
    errors, findings = parse_sanitizer("racecheck", (SANITIZER / "h200_smem_race_racecheck.txt").read_text())
    assert errors == 1
    assert findings[0].message.startswith("Race reported between Write access at vector_add+0x160")


def test_clean_sanitizer_run() -> None:
    assert parse_sanitizer("synccheck", (SANITIZER / "h200_clean_synccheck.txt").read_text()) == (0, ())


def test_native_states() -> None:
    hg = ("HGMMA", "QGMMA")
    assert judge_native("sm_90a", hg, {"HGMMA": 0}, {"HGMMA": 0}).state == "absent"
    assert judge_native("sm_90a", hg, {"HGMMA": 2}, {"HGMMA": 64}).state == "executed"
    never = judge_native("sm_90a", hg, {"HGMMA": 2}, {"LDG": 10})
    assert never.state == "present but never executed" and "branch" in never.summary
    unmeasured = judge_native("sm_90a", hg, {"HGMMA": 2}, None, not_measured_reason="ncu not found")
    assert unmeasured.state == "not measured" and "ncu not found" in unmeasured.summary


def test_profile_table_is_replaced_and_the_rest_kept() -> None:
    spec = '[kernel]\nentry = "k"\n\n[profile]\ngpu = "old"\n\n[[sweep]]\nn = 1\n'
    out = replace_profile_table(spec, {"gpu": "NVIDIA H200", "time_us": 66.05, "top_stalls": ["wait 25%"]})
    assert 'gpu = "old"' not in out and "[[sweep]]\nn = 1" in out
    assert out.endswith('[profile]\ngpu = "NVIDIA H200"\ntime_us = 66.05\ntop_stalls = ["wait 25%"]\n')
