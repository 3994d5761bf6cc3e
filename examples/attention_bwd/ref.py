"""Reference, derive function and torch baseline of examples/attention_bwd (the attention backward
pass, three kernels: preprocess, dK/dV, dQ).

Layout: Q, K, V, O, dO, dQ, dK, dV are f16 [B, H, S, D] contiguous; LSE is f32 [B, H, S], the
natural log of sum_j exp(scale * q_i . k_j) over the unmasked j (j <= i when causal).

    P  = exp(scale * Q K^T - LSE)        (0 where masked)
    dV = P^T dO
    dP = dO V^T
    Delta = rowsum(dO * O)
    dS = P * (dP - Delta)
    dQ = scale * dS K
    dK = scale * dS^T Q

``forward_stats`` derives O and LSE from the drawn Q, K, V (the forward pass, in float64), so that
the backward runs at its operating point: with an LSE that is not Q and K's, P is not a softmax and
dS is meaningless. ``attention_backward`` computes the gradients from the inputs exactly as the
kernels receive them (O rounded to f16, LSE to f32), in float64. Both work in chunks of query
rows (at most 2**24 scores at a time: 128 MiB in float64), on the GPU through CuPy where one is
usable (porter also verifies the timed size, B=4, H=16, S=4096, D=128: about 10**13 float64
flops, seconds on a GPU, minutes in NumPy), else in NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCORES_PER_CHUNK = 1 << 24


def _xp() -> Any:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:  # no CuPy, or no GPU it can use
        return np


def _host(xp: Any, x: Any) -> np.ndarray:
    return xp.asnumpy(x) if xp is not np else np.asarray(x)


def _f64(xp: Any, a: Any) -> Any:
    return xp.asarray(np.asarray(a)).astype(xp.float64)


def _chunks(b: int, h: int, s: int) -> list[tuple[int, int]]:
    """Query rows [r0, r1) a chunk: at most SCORES_PER_CHUNK scores of all heads at a time."""
    rows = max(1, SCORES_PER_CHUNK // max(1, b * h * s))
    return [(r0, min(s, r0 + rows)) for r0 in range(0, s, rows)]


def _scores(xp: Any, q: Any, k: Any, r0: int, r1: int, scale: float, causal: bool) -> tuple[Any, int]:
    """scale * Q[r0:r1] K^T over the keys any of these rows may see (all, or the first r1 when
    causal), with the masked entries at -inf; and that key count."""
    keys = r1 if causal else k.shape[2]
    s = xp.einsum("bhmd,bhnd->bhmn", q[:, :, r0:r1], k[:, :, :keys]) * scale
    if causal:
        rows = xp.arange(r0, r1)[:, None]
        cols = xp.arange(keys)[None, :]
        s = xp.where(cols <= rows, s, -xp.inf)
    return s, keys


def forward(q: Any, k: Any, v: Any, scale: float, causal: bool, xp: Any = np) -> tuple[Any, Any]:
    """O and LSE of attention in float64 (q, k, v float64 arrays of xp)."""
    b, h, s, _ = q.shape
    out = xp.empty(q.shape, dtype=xp.float64)
    lse = xp.empty(q.shape[:-1], dtype=xp.float64)
    for r0, r1 in _chunks(b, h, s):
        sc, keys = _scores(xp, q, k, r0, r1, scale, causal)
        top = sc.max(axis=-1, keepdims=True)
        p = xp.exp(sc - top)
        total = p.sum(axis=-1, keepdims=True)
        out[:, :, r0:r1] = xp.einsum("bhmn,bhnd->bhmd", p / total, v[:, :, :keys])
        lse[:, :, r0:r1] = (top + xp.log(total))[..., 0]
    return out, lse


def backward(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, scale: float, causal: bool,
             xp: Any = np) -> tuple[Any, Any, Any]:
    """dQ, dK, dV in float64 from float64 arrays of xp (the formulas of the module docstring)."""
    b, h, s, _ = q.shape
    dq = xp.empty(q.shape, dtype=xp.float64)
    dk = xp.zeros(q.shape, dtype=xp.float64)
    dv = xp.zeros(q.shape, dtype=xp.float64)
    delta = (do * o).sum(axis=-1)
    for r0, r1 in _chunks(b, h, s):
        sc, keys = _scores(xp, q, k, r0, r1, scale, causal)
        p = xp.exp(sc - lse[:, :, r0:r1, None])  # exp(-inf) = 0 where masked
        do_c = do[:, :, r0:r1]
        dv[:, :, :keys] += xp.einsum("bhmn,bhmd->bhnd", p, do_c)
        dp = xp.einsum("bhmd,bhnd->bhmn", do_c, v[:, :, :keys])
        ds = p * (dp - delta[:, :, r0:r1, None])
        dq[:, :, r0:r1] = scale * xp.einsum("bhmn,bhnd->bhmd", ds, k[:, :, :keys])
        dk[:, :, :keys] += scale * xp.einsum("bhmn,bhmd->bhnd", ds, q[:, :, r0:r1])
    return dq, dk, dv


def forward_stats(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """The derived inputs O and LSE: the forward pass of the drawn Q, K, V (porter casts O to f16
    and LSE to f32, as the forward kernel would have stored them)."""
    xp = _xp()
    q, k, v = (_f64(xp, args[name]) for name in ("Q", "K", "V"))
    out, lse = forward(q, k, v, float(args["scale"]), bool(int(sizes["causal"])), xp)
    return {"O": _host(xp, out), "LSE": _host(xp, lse)}


def attention_backward(args: dict[str, Any], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """dQ, dK, dV in float64 from the inputs as the kernels get them."""
    xp = _xp()
    q, k, v, o, do = (_f64(xp, args[name]) for name in ("Q", "K", "V", "O", "dO"))
    lse = _f64(xp, args["LSE"])
    dq, dk, dv = backward(q, k, v, o, do, lse, float(args["scale"]), bool(int(sizes["causal"])), xp)
    return {"dQ": _host(xp, dq), "dK": _host(xp, dk), "dV": _host(xp, dv)}


_FLASH_PLACEHOLDERS: dict[str, Any] = {}


def sdpa_flash_backward(args: dict[str, Any], sizes: dict[str, int]) -> None:
    """The library baseline: PyTorch's FlashAttention-2 backward (what SDPA's FLASH_ATTENTION
    backend runs for loss.backward()), on the same Q, K, V, O, dO and LSE, writing dQ, dK, dV in
    place. It calls the aten op autograd calls, with the forward's placeholders for the dense,
    dropout-free case (taken once from a tiny forward), so that only the backward is timed; the
    gradients come back in new tensors and are copied into porter's buffers (3 copies of
    B*H*S*D f16, a few percent of the time at the timed size)."""
    import torch

    q, k, v, o, do = (torch.from_dlpack(args[name]) for name in ("Q", "K", "V", "O", "dO"))
    lse = torch.from_dlpack(args["LSE"])
    causal = bool(int(sizes["causal"]))
    scale = float(args["scale"])
    if not _FLASH_PLACEHOLDERS:
        tiny = torch.zeros((1, 1, 16, q.shape[-1]), dtype=torch.float16, device=q.device)
        res = torch.ops.aten._scaled_dot_product_flash_attention(tiny, tiny, tiny, 0.0, False, False, scale=scale)
        _FLASH_PLACEHOLDERS.update(cum_q=res[2], cum_k=res[3], seed=res[6], offset=res[7])
    ph = _FLASH_PLACEHOLDERS
    s = int(sizes["S"])
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        do, q, k, v, o, lse, ph["cum_q"], ph["cum_k"], s, s, 0.0, causal, ph["seed"], ph["offset"], scale=scale)
    for name, grad in (("dQ", dq), ("dK", dk), ("dV", dv)):
        torch.from_dlpack(args[name]).copy_(grad)
