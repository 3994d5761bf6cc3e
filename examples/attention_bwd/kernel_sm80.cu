// porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a
//
// The attention backward pass as a hot loop of three kernels (FlashAttention-2 style), sm_80:
//
//   attn_bwd_preprocess  Delta[i] = sum_d dO[i, d] * O[i, d]               (f32 scratch [B, H, S])
//   attn_bwd_dkdv        per 64-row K/V tile, over the query tiles that can see it:
//                          P^T  = exp(scale * K Q^T - LSE)   (0 where masked)
//                          dV  += P^T dO
//                          dP^T = V dO^T
//                          dS^T = P^T * (dP^T - Delta)
//                          dK  += scale * dS^T Q
//   attn_bwd_dq          per 64-row Q tile, over the K/V tiles it can see: P, dP, dS again, and
//                          dQ  += scale * dS K             (no atomics: deterministic, f16 out)
//
// Q, K, V, O, dO, dQ, dK, dV are f16 [B, H, S, D] contiguous, LSE and Delta f32 [B, H, S]; LSE is
// the natural log of sum_j exp(scale * q_i . k_j) over the unmasked j (j <= i when causal).
// D is 64 or 128 (each kernel branches to a template instance); S is anything >= 1: rows past
// S are zero-filled on load (cp.async src-size 0), masked in P and never stored. Grids:
// preprocess (ceil_div(S, 16), B*H) x 128 threads; dkdv and dq (ceil_div(S, 64), B*H) x 128
// threads (4 warps), with 768*D + 1024 and 768*D bytes of dynamic shared memory.
//
// Tiles: every tile is 64 rows; each of the 4 warps owns 16 rows of the block's own tile (keys in
// dkdv, queries in dq) and all 64 rows of the tile it loops over, so every product is warp-local
// and the accumulators of a warp are 16 x D (dK and dV: 2 x 64 f32 registers a thread at D=128).
// S^T and dP^T come out of mma.sync in the accumulator layout, which for m16n8k16 is also the
// A-operand layout of the next product along their columns: P^T and dS^T feed dV and dK without
// passing through shared memory (converted to f16 in registers).
//
// Shared memory: tiles are 64 rows x D f16 (128 or 256 bytes a row = 8 or 16 chunks of 16
// bytes); chunk c of row r lives at r * 2D + ((c ^ (r & 7)) * 16), so the 8 rows an ldmatrix
// 8x8 matrix reads fall in 8 distinct 16-byte bank groups, and the cp.async stores (one chunk a
// thread) are conflict-free too.
//   dkdv: K | V | stage 0: Q, dO, LSE[64], Delta[64] | stage 1: the same   (K and V stay; the
//         query-side tiles are double-buffered with cp.async: the next tile loads while this one
//         is computed)
//   dq:   Q | dO | stage 0: K, V | stage 1: K, V
//
// The pipeline (both loops), one __syncthreads a tile: tile i lives in stage i & 1 and is one
// cp.async commit group (the first also holds the block's own tiles). Iteration i:
//   cp.async.wait_group 0   this thread's copies of tile i are done (the only group in flight)
//   __syncthreads           every thread's copies of tile i are visible, and every warp has
//                           finished tile i - 1, the last reader of stage (i + 1) & 1
//   cp.async tile i + 1 into stage (i + 1) & 1, commit (none after the last tile)
//   compute tile i from stage i & 1 (the copies of tile i + 1 fly meanwhile)
// A thread's share of a tile load is computed once (tile_lane): per tile wholly inside S, one
// multiply-add for the source pointer and immediate offsets for its chunks; only the last tile
// of a ragged S compares each chunk's row with S (load_tile).
//
// Masking is peeled: only the causal diagonal tile and the tile holding key / query S - 1 can
// hold masked pairs; they run the MASK = true instance of the tile body (dkdv_tile, dq_tile), the
// wholly visible tiles between run the instance without masking code. In dkdv the masked tiles
// are the first (the diagonal) and the last (ragged S); in dq only the last (the diagonal, or the
// ragged tile without causal).
//
// Fragments (PTX ISA, mma.m16n8k16 .f16 -> .f32; g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8, col):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]                 (B[k][n])
//   C (16x8, f32):  c0, c1 = C[g][2t..2t+1], c2, c3 = C[g+8][2t..2t+1]
//   ldmatrix.x4: lanes 8i..8i+7 give the row addresses of matrix i; thread (g, t) receives row g,
//   columns 2t, 2t+1 of each matrix (with .trans: rows 2t, 2t+1 of column g).
//   * A from a row-major tile X[row][k]: lane l reads row (l & 15), chunk (l >> 4) of the k-step:
//     matrices (rows 0-7, k 0-7), (8-15, k 0-7), (0-7, k 8-15), (8-15, k 8-15) = a0..a3.
//   * B from a tile stored Y[n][k] (B = Y^T: K in Q K^T, Q in K Q^T, dO in V dO^T, V in dO V^T):
//     no .trans, lane l reads row (l & 7) + 8 * (l >> 4), chunk (l >> 3) & 1: b0, b1 of n-tile 0,
//     then of n-tile 1.
//   * B from a tile stored Y[k][n] (B = Y: dO in P^T dO, Q in dS^T Q, K in dS K): .trans, lane l
//     reads row (l & 15), chunk (l >> 4) of the n-pair: b0, b1 of n-tile 0, then of n-tile 1.
//   * an S^T (or S) accumulator as the A operand of the next product (k = its columns): for the
//     k-step kk, a0 = pack(c0, c1) and a1 = pack(c2, c3) of n-tile 2kk, a2 and a3 the same of
//     n-tile 2kk + 1.
//
// Why dQ has its own kernel: each dQ row sums over every key tile, which the dkdv blocks own
// one each. Summing there needs f32 atomics into a B*H*S*D accumulator (128 MiB at the timed
// size), a zero step before and a conversion kernel after, and the result differs in its last
// bits from run to run. The dq kernel instead recomputes S and dP (2 of the 7 products, so 7/5
// of the minimal tensor-core work) and writes an f16 dQ once, deterministically, as torch does.

