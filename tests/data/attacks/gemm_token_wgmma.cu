// Attack (issue #12 hole 5): native evidence by one token instruction.
// Target: examples/gemm_bf16 (entry gemm_bf16_sm80), checked with --native --arch sm_90a.
// nvcc -arch=sm_90a -ptx -O3 gemm_token_wgmma.cu -o gemm_token_wgmma.ptx
//
// This is examples/gemm_bf16/kernel_sm80.cu unchanged (mma.sync m16n8k16 + ldmatrix + cp.async:
// every FLOP of C runs on HMMA, an Ampere instruction), built for sm_90a, plus one wgmma: the
// first warpgroup of block (0, 0) zeroes 2.25 KiB of shared memory, issues a single
// wgmma.mma_async m64n8k16 on it and throws the accumulators away (a store guarded by a
// condition that never holds keeps ptxas from dropping it). HGMMA is in the SASS and executes
// (4 warp-level instructions per launch against ~1e6 HMMA), so porter's native gate says
// "executed"; the share of cost.flops on wgmma is about 1e-9. C is computed correctly.

#define GEMM_BM 128
#define GEMM_BN 128
#define GEMM_BK 32
#define GEMM_STAGES 3
#define GEMM_THREADS 256
#define GEMM_A_STAGE_BYTES (GEMM_BM * GEMM_BK * 2)                     // 8192
#define GEMM_B_STAGE_BYTES (GEMM_BK * GEMM_BN * 2)                     // 8192
#define GEMM_STAGE_BYTES (GEMM_A_STAGE_BYTES + GEMM_B_STAGE_BYTES)     // 16384
// dynamic shared memory: GEMM_STAGES * GEMM_STAGE_BYTES = 49152 bytes

typedef unsigned short bf16_bits;  // raw bf16 storage; no cuda_bf16.h needed

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; bytes past src_bytes (0..16) are zero-filled.
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

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                            unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}

