"""Reference for the H200-made Triton attention forward (tests/data/compiled/triton_h200/attn_fwd), as
its .ttgir computes: s = (q k^T) * scale, p = exp(s - max), out = (p v) / sum(p), lse = max + log(sum(p))
(natural log), over contiguous [BH, S, 64] f16 tensors; in float64. scale arrives as the f32 the kernel gets."""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCK_ROWS = 64  # query rows at a time: bounds the scores' memory


def attention(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    try:  # on the GPU where CuPy has one: the timed size is 16 x 2048^2
        import cupy as xp

        xp.cuda.runtime.getDeviceCount()
    except Exception:
        xp = np
    q, k, v = (xp.asarray(np.asarray(args[n])).astype(xp.float64) for n in ("q_ptr", "k_ptr", "v_ptr"))
    scale = float(args["scale"])
    out = xp.empty(q.shape, dtype=xp.float64)
    lse = xp.empty(q.shape[:-1], dtype=xp.float64)
    for start in range(0, q.shape[1], BLOCK_ROWS):
        rows = slice(start, start + BLOCK_ROWS)
        s = xp.einsum("bmd,bnd->bmn", q[:, rows], k) * scale
        top = s.max(axis=-1, keepdims=True)
        p = xp.exp(s - top)
        total = p.sum(axis=-1, keepdims=True)
        out[:, rows] = xp.einsum("bmn,bnd->bmd", p / total, v)
        lse[:, rows] = (top + xp.log(total))[..., 0]
    host = xp.asnumpy if xp is not np else np.asarray
    return {"o_ptr": host(out), "lse_ptr": host(lse)}
