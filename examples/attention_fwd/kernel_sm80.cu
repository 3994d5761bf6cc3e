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
//     threads = 2 warpgroups of 4 warps. blockIdx.x is walked backwards, so that under causal
//     masking the longest query tiles start first.
//   * The two warpgroups split the keys: warpgroup w takes the key tiles j = w, w + 2, w + 4, ...
//     (64 keys each, BLOCK_N) for all 128 query rows, and the two partial results (row max m,
//     row sum l, unnormalised O) are merged through shared memory at the end. Inside a warpgroup
//     each warp owns 32 query rows (two m16 row groups), so every K and V B fragment it loads
//     with ldmatrix feeds two mma: half the shared-memory traffic per flop of 16 rows per warp.
//   * The warpgroups synchronise only with their own named barrier (bar.sync 1 + w, 128), so
//     one's softmax overlaps the other's mma. Each has its own single K and V buffer filled by
//     cp.async.cg (zero-filled past S), FlashAttention-2's order: V(j) is issued once K(j) has
//     landed (and everyone is done with V(j-2)), K(j+2) once V(j) has landed (and everyone is
//     done with K(j)): V's copy overlaps Q K^T, K's copy the softmax and P V.
//   * Q stays in shared memory (both warpgroups read it); its A fragments are loaded by
//     ldmatrix.x4 per k16 step (32 rows: two x4 per step), not held in registers.
//   * S = Q K^T (mma.sync.m16n8k16.row.col.f32.f16.f16.f32), K's B fragments by ldmatrix.x4
//     (K rows are B's columns: no .trans).
//   * Online softmax in registers, base 2: the raw logits' row max is taken first, then
//     p = ex2(s * scale * log2(e) - m) in one FFMA per logit, with m the running row max in
//     base-2 units; the row sum l and the O accumulator are rescaled by ex2(m_old - m_new)
//     (skipped when no row of the warp changed its max).
//   * O += P V: P is re-packed from the S accumulators into fp16 A fragments (the C layout of
//     two n8 tiles is the A layout of one k16 step), V's B fragments by ldmatrix.x4.trans.
//   * Causal: key tiles past the block's last query row are never loaded; a warp skips the math
//     of a tile that lies wholly after its 32 rows; only tiles that cross a warp's diagonal (and
//     the tile holding key S-1) are masked element by element.
//   * Epilogue: warpgroup 1 writes its (m, l, O) to shared memory, warpgroup 0 merges them into
//     its own, rounds O / l to fp16 (cvt.rn.f16x2.f32), stages it through each warp's own rows and
//     stores 16-byte rows; LSE = (m + log2 l) * ln 2.
//
// Dynamic shared memory (1280 * D + 4096 bytes: 84 KiB at D = 64, 164 KiB at D = 128; one block
// an SM either way, as 255 registers x 256 threads already are):
//   Q 128 x D + 2 warpgroups x (K 64 x D + V 64 x D) halves = 768 * D bytes, then the merge buffer,
//   (D + 8) floats x 128 threads = 512 * D + 4096 bytes, a region of its own. (Laid over the tiles,
//   as at first, it was ordered by the __syncthreads before the merge, but racecheck reported a WAR
//   hazard there whenever warpgroup 1 had no key tile and so never ran its named barrier; a probe
//   kernel, tools/racecheck_probe.cu, shows racecheck doing that for any such pair. The memory is
//   there, so no tool has to be argued with.)
// Every tile row is D halves = D / 8 16-byte chunks; chunk c of row r lives at
// r * 2D + ((c ^ (r & 7)) * 16) bytes, so the 8 rows an ldmatrix 8x8 matrix reads (one chunk
// column, 8 consecutive rows) fall in 8 distinct bank groups.
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
#define ATTN_THREADS 256 // 2 warpgroups x 4 warps x 32 query rows
#define ATTN_WG 128      // threads per warpgroup

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