typedef unsigned short f16_bits;  // raw f16 storage

#define BWD_TILE 64
#define BWD_THREADS 128
#define BWD_LOG2E 1.4426950408889634f

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, the bytes past src_bytes (0 or 16) zero-filled.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    const unsigned long long gsrc = static_cast<unsigned long long>(__cvta_generic_to_global(src));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gsrc), "r"(src_bytes)
                 : "memory");
}

// 4 bytes global -> shared, zero-filled when src_bytes is 0.
__device__ __forceinline__ void cp_async_4(unsigned dst, const void* src, int src_bytes) {
    const unsigned long long gsrc = static_cast<unsigned long long>(__cvta_generic_to_global(src));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gsrc), "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned* r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned* r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// d += a . b for one m16n8k16 tile, f16 operands, f32 accumulators.
__device__ __forceinline__ void mma_16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f32 as f16x2 (round to nearest even): lo in the low half (the lower column).
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The accumulators of a 16 x 64 product (8 n8 tiles) as the A fragments of 4 k16 steps, rounded
// to f16: the C layout of n8 tiles 2kk and 2kk+1 is the A layout of k16 step kk.
__device__ __forceinline__ void pack_a_16x64(const float (&c)[8][4], unsigned (&a)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        a[kk][0] = pack_f16x2(c[2 * kk][0], c[2 * kk][1]);
        a[kk][1] = pack_f16x2(c[2 * kk][2], c[2 * kk][3]);
        a[kk][2] = pack_f16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
        a[kk][3] = pack_f16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
    }
}

