// porter-regen: arch=sm_90a ptxas=sm_90a reject=sm_90,sm_100a,sm_120a
// porter-kernel: entry = "attn_bwd_preprocess", grid = ["ceil_div(S, 16)", "B * H"], block = [128], args = ["O", "dO", "Delta", "S", "D"]
// porter-kernel: entry = "attn_bwd_dkdv", grid = ["ceil_div(S, 64)", "B * H"], block = [128], shared = "768 * D + 2048", args = ["Q", "K", "V", "dO", "LSE", "Delta", "dK", "dV", "S", "D", "causal", "scale"]
// porter-kernel: entry = "attn_bwd_dq", grid = ["ceil_div(S, 64)", "B * H"], block = [128], shared = "768 * D + 1024", args = ["Q", "K", "V", "dO", "LSE", "Delta", "dQ", "S", "D", "causal", "scale"]
//
// The attention backward pass, Hopper (sm_90a): the three kernels of kernel_sm80.cu (same
// interface, same contract, see porter.toml and README.md) with the tensor-core products done by
// wgmma.mma_async (warpgroup MMA) instead of mma.sync:
//
//   attn_bwd_preprocess  Delta[i] = sum_d dO[i, d] * O[i, d]           (plain CUDA, as on sm_80)
//   attn_bwd_dkdv        one warpgroup (128 threads) per 64 keys of a head, over the query tiles
//                        (64 queries) that can see them:
//                          S^T  = K Q^T                 wgmma m64n64k16 SS (K, Q both K-major)
//                          P^T  = exp2(S^T scale log2e - LSE log2e)        (0 where masked)
//                          dV  += P^T dO                wgmma m64nDk16 RS (P^T in registers, dO
//                                                       MN-major: imm-trans-b = 1)
//                          dP^T = V dO^T                wgmma m64n64k16 SS (V, dO K-major)
//                          dS^T = P^T * (dP^T - Delta)
//                          dK  += dS^T Q                wgmma m64nDk16 RS (Q MN-major), x scale
//   attn_bwd_dq          one warpgroup per 64 queries, over the key tiles it can see:
//                          S = Q K^T, dP = dO V^T       wgmma m64n64k16 SS
//                          dQ  += dS K                  wgmma m64nDk16 RS (K MN-major), x scale
// No atomics: dQ has its own kernel, every output is written once, deterministically.
//
// Computing S^T (rows = keys) in dkdv makes P^T and dS^T accumulators of m64n64, and the
// accumulator fragment of m64nNk16 packs pairwise into the A fragment of m64k16 (below), so P^T and
// dS^T feed the next RS wgmma without passing through shared memory, as on sm_80.
//
// Loads: cp.async (16 bytes a thread) straight into the 128B-swizzled layout wgmma reads, the
// query-side (dkdv) or key-side (dq) tiles double-buffered with cp.async commit groups; after a
// cp.async.wait_group every thread fences the generic proxy against the async proxy
// (fence.proxy.async) and the block synchronises before the wgmmas read the tile. Rows past S
// are zero-filled (src-size 0). Every wgmma group is waited for (wait_group 0) before its
// registers are read and before its shared-memory stage is overwritten.
//
// Shared-memory layouts (as examples/attention_fwd/kernel_sm90a.cu; 128B swizzle: 16-byte chunk
// c of a 128-byte row r is stored at chunk c ^ (r % 8); every tile starts on a 1024-byte
// boundary). A tile of 64 rows x D columns is D/64 column blocks of 64 x 128 bytes; row r of
// block b at b * 8192 + r * 128.
//   As A or as B of a K-major product (contraction over D): descriptor SBO 1024 (8 rows), k slab
//     kk (16 columns) starts at block kk / 4, + (kk % 4) * 32 bytes.
//   As B of an MN-major product (contraction over the tile's 64 rows, N = D): LBO = 64 * 128 =
//     8192 bytes (between 64-column blocks), SBO = 1024 (8 rows); k slab kk (16 rows) starts
//     kk * 2048 bytes in.
//   dkdv: K | V | stage 0: Q, dO | stage 1: Q, dO | LSE[64], Delta[64] per stage (512 bytes each)
//   dq:   Q | dO | stage 0: K, V | stage 1: K, V
//   (+ up to 1024 bytes to align the base: shared = 768 * D + 2048 and 768 * D + 1024.)
//
// Register fragments (warp w of the warpgroup, lane = 4 g + t): accumulators of m64nNk16:
// acc[4 j + e] is row 16 w + g + 8 (e >= 2), column 8 j + 2 t + (e & 1). The A fragment of
// m64k16 for k slab kk is acc[8 kk .. 8 kk + 7] packed pairwise (a[i] = f16x2(acc[8 kk + 2 i],
// acc[8 kk + 2 i + 1])): rows g, g + 8 and columns 2t, 2t + 1, 2t + 8, 2t + 9 of the slab.
//
// Launch: 128 threads (one warpgroup) a block for every kernel; dkdv and dq 64-row tiles, grid
// (ceil_div(S, 64), B * H); the dq grid's x is walked in reverse (longest causal rows first).
// Assembled and checked statically; not yet run on a GPU.
#include <cuda_fp16.h>

