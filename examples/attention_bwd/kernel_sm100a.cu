// porter-regen: arch=sm_100a ptxas=sm_100a reject=sm_90a,sm_100,sm_120a
// porter-kernel: entry = "attn_bwd_preprocess", grid = ["ceil_div(S, 16)", "B * H"], block = [128], args = ["O", "dO", "Delta", "S", "D"]
// porter-kernel: entry = "attn_bwd_dkdv", grid = ["ceil_div(S, 128)", "B * H"], block = [128], shared = "1024 * D + 34816", args = ["Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV", "S", "D", "causal", "scale"]
// porter-kernel: entry = "attn_bwd_dq", grid = ["ceil_div(S, 128)", "B * H"], block = [128], shared = "1024 * D + 17408", args = ["Q", "K", "V", "dO", "LSE", "Delta", "dQ", "S", "D", "causal", "scale"]
//
// The attention backward pass, Blackwell datacenter (sm_100a): the three kernels of
// kernel_sm90a.cu (same interface, same contract, see porter.toml and README.md) with the
// tensor-core products done by tcgen05.mma (kind::f16, cta_group::1, M = 128) into tensor memory
// (TMEM) instead of wgmma into registers:
//
//   attn_bwd_preprocess  Delta[i] = sum_d dO[i, d] * O[i, d]           (plain CUDA, as on sm_90a)
//   attn_bwd_dkdv        one CTA (128 threads) per 128 keys of a head, over the query tiles (64
//                        queries) that can see them; TMEM lane r = key n0 + r = thread r:
//                          S^T  = K Q^T        M 128 N 64, A = K, B = Q_i   (both K-major)
//                          dP^T = V dO^T       M 128 N 64, A = V, B = dO_i  (both K-major)
//                          P^T  = exp2(S^T scale log2e - LSE log2e), 0 where masked, f16
//                          dS^T = P^T * (dP^T - Delta)                        f16
//                          dV  += P^T dO       M 128 N D, A = P^T (smem, K-major), B = dO_i MN-major
//                          dK  += dS^T Q       M 128 N D, A = dS^T (smem),        B = Q_i MN-major
//   attn_bwd_dq          one CTA per 128 queries, over the key tiles (64 keys) it can see; TMEM
//                        lane r = query m0 + r = thread r:
//                          S = Q K^T, dP = dO V^T       M 128 N 64 (K-major)
//                          dQ  += dS K                  M 128 N D, A = dS (smem), B = K_j MN-major
// dK and dQ are scaled by `scale` at the end. No atomics: every output is written once.
//
// STATUS: NOT RUN. There is no Blackwell GPU here: this file is assembled with ptxas for sm_100a
// and its SASS inspected only (UTCHMMA present, no HMMA). Unverified on hardware: the sm_100
// shared-memory descriptor encoding (version 1 at [46,48), layout SWIZZLE_128B = 2 at [61,64)),
// the MN-major LBO / SBO meaning for B, the instruction-descriptor bits, and the TMEM lane/column
// mapping of M = 128 accumulators read with tcgen05.ld 32x32b. All of these are copied from
// examples/attention_fwd/kernel_sm100a.cu, itself assembled but not run.
//
// Synchronisation (simple, not fast; no warp specialisation): every thread loads with cp.async
// (commit groups, two stages of the streamed tiles, as kernel_sm90a.cu), waits its group, fences
// the generic proxy against the async proxy (fence.proxy.async) and the block synchronises
// (tcgen05.fence::before_thread_sync first, so every earlier tcgen05.ld is ordered before). Then
// thread 0 alone (tcgen05.fence::after_thread_sync) issues the MMAs and one tcgen05.commit to the
// single mbarrier `mma_bar`; all 128 threads wait on that mbarrier (parity toggled per commit)
// and fence (after_thread_sync) before reading TMEM with tcgen05.ld or reusing the shared memory
// the MMAs read. P^T / dS^T (dkdv) and dS (dq) are written by the threads to shared memory in
// the 128B-swizzled K-major layout the A descriptor expects, fenced (fence.proxy.async) and
// synchronised before the second batch of MMAs. So at most one batch of MMAs is in flight, and
// loads of the next stage overlap the current tile's MMAs and math.
//
// TMEM: allocated by warp 0 (tcgen05.alloc, power of two >= the columns used; relinquish_alloc
// right after), freed by warp 0 at the end (tcgen05.dealloc) after a fenced __syncthreads.
//   dkdv: S^T at column 0 (64 cols), dP^T at 64 (64), dV at 128 (D), dK at 128 + D (D):
//         384 columns used at D = 128 (alloc 512), 256 at D = 64 (alloc 256).
//   dq:   S at 0 (64), dP at 64 (64), dQ at 128 (D): 256 at D = 128, 192 at D = 64 (alloc 256).
// With the shared memory below, at most one dkdv CTA (D = 128) or two (D = 64) fit an SM, and one
// dq CTA (D = 128) or two (D = 64): never more than 512 columns asked for at once per SM, so
// tcgen05.alloc never has to wait on another CTA.
//
// Shared-memory layouts (as kernel_sm90a.cu; 128B swizzle: 16-byte chunk c of a 128-byte row r
// is stored at chunk c ^ (r % 8); every tile starts on a 1024-byte boundary). A tile of R rows x
// C f16 is C / 64 column blocks of R x 128 bytes; row r of block b at b * R * 128 + r * 128.
//   K-major operand (contraction over the tile's columns): SBO 1024 (8 rows), LBO unused (16);
//     k slab kk (16 columns) at block kk / 4, + (kk % 4) * 32 bytes.
//   MN-major B (contraction over the tile's 64 rows, N = D): LBO = 64 * 128 = 8192 (between
//     64-column blocks), SBO 1024; k slab kk (16 rows) at kk * 2048 bytes.
//   dkdv: K (128 x D) | V (128 x D) | stage s: Q_s, dO_s (64 x D each) | P^T, dS^T (128 x 64 each)
//         | LSE[64], Delta[64] per stage (512 bytes a stage) : 1024 D + 32768 + 1024 (+ 1024 align)
//   dq:   Q (128 x D) | dO (128 x D) | stage s: K_s, V_s (64 x D each) | dS (128 x 64)
//         : 1024 D + 16384 (+ 1024 align)
//
// Instruction descriptor (kind::f16): c_format [4,6) = 1 (F32), a_format [7,10) = 0 (F16),
// b_format [10,13) = 0 (F16), a_major [15] = 0 (K), b_major [16] (0: K, 1: MN), N >> 3 at [17,23),
// M >> 4 at [24,29). M = 128 everywhere: accumulator row r is TMEM lane r, column n is TMEM column
// (base + n), so warp w reads rows 32 w .. 32 w + 31 with tcgen05.ld.32x32b.
//
// Masking: rows (keys in dkdv, queries in dq) past S are zero-filled by cp.async and never
// stored; P is forced to 0 for a key or query past S and, when causal, for key > query. Every
// CTA sees at least one tile (dkdv: query tile 2 n_tile holds query n0 >= key n0; dq: key tile 0),
// so the first tile's first MMA (accumulate 0) always initialises dV, dK, dQ.
//
// Launch: 128 threads (4 warps) a block for every kernel; dkdv and dq 128-row tiles, grid
// (ceil_div(S, 128), B * H); the dq grid's x is walked in reverse (longest causal rows first).
#include <cuda_fp16.h>

