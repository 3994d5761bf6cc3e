"""A CPU emulation of examples/attention_fwd/kernel_sm80.cu, for tests/test_attention_fwd.py.

The kernel's control flow is transliterated statement by statement (lanes as a numpy axis, the
eight warps one after another between barriers); the warp-level primitives are emulated from the
PTX ISA's definitions, not from the kernel's comments: ``ldmatrix`` (x4, with and without
``.trans``), ``mma.sync.m16n8k16.row.col.f32.f16.f16.f32`` fragment layouts, ``cvt.rn.f16x2.f32``
packing, ``shfl.xor`` and ``cp.async`` groups. Shared memory starts as NaN-filled garbage and each
``cp.async`` lands only when a ``cp.async.wait_group`` retires its group (policy ``"late"``), or as
soon as it is issued (``"early"``): a wait that retires too few groups reads garbage under the
first, a copy into a stage some warp still reads corrupts it under the second.

It checks the index arithmetic (fragments, swizzle, masks, stages, tails) on small problems; it
says nothing about timing, register pressure or races finer than the barriers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BM, BN, THREADS = 128, 64, 256
LANES = np.arange(32)
G, T = LANES >> 2, LANES & 3


@dataclass
class Smem:
    size: int
    policy: str  # "late" | "early"
    data: np.ndarray = field(init=False)
    pending: list[list[tuple[int, bytes]]] = field(default_factory=list)
    open_group: list[tuple[int, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data = np.full(self.size, 0xFF, dtype=np.uint8)  # every fp16 a NaN, every f32 a NaN

    def cp_async_16(self, dst: int, src: np.ndarray, src_bytes: int) -> None:
        chunk = bytes(src.tobytes()[:src_bytes]) + bytes(16 - src_bytes)
        if self.policy == "early":
            self.data[dst:dst + 16] = np.frombuffer(chunk, dtype=np.uint8)
        else:
            self.open_group.append((dst, chunk))

    def commit(self) -> None:
        self.pending.append(self.open_group)
        self.open_group = []

    def wait_group(self, n: int) -> None:
        while len(self.pending) > n:
            for dst, chunk in self.pending.pop(0):
                self.data[dst:dst + 16] = np.frombuffer(chunk, dtype=np.uint8)

    def u32(self, addr: np.ndarray) -> np.ndarray:
        addr = np.asarray(addr)
        assert np.all(addr % 4 == 0)
        return self.data.view(np.uint32)[addr // 4]

    def ldmatrix_x4(self, addr: np.ndarray, trans: bool = False) -> np.ndarray:
        """r[m][lane]: matrix m's rows are 16 bytes at the addresses of lanes 8m .. 8m+7."""
        assert np.all(addr % 16 == 0)
        out = np.empty((4, 32), dtype=np.uint32)
        for m in range(4):
            rows = np.stack([self.data[a:a + 16].view(np.uint16) for a in addr[8 * m:8 * m + 8]])  # [8][8]
            if trans:  # lane i: column i/4, rows 2(i%4) and 2(i%4)+1
                lo, hi = rows[2 * T, G], rows[2 * T + 1, G]
            else:  # lane i: row i/4, columns 2(i%4) and 2(i%4)+1
                lo, hi = rows[G, 2 * T], rows[G, 2 * T + 1]
            out[m] = lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)
        return out


def _halves(reg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) fp16 halves of f16x2 registers, as float64."""
    lo = (reg & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    hi = (reg >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    return lo, hi


def mma_16816(c: np.ndarray, a: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """c[4][32] f32 += A[16x16] . B[16x8] from the fragments of the PTX ISA (m16n8k16, .f16)."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for reg, (row, col) in enumerate(((G, 2 * T), (G + 8, 2 * T), (G, 2 * T + 8), (G + 8, 2 * T + 8))):
        lo, hi = _halves(a[reg])
        A[row, col], A[row, col + 1] = lo, hi
    for reg, k in ((b0, 2 * T), (b1, 2 * T + 8)):
        lo, hi = _halves(reg)
        B[k, G], B[k + 1, G] = lo, hi
    C = np.zeros((16, 8))
    C[G, 2 * T], C[G, 2 * T + 1], C[G + 8, 2 * T], C[G + 8, 2 * T + 1] = c[0], c[1], c[2], c[3]
    Dm = (A @ B + C).astype(np.float32)
    return np.stack([Dm[G, 2 * T], Dm[G, 2 * T + 1], Dm[G + 8, 2 * T], Dm[G + 8, 2 * T + 1]])


