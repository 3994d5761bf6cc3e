#!/usr/bin/env bash
# examples/attention_bwd on a GPU machine with CuPy and PyTorch (the H200): porter check of the
# three-kernel backward (sweep, value cases, timing against torch's FlashAttention-2 backward, the
# spec's baseline) at S=4096, D=128, causal 0 and 1; the baseline's gradients against the
# reference; and torch SDPA's backward alone (FLASH_ATTENTION and CUDNN_ATTENTION backends) at the
# same sizes, in TFLOP/s of the spec's cost (10 B H S^2 D, halved when causal). Logs go to $OUT
# (or ./gpu-logs). About 2 to 3 minutes of GPU time. Run from the repository root:
#   PYTHONPATH=$PWD tools/gpu_attention_bwd.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PORTER_CACHE_DIR=${PORTER_CACHE_DIR:-/tmp/porter-cache}
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
K=examples/attention_bwd/kernel_sm80.ptx
{
  date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c 'import cupy, numpy, torch; print("cupy", cupy.__version__, "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda)'
} 2>&1 | tee "$OUT/attention_bwd_env.txt"

# 1. the baseline callable on its own, against the reference, small sizes (a wrong baseline would
#    only be timed, never judged, by porter check)
python3 - <<'PY' 2>&1 | tee "$OUT/attention_bwd_baseline.txt"
import sys
import cupy as cp, numpy as np
sys.path.insert(0, "examples/attention_bwd")
import ref
for (b, h, s, d, causal) in [(1, 2, 77, 64, 1), (2, 2, 300, 128, 0), (1, 2, 300, 128, 1)]:
    rng = np.random.default_rng(0)
    args = {n: rng.standard_normal((b, h, s, d)).astype(np.float16) for n in ("Q", "K", "V", "dO")}
    args["scale"] = np.float32(d ** -0.5)
    sizes = {"B": b, "H": h, "S": s, "D": d, "causal": causal}
    st = ref.forward_stats(args, sizes)
    args["O"], args["LSE"] = st["O"].astype(np.float16), st["LSE"].astype(np.float32)
    want = ref.attention_backward(args, sizes)
    dev = {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    for n in ("dQ", "dK", "dV"):
        dev[n] = cp.full((b, h, s, d), cp.nan, dtype=cp.float16)
    ref.sdpa_flash_backward(dev, sizes)
    cp.cuda.Device().synchronize()
    errs = {n: float(np.abs(cp.asnumpy(dev[n]).astype(np.float64) - want[n]).max()) for n in ("dQ", "dK", "dV")}
    print(f"baseline B={b} H={h} S={s} D={d} causal={causal}: max |err| vs reference", errs)
PY

# 2. porter check: sweep, value cases, unannounced size, timing at both flags (default sizes first)
python3 -m porter check $K --time-at S=4096,D=128,causal=0 --time-at S=4096,D=128,causal=1 \
  2>&1 | tee "$OUT/attention_bwd_check.txt"

# 3. torch SDPA backward alone, each backend, same sizes
python3 - <<'PY' 2>&1 | tee "$OUT/attention_bwd_torch.txt"
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F
B, H, S, D = 4, 16, 4096, 128
for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
    for causal in (0, 1):
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
        try:
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                for _ in range(3):
                    torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                torch.cuda.synchronize()
                times = []
                for _ in range(30):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record(); torch.autograd.grad(out, (q, k, v), do, retain_graph=True); e.record()
                    torch.cuda.synchronize(); times.append(s.elapsed_time(e))
        except Exception as err:  # a backend this build or GPU lacks
            print(f"{backend.name} causal={causal}: not run ({type(err).__name__}: {str(err)[:160]})")
            continue
        ms = sorted(times)[len(times) // 2]
        flops = 10 * B * H * S * S * D / (1 + causal)
        print(f"{backend.name} causal={causal} B={B} H={H} S={S} D={D}: backward median {ms:.4f} ms, {flops / ms / 1e9:.0f} TFLOP/s")
PY
