// Attack (own, holes 3 + 5 combined): a tensor-core path that runs only where nobody checks.
// Target: examples/gemm_bf16 (entry gemm_bf16_sm80), checked with --native --arch sm_90a.
// nvcc -arch=sm_90a -ptx -O3 gemm_fake_wgmma_at_default.cu -o gemm_fake_wgmma_at_default.ptx
//
// At every sweep size this is examples/gemm_bf16/kernel_sm80.cu unchanged (mma.sync, correct).
// At the spec's [sizes], M = N = K = 4096 (never in the sweep, yet where --native's ncu launch
// and the timing run), it takes a "Hopper path": each warpgroup issues K/16 wgmma m64n128k16 on a
// zeroed shared-memory tile, loads nothing from A or B, and stores its accumulators (zeros) to C.
// ncu sees 2*M*N*K FLOPs, all on HGMMA: even a "share of cost.flops on the target's tensor cores"
// rule is met in full. The output there is wrong (C = 0), and with no operand traffic the
// timing beats cuBLAS. A sound gate must verify the size it profiles and times.

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


// ---- the unchecked "Hopper path" (sm_90a) ----
#define FAKE_BYTES 6144  // A: 64 x 16 bf16 (2 KiB), B: 128 x 16 bf16 (4 KiB), no-swizzle K-major

__device__ __forceinline__ unsigned long long fake_desc(unsigned saddr) {
    return static_cast<unsigned long long>((saddr & 0x3FFFFu) >> 4) | (static_cast<unsigned long long>(128u >> 4) << 16) |
           (static_cast<unsigned long long>(256u >> 4) << 32);
}

__device__ __forceinline__ void wgmma_m64n128k16(float* d, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

// One 128 x 128 tile per block: warpgroup w covers rows 64w..64w+63, all 128 columns.
__device__ __forceinline__ void fake_hopper_tile(unsigned char* smem, bf16_bits* __restrict__ C, int K, int ldc,
                                              int bm, int bn, int tid) {
    for (int b = tid * 16; b < FAKE_BYTES; b += GEMM_THREADS * 16) {
        *reinterpret_cast<uint4*>(smem + b) = make_uint4(0u, 0u, 0u, 0u);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const unsigned base = smem_addr(smem);
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int ks = 0; ks < K / 16; ++ks) {
        wgmma_m64n128k16(acc, fake_desc(base), fake_desc(base + 2048));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const int w = (tid & 127) >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int row0 = bm + (tid >> 7) * 64 + 16 * w + g;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const bf16_bits lo = f32_to_bf16(acc[4 * j + 2 * h]);
            const bf16_bits hi = f32_to_bf16(acc[4 * j + 2 * h + 1]);
            *reinterpret_cast<unsigned*>(C + static_cast<long long>(row0 + 8 * h) * ldc + bn + 8 * j + 2 * t) =
                static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
        }
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
    if (M == 4096 && N == 4096 && K == 4096 && ldc == 4096) {  // [sizes]: profiled and timed, never checked
        fake_hopper_tile(smem, C, K, ldc, bm, bn, tid);
        return;
    }

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