#define BWD_BM 128       // rows of a CTA's own tile (keys in dkdv, queries in dq): the MMA's M
#define BWD_BN 64        // rows of a streamed tile (queries in dkdv, keys in dq): N of S, dP
#define BWD_THREADS 128
#define BWD_LOG2E 1.4426950408889634f
#define BWD_ALIGN 1024
#define BWD_SBO 1024                  // 8 rows x 128 bytes
#define BWD_MN_LBO (BWD_BN * 128)     // 8192: between 64-column blocks of a 64-row tile
#define UMMA_LAYOUT_SWIZZLE_128B 2ull

#define BWD_IDESC(N, B_MN_MAJOR) \
    ((1u << 4) | (0u << 7) | (0u << 10) | (0u << 15) | ((B_MN_MAJOR) << 16) | (((N) >> 3) << 17) | ((BWD_BM >> 4) << 24))

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- cp.async

// 16 bytes global -> shared; src_bytes 0 writes 16 zero bytes (and reads nothing).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 4 bytes global -> shared, zero-filled when src_bytes is 0.
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Order this thread's generic-proxy shared-memory writes (cp.async data it waited for, st.shared)
// before the async-proxy reads of the tensor cores.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Copy rows [0, ROWS) x D of a [rows x D] f16 matrix at src (row stride D) into the swizzled
// layout at dst (see the header); rows >= valid_rows become zeros. 128 threads.
template <int ROWS, int D>
__device__ __forceinline__ void load_tile(unsigned dst, const __half* src, int valid_rows, int tid) {
    constexpr int CPR = D / 8;  // 16-byte chunks per row
    constexpr int TOTAL = ROWS * CPR;
    static_assert(TOTAL % BWD_THREADS == 0, "whole passes of 128 threads");
#pragma unroll 4
    for (int i = tid; i < TOTAL; i += BWD_THREADS) {
        const int row = i / CPR;
        const int ch = i % CPR;
        const unsigned off = static_cast<unsigned>((ch >> 3) * (ROWS * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
        const bool ok = row < valid_rows;
        cp_async16(dst + off, ok ? src + static_cast<long long>(row) * D + ch * 8 : src, ok ? 16u : 0u);
    }
}

// ---------------------------------------------------------------- mbarrier

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------- tcgen05

// sm100 128B-swizzle shared-memory descriptor: start >> 4 [0,14), LBO >> 4 [16,30), SBO >> 4
// [32,46), version 1 [46,48), base offset 0, lbo mode 0, layout SWIZZLE_128B (2) [61,64).
__device__ __forceinline__ unsigned long long make_desc_sw128(unsigned saddr, unsigned lbo, unsigned sbo) {
    const unsigned long long start = (saddr & 0x3FFFFu) >> 4;
    return start | (static_cast<unsigned long long>(lbo >> 4) << 16) |
           (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 46) | (UMMA_LAYOUT_SWIZZLE_128B << 61);
}
__device__ __forceinline__ void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }
__device__ __forceinline__ void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

// D[tmem] (+)= A[smem] . B[smem], 128 x N x 16; accumulate == 0 overwrites D.
__device__ __forceinline__ void tc_mma(unsigned tmem_d, unsigned long long desc_a, unsigned long long desc_b,
                                       unsigned idesc, unsigned accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}\n" ::"r"(tmem_d),
        "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(accumulate)
        : "memory");
}
// One arrival on bar once every tcgen05 operation this thread issued so far has completed.
__device__ __forceinline__ void tc_commit(unsigned bar) {
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(bar)
                 : "memory");
}