// d += a . b for one m16n8k16 tile.
__device__ __forceinline__ void mma_bf16_16816(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ bf16_bits f32_to_bf16(float v) {
    bf16_bits h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
    return h;
}


// ---- token wgmma helpers (sm_90a) ----
#define TOKEN_BYTES 2304  // A: 64 x 16 bf16 (2 KiB), B: 8 x 16 bf16 (256 B)

// No-swizzle K-major descriptor: start >> 4 in bits 0-13, LBO 128 B, SBO 256 B, layout 0.
__device__ __forceinline__ unsigned long long token_desc(unsigned saddr) {
    return static_cast<unsigned long long>((saddr & 0x3FFFFu) >> 4) | (static_cast<unsigned long long>(128u >> 4) << 16) |
           (static_cast<unsigned long long>(256u >> 4) << 32);
}

__device__ __forceinline__ void wgmma_m64n8k16(float* d, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

// Issue the cp.async copies of k-tile `kt` into pipeline stage `stage` (no commit).
__device__ __forceinline__ void load_tile(unsigned stage_base, const bf16_bits* __restrict__ A,
                                          const bf16_bits* __restrict__ B, int M, int N, int K, int lda,
                                          int ldb, int bm, int bn, int kt, int tid) {
    const int k0 = kt * GEMM_BK;
    // A: 128 rows x 4 chunks = 512 chunks, two per thread.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int id = tid + i * GEMM_THREADS;
        const int r = id >> 2;
        const int c = id & 3;
        const int gm = bm + r;
        const int gk = k0 + c * 8;
        const bf16_bits* src = A;  // any valid address; nothing is read when src_bytes == 0
        int bytes = 0;
        if (gm < M && gk < K) {
            src = A + static_cast<long long>(gm) * lda + gk;
            bytes = min(16, (K - gk) * 2);
        }
        cp_async_16(stage_base + r * 64 + ((c ^ ((r >> 1) & 3)) << 4), src, bytes);
    }
    // B: 32 rows x 16 chunks = 512 chunks, two per thread.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int id = tid + i * GEMM_THREADS;
        const int r = id >> 4;
        const int c = id & 15;
        const int gk = k0 + r;
        const int gn = bn + c * 8;
        const bf16_bits* src = B;
        int bytes = 0;
        if (gk < K && gn < N) {
            src = B + static_cast<long long>(gk) * ldb + gn;
            bytes = min(16, (N - gn) * 2);
        }
        cp_async_16(stage_base + GEMM_A_STAGE_BYTES + r * 256 + ((c ^ (r & 7)) << 4), src, bytes);
    }
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)
gemm_bf16_sm80(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
               int M, int N, int K, int lda, int ldb, int ldc) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned smem_base = smem_addr(smem);

    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int warp_m = warp & 1;   // rows warp_m*64 .. +63 of the block tile
    const int warp_n = warp >> 1;  // cols warp_n*32 .. +31 of the block tile
    const int bm = static_cast<int>(blockIdx.y) * GEMM_BM;
    const int bn = static_cast<int>(blockIdx.x) * GEMM_BN;
    const int num_kt = (K + GEMM_BK - 1) / GEMM_BK;

    // ---- the token: one wgmma on a zeroed, discarded tile (block (0, 0), warpgroup 0) ----
    if (blockIdx.x == 0 && blockIdx.y == 0 && tid < 128) {
        for (int b = tid * 16; b < TOKEN_BYTES; b += 128 * 16) {
            *reinterpret_cast<uint4*>(smem + b) = make_uint4(0u, 0u, 0u, 0u);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync 1, 128;\n" ::: "memory");  // the warpgroup's zeroes are in place
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        wgmma_m64n8k16(d, token_desc(smem_base), token_desc(smem_base + 2048));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (__float_as_uint(d[0]) == 0x7f800001u) C[0] = 0;  // never: 0 . 0 = 0
    }
    __syncthreads();  // the tile is dead; the pipeline below reuses the memory

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    // Prologue: k-tiles 0 .. STAGES-2, one commit group each (empty groups keep the count).
#pragma unroll
    for (int s = 0; s < GEMM_STAGES - 1; ++s) {
        if (s < num_kt) {
            load_tile(smem_base + s * GEMM_STAGE_BYTES, A, B, M, N, K, lda, ldb, bm, bn, s, tid);
        }
        cp_async_commit();
    }

    // Per-lane ldmatrix row / chunk selectors (see the fragment notes at the top).
    const int ld_row = lane & 15;  // row within a 16-row (A) or 16-k (B) slab
    const int ld_hi = lane >> 4;   // second chunk column: k + 8 (A) or n + 8 (B)

    for (int kt = 0; kt < num_kt; ++kt) {
        // Groups committed so far: (STAGES - 1) + kt; allowing STAGES - 2 in flight means
        // k-tile kt has landed (for this thread's copies) ...
        cp_async_wait<GEMM_STAGES - 2>();
        // ... and after the barrier for everyone's; also every warp is done reading the stage
        // that k-tile kt-1 used, which is the one refilled next.
        __syncthreads();
        {
            const int nk = kt + GEMM_STAGES - 1;
            if (nk < num_kt) {
                load_tile(smem_base + (nk % GEMM_STAGES) * GEMM_STAGE_BYTES, A, B, M, N, K, lda, ldb, bm,
                          bn, nk, tid);
            }
            cp_async_commit();
        }

        const unsigned sA = smem_base + (kt % GEMM_STAGES) * GEMM_STAGE_BYTES;
        const unsigned sB = sA + GEMM_A_STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; ++kk) {
            unsigned af[4][4];
            unsigned bfr[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = warp_m * 64 + i * 16 + ld_row;
                const int c = kk * 2 + ld_hi;
                ldmatrix_x4(sA + r * 64 + ((c ^ ((r >> 1) & 3)) << 4), af[i][0], af[i][1], af[i][2],
                            af[i][3]);
            }
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const int k = kk * 16 + ld_row;
                const int c = warp_n * 4 + p * 2 + ld_hi;
                ldmatrix_x4_trans(sB + k * 256 + ((c ^ (k & 7)) << 4), bfr[2 * p][0], bfr[2 * p][1],
                                  bfr[2 * p + 1][0], bfr[2 * p + 1][1]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_bf16_16816(acc[i][j], af[i], bfr[j]);
        }
    }
    cp_async_wait<0>();  // only empty groups can be pending here; drain them anyway

    // Epilogue: fp32 -> bf16 (RN), straight from the accumulators to global memory.
    const int g = lane >> 2;
    const int t = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gm = bm + warp_m * 64 + i * 16 + g + h * 8;
            if (gm >= M) continue;
            bf16_bits* crow = C + static_cast<long long>(gm) * ldc;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int gn = bn + warp_n * 32 + j * 8 + 2 * t;
                const bf16_bits lo = f32_to_bf16(acc[i][j][2 * h]);
                const bf16_bits hi = f32_to_bf16(acc[i][j][2 * h + 1]);
                if (gn + 1 < N) {
                    // gn is even and ldc % 8 == 0, so this 4-byte store is aligned.
                    *reinterpret_cast<unsigned*>(crow + gn) =
                        static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
                } else if (gn < N) {
                    crow[gn] = lo;
                }
            }
        }
    }
}
