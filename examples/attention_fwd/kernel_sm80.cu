// porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a
//
// attn_fwd (sm_80): FlashAttention-2-style attention forward, fp16 in, fp32 accumulate, fp16 out.
//
//   Q, K, V, O: fp16 [B, H, S, D], contiguous row-major; D = 64 or 128 (dispatched at run time).
//   O[i]   = sum_j softmax_j(scale * q_i . k_j) v_j   over the unmasked j (causal: j <= i)
//   LSE[i] = log(sum_j exp(scale * q_i . k_j))        natural log, fp32 [B, H, S]
//   S: any length >= 1; tails (S not a multiple of the tiles) are zero-filled and masked.
//
// Ampere-style structure (mma.sync + ldmatrix + cp.async), nothing newer than sm_80:
//   * grid (ceil_div(S, 128), B * H); one block = 128 query rows of one head (BLOCK_M), 256
//     threads = 8 warps, one warp per 16 query rows. blockIdx.x is walked backwards, so that
//     under causal masking the longest query tiles start first.
//   * K and V stream through in tiles of 64 keys (BLOCK_N), each double-buffered in shared
//     memory by cp.async.cg (zero-filled past S). K(j+1) is issued as soon as tile j's K has
//     landed, V(j+1) as soon as tile j's V has landed: each load overlaps a whole tile of math.
//   * S = Q K^T (mma.sync.m16n8k16.row.col.f32.f16.f16.f32), Q's A fragments held in registers
//     (ldmatrix.x4 once), K's B fragments by ldmatrix.x4 (K rows are B's columns: no .trans).
//   * Online softmax in registers, base 2: logits are multiplied by scale * log2(e) once, so
//     p = ex2(s - m) with m the running row max in the same units; the row sum l and the O
//     accumulator are rescaled by ex2(m_old - m_new) when the max grows.
//   * O += P V: P is re-packed from the S accumulators into fp16 A fragments (the C layout of
//     two n8 tiles is the A layout of one k16 step), V's B fragments by ldmatrix.x4.trans.
//   * Causal: key tiles past the block's last query row are never loaded; only the diagonal
//     tiles (and the tile holding key S-1) are masked element by element.
//   * Epilogue: O / l rounded to fp16 (cvt.rn.f16x2.f32), staged through the warp's own rows of
//     the Q buffer and stored as 16-byte rows; LSE = (m + log2 l) * ln 2.
//
// Dynamic shared memory: Q 128 x D + K 2 x 64 x D + V 2 x 64 x D halves = 768 * D bytes
// (D = 64: 48 KiB, D = 128: 96 KiB). Every tile row is D halves = D / 8 16-byte chunks; chunk c of
// row r lives at r * 2D + ((c ^ (r & 7)) * 16) bytes, so the 8 rows an ldmatrix 8x8 matrix reads
// (one chunk column, 8 consecutive rows) fall in 8 distinct bank groups.
//
// Fragments (PTX ISA, mma.m16n8k16 f16; g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8, col):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16x8, f32):  c0, c1 = C[g][2t..2t+1], c2, c3 = C[g+8][2t..2t+1]
//   S = Q K^T: B[k = d][n = key] = K[key][d], so one stored 8x8 block of K (8 keys, 8 d) read
//     without .trans hands thread (g, t) K[g][2t..2t+1] = b0.
//   O = P V:   B[k = key][n = d] = V[key][d], so a stored 8x8 block of V (8 keys, 8 d) read with
//     .trans hands thread (g, t) V[2t..2t+1][g] = b0.
//   P as A: for k16 step kk, n8 tiles 2kk and 2kk+1 of S give (a0, a1) and (a2, a3).

#include <cuda_fp16.h>

#define ATTN_BM 128      // query rows per block
#define ATTN_BN 64       // keys per tile
#define ATTN_THREADS 256 // 8 warps x 16 query rows

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; bytes past src_bytes (0 or 16 here) are zero-filled.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    const unsigned long long gsrc = static_cast<unsigned long long>(__cvta_generic_to_global(src));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gsrc), "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned* r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned* r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// d += a . b for one m16n8k16 tile (fp16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma_16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2(-inf) = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Two floats to one f16x2 register, rounded to nearest even: lo in bits 0-15 (the lower column).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// Byte offset of 16-byte chunk c of row r in a swizzled tile of D halves per row.
template <int D>
__device__ __forceinline__ unsigned swz(int r, int c) {
    return static_cast<unsigned>(r * (2 * D) + ((c ^ (r & 7)) << 4));
}