// 32 consecutive 32-bit TMEM columns of this thread's lane (shape 32x32b: thread i of the warp
// reads lane (taddr >> 16) + i), waited for in the same statement.
__device__ __forceinline__ void tmem_ld32(unsigned taddr, unsigned* v) {
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x32.b32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];\n\t"
        "tcgen05.wait::ld.sync.aligned;\n"
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]), "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15]), "=r"(v[16]), "=r"(v[17]), "=r"(v[18]), "=r"(v[19]), "=r"(v[20]), "=r"(v[21]), "=r"(v[22]), "=r"(v[23]), "=r"(v[24]), "=r"(v[25]), "=r"(v[26]), "=r"(v[27]), "=r"(v[28]), "=r"(v[29]), "=r"(v[30]), "=r"(v[31])
        : "r"(taddr)
        : "memory");
}

// A dummy copy of x the compiler cannot see through: keeps the descriptors from being hoisted
// out of the loops and held in registers for every stage.
__device__ __forceinline__ unsigned opaque(unsigned x) {
    unsigned y;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

// d[128 x N] (+)= A B^T over K = KDIM columns: A (128 rows, A_ROWS) and B (N rows) K-major
// swizzled tiles at a_base, b_base. KDIM / 16 MMAs; the first overwrites d unless acc.
template <int KDIM, int N>
__device__ __forceinline__ void mma_kmajor(unsigned tmem_d, unsigned a_base, unsigned b_base, bool acc) {
    const unsigned long long da0 = make_desc_sw128(opaque(a_base), 16, BWD_SBO);
    const unsigned long long db0 = make_desc_sw128(opaque(b_base), 16, BWD_SBO);
#pragma unroll
    for (int kk = 0; kk < KDIM / 16; ++kk) {
        const unsigned aoff = ((kk >> 2) * (BWD_BM * 128) + (kk & 3) * 32) >> 4;
        const unsigned boff = ((kk >> 2) * (N * 128) + (kk & 3) * 32) >> 4;
        tc_mma(tmem_d, da0 + aoff, db0 + boff, BWD_IDESC(N, 0u), (acc || kk > 0) ? 1u : 0u);
    }
}

// d[128 x D] (+)= A[128 x 64] Y[64 x D]: A a 128 x 64 K-major swizzled tile (one column block),
// Y a 64-row tile read MN-major. 4 MMAs; the first overwrites d unless acc.
template <int D>
__device__ __forceinline__ void mma_ay(unsigned tmem_d, unsigned a_base, unsigned y_base, bool acc) {
    const unsigned long long da0 = make_desc_sw128(opaque(a_base), 16, BWD_SBO);
    const unsigned long long db0 = make_desc_sw128(opaque(y_base), BWD_MN_LBO, BWD_SBO);
#pragma unroll
    for (int kk = 0; kk < BWD_BN / 16; ++kk) {
        tc_mma(tmem_d, da0 + ((kk * 32) >> 4), db0 + ((kk * 2048) >> 4), BWD_IDESC(D, 1u), (acc || kk > 0) ? 1u : 0u);
    }
}

// TMEM allocation by warp 0 (whole warp); the address is published through shared memory.
template <int COLS>
__device__ __forceinline__ unsigned tmem_alloc(unsigned* slot, int warp) {
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(smem_addr(slot)),
                     "n"(COLS)
                     : "memory");
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
    }
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    return *reinterpret_cast<volatile unsigned*>(slot);
}
template <int COLS>
__device__ __forceinline__ void tmem_free(unsigned tmem, int warp) {
    tc_fence_before();
    __syncthreads();
    if (warp == 0) {
        tc_fence_after();
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "n"(COLS) : "memory");
    }
}

