"""Reference for examples/triton_attention: Triton's non-causal attention forward with the
log-sum-exp, over contiguous [Z, H, N_CTX, 64] f16 tensors.

    Out[z, h] = softmax(Q[z, h] K[z, h]^T * sm_scale) V[z, h]
    LSE[z*H + h, m] = log2(sum_n 2^(S[m, n] * sm_scale * 1.44269504)),  S = Q K^T

The kernel works in base 2 (exp2 with sm_scale folded into 1.44269504 = log2(e)), so its LSE is
the natural log-sum-exp divided by ln 2; the reference computes that form directly, in float64.
sm_scale arrives as the f32 the kernel receives."""

from __future__ import annotations

from typing import Any

import numpy as np

LOG2E = 1.44269504  # the constant the kernel multiplies sm_scale by, as an f32
BLOCK_ROWS = 16  # query rows of all heads at a time: bounds the scores' memory


def _attention(xp: Any, q: Any, k: Any, v: Any, scale: float) -> tuple[Any, Any]:
    out = xp.empty(q.shape, dtype=xp.float64)
    lse = xp.empty(q.shape[:-1], dtype=xp.float64)
    for start in range(0, q.shape[2], BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        s = xp.einsum("zhmd,zhnd->zhmn", q[:, :, rows], k) * scale  # in base 2
        top = s.max(axis=-1, keepdims=True)
        p = xp.exp2(s - top)
        total = p.sum(axis=-1, keepdims=True)
        out[:, :, rows] = xp.einsum("zhmn,zhnd->zhmd", p / total, v)
        lse[:, :, rows] = (top + xp.log2(total))[..., 0]
    return out, lse


def attention(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    z, h, n = int(sizes["Z"]), int(sizes["H"]), int(sizes["N_CTX"])
    scale = float(np.float32(np.float32(args["sm_scale"]) * np.float32(LOG2E)))  # qk_scale, in f32
    try:  # on the GPU where CuPy has one: porter also verifies the timed size
        import cupy as xp

        xp.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, or no GPU it can use
        xp = np
    q, k, v = (xp.asarray(np.asarray(args[name])).astype(xp.float64) for name in ("Q", "K", "V"))
    out, lse = _attention(xp, q, k, v, scale)
    to_host = xp.asnumpy if xp is not np else np.asarray
    return {"Out": to_host(out), "LSE": to_host(lse).reshape(z * h, n)}