// One half of an f16x2, as f32: the low half for which == 0.
__device__ __forceinline__ float f16x2_half(unsigned v, int which) {
    unsigned short h = static_cast<unsigned short>(which ? (v >> 16) : (v & 0xffffu));
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float f16_to_f32(f16_bits h) {
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

// Byte offset of chunk c (16 bytes) of row r in a swizzled tile of D columns.
template <int D>
__device__ __forceinline__ unsigned swz(int r, int c) {
    return static_cast<unsigned>(r * (2 * D) + ((c ^ (r & 7)) << 4));
}

// A thread's share of every tile load, computed once per kernel: thread tid copies the 16-byte
// chunk c = tid % (D / 8) of the rows r0 = tid / (D / 8), r0 + ROWS, r0 + 2 ROWS, ... (ROWS =
// 1024 / D: 8 at D = 128, 16 at D = 64). ROWS is a multiple of 8, so r & 7 (the swizzle) is the
// same for all of them: they lie at swz(r0, c) + i * ROWS * 2D in the tile and at
// (r0 * D + c * 8) + i * ROWS * D elements past the tile's first row in global memory.
template <int D>
struct TileLane {
    unsigned dst;  // swz(r0, c): byte offset in the tile
    int src;       // r0 * D + c * 8: element offset from the tile's first row
    int row;       // r0
};

template <int D>
__device__ __forceinline__ TileLane<D> tile_lane(int tid) {
    constexpr int CHUNKS = D / 8;
    const int r = tid / CHUNKS;
    const int c = tid % CHUNKS;
    return TileLane<D>{swz<D>(r, c), r * D + c * 8, r};
}

// cp.async the 64 rows row0.. of one head's [S, D] matrix into a swizzled tile (no commit);
// rows at or past S are zero-filled. A tile wholly inside S (all but the last) takes one
// multiply-add for its source pointer and immediate offsets for every chunk; the last tile of a
// ragged S compares each chunk's row with S and reads nothing (src-size 0) past it.
template <int D>
__device__ __forceinline__ void load_tile(unsigned tile, const f16_bits* __restrict__ head, int row0, int S,
                                          const TileLane<D>& tl) {
    constexpr int ROWS = BWD_THREADS / (D / 8);
    const unsigned dst = tile + tl.dst;
    if (row0 + BWD_TILE <= S) {  // uniform across the block
        const f16_bits* src = head + (static_cast<long long>(row0) * D + tl.src);
#pragma unroll
        for (int i = 0; i < BWD_TILE / ROWS; ++i) {
            cp_async_16(dst + i * ROWS * (2 * D), src + i * ROWS * D, 16);
        }
    } else {
        const int left = S - row0 - tl.row;  // chunk i exists when i * ROWS < left
        const long long off = static_cast<long long>(row0) * D + tl.src;
#pragma unroll
        for (int i = 0; i < BWD_TILE / ROWS; ++i) {
            const bool in = i * ROWS < left;
            // the head's first element: a valid address for the chunks that read nothing
            cp_async_16(dst + i * ROWS * (2 * D), head + (in ? off + i * ROWS * D : 0LL), in ? 16 : 0);
        }
    }
}

// The 16 x D accumulator of one warp (rows row0 + g and row0 + g + 8) times `mul`, stored as f16
// rows of one head's [S, D] matrix (rows at or past S are not stored).
template <int D>
__device__ __forceinline__ void store_rows(f16_bits* __restrict__ head, const float (*acc)[4], int row0, int S,
                                           float mul, int g, int t) {
    const int lo = row0 + g;
    const int hi = lo + 8;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
        const int col = dt * 8 + 2 * t;
        if (lo < S) {
            *reinterpret_cast<unsigned*>(head + static_cast<long long>(lo) * D + col) =
                pack_f16x2(acc[dt][0] * mul, acc[dt][1] * mul);
        }
        if (hi < S) {
            *reinterpret_cast<unsigned*>(head + static_cast<long long>(hi) * D + col) =
                pack_f16x2(acc[dt][2] * mul, acc[dt][3] * mul);
        }
    }
}

// The swizzle as address arithmetic. Every ldmatrix lane address here is
//   tile + row * 2D + (c0 + 2 * step) * 16,   row & 7 == lane & 7,  c0 in {0, 1},
// and the tile bases are multiples of 128 bytes (rows of 128 or 256 bytes), so the swizzled form
// (chunk ^ (row & 7)) * 16 is an XOR of bits 4..6 with (lane & 7) << 4. lane_xor applies it to
// the step-0 address; kstep_addr then moves by `step` chunk pairs: bits 5..6 of the move (which
// the XOR touches) by an XOR, the rest (multiples of 128 bytes, which it does not) by an add.
__device__ __forceinline__ unsigned lane_xor(unsigned addr, int lane) {
    return addr ^ ((lane & 7) << 4);
}

__device__ __forceinline__ unsigned kstep_addr(unsigned swizzled0, int step) {
    return (swizzled0 ^ ((step & 3) << 5)) + ((step >> 2) << 7);
}

// acc[16 x 64] = X[rows xrow0.., :] . Y[0..63, :]^T over the D columns, X and Y swizzled tiles in
// shared memory (X's 16 rows are the warp's; Y's 64 rows are the 8 n-tiles of the result).
template <int D>
__device__ __forceinline__ void xyt_16x64(float (*acc)[4], unsigned xtile, int xrow0, unsigned ytile, int lane) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    }
    const unsigned a0 = lane_xor(xtile + (xrow0 + (lane & 15)) * (2 * D) + ((lane >> 4) << 4), lane);
    const unsigned b0 = lane_xor(ytile + ((lane & 7) + ((lane >> 4) << 3)) * (2 * D) + (((lane >> 3) & 1) << 4), lane);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        unsigned a[4];
        ldsm_x4(kstep_addr(a0, kk), a);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
            unsigned b[4];
            ldsm_x4(kstep_addr(b0, kk) + np * 16 * (2 * D), b);
            mma_16816(acc[2 * np], a, b[0], b[1]);
            mma_16816(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}