// Thread 0 has issued MMAs (after this call's caller synchronised the block): commit them to bar
// and have every thread wait for their completion. phase is the parity to wait for; toggled.
__device__ __forceinline__ void mma_done(unsigned bar, unsigned& phase, int tid) {
    if (tid == 0) tc_commit(bar);
    __syncwarp();
    mbar_wait(bar, phase);
    phase ^= 1u;
    tc_fence_after();
}

// cp.async data of this thread landed and fenced for the async proxy; every earlier TMEM read
// of this thread ordered before the barrier; then the whole block; then thread 0 may issue.
template <int N>
__device__ __forceinline__ void tiles_ready() {
    cp_async_wait<N>();
    fence_proxy_async();
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
}

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// Two f32 as f16x2 (round to nearest even): lo in the low half (the lower column).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }

// 8 consecutive f16 (one 16-byte chunk ch of this row) of a 128 x 64 K-major swizzled tile.
__device__ __forceinline__ void st_chunk(unsigned row_addr, int row, int ch, const float* x) {
    const unsigned addr = row_addr + ((static_cast<unsigned>(ch) ^ static_cast<unsigned>(row & 7)) << 4);
    const unsigned w0 = pack_half2(x[0], x[1]);
    const unsigned w1 = pack_half2(x[2], x[3]);
    const unsigned w2 = pack_half2(x[4], x[5]);
    const unsigned w3 = pack_half2(x[6], x[7]);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                 : "memory");
}

