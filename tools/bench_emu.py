"""How long porter's PTX emulator takes on the issue-#30 speed goals (CPU only).

    PYTHONPATH=$PWD python tools/bench_emu.py

Goals (2-core CPU): the sm_100a GEMM (examples/gemm_bf16/kernel_sm100a.ptx) at M=N=256, K=128 in
at most 10 s; attention forward (examples/attention_fwd/kernel_sm100a.ptx) at S=128, D=128 in at
most 30 s. Each line gives the seconds, the instruction executions (a group of threads running
one instruction counts once), whether the outputs met the spec's tolerance against its float64
reference, and the goal. The sm_80 and sm_90a versions are timed too, for comparison.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNS = [
    # (example, ptx, sizes, goal seconds or None)
    ("gemm_bf16", "kernel_sm100a.ptx", {"M": 256, "N": 256, "K": 128}, 10.0),
    ("attention_fwd", "kernel_sm100a.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}, 30.0),
    ("gemm_bf16", "kernel_sm90a.ptx", {"M": 256, "N": 256, "K": 128}, None),
    ("gemm_bf16", "kernel_sm80.ptx", {"M": 256, "N": 256, "K": 128}, None),
    ("attention_fwd", "kernel_sm90a.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}, None),
    ("attention_fwd", "kernel_sm80.ptx", {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0}, None),
]


def _calibrate():
    spec = importlib.util.spec_from_file_location("emu_calibrate", ROOT / "tools" / "emu_calibrate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["emu_calibrate"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    cal = _calibrate()
    failed = False
    print(f"{'kernel':40} {'sizes':34} {'seconds':>8} {'steps':>8}  outputs  goal")
    for example, ptx, sizes, goal in RUNS:
        case = cal.emu_case(ROOT / "examples" / example, ROOT / "examples" / example / ptx, sizes)
        started = time.perf_counter()
        results = cal.run_emulated(case)
        seconds = time.perf_counter() - started
        ok = all(r.ok for r in results)
        if ok:
            ref = cal.reference(case)
            got = cal.outputs(case)
            ok = all(cal.within(case, name, got[name], ref[name])[0] for name in ref)
        verdict = "" if goal is None else ("met" if seconds <= goal else "MISSED") + f" (<= {goal:g} s)"
        failed |= not ok or (goal is not None and seconds > goal)
        shown = ",".join(f"{k}={v}" for k, v in sizes.items())
        print(f"{example + '/' + ptx:40} {shown:34} {seconds:8.2f} {sum(r.steps for r in results):8d}  "
              f"{'ok' if ok else 'WRONG':7}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