// acc[16 x D] += A[16 x 64] . Y[0..63, :], A in registers (4 k-steps of f16x2 fragments), Y a
// swizzled [64, D] tile in shared memory.
template <int D>
__device__ __forceinline__ void ay_16xD(float (*acc)[4], const unsigned (*a)[4], unsigned ytile, int lane) {
    const unsigned b0 = lane_xor(ytile + (lane & 15) * (2 * D) + ((lane >> 4) << 4), lane);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
            unsigned b[4];
            ldsm_x4_t(kstep_addr(b0, dp) + kk * 16 * (2 * D), b);
            mma_16816(acc[2 * dp], a[kk], b[0], b[1]);
            mma_16816(acc[2 * dp + 1], a[kk], b[2], b[3]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// attn_bwd_preprocess: Delta = rowsum(dO * O). Block: 4 warps x 4 rows; a lane reads D/32
// consecutive elements of a row, the warp sums them.

template <int D>
__device__ __forceinline__ void preprocess_body(const f16_bits* __restrict__ O, const f16_bits* __restrict__ dO,
                                                float* __restrict__ Delta, int S) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    constexpr int PER_LANE = D / 32;  // 2 or 4 elements
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int row = blockIdx.x * 16 + warp * 4 + r;
        if (row >= S) {
            break;  // uniform across the warp
        }
        const long long base = (head + row) * D + lane * PER_LANE;
        float sum = 0.0f;
#pragma unroll
        for (int e = 0; e < PER_LANE; ++e) {
            sum += f16_to_f32(O[base + e]) * f16_to_f32(dO[base + e]);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        }
        if (lane == 0) {
            Delta[head + row] = sum;
        }
    }
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS)
attn_bwd_preprocess(const f16_bits* __restrict__ O, const f16_bits* __restrict__ dO, float* __restrict__ Delta,
                    int S, int D) {
    if (D == 64) {
        preprocess_body<64>(O, dO, Delta, S);
    } else if (D == 128) {
        preprocess_body<128>(O, dO, Delta, S);
    }
}