// This thread's row (TMEM lane tid) of a 128 x D fp32 accumulator at TMEM column col0, times mul,
// as f16 into out (a row of a [S, D] matrix) when valid. Whole warps (tcgen05.ld is .sync.aligned).
template <int D>
__device__ __forceinline__ void store_row(__half* out, unsigned lane_base, unsigned col0, bool valid, float mul) {
#pragma unroll 1
    for (int c = 0; c < D / 32; ++c) {
        unsigned v[32];
        tmem_ld32(lane_base + col0 + c * 32, v);
        if (valid) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                uint4 o;
                o.x = pack_half2(__uint_as_float(v[8 * q + 0]) * mul, __uint_as_float(v[8 * q + 1]) * mul);
                o.y = pack_half2(__uint_as_float(v[8 * q + 2]) * mul, __uint_as_float(v[8 * q + 3]) * mul);
                o.z = pack_half2(__uint_as_float(v[8 * q + 4]) * mul, __uint_as_float(v[8 * q + 5]) * mul);
                o.w = pack_half2(__uint_as_float(v[8 * q + 6]) * mul, __uint_as_float(v[8 * q + 7]) * mul);
                *reinterpret_cast<uint4*>(out + c * 32 + q * 8) = o;
            }
        }
    }
}

// ---------------------------------------------------------------- attn_bwd_preprocess
// Delta = rowsum(dO * O). Block: 4 warps x 4 rows; a lane reads D/32 consecutive elements.

template <int D>
__device__ __forceinline__ void preprocess_body(const __half* __restrict__ O, const __half* __restrict__ dO,
                                                float* __restrict__ Delta, int S) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    constexpr int PER_LANE = D / 32;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int row = blockIdx.x * 16 + warp * 4 + r;
        if (row >= S) break;  // uniform across the warp
        const long long base = (head + row) * D + lane * PER_LANE;
        float sum = 0.0f;
#pragma unroll
        for (int e = 0; e < PER_LANE; ++e) sum += __half2float(O[base + e]) * __half2float(dO[base + e]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) Delta[head + row] = sum;
    }
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS)
attn_bwd_preprocess(const __half* __restrict__ O, const __half* __restrict__ dO, float* __restrict__ Delta, int S,
                    int D) {
    if (D == 64) {
        preprocess_body<64>(O, dO, Delta, S);
    } else if (D == 128) {
        preprocess_body<128>(O, dO, Delta, S);
    }
}

// ---------------------------------------------------------------- attn_bwd_dkdv
// Block (n-tile, b*H + h) owns keys n0 .. n0 + 127; thread r (TMEM lane r) owns key n0 + r.

template <int D>
struct DkdvCols {
    static constexpr unsigned S = 0, DP = 64, DV = 128, DK = 128 + D;
    static constexpr int ALLOC = D == 128 ? 512 : 256;  // 384 / 256 used
};