def pack_half2(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo16 = np.asarray(lo, dtype=np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    hi16 = np.asarray(hi, dtype=np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    return lo16 | (hi16 << 16)


def shfl_xor(x: np.ndarray, m: int) -> np.ndarray:
    return x[LANES ^ m]


def ex2(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp2(np.asarray(x, dtype=np.float32)).astype(np.float32)


def swz(D: int, r, c):
    return r * (2 * D) + ((c ^ (r & 7)) << 4)


def load_rows(sm: Smem, D: int, rows: int, tile: int, head: np.ndarray, row0: int, S: int) -> None:
    cpr = D // 8
    for tid in range(THREADS):
        for i in range(rows * cpr // THREADS):
            idx = tid + i * THREADS
            r, c = idx // cpr, idx % cpr
            row = row0 + r
            inside = row < S
            src = head[row if inside else 0, c * 8:c * 8 + 8]
            sm.cp_async_16(tile + swz(D, r, c), src, 16 if inside else 0)


def attn_block(q, k, v, o_out, lse_out, S: int, D: int, causal: int, scale: np.float32, bx: int, gx: int,
               policy: str) -> None:
    """One block (bx, one head): q, k, v [S][D] fp16, o_out [S][D] fp16 and lse_out [S] f32 written."""
    f32 = np.float32
    KQK, NTO, CPR = D // 16, D // 8, D // 8
    Q_BYTES, KV_BYTES = BM * D * 2, BN * D * 2
    m0 = (gx - 1 - bx) * BM
    if m0 >= S:
        return
    sm = Smem(768 * D, policy)
    sQ, sK = 0, Q_BYTES
    sV = sK + 2 * KV_BYTES
    n_tiles = (S + BN - 1) // BN
    if causal:
        n_tiles = min(n_tiles, (min(m0 + BM, S) - 1) // BN + 1)
    load_rows(sm, D, BM, sQ, q, m0, S)
    load_rows(sm, D, BN, sK, k, 0, S)
    sm.commit()
    load_rows(sm, D, BN, sV, v, 0, S)
    sm.commit()
    sl2 = f32(scale * f32(1.4426950408889634))
    warps = range(THREADS // 32)
    o = {w: np.zeros((NTO, 4, 32), dtype=f32) for w in warps}
    m_run = {w: np.full((2, 32), -np.inf, dtype=f32) for w in warps}
    l_run = {w: np.zeros((2, 32), dtype=f32) for w in warps}
    qf: dict[int, list[np.ndarray]] = {}
    pf: dict[int, list[list[np.ndarray]]] = {}
    for j in range(n_tiles):
        st = j & 1
        sm.wait_group(1)  # then __syncthreads
        if j == 0:
            for w in warps:
                r = w * 16 + (LANES & 7) + (((LANES >> 3) & 1) << 3)
                qf[w] = [sm.ldmatrix_x4(sQ + swz(D, r, 2 * kk + (LANES >> 4))) for kk in range(KQK)]
        if j + 1 < n_tiles:
            load_rows(sm, D, BN, sK + (st ^ 1) * KV_BYTES, k, (j + 1) * BN, S)
        sm.commit()
        key0 = j * BN
        for w in warps:
            wrow = m0 + w * 16
            row0 = wrow + G
            s = np.zeros((8, 4, 32), dtype=f32)
            kt = sK + st * KV_BYTES
            for kk in range(KQK):
                for np_ in range(4):
                    key = np_ * 16 + (LANES & 7) + ((LANES >> 4) << 3)
                    b = sm.ldmatrix_x4(kt + swz(D, key, 2 * kk + ((LANES >> 3) & 1)))
                    s[2 * np_] = mma_16816(s[2 * np_], qf[w][kk], b[0], b[1])
                    s[2 * np_ + 1] = mma_16816(s[2 * np_ + 1], qf[w][kk], b[2], b[3])
            s = (s * sl2).astype(f32)
            if key0 + BN > S or (causal and key0 + BN - 1 > wrow):
                for n in range(8):
                    for e in range(4):
                        key = key0 + n * 8 + 2 * T + (e & 1)
                        row = row0 + ((e >> 1) << 3)
                        masked = (key >= S) | (bool(causal) & (key > row))
                        s[n, e] = np.where(masked, -np.inf, s[n, e])
            mx = m_run[w].copy()
            for n in range(8):
                mx[0] = np.maximum(mx[0], np.maximum(s[n, 0], s[n, 1]))
                mx[1] = np.maximum(mx[1], np.maximum(s[n, 2], s[n, 3]))
            alpha, base = np.empty((2, 32), f32), np.empty((2, 32), f32)
            for h in range(2):
                mx[h] = np.maximum(mx[h], shfl_xor(mx[h], 1))
                mx[h] = np.maximum(mx[h], shfl_xor(mx[h], 2))
                base[h] = np.where(mx[h] == -np.inf, f32(0), mx[h])
                alpha[h] = ex2(m_run[w][h] - base[h])
                m_run[w][h] = mx[h]
            rs = np.zeros((2, 32), dtype=f32)
            for n in range(8):
                for e in range(4):
                    s[n, e] = ex2(s[n, e] - base[e >> 1])
                rs[0] = rs[0] + (s[n, 0] + s[n, 1])
                rs[1] = rs[1] + (s[n, 2] + s[n, 3])
            l_run[w] = (l_run[w] * alpha + rs).astype(f32)
            o[w][:, 0:2] *= alpha[0]
            o[w][:, 2:4] *= alpha[1]
            pf[w] = [[pack_half2(s[2 * kk, 0], s[2 * kk, 1]), pack_half2(s[2 * kk, 2], s[2 * kk, 3]),
                      pack_half2(s[2 * kk + 1, 0], s[2 * kk + 1, 1]), pack_half2(s[2 * kk + 1, 2], s[2 * kk + 1, 3])]
                     for kk in range(4)]
        sm.wait_group(1)  # then __syncthreads
        if j + 1 < n_tiles:
            load_rows(sm, D, BN, sV + (st ^ 1) * KV_BYTES, v, (j + 1) * BN, S)
        sm.commit()
        vt = sV + st * KV_BYTES
        for w in warps:
            for kk in range(4):
                a = np.stack(pf[w][kk])
                for dp in range(NTO // 2):
                    key = kk * 16 + (LANES & 7) + (((LANES >> 3) & 1) << 3)
                    b = sm.ldmatrix_x4(vt + swz(D, key, 2 * dp + (LANES >> 4)), trans=True)
                    o[w][2 * dp] = mma_16816(o[w][2 * dp], a, b[0], b[1])
                    o[w][2 * dp + 1] = mma_16816(o[w][2 * dp + 1], a, b[2], b[3])
    sm.wait_group(0)
    words = sm.data.view(np.uint32)
    for w in warps:
        wrow = m0 + w * 16
        row0 = wrow + G
        inv = np.empty((2, 32), f32)
        for h in range(2):
            l_run[w][h] = l_run[w][h] + shfl_xor(l_run[w][h], 1)
            l_run[w][h] = l_run[w][h] + shfl_xor(l_run[w][h], 2)
            with np.errstate(divide="ignore"):
                inv[h] = np.where(l_run[w][h] > 0, f32(1) / l_run[w][h], f32(0))
        lr = w * 16 + G
        for n in range(NTO):
            off = swz(D, lr, n) + 4 * T
            words[off // 4] = pack_half2(o[w][n, 0] * inv[0], o[w][n, 1] * inv[0])
            words[(off + 16 * D) // 4] = pack_half2(o[w][n, 2] * inv[1], o[w][n, 3] * inv[1])
        for i in range(16 * CPR // 32):
            idx = LANES + 32 * i
            for lane in range(32):
                r, c = idx[lane] // CPR, idx[lane] % CPR
                row = wrow + r
                if row < S:
                    src = swz(D, w * 16 + r, c)
                    o_out[row, c * 8:c * 8 + 8] = sm.data[src:src + 16].view(np.float16)
        with np.errstate(divide="ignore"):
            lse = ((m_run[w] + np.log2(l_run[w])) * f32(0.6931471805599453)).astype(f32)
        for lane in range(0, 32, 4):
            for h in range(2):
                row = row0[lane] + 8 * h
                if row < S:
                    lse_out[row] = lse[h, lane]


def attn_fwd(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: int, scale: np.float32,
             policy: str = "late") -> tuple[np.ndarray, np.ndarray]:
    """The whole launch: grid (ceil_div(S, 128), B*H) over fp16 [B, H, S, D] q, k, v; outputs start
    as NaN (porter's poison), so an element the kernel never writes stays NaN."""
    b, h, S, D = q.shape
    assert D in (64, 128)
    o = np.full(q.shape, np.nan, dtype=np.float16)
    lse = np.full(q.shape[:3], np.nan, dtype=np.float32)
    gx = (S + BM - 1) // BM
    for bh in range(b * h):
        i, j = divmod(bh, h)
        for bx in range(gx):
            attn_block(q[i, j], k[i, j], v[i, j], o[i, j], lse[i, j], S, D, causal, scale, bx, gx, policy)
    return o, lse