// ---------------------------------------------------------------------------------------------
// attn_bwd_dkdv: block (n-tile, b*H + h) owns keys n0 .. n0+63; warp w the 16 keys n0 + 16w ..

// One query tile (m0 ..) against the block's keys, from the stage at sQ (Q, dO, LSE, Delta).
// MASK: the tile holds the causal diagonal or query S - 1; every other tile is wholly visible.
template <int D, bool MASK>
__device__ __forceinline__ void dkdv_tile(float (&dk)[D / 8][4], float (&dv)[D / 8][4], unsigned sK, unsigned sV,
                                          unsigned sQ, const float* __restrict__ sLSE, int m0, int kv_lo, int kv_hi,
                                          int S, int causal, float scale_log2, int warp, int lane) {
    constexpr int TILE_BYTES = BWD_TILE * D * 2;
    const int t = lane & 3;
    const unsigned sdO = sQ + TILE_BYTES;
    const float* sDelta = sLSE + BWD_TILE;

    // S^T = K Q^T (16 keys x 64 queries), then P^T = exp(scale S^T - LSE), packed as A fragments.
    unsigned pa[4][4];
    {
        float s[8][4];
        xyt_16x64<D>(s, sK, warp * 16, sQ, lane);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = nt * 8 + 2 * t + (e & 1);
                float p = fast_exp2(fmaf(s[nt][e], scale_log2, -sLSE[col] * BWD_LOG2E));
                if (MASK) {
                    const int q = m0 + col;
                    const int kv = e < 2 ? kv_lo : kv_hi;
                    if (q >= S || (causal && kv > q)) {
                        p = 0.0f;
                    }
                }
                s[nt][e] = p;
            }
        }
        pack_a_16x64(s, pa);
    }

    // dV += P^T dO
    ay_16xD<D>(dv, pa, sdO, lane);

    // dP^T = V dO^T, then dS^T = P^T * (dP^T - Delta), packed as A fragments.
    unsigned dsa[4][4];
    {
        float dp[8][4];
        xyt_16x64<D>(dp, sV, warp * 16, sdO, lane);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = nt * 8 + 2 * t + (e & 1);
                const float p = f16x2_half(pa[nt >> 1][((nt & 1) << 1) | (e >> 1)], e & 1);
                dp[nt][e] = p * (dp[nt][e] - sDelta[col]);
            }
        }
        pack_a_16x64(dp, dsa);
    }

    // dK += dS^T Q (scaled at the end)
    ay_16xD<D>(dk, dsa, sQ, lane);
}

