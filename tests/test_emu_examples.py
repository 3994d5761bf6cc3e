"""porter.emu on the attention examples and the Triton fixtures, through their porter specs: each
kernel's outputs at a small size set within the spec's tolerance of its float64 reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _calibrate():
    name = "porter_tools_emu_calibrate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "emu_calibrate.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CASES = [
    ("attention_fwd", "kernel_sm80.ptx", {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}),
    ("attention_fwd", "kernel_sm90a.ptx", {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}),
    ("attention_fwd", "kernel_sm100a.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}),
    ("attention_fwd", "kernel_sm100a.ptx", {"B": 1, "H": 2, "S": 77, "D": 64, "causal": 1}),
    ("attention_bwd", "kernel_sm80.ptx", {"B": 1, "H": 1, "S": 77, "D": 64, "causal": 1}),
    ("attention_bwd", "kernel_sm90a.ptx", {"B": 1, "H": 1, "S": 77, "D": 64, "causal": 1}),
    ("attention_bwd", "kernel_sm100a.ptx", {"B": 1, "H": 1, "S": 77, "D": 64, "causal": 1}),
    ("triton_matmul", "matmul_kernel.ptx", {"M": 144, "N": 208, "K": 80}),
    ("triton_attention", "attn_fwd.ptx", {"Z": 1, "H": 3, "N_CTX": 256}),
]


@pytest.mark.parametrize(("example", "ptx", "sizes"), CASES, ids=[f"{e}/{p}/{'x'.join(map(str, s.values()))}"
                                                                    for e, p, s in CASES])
def test_example_in_emulation_matches_its_reference(example: str, ptx: str, sizes: dict[str, int]) -> None:
    cal = _calibrate()
    case = cal.emu_case(ROOT / "examples" / example, ROOT / "examples" / example / ptx, sizes)
    results = cal.run_emulated(case)
    assert all(r.ok and not r.diagnostics for r in results), [str(d) for r in results for d in r.diagnostics]
    ref = cal.reference(case)
    got = cal.outputs(case)
    for name, expected in ref.items():
        ok, err = cal.within(case, name, got[name], expected)
        assert ok, f"{name}: largest difference {err}"