// Barrier of one warpgroup's 128 threads (ids 1 and 2; __syncthreads is barrier 0).
__device__ __forceinline__ void wg_barrier(int id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
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
// tile, by NT threads (tid in 0 .. NT - 1); rows at or past S are zero-filled (and read nothing:
// their source is row 0).
template <int D, int ROWS, int NT>
__device__ __forceinline__ void load_rows(unsigned tile, const __half* __restrict__ head, int row0, int S,
                                          int tid) {
    constexpr int CPR = D / 8;  // 16-byte chunks per row
    static_assert((ROWS * CPR) % NT == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < (ROWS * CPR) / NT; ++i) {
        const int id = tid + i * NT;
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
    constexpr int NMERGE = 2 * NTO * 4 + 8;  // floats per thread in the merge buffer: O, m, l
    static_assert(NMERGE * ATTN_WG * 4 == 512 * D + 4096, "the merge buffer is the launch's last 512 D + 4096 bytes");
    const float NEG_INF = __int_as_float(0xff800000);

    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int wg = warp >> 2;        // warpgroup: 0 or 1
    const int wq = warp & 3;         // warp within the warpgroup
    const int wtid = tid & (ATTN_WG - 1);

    const int m0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * ATTN_BM;
    if (m0 >= S) return;  // a grid larger than ceil_div(S, 128): nothing to do (uniform per block)
    const long long bh = static_cast<long long>(blockIdx.y);
    const __half* q = Q + bh * S * D;
    const __half* k = K + bh * S * D;
    const __half* v = V + bh * S * D;

    const unsigned sQ = smem_u32(smem);
    const unsigned sK = sQ + Q_BYTES + static_cast<unsigned>(wg) * (2 * KV_BYTES);  // this warpgroup's
    const unsigned sV = sK + KV_BYTES;

    int n_tiles = (S + ATTN_BN - 1) / ATTN_BN;
    if (causal) n_tiles = min(n_tiles, (min(m0 + ATTN_BM, S) - 1) / ATTN_BN + 1);
    const int n_mine = (n_tiles - wg + 1) >> 1;  // tiles wg, wg + 2, ... below n_tiles

    // Prologue: one group = Q (all 256 threads) and this warpgroup's first K tile.
    load_rows<D, ATTN_BM, ATTN_THREADS>(sQ, q, m0, S, tid);
    if (n_mine > 0) load_rows<D, ATTN_BN, ATTN_WG>(sK, k, wg * ATTN_BN, S, wtid);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();  // Q and both first K tiles visible to all

    const float sl2 = scale * 1.4426950408889634f;  // logits in base 2
    const int wrow = m0 + wq * 32;                   // this warp's first query row (32 rows)
    // This thread's rows: wrow + 16 mi + g + 8 h, for row group mi and half h (index 2 mi + h).

    float o[2][NTO][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int n = 0; n < NTO; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mi][n][e] = 0.0f;
    float m_run[4] = {NEG_INF, NEG_INF, NEG_INF, NEG_INF};  // running row max, base-2 units
    float l_run[4] = {0.0f, 0.0f, 0.0f, 0.0f};              // this thread's share of the row sum

    for (int i = 0; i < n_mine; ++i) {
        const int j = wg + 2 * i;  // the key tile
        const int key0 = j * ATTN_BN;
        if (i > 0) {
            // Committed by this thread: ..., V(j-2), K(j); one in flight at most = K(j).
            cp_async_wait<0>();
            wg_barrier(1 + wg);  // K(j) visible to the warpgroup; everyone is done with V(j-2)
        }
        load_rows<D, ATTN_BN, ATTN_WG>(sV, v, key0, S, wtid);
        cp_async_commit();

        // Does this tile hold any key <= the warp's last row? (uniform per warp)
        const bool live = !(causal && key0 > wrow + 31);

        // S = Q K(j)^T: 32 rows x 64 keys per warp, 2 x 8 n8 tiles.
        float s[2][8][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mi][n][e] = 0.0f;
        if (live) {
#pragma unroll
            for (int kk = 0; kk < KQK; ++kk) {
                unsigned qa[2][4];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    const int r = wq * 32 + mi * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    ldmatrix_x4(sQ + swz<D>(r, 2 * kk + (lane >> 4)), qa[mi]);
                }
#pragma unroll
                for (int np = 0; np < 4; ++np) {
                    const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                    unsigned b[4];
                    ldmatrix_x4(sK + swz<D>(key, 2 * kk + ((lane >> 3) & 1)), b);
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        mma_16816(s[mi][2 * np], qa[mi], b[0], b[1]);
                        mma_16816(s[mi][2 * np + 1], qa[mi], b[2], b[3]);
                    }
                }
            }
        }

        // Committed: ..., K(j), V(j); one in flight = V(j).
        cp_async_wait<0>();
        wg_barrier(1 + wg);  // V(j) visible to the warpgroup; everyone is done with K(j)
        if (i + 1 < n_mine) load_rows<D, ATTN_BN, ATTN_WG>(sK, k, key0 + 2 * ATTN_BN, S, wtid);
        cp_async_commit();  // always: an empty group keeps the count

        if (live) {
            // Mask (raw logits) keys past S and, under causal, keys after the row.
            if (key0 + ATTN_BN > S || (causal && key0 + ATTN_BN - 1 > wrow)) {  // uniform per warp
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
                    for (int n = 0; n < 8; ++n) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int key = key0 + n * 8 + 2 * t + (e & 1);
                            const int row = wrow + mi * 16 + g + ((e >> 1) << 3);
                            if (key >= S || (causal && key > row)) s[mi][n][e] = NEG_INF;
                        }
                    }
                }
            }

            // Online softmax: the raw row max over the quad (the 4 lanes that share a row).
            float mx[4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
                mx[2 * mi] = fmaxf(s[mi][0][0], s[mi][0][1]);
                mx[2 * mi + 1] = fmaxf(s[mi][0][2], s[mi][0][3]);
#pragma unroll
                for (int n = 1; n < 8; ++n) {
                    mx[2 * mi] = fmaxf(mx[2 * mi], fmaxf(s[mi][n][0], s[mi][n][1]));
                    mx[2 * mi + 1] = fmaxf(mx[2 * mi + 1], fmaxf(s[mi][n][2], s[mi][n][3]));
                }
            }
            float alpha[4], nbase[4];
            bool grew = false;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                const float mn = fmaxf(m_run[r], mx[r] * sl2);  // sl2 > 0: max commutes with it
                const float base = mn == NEG_INF ? 0.0f : mn;  // a row masked so far: finite exponents
                alpha[r] = ex2(m_run[r] - base);                // 0 on the first tile (m_run = -inf)
                grew |= mn != m_run[r];
                m_run[r] = mn;
                nbase[r] = -base;
            }
            float rs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
                for (int n = 0; n < 8; ++n) {
                    s[mi][n][0] = ex2(fmaf(s[mi][n][0], sl2, nbase[2 * mi]));
                    s[mi][n][1] = ex2(fmaf(s[mi][n][1], sl2, nbase[2 * mi]));
                    s[mi][n][2] = ex2(fmaf(s[mi][n][2], sl2, nbase[2 * mi + 1]));
                    s[mi][n][3] = ex2(fmaf(s[mi][n][3], sl2, nbase[2 * mi + 1]));
                    rs[2 * mi] += s[mi][n][0] + s[mi][n][1];
                    rs[2 * mi + 1] += s[mi][n][2] + s[mi][n][3];
                }
            }