template <int D>
__device__ __forceinline__ void dkdv_body(const f16_bits* __restrict__ Q, const f16_bits* __restrict__ K,
                                          const f16_bits* __restrict__ V, const f16_bits* __restrict__ dO,
                                          const float* __restrict__ LSE, const float* __restrict__ Delta,
                                          f16_bits* __restrict__ dK, f16_bits* __restrict__ dV, int S, int causal,
                                          float scale, unsigned char* smem) {
    constexpr int TILE_BYTES = BWD_TILE * D * 2;
    constexpr int STAGE_BYTES = 2 * TILE_BYTES + 2 * BWD_TILE * 4;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int n_tile = blockIdx.x;
    const int n0 = n_tile * BWD_TILE;
    const long long head = static_cast<long long>(blockIdx.y) * S;  // the head's first row
    const f16_bits* Qh = Q + head * D;
    const f16_bits* dOh = dO + head * D;
    const TileLane<D> tl = tile_lane<D>(tid);
    // LSE (threads 0-63) and Delta (64-127): one value a thread, i = tid & 63 of the 64 rows.
    const int stat_i = tid & 63;
    const float* stat_head = (tid < 64 ? LSE : Delta) + head;
    const unsigned stat_dst = 2 * TILE_BYTES + (tid < 64 ? 0 : BWD_TILE * 4) + stat_i * 4;

    const unsigned base = smem_u32(smem);
    const unsigned sK = base;
    const unsigned sV = base + TILE_BYTES;
    const unsigned stage0 = base + 2 * TILE_BYTES;
    const float* stats = reinterpret_cast<const float*>(smem + 2 * TILE_BYTES + 2 * TILE_BYTES);

    const int q_tiles = (S + BWD_TILE - 1) / BWD_TILE;
    const int first = causal ? n_tile : 0;  // query tiles before the diagonal see none of these keys

    // The query-side tiles of query tile `it` into stage `st`: Q, dO and 64 LSE and Delta values.
    auto load_query_side = [&](int st, int it) {
        const unsigned s = stage0 + st * STAGE_BYTES;
        const int m0 = it * BWD_TILE;
        load_tile<D>(s, Qh, m0, S, tl);
        load_tile<D>(s + TILE_BYTES, dOh, m0, S, tl);
        const bool in = stat_i < S - m0;
        cp_async_4(s + stat_dst, in ? stat_head + m0 + stat_i : LSE, in ? 4 : 0);
    };

    load_tile<D>(sK, K + head * D, n0, S, tl);
    load_tile<D>(sV, V + head * D, n0, S, tl);
    load_query_side(0, first);  // first < q_tiles: n_tile < ceil_div(S, 64)
    cp_async_commit();

    float dk[D / 8][4];
    float dv[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
        dk[dt][0] = dk[dt][1] = dk[dt][2] = dk[dt][3] = 0.0f;
        dv[dt][0] = dv[dt][1] = dv[dt][2] = dv[dt][3] = 0.0f;
    }
    const float scale_log2 = scale * BWD_LOG2E;
    const int kv_lo = n0 + warp * 16 + g;  // the keys of this thread's accumulator rows
    const int kv_hi = kv_lo + 8;

    // The pipeline, one barrier a tile: wait for this thread's copies of tile `it` (the only group
    // in flight), then the barrier, after which (a) every thread's copies of tile `it` are visible
    // and (b) every warp has finished tile it - 1, the last reader of the other stage, which the
    // loads of tile it + 1 then refill while tile `it` is computed.
    // Masked tiles peeled: the causal diagonal (the first tile, it == n_tile) and the ragged last
    // tile (S % 64 != 0) take the masked instance; the tiles between see all 64 x 64 pairs and run
    // the instance without masking code (the branch between them is uniform across the block).
    const int masked_last = (S % BWD_TILE) != 0 ? q_tiles - 1 : q_tiles;  // q_tiles: none
    for (int it = first; it < q_tiles; ++it) {
        const int st = (it - first) & 1;
        cp_async_wait<0>();
        __syncthreads();
        if (it + 1 < q_tiles) {
            load_query_side(st ^ 1, it + 1);
            cp_async_commit();
        }
        const unsigned sQ = stage0 + st * STAGE_BYTES;
        const float* sLSE = stats + st * (STAGE_BYTES / 4);
        if ((causal && it == first) || it == masked_last) {
            dkdv_tile<D, true>(dk, dv, sK, sV, sQ, sLSE, it * BWD_TILE, kv_lo, kv_hi, S, causal, scale_log2, warp,
                               lane);
        } else {
            dkdv_tile<D, false>(dk, dv, sK, sV, sQ, sLSE, it * BWD_TILE, kv_lo, kv_hi, S, causal, scale_log2, warp,
                                lane);
        }
    }
    cp_async_wait<0>();  // nothing is in flight here (the last tile loads nothing); kept as a guard

    store_rows<D>(dK + head * D, dk, n0 + warp * 16, S, scale, g, t);
    store_rows<D>(dV + head * D, dv, n0 + warp * 16, S, 1.0f, g, t);
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS)
attn_bwd_dkdv(const f16_bits* __restrict__ Q, const f16_bits* __restrict__ K, const f16_bits* __restrict__ V,
              const f16_bits* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
              f16_bits* __restrict__ dK, f16_bits* __restrict__ dV, int S, int D, int causal, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (D == 64) {
        dkdv_body<64>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal, scale, smem);
    } else if (D == 128) {
        dkdv_body<128>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal, scale, smem);
    }
}

