"""Compile porter's Triton test kernels for sm_90a and copy what Triton's cache holds for each
(the PTX and the compile metadata JSON, as `<kernel>.ptx` and `<kernel>.json`) into a folder.

Triton compiles for a target without a GPU (``triton.compile`` with ``GPUTarget("cuda", 90, 32)``
runs the whole pipeline, ptxas included, on the CPU), so this runs anywhere Triton installs:

    python -m venv /tmp/vt && /tmp/vt/bin/pip install "triton==3.6.*" numpy
    /tmp/vt/bin/python tools/make_triton_fixtures.py tests/data/compiled/triton

Arguments are specialised as Triton's JIT specialises them for one typical call (its
``tt.divisibility`` of 16 for every pointer, as torch allocates them, and for each integer argument
whose value in that call is a multiple of 16; UNALIGNED names the integers that are not): the
compiled kernel may assume those integers stay multiples of 16, which its spec's sizes must respect.
The kernels are written for these fixtures; each docstring says what it computes.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C[M, N] (f16) = A[M, K] (f16) @ B[K, N] (f16), f32 accumulation; row-major, any M, N, K."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a_mask = (rm[:, None] < M) & (rk[None, :] < K - k * BLOCK_K)
        b_mask = (rk[:, None] < K - k * BLOCK_K) & (rn[None, :] < N)
        acc = tl.dot(tl.load(a, mask=a_mask, other=0.0), tl.load(b, mask=b_mask, other=0.0), acc)
        a += BLOCK_K
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def attn_fwd(Q, K, V, sm_scale, LSE, Out, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
             stride_vz, stride_vh, stride_vk, stride_oz, stride_oh, stride_om, H, N_CTX,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Non-causal attention forward over [Z, H, N_CTX, HEAD_DIM] f16 tensors: Out = softmax(Q K^T
    * sm_scale) V, and LSE[z*H + h, m] = log2 of the softmax's denominator (in base 2, as the
    kernel works: logsumexp(Q K^T * sm_scale) / ln 2). N_CTX must be a multiple of BLOCK_M and BLOCK_N."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = Q + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = K + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = V + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = Out + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0  # the first alpha, 2^-inf = 0, clears it
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(k_base + (start_n + offs_n)[None, :] * stride_kn + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + (start_n + offs_n)[:, None] * stride_vk + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(LSE + off_hz * N_CTX + offs_m, m_i + tl.math.log2(l_i))
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(Out.type.element_ty))


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    """One program per row: out[r, :n_cols] = softmax(in[r, :n_cols]) in f32."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row.to(tl.int64) * in_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row.to(tl.int64) * out_row_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK: tl.constexpr):
    """One program per row of X[rows, N] (bf16): Y = (X - mean) * rstd * W + B (bf16), Mean and Rstd (f32)."""
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    var_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        var_acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(var_acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, ((x - mean) * rstd * w + b).to(tl.bfloat16), mask=mask)


@triton.jit
def attn_bwd_preprocess(Out, DO, Delta, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Delta[hz, m] = sum_d Out[hz, m, d] * DO[hz, m, d] (f16 in, f32 out), [Z*H, N_CTX, HEAD_DIM] contiguous."""
    off_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hz = tl.program_id(1)
    off_d = tl.arange(0, HEAD_DIM)
    base = off_hz * HEAD_DIM * N_CTX
    o = tl.load(Out + base + off_m[:, None] * HEAD_DIM + off_d[None, :])
    do = tl.load(DO + base + off_m[:, None] * HEAD_DIM + off_d[None, :]).to(tl.float32)
    tl.store(Delta + off_hz * N_CTX + off_m, tl.sum(o * do, axis=1))


@triton.jit
def copy_tma(in_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[M, N] = 2 * in[M, N] (f32) through device-side tensor descriptors: Triton builds them in its
    global scratch (global_scratch_size > 0), so the data pointers only reach tensormap.replace."""
    src = tl.make_tensor_descriptor(in_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    pm, pn = tl.program_id(0), tl.program_id(1)
    dst.store([pm * BLOCK_M, pn * BLOCK_N], src.load([pm * BLOCK_M, pn * BLOCK_N]) * 2)


def _signature(fn, types: dict[str, str]) -> dict[str, str]:
    return {name: types.get(name, "constexpr") for name in fn.arg_names}


MATMUL_TYPES = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
KERNELS = [
    # (function, argument types (the rest are constexpr), constexprs, options[, subfolder])
    (matmul_kernel, MATMUL_TYPES, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8},
     {"num_warps": 4, "num_stages": 3}),
    (attn_fwd, {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "LSE": "*fp32", "Out": "*fp16",
                **{f"stride_{t}{d}": "i32" for t, dims in (("q", "zhm"), ("k", "zhn"), ("v", "zhk"), ("o", "zhm"))
                   for d in dims}, "H": "i32", "N_CTX": "i32"},
     {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64}, {"num_warps": 8, "num_stages": 3}),
    (softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32",
                      "n_cols": "i32"}, {"BLOCK": 1024}, {"num_warps": 4}),
    (layer_norm_fwd, {"X": "*bf16", "Y": "*bf16", "W": "*fp32", "B": "*fp32", "Mean": "*fp32", "Rstd": "*fp32",
                      "stride": "i32", "N": "i32", "eps": "fp32"}, {"BLOCK": 1024}, {"num_warps": 8}),
    (attn_bwd_preprocess, {"Out": "*fp16", "DO": "*fp16", "Delta": "*fp32", "N_CTX": "i32"},
     {"HEAD_DIM": 64, "BLOCK_M": 128}, {"num_warps": 4}),
    (copy_tma, {"in_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"}, {"BLOCK_M": 64, "BLOCK_N": 64},
     {"num_warps": 4}),
    # the same matmul in clusters of two CTAs (Triton's num_ctas), in a folder of its own
    (matmul_kernel, MATMUL_TYPES, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8},
     {"num_warps": 4, "num_stages": 3, "num_ctas": 2}, "num_ctas2"),
]


# Integer arguments whose value in the typical call is not a multiple of 16 (attention with 3 heads,
# a softmax over 1000 columns, ragged tensor-descriptor extents): not specialised.
UNALIGNED = {("attn_fwd", "H"), ("softmax_kernel", "n_cols"), ("copy_tma", "M")}


def compile_all(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    target = GPUTarget("cuda", 90, 32)
    for fn, types, constexprs, options, *subfolder in KERNELS:
        signature = _signature(fn, types)
        into = out.joinpath(*subfolder)
        into.mkdir(parents=True, exist_ok=True)
        # Divisible by 16, as the JIT marks aligned pointers and integers that are multiples of 16
        # (floats are never specialised).
        attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
                 if signature[name] != "constexpr" and not signature[name].startswith("fp")
                 and (fn.__name__, name) not in UNALIGNED}
        with tempfile.TemporaryDirectory() as cache:
            triton.knobs.cache.dir = cache
            src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
            compiled = triton.compile(src, target=target, options=options)
            name = compiled.metadata.name
            folder = next(p.parent for p in Path(cache).rglob(f"{name}.json"))
            for suffix in (".ptx", ".json"):
                shutil.copyfile(folder / f"{name}{suffix}", into / f"{name}{suffix}")
            meta = json.loads((into / f"{name}.json").read_text())
            print(f"{name}: {meta['num_warps']} warps, {meta['shared']} B shared, triton {meta['triton_version']}")


if __name__ == "__main__":
    compile_all(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/compiled/triton"))