#pragma unroll
            for (int r = 0; r < 4; ++r) l_run[r] = l_run[r] * alpha[r] + rs[r];
            if (__any_sync(0xffffffffu, grew)) {  // some row's max grew: alpha != 1 somewhere
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
                    for (int n = 0; n < NTO; ++n) {
                        o[mi][n][0] *= alpha[2 * mi];
                        o[mi][n][1] *= alpha[2 * mi];
                        o[mi][n][2] *= alpha[2 * mi + 1];
                        o[mi][n][3] *= alpha[2 * mi + 1];
                    }
                }
            }

            // O += P V(j): 32 rows x D per warp; P as fp16 A fragments, one per k16 step.
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                unsigned pf[2][4];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    pf[mi][0] = pack_half2(s[mi][2 * kk][0], s[mi][2 * kk][1]);
                    pf[mi][1] = pack_half2(s[mi][2 * kk][2], s[mi][2 * kk][3]);
                    pf[mi][2] = pack_half2(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
                    pf[mi][3] = pack_half2(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
                }
#pragma unroll
                for (int dp = 0; dp < NTO / 2; ++dp) {
                    const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    unsigned b[4];
                    ldmatrix_x4_trans(sV + swz<D>(key, 2 * dp + (lane >> 4)), b);
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        mma_16816(o[mi][2 * dp], pf[mi], b[0], b[1]);
                        mma_16816(o[mi][2 * dp + 1], pf[mi], b[2], b[3]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();  // only empty groups remain; nothing may be in flight at exit

    // Merge the two warpgroups' partial results: warpgroup 1 writes its m, l and O, thread by
    // thread (float x of thread w at (x * 128 + w) * 4: conflict-free), warpgroup 0 reads them.
    float* mb = reinterpret_cast<float*>(smem + Q_BYTES + 4 * KV_BYTES);  // its own region: read by no loop
    __syncthreads();  // every warp is done with Q, K and V
    if (wg == 1) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            mb[r * ATTN_WG + wtid] = m_run[r];
            mb[(4 + r) * ATTN_WG + wtid] = l_run[r];
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int n = 0; n < NTO; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) mb[(8 + (mi * NTO + n) * 4 + e) * ATTN_WG + wtid] = o[mi][n][e];
    }
    __syncthreads();  // warpgroup 1's partial results visible
    if (wg == 1) return;

    float a0[4], a1[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const float m1 = mb[r * ATTN_WG + wtid];
        const float l1 = mb[(4 + r) * ATTN_WG + wtid];
        const float mn = fmaxf(m_run[r], m1);
        const float base = mn == NEG_INF ? 0.0f : mn;
        a0[r] = ex2(m_run[r] - base);  // 1 for the warpgroup that holds the max, 0 for a row it never saw
        a1[r] = ex2(m1 - base);
        l_run[r] = l_run[r] * a0[r] + l1 * a1[r];
        m_run[r] = mn;
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int n = 0; n < NTO; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                o[mi][n][e] = o[mi][n][e] * a0[2 * mi + (e >> 1)] +
                              mb[(8 + (mi * NTO + n) * 4 + e) * ATTN_WG + wtid] * a1[2 * mi + (e >> 1)];
    wg_barrier(1);  // warpgroup 0 is done reading the merge buffer (staging below overwrites it)

    // Row sums over the quad, then O / l to fp16 and the log-sum-exp.
    float inv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
        inv[r] = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
    }
    // Stage this warp's 32 rows of O in rows wq * 32 .. + 31 of the Q tile, then store them as
    // whole 16-byte chunks (the warp reads back only the rows it wrote).
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
        const int lr = wq * 32 + mi * 16 + g;  // local row of c0/c1; c2/c3 are lr + 8 (same r & 7)
#pragma unroll
        for (int n = 0; n < NTO; ++n) {
            const unsigned off = swz<D>(lr, n) + 4 * t;
            *reinterpret_cast<unsigned*>(smem + off) =
                pack_half2(o[mi][n][0] * inv[2 * mi], o[mi][n][1] * inv[2 * mi]);
            *reinterpret_cast<unsigned*>(smem + off + 8 * 2 * D) =
                pack_half2(o[mi][n][2] * inv[2 * mi + 1], o[mi][n][3] * inv[2 * mi + 1]);
        }
    }
    __syncwarp();
    __half* out = O + bh * S * D;
#pragma unroll
    for (int x = 0; x < (32 * CPR) / 32; ++x) {
        const int id = lane + 32 * x;
        const int r = id / CPR;
        const int c = id % CPR;
        const int row = wrow + r;
        if (row < S) {
            const uint4 val = *reinterpret_cast<const uint4*>(smem + swz<D>(wq * 32 + r, c));
            *reinterpret_cast<uint4*>(out + static_cast<long long>(row) * D + c * 8) = val;
        }
    }
    if (t == 0) {
        float* lse = LSE + bh * S;
        const float LN2 = 0.6931471805599453f;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = wrow + (r >> 1) * 16 + g + (r & 1) * 8;
            if (row < S) lse[row] = (m_run[r] + log2f(l_run[r])) * LN2;
        }
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