template <int D>
__device__ __forceinline__ void dkdv_body(const __half* __restrict__ Q, const __half* __restrict__ K,
                                          const __half* __restrict__ V, const __half* __restrict__ dO,
                                          const float* __restrict__ LSE, const float* __restrict__ Delta,
                                          __half* __restrict__ dK, __half* __restrict__ dV, int S, int causal,
                                          float scale, unsigned char* smem, unsigned mma_bar, unsigned* tmem_slot) {
    using C = DkdvCols<D>;
    constexpr unsigned TA = BWD_BM * D * 2;  // a 128-row tile
    constexpr unsigned TB = BWD_BN * D * 2;  // a 64-row tile
    constexpr unsigned TP = BWD_BM * BWD_BN * 2;  // 128 x 64 f16
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int n_tile = blockIdx.x;
    const int n0 = n_tile * BWD_BM;
    const int key = n0 + tid;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    const __half* Qh = Q + head * D;
    const __half* dOh = dO + head * D;
    const float* LSEh = LSE + head;
    const float* Deltah = Delta + head;

    const unsigned raw = smem_addr(smem);
    const unsigned base = (raw + (BWD_ALIGN - 1)) & ~static_cast<unsigned>(BWD_ALIGN - 1);
    unsigned char* gbase = smem + (base - raw);  // the same bytes, generic address
    const unsigned sK = base, sV = base + TA;
    auto sQ = [&](int st) { return base + 2 * TA + st * 2 * TB; };
    auto sdO = [&](int st) { return base + 2 * TA + st * 2 * TB + TB; };
    const unsigned sP = base + 2 * TA + 4 * TB, sdS = sP + TP;
    constexpr unsigned STATS = 2 * TA + 4 * TB + 2 * TP;  // + st * 512: LSE[64], then Delta[64]

    const unsigned tmem = tmem_alloc<C::ALLOC>(tmem_slot, warp);
    const unsigned lane_base = tmem + (static_cast<unsigned>(warp * 32) << 16);

    const int q_tiles = (S + BWD_BN - 1) / BWD_BN;
    const int first = causal ? (n0 / BWD_BN) : 0;  // earlier query tiles see none of these keys

    auto load_query_side = [&](int st, int it) {
        const int m0 = it * BWD_BN;
        load_tile<BWD_BN, D>(sQ(st), Qh + static_cast<long long>(m0) * D, S - m0, tid);
        load_tile<BWD_BN, D>(sdO(st), dOh + static_cast<long long>(m0) * D, S - m0, tid);
        const int i = tid & 63;
        const float* src = tid < 64 ? LSEh : Deltah;
        const bool in = m0 + i < S;
        cp_async4(base + STATS + st * 512 + (tid < 64 ? 0 : 256) + i * 4, in ? src + m0 + i : src, in ? 4u : 0u);
    };

    load_tile<BWD_BM, D>(sK, K + head * D + static_cast<long long>(n0) * D, S - n0, tid);
    load_tile<BWD_BM, D>(sV, V + head * D + static_cast<long long>(n0) * D, S - n0, tid);
    if (first < q_tiles) load_query_side(0, first);
    cp_async_commit();

    const float scale_log2 = scale * BWD_LOG2E;
    const unsigned p_row = sP + tid * 128, ds_row = sdS + tid * 128;
    unsigned phase = 0;

#pragma unroll 1
    for (int it = first; it < q_tiles; ++it) {
        const int st = (it - first) & 1;
        // Stage st ^ 1 was read by the previous tile's MMAs, which every thread waited for.
        if (it + 1 < q_tiles) load_query_side(st ^ 1, it + 1);
        cp_async_commit();
        tiles_ready<1>();  // also: every thread's TMEM reads of the last tile are done

        // S^T = K Q^T and dP^T = V dO^T (128 keys x 64 queries), one commit.
        if (tid == 0) {
            mma_kmajor<D, BWD_BN>(tmem + C::S, sK, sQ(st), false);
            mma_kmajor<D, BWD_BN>(tmem + C::DP, sV, sdO(st), false);
        }
        mma_done(mma_bar, phase, tid);

        const int m0 = it * BWD_BN;
        const float* sLSE = reinterpret_cast<const float*>(gbase + STATS + st * 512);
        const float* sDelta = sLSE + BWD_BN;
        // P^T = exp2(scale log2e S^T - log2e LSE[query]) (0 where masked), rounded to f16;
        // dS^T = P^T * (dP^T - Delta[query]); both rows to shared memory, 32 queries at a time.
#pragma unroll 1
        for (int c = 0; c < BWD_BN / 32; ++c) {
            float s[32], dp[32];
            tmem_ld32(lane_base + C::S + c * 32, reinterpret_cast<unsigned*>(s));
            tmem_ld32(lane_base + C::DP + c * 32, reinterpret_cast<unsigned*>(dp));
#pragma unroll
            for (int i = 0; i < 32; ++i) {
                const int col = c * 32 + i;
                const int q = m0 + col;
                float p = ex2(fmaf(s[i], scale_log2, -sLSE[col] * BWD_LOG2E));
                if (q >= S || key >= S || (causal && key > q)) p = 0.0f;
                p = round_f16(p);
                s[i] = p;
                dp[i] = p * (dp[i] - sDelta[col]);
            }
#pragma unroll
            for (int ch = 0; ch < 4; ++ch) {
                st_chunk(p_row, tid, c * 4 + ch, s + 8 * ch);
                st_chunk(ds_row, tid, c * 4 + ch, dp + 8 * ch);
            }
        }
        fence_proxy_async();  // the P^T / dS^T stores before the MMAs' (async-proxy) reads
        tc_fence_before();
        __syncthreads();
        tc_fence_after();

        // dV += P^T dO and dK += dS^T Q (the first tile overwrites), one commit.
        if (tid == 0) {
            mma_ay<D>(tmem + C::DV, sP, sdO(st), it > first);
            mma_ay<D>(tmem + C::DK, sdS, sQ(st), it > first);
        }
        mma_done(mma_bar, phase, tid);  // P^T, dS^T and stage st are free again
    }
    cp_async_wait<0>();

    const bool valid = key < S;
    store_row<D>(dV + head * D + static_cast<long long>(key) * D, lane_base, C::DV, valid, 1.0f);
    store_row<D>(dK + head * D + static_cast<long long>(key) * D, lane_base, C::DK, valid, scale);
    tmem_free<C::ALLOC>(tmem, warp);
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS, 1)
attn_bwd_dkdv(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
              const __half* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
              __half* __restrict__ dK, __half* __restrict__ dV, int S, int D, int causal, float scale) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long mma_bar_mem;
    __shared__ unsigned tmem_slot;
    if (D != 64 && D != 128) return;  // outside the contract: nothing is written
    const unsigned mma_bar = smem_addr(&mma_bar_mem);
    if (threadIdx.x == 0) {
        mbar_init(mma_bar, 1);  // one tcgen05.commit a phase
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // (the __syncthreads in tmem_alloc publishes the initialised barrier)
    if (D == 64) {
        dkdv_body<64>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal != 0, scale, smem, mma_bar, &tmem_slot);
    } else {
        dkdv_body<128>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal != 0, scale, smem, mma_bar, &tmem_slot);
    }
}