#define BWD_TILE 64
#define BWD_THREADS 128
#define BWD_LOG2E 1.4426950408889634f
#define BWD_ALIGN 1024
#define BWD_SBO 1024                // 8 rows x 128 bytes
#define BWD_MN_LBO (BWD_TILE * 128)  // 8192: between 64-column blocks of a 64-row tile

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

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
// Order the generic-proxy writes this thread has observed (cp.async data) before the following
// async-proxy reads (wgmma's shared-memory operands).
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// cp.async data of this thread landed, fenced for the async proxy, then the whole block.
template <int N>
__device__ __forceinline__ void tiles_ready() {
    cp_async_wait<N>();
    fence_proxy_async();
    __syncthreads();
    fence_proxy_async();
}

// Copy rows [0, 64) x D of a [rows x D] f16 matrix at src (row stride D) into the swizzled
// layout at dst (see the header); rows >= valid_rows become zeros. 128 threads.
template <int D>
__device__ __forceinline__ void load_tile(unsigned dst, const __half* src, int valid_rows, int tid) {
    constexpr int CPR = D / 8;  // 16-byte chunks per row
    constexpr int TOTAL = BWD_TILE * CPR;
    static_assert(TOTAL % BWD_THREADS == 0, "whole passes of 128 threads");
#pragma unroll
    for (int i = tid; i < TOTAL; i += BWD_THREADS) {
        const int row = i / CPR;
        const int ch = i % CPR;
        const unsigned off = static_cast<unsigned>((ch >> 3) * (BWD_TILE * 128) + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
        const bool ok = row < valid_rows;
        cp_async16(dst + off, ok ? src + static_cast<long long>(row) * D + ch * 8 : src, ok ? 16u : 0u);
    }
}

// ---------------------------------------------------------------- wgmma

// 128B-swizzle descriptor: start >> 4 [0,14), LBO >> 4 [16,30), SBO >> 4 [32,46), layout 1 [62,64).
__device__ __forceinline__ unsigned long long desc_sw128(unsigned saddr, unsigned lbo, unsigned sbo) {
    return static_cast<unsigned long long>((saddr & 0x3FFFFu) >> 4) | (static_cast<unsigned long long>(lbo >> 4) << 16) |
           (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d[64 x 64] (+)= A[64 x 16] . B[16 x 64], A and B from shared memory, both K-major
// (imm-trans-a = imm-trans-b = 0); accumulate != 0 adds to d, 0 overwrites it (scale-d).
__device__ __forceinline__ void wgmma_ss_m64n64k16(float* d, unsigned long long desc_a, unsigned long long desc_b,
                                                    int accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n\t}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

// d[64 x 64] += A[64 x 16] . B[16 x 64]; A from registers (the m64k16 fragment, four f16x2),
// B from shared memory, MN-major (imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs_m64n64k16(float* d, const unsigned* a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b)
        : "memory");
}

// d[64 x 128] += A[64 x 16] . B[16 x 128]; A from registers (the m64k16 fragment, four f16x2),
// B from shared memory, MN-major (imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs_m64n128k16(float* d, const unsigned* a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b)
        : "memory");
}

// Pin registers around wgmma issue/wait so that the compiler neither reads them before the wait
// nor moves their producers past the issue.
template <int N>
__device__ __forceinline__ void fence_regs(float* r) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(unsigned* r) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// d = A . B^T over D columns: A and B 64-row K-major tiles (swizzled) at a_base and b_base,
// D / 16 wgmmas m64n64k16, the first overwriting d. Issued, not committed.
template <int D>
__device__ __forceinline__ void issue_xyt(float* d, unsigned a_base, unsigned b_base) {
    const unsigned long long da0 = desc_sw128(a_base, 16, BWD_SBO);
    const unsigned long long db0 = desc_sw128(b_base, 16, BWD_SBO);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const unsigned off = (kk >> 2) * (BWD_TILE * 128) + (kk & 3) * 32;
        wgmma_ss_m64n64k16(d, da0 + (off >> 4), db0 + (off >> 4), kk > 0 ? 1 : 0);
    }
}

