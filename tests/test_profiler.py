"""Parsers for Nsight Compute and compute-sanitizer output, held against recorded H200 output,
and the native-evidence judgement."""

from __future__ import annotations

from pathlib import Path

from porter.hotprofile import replace_profile_table, summarise
from porter.native import judge_native
from porter.profiler import opcode_bases, parse_details_csv, parse_sanitizer, parse_source_csv, sass_opcode

NCU = Path(__file__).resolve().parent / "data" / "ncu"


def test_source_counters_give_executed_hgmma_per_opcode() -> None:
    counts = parse_source_csv((NCU / "h200_wg_source.csv").read_text())
    assert counts["HGMMA.64x16x16.F32.BF16"] == 4  # one warpgroup, one HGMMA: 4 warp-level instructions
    assert opcode_bases(counts)["HGMMA"] == 4
    assert "NOP" not in counts  # never executed rows do not count


def test_sass_opcode_drops_predicates() -> None:
    assert sass_opcode("      @!P0 BRA 0x7fdb057a0130") == "BRA"
    assert sass_opcode("HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4], R24, UP0, gsb0 ;") == "HGMMA.64x16x16.F32.BF16"


def test_garbage_is_no_counts() -> None:
    assert parse_source_csv("==PROF== nothing here\n") == {}
    assert parse_details_csv("") == {}


DETAILS = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","usecond","66.05"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","Launch Statistics","Registers Per Thread","register/thread","16"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","Occupancy","Achieved Occupancy","%","87.5"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","ratio","6"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","ratio","2"
"0","1","python3","127.0.0.1","k","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0","Command line profiler metrics","sm__inst_executed_pipe_tensor_op_gmma.sum","inst","1,024"
'''


def test_details_page_and_profile_facts() -> None:
    metrics = parse_details_csv(DETAILS)
    assert metrics["Duration"] == ("usecond", 66.05)
    assert metrics["sm__inst_executed_pipe_tensor_op_gmma.sum"] == ("inst", 1024.0)  # thousands separator
    facts = summarise(metrics, flops=2 * 2**24, nbytes=12 * 2**24, peak_tflops=989.0, peak_tbps=4.8)
    assert facts["time_us"] == 66.05
    assert abs(facts["tbps"] - 12 * 2**24 / 66.05e-6 / 1e12) < 1e-3
    assert facts["registers"] == 16 and facts["achieved_occupancy_pct"] == 87.5
    assert facts["top_stalls"] == ["long_scoreboard 75%", "wait 25%"]


MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vector_add+0x1b0
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f0000000084 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0000000000 of size 132 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f2b4f] in libcuda.so.1
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========
========= ERROR SUMMARY: 2 errors
"""


def test_memcheck_finding_with_its_location() -> None:
    errors, findings = parse_sanitizer("memcheck", MEMCHECK)
    assert errors == 2
    first = findings[0]
    assert first.message == "Invalid __global__ write of size 4 bytes"
    assert (first.function, first.offset) == ("vector_add", 0x1B0)
    assert "block (1,0,0)" in first.detail and "out of bounds" in first.detail
    assert "Host Frame" not in first.detail


def test_clean_sanitizer_run() -> None:
    assert parse_sanitizer("synccheck", "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == (0, ())


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