// cp.async (no commit) rows row0 .. row0 + ROWS - 1 of one head's [S][D] slab into a swizzled
// tile; rows at or past S are zero-filled (and read nothing: their source is row 0).
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(unsigned tile, const __half* __restrict__ head, int row0, int S,
                                          int tid) {
    constexpr int CPR = D / 8;  // 16-byte chunks per row
    static_assert((ROWS * CPR) % ATTN_THREADS == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < (ROWS * CPR) / ATTN_THREADS; ++i) {
        const int id = tid + i * ATTN_THREADS;
        const int r = id / CPR;
        const int c = id % CPR;
        const int row = row0 + r;
        const bool in = row < S;
        const __half* src = head + static_cast<long long>(in ? row : 0) * D + c * 8;
        cp_async_16(tile + swz<D>(r, c), src, in ? 16 : 0);
    }
}

template <int D>
__device__ __forceinline__ void attn_block(const __half* __restrict__ Q, const __half* __restrict__ K,
                                           const __half* __restrict__ V, __half* __restrict__ O,
                                           float* __restrict__ LSE, int S, int causal, float scale,
                                           unsigned char* smem) {
    constexpr int KQK = D / 16;  // k16 steps of S = Q K^T
    constexpr int NTO = D / 8;   // n8 tiles of O
    constexpr int CPR = D / 8;
    constexpr unsigned Q_BYTES = ATTN_BM * D * 2;
    constexpr unsigned KV_BYTES = ATTN_BN * D * 2;
    const float NEG_INF = __int_as_float(0xff800000);

    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;

    const int m0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * ATTN_BM;
    if (m0 >= S) return;  // a grid larger than ceil_div(S, 128): nothing to do (uniform per block)
    const long long bh = static_cast<long long>(blockIdx.y);
    const __half* q = Q + bh * S * D;
    const __half* k = K + bh * S * D;
    const __half* v = V + bh * S * D;

    const unsigned sQ = smem_u32(smem);
    const unsigned sK = sQ + Q_BYTES;
    const unsigned sV = sK + 2 * KV_BYTES;

    int n_tiles = (S + ATTN_BN - 1) / ATTN_BN;
    if (causal) n_tiles = min(n_tiles, (min(m0 + ATTN_BM, S) - 1) / ATTN_BN + 1);

    // Prologue: group 0 = Q and K(0), group 1 = V(0).
    load_rows<D, ATTN_BM>(sQ, q, m0, S, tid);
    load_rows<D, ATTN_BN>(sK, k, 0, S, tid);
    cp_async_commit();
    load_rows<D, ATTN_BN>(sV, v, 0, S, tid);
    cp_async_commit();

    const float sl2 = scale * 1.4426950408889634f;  // logits in base 2
    const int wrow = m0 + warp * 16;                 // this warp's first query row
    const int row0 = wrow + g;                       // this thread's rows: row0 and row0 + 8

    float o[NTO][4];
#pragma unroll
    for (int n = 0; n < NTO; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
    float m_run[2] = {NEG_INF, NEG_INF};  // running row max, base-2 units
    float l_run[2] = {0.0f, 0.0f};        // this thread's share of the row sum
    unsigned qf[KQK][4];

    for (int j = 0; j < n_tiles; ++j) {
        const unsigned st = static_cast<unsigned>(j & 1);
        // Committed so far: K(0..j), V(0..j) in the order K0 V0 K1 V1 ...; one in flight = V(j).
        cp_async_wait<1>();
        __syncthreads();  // K(j) visible to all; everyone is done with K(j-1)'s stage
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < KQK; ++kk) {
                const int r = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                ldmatrix_x4(sQ + swz<D>(r, 2 * kk + (lane >> 4)), qf[kk]);
            }
        }
        if (j + 1 < n_tiles) load_rows<D, ATTN_BN>(sK + (st ^ 1u) * KV_BYTES, k, (j + 1) * ATTN_BN, S, tid);
        cp_async_commit();  // always: an empty group keeps the count

        // S = Q K(j)^T: 16 rows x 64 keys per warp, 8 n8 tiles.
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
        const unsigned kt = sK + st * KV_BYTES;
#pragma unroll
        for (int kk = 0; kk < KQK; ++kk) {
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                unsigned b[4];
                ldmatrix_x4(kt + swz<D>(key, 2 * kk + ((lane >> 3) & 1)), b);
                mma_16816(s[2 * np], qf[kk], b[0], b[1]);
                mma_16816(s[2 * np + 1], qf[kk], b[2], b[3]);
            }
        }

        // Base-2 logits; mask keys past S and, under causal, keys after the row.
        const int key0 = j * ATTN_BN;
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] *= sl2;
        if (key0 + ATTN_BN > S || (causal && key0 + ATTN_BN - 1 > wrow)) {  // uniform per warp
#pragma unroll
            for (int n = 0; n < 8; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = key0 + n * 8 + 2 * t + (e & 1);
                    const int row = row0 + ((e >> 1) << 3);
                    if (key >= S || (causal && key > row)) s[n][e] = NEG_INF;
                }
            }
        }

        // Online softmax: new row max over the quad (the 4 lanes that share a row).
        float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2], base[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            base[h] = mx[h] == NEG_INF ? 0.0f : mx[h];  // a row masked so far: keep exponents finite
            alpha[h] = ex2(m_run[h] - base[h]);         // 0 on the first tile (m_run = -inf)
            m_run[h] = mx[h];
        }
        float rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            s[n][0] = ex2(s[n][0] - base[0]);
            s[n][1] = ex2(s[n][1] - base[0]);
            s[n][2] = ex2(s[n][2] - base[1]);
            s[n][3] = ex2(s[n][3] - base[1]);
            rs[0] += s[n][0] + s[n][1];
            rs[1] += s[n][2] + s[n][3];
        }
        l_run[0] = l_run[0] * alpha[0] + rs[0];
        l_run[1] = l_run[1] * alpha[1] + rs[1];