// ---------------------------------------------------------------- attn_bwd_dq
// Block (m-tile, b*H + h) owns queries m0 .. m0 + 127 (the grid's last x first); thread r (TMEM
// lane r) owns query m0 + r.

template <int D>
struct DqCols {
    static constexpr unsigned S = 0, DP = 64, DQ = 128;
    static constexpr int ALLOC = 256;  // 256 (D = 128) / 192 (D = 64) used
};

template <int D>
__device__ __forceinline__ void dq_body(const __half* __restrict__ Q, const __half* __restrict__ K,
                                        const __half* __restrict__ V, const __half* __restrict__ dO,
                                        const float* __restrict__ LSE, const float* __restrict__ Delta,
                                        __half* __restrict__ dQ, int S, int causal, float scale,
                                        unsigned char* smem, unsigned mma_bar, unsigned* tmem_slot) {
    using C = DqCols<D>;
    constexpr unsigned TA = BWD_BM * D * 2;
    constexpr unsigned TB = BWD_BN * D * 2;
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int m_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
    const int m0 = m_tile * BWD_BM;
    const int q = m0 + tid;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    const __half* Kh = K + head * D;
    const __half* Vh = V + head * D;

    const unsigned raw = smem_addr(smem);
    const unsigned base = (raw + (BWD_ALIGN - 1)) & ~static_cast<unsigned>(BWD_ALIGN - 1);
    const unsigned sQ = base, sdO = base + TA;
    auto sKt = [&](int st) { return base + 2 * TA + st * 2 * TB; };
    auto sVt = [&](int st) { return base + 2 * TA + st * 2 * TB + TB; };
    const unsigned sdS = base + 2 * TA + 4 * TB;

    const unsigned tmem = tmem_alloc<C::ALLOC>(tmem_slot, warp);
    const unsigned lane_base = tmem + (static_cast<unsigned>(warp * 32) << 16);

    const int kv_all = (S + BWD_BN - 1) / BWD_BN;
    // later key tiles are all masked: keys up to m0 + 127 are visible to some query of the tile
    const int kv_tiles = causal ? min(kv_all, (m0 + BWD_BM - 1) / BWD_BN + 1) : kv_all;

    load_tile<BWD_BM, D>(sQ, Q + head * D + static_cast<long long>(m0) * D, S - m0, tid);
    load_tile<BWD_BM, D>(sdO, dO + head * D + static_cast<long long>(m0) * D, S - m0, tid);
    load_tile<BWD_BN, D>(sKt(0), Kh, S, tid);
    load_tile<BWD_BN, D>(sVt(0), Vh, S, tid);
    cp_async_commit();

    const bool valid = q < S;
    const float lse = valid ? LSE[head + q] * BWD_LOG2E : 0.0f;
    const float delta = valid ? Delta[head + q] : 0.0f;
    const float scale_log2 = scale * BWD_LOG2E;
    const unsigned ds_row = sdS + tid * 128;
    unsigned phase = 0;

#pragma unroll 1
    for (int j = 0; j < kv_tiles; ++j) {
        const int st = j & 1;
        if (j + 1 < kv_tiles) {
            const int r1 = (j + 1) * BWD_BN;
            load_tile<BWD_BN, D>(sKt(st ^ 1), Kh + static_cast<long long>(r1) * D, S - r1, tid);
            load_tile<BWD_BN, D>(sVt(st ^ 1), Vh + static_cast<long long>(r1) * D, S - r1, tid);
        }
        cp_async_commit();
        tiles_ready<1>();

        // S = Q K^T and dP = dO V^T (128 queries x 64 keys), one commit.
        if (tid == 0) {
            mma_kmajor<D, BWD_BN>(tmem + C::S, sQ, sKt(st), false);
            mma_kmajor<D, BWD_BN>(tmem + C::DP, sdO, sVt(st), false);
        }
        mma_done(mma_bar, phase, tid);

        // P = exp2(scale log2e S - log2e LSE) (0 where masked), rounded to f16; dS = P (dP - Delta).
        const int n0 = j * BWD_BN;
#pragma unroll 1
        for (int c = 0; c < BWD_BN / 32; ++c) {
            float s[32], dp[32];
            tmem_ld32(lane_base + C::S + c * 32, reinterpret_cast<unsigned*>(s));
            tmem_ld32(lane_base + C::DP + c * 32, reinterpret_cast<unsigned*>(dp));
#pragma unroll
            for (int i = 0; i < 32; ++i) {
                const int kv = n0 + c * 32 + i;
                float p = ex2(fmaf(s[i], scale_log2, -lse));
                if (kv >= S || (causal && kv > q)) p = 0.0f;
                p = round_f16(p);
                dp[i] = p * (dp[i] - delta);
            }
#pragma unroll
            for (int ch = 0; ch < 4; ++ch) st_chunk(ds_row, tid, c * 4 + ch, dp + 8 * ch);
        }
        fence_proxy_async();
        tc_fence_before();
        __syncthreads();
        tc_fence_after();

        // dQ += dS K (K read MN-major; the first tile overwrites), scaled at the end.
        if (tid == 0) mma_ay<D>(tmem + C::DQ, sdS, sKt(st), j > 0);
        mma_done(mma_bar, phase, tid);  // dS and stage st are free again
    }
    cp_async_wait<0>();

    store_row<D>(dQ + head * D + static_cast<long long>(q) * D, lane_base, C::DQ, valid, scale);
    tmem_free<C::ALLOC>(tmem, warp);
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS, 1)
attn_bwd_dq(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
            const __half* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
            __half* __restrict__ dQ, int S, int D, int causal, float scale) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long mma_bar_mem;
    __shared__ unsigned tmem_slot;
    if (D != 64 && D != 128) return;  // outside the contract: nothing is written
    const unsigned mma_bar = smem_addr(&mma_bar_mem);
    if (threadIdx.x == 0) {
        mbar_init(mma_bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (D == 64) {
        dq_body<64>(Q, K, V, dO, LSE, Delta, dQ, S, causal != 0, scale, smem, mma_bar, &tmem_slot);
    } else {
        dq_body<128>(Q, K, V, dO, LSE, Delta, dQ, S, causal != 0, scale, smem, mma_bar, &tmem_slot);
    }
}