// ---------------------------------------------------------------------------------------------
// attn_bwd_dq: block (m-tile, b*H + h) owns queries m0 .. m0+63 (the grid's last x first, so that
// with causal masking the longest blocks start first); warp w the 16 queries m0 + 16w ..

// One key tile (n0 ..) against the block's queries, from the stage at sK (K, V). MASK: the tile
// holds the causal diagonal or key S - 1; every other tile is wholly visible.
template <int D, bool MASK>
__device__ __forceinline__ void dq_tile(float (&dq)[D / 8][4], unsigned sQ, unsigned sdO, unsigned sK, int n0,
                                        int q_lo, int q_hi, float lse_lo, float lse_hi, float delta_lo,
                                        float delta_hi, int S, int causal, float scale_log2, int warp, int lane) {
    constexpr int TILE_BYTES = BWD_TILE * D * 2;
    const int t = lane & 3;
    const unsigned sV = sK + TILE_BYTES;

    // S = Q K^T (16 queries x 64 keys), P = exp(scale S - LSE)
    float s[8][4];
    xyt_16x64<D>(s, sQ, warp * 16, sK, lane);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float p = fast_exp2(fmaf(s[nt][e], scale_log2, -(e < 2 ? lse_lo : lse_hi)));
            if (MASK) {
                const int kv = n0 + nt * 8 + 2 * t + (e & 1);
                const int q = e < 2 ? q_lo : q_hi;
                if (kv >= S || (causal && kv > q)) {
                    p = 0.0f;
                }
            }
            s[nt][e] = p;
        }
    }

    // dP = dO V^T, dS = P * (dP - Delta), packed as A fragments (k = the 64 keys)
    unsigned dsa[4][4];
    {
        float dp[8][4];
        xyt_16x64<D>(dp, sdO, warp * 16, sV, lane);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                dp[nt][e] = s[nt][e] * (dp[nt][e] - (e < 2 ? delta_lo : delta_hi));
            }
        }
        pack_a_16x64(dp, dsa);
    }

    // dQ += dS K (scaled at the end)
    ay_16xD<D>(dq, dsa, sK, lane);
}

