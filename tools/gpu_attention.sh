#!/usr/bin/env bash
# examples/attention_fwd on a GPU (the H200): porter check of every kernel that runs here (sm_80;
# sm_90a, TMA + wgmma, with --native), each timed by porter at S=4096 and S=8192 (B=4, H=16,
# D=128, causal 0 and 1) beside its library baseline (torch SDPA, as ref.py:sdpa calls it), and
# torch SDPA's FLASH_ATTENTION and CUDNN_ATTENTION backends timed apart at the same sizes. Logs and
# a markdown table go to $OUT (or ./gpu-logs), all named attn-*. Runs from a source checkout
# (PYTHONPATH=$PWD); needs cupy and torch with CUDA. About 6 minutes of GPU time; each step has a
# timeout, so the whole script stays under 9.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PORTER_CACHE_DIR=${PORTER_CACHE_DIR:-/tmp/porter-cache}
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
SIZES=(B=4,H=16,S=4096,D=128,causal=0 B=4,H=16,S=4096,D=128,causal=1
       B=4,H=16,S=8192,D=128,causal=0 B=4,H=16,S=8192,D=128,causal=1)

{
  date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm --format=csv,noheader
  python3 -c 'import cupy, numpy, torch; print("cupy", cupy.__version__, "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  ptxas --version 2>/dev/null | tail -1
} 2>&1 | tee "$OUT/attn-env.txt"

summary() {  # one line per verdict: status, gates, timings
  python3 - "$1" <<'EOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as err:
    sys.exit(f"{sys.argv[1]}: no verdict ({err})")
print(f"{v['status'].upper()}: {v['reason']}  ({v['wall_s']:.0f} s, seeds {v.get('seeds')})")
for g in v["gates"]:
    print(f"  {g['name']:<12} {g['status']:<8} {g['summary'][:160]}")
for t in v["timings"]:
    print(f"  {t['sizes']:<40} {t['name']:<10} {t['median_ms']:9.4f} ms  {t.get('tflops') or 0:7.1f} TFLOP/s")
EOF
}

# 1. Each kernel, timed (and so verified) at the four sizes, interleaved with the library baseline.
TIME_AT=(); for s in "${SIZES[@]}"; do TIME_AT+=(--time-at "$s"); done
for k in sm80 sm90a; do
  flags=(); [ "$k" = sm80 ] || flags=(--arch sm_90a --native)
  timeout 170 python3 -m porter check "examples/attention_fwd/kernel_$k.ptx" "${flags[@]}" "${TIME_AT[@]}" --json \
    > "$OUT/attn-$k.json" 2> "$OUT/attn-$k.err"
  echo "porter check kernel_$k rc=$?"; summary "$OUT/attn-$k.json" | tee "$OUT/attn-$k.txt"
done

# 3. torch SDPA's two fused backends, timed apart (CUDA events, L2 flushed before each launch as
#    porter does, median), and the copy of O that ref.py:sdpa adds for porter (SDPA has no out=).
timeout 45 python3 - "$OUT/attn-sdpa.json" <<'EOF' 2>&1 | tee "$OUT/attn-sdpa.txt"
import json, statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # larger than the H200's L2 (60 MiB)
def timed(fn, reps):
    for _ in range(3):
        fn()
    pairs = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(); end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)

rows = []
for S in (4096, 8192):
    B, H, D = 4, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(S)
    q, k, v = (torch.rand(B, H, S, D, device="cuda", generator=gen, dtype=torch.float16) * 2 - 1 for _ in range(3))
    o = torch.empty_like(q)
    for causal in (0, 1):
        flops = 4 * B * H * S * S * D // (1 + causal)
        row = {"S": S, "causal": causal, "flops": flops}
        outs = {}
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            try:
                with sdpa_kernel([getattr(SDPBackend, name)]):
                    call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=D ** -0.5)
                    outs[name] = call()
                    row[name] = timed(call, 30 if S == 4096 else 15)
            except RuntimeError as err:
                row[name] = None
                row[name + "_error"] = str(err).splitlines()[0][:200]
        if len(outs) == 2:
            row["max_diff_flash_vs_cudnn"] = float((outs["FLASH_ATTENTION"] - outs["CUDNN_ATTENTION"]).abs().max())
        x = next(iter(outs.values()), q)
        row["copy_O"] = timed(lambda: o.copy_(x), 30)
        rows.append(row)
        shown = "  ".join(f"{n}: " + (f"{row[n]:.4f} ms {flops / row[n] / 1e9:.1f} TFLOP/s" if row.get(n) else
                                      f"unavailable ({row.get(n + '_error')})") for n in ("FLASH_ATTENTION", "CUDNN_ATTENTION"))
        print(f"S={S} causal={causal}  {shown}  copy of O {row['copy_O']:.4f} ms")
json.dump(rows, open(sys.argv[1], "w"), indent=1)
EOF

# 4. The table.
python3 - "$OUT" <<'EOF' | tee "$OUT/attn-table.md"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def load(name):
    try:
        return json.loads((out / name).read_text())
    except Exception:
        return None
kernels = ("sm80", "sm90a")
verdicts = {k: load(f"attn-{k}.json") or {} for k in kernels}
sdpa = load("attn-sdpa.json") or []
def timing(k, label, name):
    return next((t for t in verdicts[k].get("timings", []) if t["sizes"] == label and t["name"] == name), {})
def cell(ms, flops):
    return "-" if not ms else f"{ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s"
print("; ".join(f"kernel_{k}: {verdicts[k].get('status', 'no verdict')}" for k in kernels))
print()
print("| S | causal | " + " | ".join(f"kernel_{k}" for k in kernels) + " | SDPA baseline in porter | SDPA FLASH | SDPA CUDNN | best kernel / CUDNN |")
print("|---|---|" + "---|" * (len(kernels) + 4))
for row in sdpa:
    S, causal, flops = row["S"], row["causal"], row["flops"]
    label = f"B=4, H=16, S={S}, D=128, causal={causal}"
    ours = [timing(k, label, "candidate").get("median_ms") for k in kernels]
    lib = next((timing(k, label, "library")["median_ms"] for k in kernels if timing(k, label, "library")), None)
    best = min((ms for ms in ours if ms), default=None)
    ratio = f"{row['CUDNN_ATTENTION'] / best:.2f}" if best and row.get("CUDNN_ATTENTION") else "-"
    print(f"| {S} | {causal} | " + " | ".join(cell(ms, flops) for ms in ours) + f" | {cell(lib, flops)} | "
          f"{cell(row.get('FLASH_ATTENTION'), flops)} | {cell(row.get('CUDNN_ATTENTION'), flops)} | {ratio} |")
EOF