#pragma unroll
        for (int n = 0; n < NTO; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        unsigned pf[4][4];  // P as fp16 A fragments, one per k16 step of 16 keys
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            pf[kk][0] = pack_half2(s[2 * kk][0], s[2 * kk][1]);
            pf[kk][1] = pack_half2(s[2 * kk][2], s[2 * kk][3]);
            pf[kk][2] = pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pf[kk][3] = pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }

        // Committed: ... V(j), K(j+1); one in flight = K(j+1).
        cp_async_wait<1>();
        __syncthreads();  // V(j) visible to all; everyone is done with V(j-1)'s stage
        if (j + 1 < n_tiles) load_rows<D, ATTN_BN>(sV + (st ^ 1u) * KV_BYTES, v, (j + 1) * ATTN_BN, S, tid);
        cp_async_commit();

        // O += P V(j): 16 rows x D per warp.
        const unsigned vt = sV + st * KV_BYTES;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
            for (int dp = 0; dp < NTO / 2; ++dp) {
                const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                unsigned b[4];
                ldmatrix_x4_trans(vt + swz<D>(key, 2 * dp + (lane >> 4)), b);
                mma_16816(o[2 * dp], pf[kk], b[0], b[1]);
                mma_16816(o[2 * dp + 1], pf[kk], b[2], b[3]);
            }
        }
    }
    cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit

    // Row sums over the quad, then O / l to fp16 and the log-sum-exp.
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
        l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
        inv[h] = l_run[h] > 0.0f ? 1.0f / l_run[h] : 0.0f;
    }
    // Stage this warp's 16 rows of O in its own 16 rows of the Q tile (read only at j == 0, by
    // this warp alone), then store them as whole 16-byte chunks.
    const int lr = warp * 16 + g;  // local row of c0/c1; c2/c3 are lr + 8 (same r & 7)
#pragma unroll
    for (int n = 0; n < NTO; ++n) {
        const unsigned off = swz<D>(lr, n) + 4 * t;
        *reinterpret_cast<unsigned*>(smem + off) = pack_half2(o[n][0] * inv[0], o[n][1] * inv[0]);
        *reinterpret_cast<unsigned*>(smem + off + 8 * 2 * D) = pack_half2(o[n][2] * inv[1], o[n][3] * inv[1]);
    }
    __syncwarp();
    __half* out = O + bh * S * D;
#pragma unroll
    for (int i = 0; i < (16 * CPR) / 32; ++i) {
        const int id = lane + 32 * i;
        const int r = id / CPR;
        const int c = id % CPR;
        const int row = wrow + r;
        if (row < S) {
            const uint4 val = *reinterpret_cast<const uint4*>(smem + swz<D>(warp * 16 + r, c));
            *reinterpret_cast<uint4*>(out + static_cast<long long>(row) * D + c * 8) = val;
        }
    }
    if (t == 0) {
        float* lse = LSE + bh * S;
        const float LN2 = 0.6931471805599453f;
        if (row0 < S) lse[row0] = (m_run[0] + log2f(l_run[0])) * LN2;
        if (row0 + 8 < S) lse[row0 + 8] = (m_run[1] + log2f(l_run[1])) * LN2;
    }
}

extern "C" __global__ void __launch_bounds__(ATTN_THREADS, 1)
attn_fwd(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
         __half* __restrict__ O, float* __restrict__ LSE, int B, int H, int S, int D, int causal, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (static_cast<int>(blockIdx.y) >= B * H) return;
    if (D == 64) {
        attn_block<64>(Q, K, V, O, LSE, S, causal, scale, smem);
    } else if (D == 128) {
        attn_block<128>(Q, K, V, O, LSE, S, causal, scale, smem);
    }
}