// d[64 x D] += A[64 x 64] . Y[64 x D]: A in registers (4 k slabs of 4 f16x2, a[4 kk ..]), Y a
// 64-row tile (swizzled) read MN-major. 4 wgmmas m64nDk16 (RS). Issued, not committed.
template <int D>
__device__ __forceinline__ void issue_ay(float* d, const unsigned* a, unsigned y_base) {
    const unsigned long long db0 = desc_sw128(y_base, BWD_MN_LBO, BWD_SBO);
#pragma unroll
    for (int kk = 0; kk < BWD_TILE / 16; ++kk) {
        const unsigned long long db = db0 + ((kk * 2048) >> 4);
        if constexpr (D == 128) {
            wgmma_rs_m64n128k16(d, a + 4 * kk, db);
        } else {
            wgmma_rs_m64n64k16(d, a + 4 * kk, db);
        }
    }
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
// One half of an f16x2, as f32: the low half for which == 0.
__device__ __forceinline__ float half_of(unsigned v, int which) {
    const unsigned short h = static_cast<unsigned short>(which ? (v >> 16) : (v & 0xffffu));
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

// The 64 x D accumulator of the warpgroup (this thread: rows row0 and row0 + 8) times mul, stored
// as f16 rows of one head's [S, D] matrix (rows at or past S are not stored).
template <int D>
__device__ __forceinline__ void store_rows(__half* head, const float* acc, int row0, int S, float mul, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row < S) {
            __half* out = head + static_cast<long long>(row) * D;
#pragma unroll
            for (int jj = 0; jj < D / 8; ++jj) {
                *reinterpret_cast<unsigned*>(out + 8 * jj + 2 * t) =
                    pack_half2(acc[4 * jj + 2 * h] * mul, acc[4 * jj + 2 * h + 1] * mul);
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
// Block (n-tile, b*H + h) owns keys n0 .. n0 + 63; warp w rows (keys) 16 w .. 16 w + 15.

template <int D>
__device__ __forceinline__ void dkdv_body(const __half* __restrict__ Q, const __half* __restrict__ K,
                                          const __half* __restrict__ V, const __half* __restrict__ dO,
                                          const float* __restrict__ LSE, const float* __restrict__ Delta,
                                          __half* __restrict__ dK, __half* __restrict__ dV, int S, int causal,
                                          float scale, unsigned char* smem) {
    constexpr unsigned T = BWD_TILE * D * 2;  // one 64-row tile
    constexpr int ACC = D / 2;                // accumulators of m64nD per thread
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int n_tile = blockIdx.x;
    const int n0 = n_tile * BWD_TILE;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    const __half* Qh = Q + head * D;
    const __half* dOh = dO + head * D;
    const float* LSEh = LSE + head;
    const float* Deltah = Delta + head;

    const unsigned raw = smem_addr(smem);
    const unsigned base = (raw + (BWD_ALIGN - 1)) & ~static_cast<unsigned>(BWD_ALIGN - 1);
    unsigned char* gbase = smem + (base - raw);  // the same bytes, generic address
    const unsigned sK = base, sV = base + T;
    auto sQ = [&](int st) { return base + 2 * T + st * 2 * T; };
    auto sdO = [&](int st) { return base + 3 * T + st * 2 * T; };
    constexpr unsigned STATS = 6 * T;  // + st * 512: LSE[64], then Delta[64]

    const int q_tiles = (S + BWD_TILE - 1) / BWD_TILE;
    const int first = causal ? n_tile : 0;  // earlier query tiles see none of these keys

    auto load_query_side = [&](int st, int it) {
        const int m0 = it * BWD_TILE;
        load_tile<D>(sQ(st), Qh + static_cast<long long>(m0) * D, S - m0, tid);
        load_tile<D>(sdO(st), dOh + static_cast<long long>(m0) * D, S - m0, tid);
        const int i = tid & 63;
        const float* src = tid < 64 ? LSEh : Deltah;
        const bool in = m0 + i < S;
        cp_async4(base + STATS + st * 512 + (tid < 64 ? 0 : 256) + i * 4, in ? src + m0 + i : src, in ? 4u : 0u);
    };

    load_tile<D>(sK, K + head * D + static_cast<long long>(n0) * D, S - n0, tid);
    load_tile<D>(sV, V + head * D + static_cast<long long>(n0) * D, S - n0, tid);
    if (first < q_tiles) load_query_side(0, first);
    cp_async_commit();

    float dk[ACC], dv[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) dk[i] = dv[i] = 0.0f;
    const float scale_log2 = scale * BWD_LOG2E;
    const int kv_lo = n0 + warp * 16 + g;  // the keys of this thread's rows (and kv_lo + 8)

#pragma unroll 1
    for (int it = first; it < q_tiles; ++it) {
        const int st = (it - first) & 1;
        if (it + 1 < q_tiles) load_query_side(st ^ 1, it + 1);
        cp_async_commit();
        tiles_ready<1>();

        const int m0 = it * BWD_TILE;
        const float* sLSE = reinterpret_cast<const float*>(gbase + STATS + st * 512);
        const float* sDelta = sLSE + BWD_TILE;

        // S^T = K Q^T (64 keys x 64 queries)
        float s[32];
        wgmma_fence();
        issue_xyt<D>(s, sK, sQ(st));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<32>(s);

        // P^T = exp2(scale log2e S^T - log2e LSE[query]), 0 where masked; packed as A fragments.
        unsigned pa[16];
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int col = 8 * (i >> 2) + 2 * t + (i & 1);
            const int q = m0 + col;
            const int kv = kv_lo + ((i & 2) ? 8 : 0);
            float p = ex2(fmaf(s[i], scale_log2, -sLSE[col] * BWD_LOG2E));
            if (q >= S || (causal && kv > q)) p = 0.0f;
            s[i] = p;
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) pa[i] = pack_half2(s[2 * i], s[2 * i + 1]);

        // dV += P^T dO (RS) and dP^T = V dO^T (SS), one group.
        float dp[32];
        fence_regs<ACC>(dv);
        fence_regs<16>(pa);
        wgmma_fence();
        issue_ay<D>(dv, pa, sdO(st));
        issue_xyt<D>(dp, sV, sdO(st));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<ACC>(dv);
        fence_regs<32>(dp);
        fence_regs<16>(pa);

        // dS^T = P^T * (dP^T - Delta[query]) with P^T as rounded to f16; packed as A fragments.
        unsigned dsa[16];
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int col = 8 * (i >> 2) + 2 * t + (i & 1);
            dp[i] = half_of(pa[i >> 1], i & 1) * (dp[i] - sDelta[col]);
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) dsa[i] = pack_half2(dp[2 * i], dp[2 * i + 1]);

        // dK += dS^T Q (RS; scaled at the end)
        fence_regs<ACC>(dk);
        fence_regs<16>(dsa);
        wgmma_fence();
        issue_ay<D>(dk, dsa, sQ(st));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<ACC>(dk);
        fence_regs<16>(dsa);

        __syncthreads();  // this stage is loaded again on the next iteration but one
    }
    cp_async_wait<0>();

    store_rows<D>(dK + head * D, dk, kv_lo, S, scale, t);
    store_rows<D>(dV + head * D, dv, kv_lo, S, 1.0f, t);
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS)
attn_bwd_dkdv(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
              const __half* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
              __half* __restrict__ dK, __half* __restrict__ dV, int S, int D, int causal, float scale) {
    extern __shared__ __align__(1024) unsigned char smem[];
    if (D == 64) {
        dkdv_body<64>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal != 0, scale, smem);
    } else if (D == 128) {
        dkdv_body<128>(Q, K, V, dO, LSE, Delta, dK, dV, S, causal != 0, scale, smem);
    }
}

// ---------------------------------------------------------------- attn_bwd_dq
// Block (m-tile, b*H + h) owns queries m0 .. m0 + 63 (the grid's last x first); warp w rows
// (queries) 16 w .. 16 w + 15.

template <int D>
__device__ __forceinline__ void dq_body(const __half* __restrict__ Q, const __half* __restrict__ K,
                                        const __half* __restrict__ V, const __half* __restrict__ dO,
                                        const float* __restrict__ LSE, const float* __restrict__ Delta,
                                        __half* __restrict__ dQ, int S, int causal, float scale,
                                        unsigned char* smem) {
    constexpr unsigned T = BWD_TILE * D * 2;
    constexpr int ACC = D / 2;
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int m_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
    const int m0 = m_tile * BWD_TILE;
    const long long head = static_cast<long long>(blockIdx.y) * S;
    const __half* Kh = K + head * D;
    const __half* Vh = V + head * D;

    const unsigned raw = smem_addr(smem);
    const unsigned base = (raw + (BWD_ALIGN - 1)) & ~static_cast<unsigned>(BWD_ALIGN - 1);
    const unsigned sQ = base, sdO = base + T;
    auto sKt = [&](int st) { return base + 2 * T + st * 2 * T; };
    auto sVt = [&](int st) { return base + 3 * T + st * 2 * T; };

    const int kv_all = (S + BWD_TILE - 1) / BWD_TILE;
    const int kv_tiles = causal ? min(m_tile + 1, kv_all) : kv_all;  // later tiles are all masked

    load_tile<D>(sQ, Q + head * D + static_cast<long long>(m0) * D, S - m0, tid);
    load_tile<D>(sdO, dO + head * D + static_cast<long long>(m0) * D, S - m0, tid);
    load_tile<D>(sKt(0), Kh, S, tid);
    load_tile<D>(sVt(0), Vh, S, tid);
    cp_async_commit();

    const int q_lo = m0 + warp * 16 + g;  // this thread's queries: q_lo and q_lo + 8
    const int q_hi = q_lo + 8;
    const float lse_lo = q_lo < S ? LSE[head + q_lo] * BWD_LOG2E : 0.0f;
    const float lse_hi = q_hi < S ? LSE[head + q_hi] * BWD_LOG2E : 0.0f;
    const float delta_lo = q_lo < S ? Delta[head + q_lo] : 0.0f;
    const float delta_hi = q_hi < S ? Delta[head + q_hi] : 0.0f;
    const float scale_log2 = scale * BWD_LOG2E;

    float dq[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) dq[i] = 0.0f;

#pragma unroll 1
    for (int j = 0; j < kv_tiles; ++j) {
        const int st = j & 1;
        if (j + 1 < kv_tiles) {
            const int r1 = (j + 1) * BWD_TILE;
            load_tile<D>(sKt(st ^ 1), Kh + static_cast<long long>(r1) * D, S - r1, tid);
            load_tile<D>(sVt(st ^ 1), Vh + static_cast<long long>(r1) * D, S - r1, tid);
        }
        cp_async_commit();
        tiles_ready<1>();
        const int n0 = j * BWD_TILE;

        // S = Q K^T and dP = dO V^T (64 queries x 64 keys), one group.
        float s[32], dp[32];
        wgmma_fence();
        issue_xyt<D>(s, sQ, sKt(st));
        issue_xyt<D>(dp, sdO, sVt(st));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<32>(s);
        fence_regs<32>(dp);

        // P = exp2(scale log2e S - log2e LSE), 0 where masked; dS = P * (dP - Delta), f16 P.
        unsigned dsa[16];
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int kv = n0 + 8 * (i >> 2) + 2 * t + (i & 1);
            const bool hi = (i & 2) != 0;
            const int q = hi ? q_hi : q_lo;
            float p = ex2(fmaf(s[i], scale_log2, -(hi ? lse_hi : lse_lo)));
            if (kv >= S || (causal && kv > q)) p = 0.0f;
            p = __half2float(__float2half_rn(p));
            dp[i] = p * (dp[i] - (hi ? delta_hi : delta_lo));
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) dsa[i] = pack_half2(dp[2 * i], dp[2 * i + 1]);

        // dQ += dS K (RS, K read MN-major; scaled at the end)
        fence_regs<ACC>(dq);
        fence_regs<16>(dsa);
        wgmma_fence();
        issue_ay<D>(dq, dsa, sKt(st));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<ACC>(dq);
        fence_regs<16>(dsa);

        __syncthreads();  // this stage is loaded again on the next iteration but one
    }
    cp_async_wait<0>();

    store_rows<D>(dQ + head * D, dq, q_lo, S, scale, t);
}

extern "C" __global__ void __launch_bounds__(BWD_THREADS)
attn_bwd_dq(const __half* __restrict__ Q, const __half* __restrict__ K, const __half* __restrict__ V,
            const __half* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ Delta,
            __half* __restrict__ dQ, int S, int D, int causal, float scale) {
    extern __shared__ __align__(1024) unsigned char smem[];
    if (D == 64) {
        dq_body<64>(Q, K, V, dO, LSE, Delta, dQ, S, causal != 0, scale, smem);
    } else if (D == 128) {
        dq_body<128>(Q, K, V, dO, LSE, Delta, dQ, S, causal != 0, scale, smem);
    }
}
