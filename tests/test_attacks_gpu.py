"""Every attack kernel in tests/data/attacks (written as an adversary would, against the gate as it
was) fails on a GPU for its own reason, and the worker keeps working after each.

The manifest says what each attack exploits; ``WHY`` below says which defence must catch it, as
words that must appear in the verdict. The ``porter ci`` attacks are CPU tests in test_ci.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porter._toml import tomllib
from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.spec import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
ATTACKS = ROOT / "tests" / "data" / "attacks"
MANIFEST = [a for a in tomllib.loads((ATTACKS / "manifest.toml").read_text())["attack"] if "ci" not in a["options"]]

# attack -> words the verdict must contain (the defence that catches it)
WHY = {
    "skip_if_written": "initial contents",
    "fmax_poison": "initial contents",
    "trap_if_written": "initial contents",
    # each counts launches in a __device__ variable keyed on its buffers, which moves at a case's second run
    # (until 2026-12-07: "repeated launches", "fault" and "illegal", each at the launch it broke at)
    "first_launches": "left module variable",
    "gemm_zero_inputs_when_timed": "left module variable",
    "idle_at_default": "n=16777216",
    "trap_after_n": "left module variable",
    "trap_after_many": "left module variable",  # would trap at the 100th launch
    "token_wgmma": "minor share",
    "fingerprint_seed": "elements wrong",
    "hardcoded_alpha": "elements wrong",
    "latch_alpha": "elements wrong",
    "clamp_inputs": "wide",
    "softmax_fixed_shift": "wide",
    "oob_write_past_guard": "out-of-bounds",
    "oob_read": "memcheck",
    "canary_write": "out-of-bounds",
    "input_scratch": "illegal",  # the input's mapping is read-only
    "detect_harness": "elements wrong",
    "listed_sizes_only": "elements wrong",
    "oob_unless_first_launch": "out-of-bounds",
    "fake_wgmma_at_default": "M=4096",
    "native_only_when_profiled": "behaves otherwise when profiled",
    "aligned_only": "elements wrong",
    "time_bomb": "reads %globaltimer",
    "skip_where_zero": "starts as zeros",  # refused at the interface, before anything runs  # the second run of a case places buffers at 16-byte offsets
    "read_past_end": "illegal",  # the first run's buffers end at unmapped memory
    "shared_pattern": "elements wrong",  # the scrub's words are random
    "gemm_k16_count": "elements wrong",  # the large case's K passes 2^16
}
GOLDEN = {"golden_empty": "holds no cases", "golden_other_spec": r"older porter|another spec"}


def _options(attack: dict) -> dict:
    options = dict(attack["options"])
    if "seeds" in options:
        options["seeds"] = tuple(options["seeds"])
    for path in ("golden", "against"):
        if path in options:
            options[path] = ROOT / options[path]
    return options


def _evidence(verdict) -> str:
    return json.dumps([verdict.reason, [(g.name, g.status, g.summary, g.details) for g in verdict.gates],
                       [(c.sizes, c.values, c.reason, [o.summary for o in c.outputs]) for c in verdict.cases]])


@pytest.mark.parametrize("attack", MANIFEST, ids=lambda a: a["name"])
def test_the_attack_fails_for_its_own_reason(attack, runner, toolchain):
    spec = load_spec(ROOT / attack["spec"] / "porter.toml")
    kernel = ATTACKS / attack["kernel"]
    options = CheckOptions(case_timeout_s=30.0, **_options(attack))
    if attack["name"] in GOLDEN:
        with pytest.raises(InputError, match=GOLDEN[attack["name"]]):
            run_check(kernel, spec, options, toolchain=toolchain, runner=runner)
        return
    verdict = run_check(kernel, spec, options, toolchain=toolchain, runner=runner)
    evidence = _evidence(verdict)
    if attack["name"] == "gemm_cache":
        # Memoisation is not wrong on repeated inputs; what it must never earn is a speed-up: every
        # timed launch starts with the module's globals as loaded, so the cache is empty.
        assert verdict.status != "passed" or (verdict.speedup_vs_library or 0) < 0.5, evidence[:3000]
    elif attack["name"] == "tuned_for_timed":
        # Correct, so it may pass; what it must not report is the source's speed at the shape it
        # was tuned for: the headline is the lower of the named and the drawn size set's.
        assert verdict.speedup_vs_source is not None and verdict.speedup_vs_source < 0.5, evidence[:3000]
        assert len({t.sizes for t in verdict.timings}) == 2, evidence[:3000]
    else:
        assert verdict.status in ("failed", "error"), evidence[:3000]
        assert WHY[attack["name"]].lower() in evidence.lower(), evidence[:3000]
    if any(c.fault for c in verdict.cases) or verdict.status == "error":  # the worker was restarted: it still works
        vector_add = ROOT / "examples" / "vector_add"
        good = run_check(vector_add / "kernel.ptx", load_spec(vector_add / "porter.toml"), CheckOptions(timing=False),
                         toolchain=toolchain, runner=runner)
        assert good.status == "passed", good.reason


def test_every_attack_in_the_manifest_has_a_named_defence():
    names = {a["name"] for a in MANIFEST}
    assert names <= set(WHY) | set(GOLDEN) | {"gemm_cache", "tuned_for_timed"}
