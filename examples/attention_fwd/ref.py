"""Reference and torch SDPA baseline for examples/attention_fwd: attention forward with its
log-sum-exp over contiguous fp16 [B, H, S, D] tensors.

    O[b, h, i]   = sum_j softmax_j(scale * q_i . k_j) v_j     j over the unmasked keys
    LSE[b, h, i] = log(sum_j exp(scale * q_i . k_j))          natural log
    causal = 1 masks the keys after the query (j > i); causal = 0 masks nothing.

The reference computes in float64 from the fp16 inputs, one block of (head, query row) pairs at a
time so that the scores never take more than about 256 MiB (B=4, H=16, S=8192, D=128 is 64 heads
of 8192 x 8192 scores: 32 GiB at once). It runs on the GPU through CuPy where CuPy has one (porter
also verifies the timed sizes, seconds of float64 work in NumPy), else in NumPy.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

SCORE_ELEMENTS = 1 << 25  # float64 scores per block: 256 MiB


def _xp() -> Any:
    try:  # on the GPU where CuPy has one
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:  # no CuPy, or no GPU it can use
        return np


def attention_math(xp: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """O and LSE in float64 for float64 [N, S, D] q, k, v (N = B * H heads)."""
    n, s_len, _ = q.shape
    out = xp.empty(q.shape, dtype=xp.float64)
    lse = xp.empty(q.shape[:2], dtype=xp.float64)
    rows = max(1, min(s_len, SCORE_ELEMENTS // s_len))  # query rows of one head per block
    heads = max(1, min(n, SCORE_ELEMENTS // (rows * s_len)))  # heads per block
    keys = xp.arange(s_len)
    for h0 in range(0, n, heads):
        hs = slice(h0, h0 + heads)
        for r0 in range(0, s_len, rows):
            rs = slice(r0, r0 + rows)
            scores = xp.matmul(q[hs, rs], k[hs].transpose(0, 2, 1)) * scale
            if causal:
                later = keys[None, :] > xp.arange(r0, min(r0 + rows, s_len))[:, None]
                scores = xp.where(later[None], -xp.inf, scores)
            top = scores.max(axis=-1, keepdims=True)  # finite: key 0 is never masked
            p = xp.exp(scores - top)
            total = p.sum(axis=-1, keepdims=True)
            out[hs, rs] = xp.matmul(p, v[hs]) / total
            lse[hs, rs] = (top + xp.log(total))[..., 0]
    return out, lse


def attention(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """porter's reference: fn(args, sizes) -> {"O": [B, H, S, D], "LSE": [B, H, S]} in float64."""
    b, h, s, d = (int(sizes[name]) for name in ("B", "H", "S", "D"))
    causal = bool(int(args["causal"]))
    scale = float(np.float32(args["scale"]))  # the f32 the kernel receives
    xp = _xp()
    q, k, v = (xp.asarray(np.asarray(args[name]).reshape(b * h, s, d)).astype(xp.float64) for name in "QKV")
    out, lse = attention_math(xp, q, k, v, scale, causal)
    to_host = np.asarray if xp is np else xp.asnumpy
    return {"O": to_host(out).reshape(b, h, s, d), "LSE": to_host(lse).reshape(b, h, s)}


_BACKEND: dict[tuple[int, int, int], str] = {}  # (S, D, causal) -> the backend that ran there


def sdpa(args: dict[str, Any], sizes: dict[str, int], backends: tuple[str, ...] = ("CUDNN_ATTENTION", "FLASH_ATTENTION")) -> None:
    """torch's scaled_dot_product_attention on the GPU, writing O in place (porter's library baseline).

    The first of ``backends`` that accepts the problem runs (cuDNN, else FlashAttention-2), on
    CuPy's current stream, so that porter's events time it. SDPA has no ``out=``: O is copied
    into place: one more read and write of O, which tools/gpu_attention.sh measures apart. LSE is not
    written: SDPA computes it only internally, and porter does not judge a baseline's outputs.
    """
    import cupy
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, o = (torch.from_dlpack(args[name]) for name in ("Q", "K", "V", "O"))
    causal = bool(int(args["causal"]))
    scale = float(np.float32(args["scale"]))
    key = (int(sizes["S"]), int(sizes["D"]), int(causal))
    order = [_BACKEND[key]] if key in _BACKEND else list(backends)
    ptr = cupy.cuda.get_current_stream().ptr  # 0: the legacy default stream, torch's own default
    with torch.cuda.stream(torch.cuda.ExternalStream(ptr)) if ptr else contextlib.nullcontext():
        for i, name in enumerate(order):
            try:
                with sdpa_kernel([getattr(SDPBackend, name)]):
                    o.copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale))
            except RuntimeError:
                if i == len(order) - 1:
                    raise
                continue
            _BACKEND[key] = name
            return