template <int D>
__device__ __forceinline__ void dq_body(const f16_bits* __restrict__ Q, const f16_bits* __restrict__ K,
                                        const f16_bits* __restrict__ V, const f16_bits* __restrict__ dO,
                                        const float* __restrict__ LSE, const float* __restrict__ Delta,
                                        f16_bits* __restrict__ dQ, int S, int causal, float scale,
                                        unsigned char* smem) {
    constexpr int TILE_BYTES = BWD_TILE * D * 2;
    constexpr int STAGE_BYTES = 2 * TILE_BYTES;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int m_tile = gridDim.x - 1 - blockIdx.x;
    const int m0 = m_tile * BWD_TILE;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    const f16_bits* Kh = K + head * D;
    const f16_bits* Vh = V + head * D;
    const TileLane<D> tl = tile_lane<D>(tid);

    const unsigned base = smem_u32(smem);
    const unsigned sQ = base;
    const unsigned sdO = base + TILE_BYTES;
    const unsigned stage0 = base + 2 * TILE_BYTES;

    const int kv_tiles_all = (S + BWD_TILE - 1) / BWD_TILE;
    const int kv_tiles = causal ? min(m_tile + 1, kv_tiles_all) : kv_tiles_all;  // later tiles are masked

    load_tile<D>(sQ, Q + head * D, m0, S, tl);
    load_tile<D>(sdO, dO + head * D, m0, S, tl);
    load_tile<D>(stage0, Kh, 0, S, tl);
    load_tile<D>(stage0 + TILE_BYTES, Vh, 0, S, tl);
    cp_async_commit();

    const int q_lo = m0 + warp * 16 + g;  // the queries of this thread's accumulator rows
    const int q_hi = q_lo + 8;
    const float lse_lo = q_lo < S ? LSE[head + q_lo] * BWD_LOG2E : 0.0f;
    const float lse_hi = q_hi < S ? LSE[head + q_hi] * BWD_LOG2E : 0.0f;
    const float delta_lo = q_lo < S ? Delta[head + q_lo] : 0.0f;
    const float delta_hi = q_hi < S ? Delta[head + q_hi] : 0.0f;
    const float scale_log2 = scale * BWD_LOG2E;

    float dq[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
        dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.0f;
    }

    // The pipeline, one barrier a tile (as in dkdv): wait for tile j (the only group in flight),
    // the barrier (tile j visible to all; every warp done with tile j - 1, the other stage's last
    // reader), then tile j + 1's loads into the other stage. Returns tile j's stage.
    auto begin_tile = [&](int j) -> unsigned {
        const int st = j & 1;
        cp_async_wait<0>();
        __syncthreads();
        if (j + 1 < kv_tiles) {
            const unsigned next = stage0 + (st ^ 1) * STAGE_BYTES;
            load_tile<D>(next, Kh, (j + 1) * BWD_TILE, S, tl);
            load_tile<D>(next + TILE_BYTES, Vh, (j + 1) * BWD_TILE, S, tl);
            cp_async_commit();
        }
        return stage0 + st * STAGE_BYTES;
    };

    // Masked tile peeled: only the last key tile can be masked (the causal diagonal, j == m_tile,
    // or the ragged tile holding key S - 1); the tiles before it see all 64 x 64 pairs.
    const bool mask_last = causal || (S % BWD_TILE) != 0;
    const int full_end = mask_last ? kv_tiles - 1 : kv_tiles;
    int j = 0;
    for (; j < full_end; ++j) {
        const unsigned sK = begin_tile(j);
        dq_tile<D, false>(dq, sQ, sdO, sK, j * BWD_TILE, q_lo, q_hi, lse_lo, lse_hi, delta_lo, delta_hi, S, causal,
                          scale_log2, warp, lane);
    }
    if (j < kv_tiles) {  // mask_last: j == kv_tiles - 1
        const unsigned sK = begin_tile(j);
        dq_tile<D, true>(dq, sQ, sdO, sK, j * BWD_TILE, q_lo, q_hi, lse_lo, lse_hi, delta_lo, delta_hi, S, causal,
                         scale_log2, warp, lane);
    }
    cp_async_wait<0>();  // nothing is in flight here (the last tile loads nothing); kept as a guard

    store_rows<D>(dQ + head * D, dq, m0 + warp * 16, S, scale, g, t);
}

// Two blocks an SM (2 x 128 threads x <= 256 registers, 2 x 98,304 bytes of shared memory at
// D = 128 on sm_90).
extern "C" __global__ void __launch_bounds__(BWD_THREADS, 2)
attn_bwd_dq(const f16_bits* __restrict__ Q, const f16_bits* __restrict__ K, const f16_bits* __restrict__ V,
            const f16_bits* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
            f16_bits* __restrict__ dQ, int S, int D, int causal, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (D == 64) {
        dq_body<64>(Q, K, V, dO, LSE, Delta, dQ, S, causal, scale, smem);
    } else if (D == 128) {
        dq_body<128>(Q, K, V, dO, LSE, Delta, dQ, S, causal, scale, smem);
    }
}
