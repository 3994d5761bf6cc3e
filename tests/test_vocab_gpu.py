"""The spec vocabulary for real kernels on a real GPU: the hot loop of tests/data/vocab (three
kernels compiled by nvcc: padded input and output, a derived input, a [values] entry, an output
accumulated with atomics and declared nondeterministic, a zero step) checked and timed as a whole;
a port that fuses two of its kernels; a kernel that writes the padding and one that skips work,
each failing for its own reason; and the worker's padding and held-output arithmetic in CuPy.

tests/test_vocab.py runs the same gate on the CPU, with the kernels played in NumPy.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import as_nvcc_of

from porter.gate.check import CheckOptions, run_check
from porter.gate.spec import load_spec

pytestmark = pytest.mark.gpu

VOCAB = Path(__file__).resolve().parent / "data" / "vocab"


def check(kernel: str, runner, toolchain, spec: Path = VOCAB / "porter.toml", **options):
    path = as_nvcc_of(toolchain, VOCAB / kernel, Path(tempfile.gettempdir()) / f"porter-vocab-{os.getpid()}")
    return run_check(path, load_spec(spec), CheckOptions(**options), toolchain=toolchain, runner=runner)


def test_the_hot_loop_of_three_kernels_passes_checked_and_timed_as_a_whole(runner, toolchain):
    verdict = check("pipeline.ptx", runner, toolchain)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith("3 kernels in sequence")
    timing = verdict.gate("timing")
    assert timing.status == "passed", timing  # S (atomics) held to the reference on every timed launch
    assert verdict.timings[0].median_ms > 0


def test_the_hot_loop_is_clean_under_every_sanitizer(runner, toolchain):
    verdict = check("pipeline.ptx", runner, toolchain, timing=False, sanitize=True)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("sanitize").status == "passed", verdict.gate("sanitize")


def test_a_port_that_fuses_two_of_the_kernels_passes(runner, toolchain):
    verdict = check("pipeline_fused.ptx", runner, toolchain)
    assert verdict.status == "passed", verdict.reason
    assert verdict.gate("interface").summary.startswith("2 kernels in sequence (rn_fused, rn_colsum)")


def test_a_kernel_that_writes_the_padding_fails(runner, toolchain):
    verdict = check("pipeline_writes_padding.ptx", runner, toolchain, timing=False)
    assert verdict.status == "failed"
    assert "out-of-bounds write: Y:" in verdict.reason and "of its padding changed" in verdict.reason


def test_an_atomics_output_that_skips_work_fails(runner, toolchain):
    verdict = check("pipeline_skips_work.ptx", runner, toolchain, timing=False)
    assert verdict.status == "failed"
    assert "S:" in verdict.reason and "elements wrong" in verdict.reason, verdict.reason


def test_the_padding_and_the_held_outputs_in_cupy():
    import cupy as cp

    from porter.gate.dtypes import DTYPES
    from porter.gate.runner.hold import HeldOutput, decoder, elements
    from porter.gate.runner.padding import Padding

    layout = Padding.of((3, 6), (3, 4), 4)
    pattern = cp.arange(72, dtype=cp.uint8)
    whole = layout.image(cp, cp.full(48, 0xEE, dtype=cp.uint8), pattern)
    assert layout.changes(cp, whole, pattern, "Y", 6) == "" and bool((layout.view(cp, whole) == 0xEE).all())
    whole.reshape(3, 24)[2, 17] ^= 1
    assert "row 2, column 4" in layout.changes(cp, whole, pattern, "Y", 6)

    ref = np.asarray([0.0, 1.0, -2.0, np.inf, np.nan, 5.0])  # on the host: uploaded for each comparison
    held = HeldOutput(ref, 1e-4, 1e-3)
    assert int(held.outside(cp, cp.asarray([1e-5, 1.0001, -2.0, np.inf, np.nan, np.nan]))) == 1
    bf16 = np.array([1.5, -2.0, 3.0], dtype=DTYPES["bf16"].numpy)
    decoded = decoder(cp, DTYPES["bf16"], {})(elements(cp.asarray(bf16.view(np.uint8)), DTYPES["bf16"]))
    assert decoded.get().tolist() == [1.5, -2.0, 3.0]


def test_without_declared_nondeterminism_the_atomics_are_judged_bit_for_bit(runner, toolchain, tmp_path):
    """Informative about the H200 more than about porter: whether S's atomics differ between two
    runs there. Either way the verdict must not be 'passed' for the wrong reason."""
    folder = tmp_path / "vocab"
    shutil.copytree(VOCAB, folder)
    text = (folder / "porter.toml").read_text()
    (folder / "porter.toml").write_text(text.replace("deterministic = false                  #",
                                                     "deterministic = true  #", 1))
    kernel = as_nvcc_of(toolchain, folder / "pipeline.ptx", folder)
    verdict = run_check(kernel, load_spec(folder / "porter.toml"), CheckOptions(timing=False),
                        toolchain=toolchain, runner=runner)
    assert verdict.status in ("passed", "failed"), verdict.reason
    if verdict.status == "failed":
        assert "nondeterministic: S:" in verdict.reason, verdict.reason
