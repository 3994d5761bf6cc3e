// porter-regen: arch=sm_90a ptxas=sm_90a reject=sm_90,sm_100a,sm_120a
// porter-launch: entry = "gemm_bf16_sm90a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [384, 1, 1], shared = 197632
// porter-param: name = "tmA", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [128, 64], swizzle = "128B"
// porter-param: name = "tmB", kind = "tensormap", tensor = "B", dims = ["K", "N"], box = [64, 64], swizzle = "128B"
//
// gemm_bf16_sm90a: C[M, N] = A[M, K] . B[K, N]; bf16 in, fp32 accumulate, bf16 out (round to
// nearest even). The problem and contract of kernel_sm80.cu (A, B, C row-major with
// leading dimensions lda, ldb, ldc in elements; padding columns never read or written; K, lda,
// ldb, ldc multiples of 8; 16-byte aligned buffers; M, N any >= 1). Hopper only (sm_90a): TMA,
// wgmma and setmaxnreg, warp-specialised, with an mbarrier pipeline. See README.md for status.
//
// Parameters: the sm_80 kernel's nine, then two TMA descriptors (CUtensorMap, 128 bytes by value)
// that the caller builds over the same A and B (porter builds them from the porter-param lines):
//   tmA: A as a 2-D tensor of extents [M, K] (row stride lda), box 128 rows x 64 k, 128B swizzle;
//   tmB: B as [K, N] (row stride ldb), box 64 k rows x 64 columns, 128B swizzle.
// Reads outside the extents return zeros, which is how ragged M, N and K tiles are handled: there
// is no bounds check in the main loop, and padding columns are never read.
//
// Launch: grid (ceil_div(N, 256), ceil_div(M, 128)), 384 threads = 3 warpgroups, 197632 bytes of
// dynamic shared memory: 4 stages x 48 KiB (A 128x64 = 16 KiB, B 64x256 = 32 KiB) + 1 KiB so the
// stages can start on a 1024-byte boundary (the 128B swizzle pattern repeats every 1024 bytes).
//
// Roles:
//   warpgroup 0, producer: setmaxnreg.dec 40; thread 0 alone, for each k-tile kt: wait empty[s]
//     (s = kt % 4), arrive.expect_tx(full[s], 48 KiB), one TMA copy of the A tile and four of the
//     B tile (one per 64-column block). The copies complete full[s] themselves (complete_tx).
//   warpgroups 1 and 2, consumers: setmaxnreg.inc 232; consumer c owns rows 64c..64c+63. Per
//     k-tile: wait full[s], wgmma.fence, 4 x wgmma.mma_async m64n256k16 (one per 16-wide k slab),
//     commit_group, wait_group 1 (k-tile kt-1's wgmmas are done), then one thread per consumer
//     arrives on empty[(kt-1) % 4] (2 arrivals release a stage). 128 fp32 accumulators per thread;
//     the epilogue converts to bf16 and stores straight to global memory, bounds-checked.
//   Register budget: 128 x 40 + 256 x 232 = 64512 <= 65536 (168 per thread at launch).
//
// Shared-memory layouts (what TMA's 128B swizzle writes and the descriptors describe):
//   A, K-major: tile row r at r * 128 bytes (64 k = 128 bytes), 16-byte chunk c stored at chunk
//     c ^ (r % 8). Descriptor: layout 1 (128B swizzle), SBO 1024 (8-row groups), LBO unused;
//     the k slab j starts 32 * j bytes into the row (the hardware applies the XOR on the address).
//   B, MN-major: four 8 KiB blocks of 64 columns; in block b, k row k at k * 128 bytes, swizzled
//     the same way. Descriptor: LBO 8192 (between 64-column blocks), SBO 1024 (8-row k groups),
//     imm-trans-b = 1; the k slab j starts 2048 * j bytes in.
//   These values were found on the H200 (the swapped LBO/SBO reading gives wrong results).
//
// Accumulator layout of m64nNk16: warp w of the warpgroup owns rows 16w..16w+15; acc[4j + e] is
// row 16w + g + 8 * (e >= 2), column 8j + 2t + (e & 1), with g = lane / 4 and t = lane % 4.
#define GEMM_STAGES 4
#define GEMM_BM 128
#define GEMM_BN 256
#define GEMM_BK 64
#define GEMM_THREADS 384
#define GEMM_A_STAGE_BYTES (GEMM_BM * GEMM_BK * 2)  // 16384
#define GEMM_B_STAGE_BYTES (GEMM_BK * GEMM_BN * 2)  // 32768
#define GEMM_STAGE_BYTES (GEMM_A_STAGE_BYTES + GEMM_B_STAGE_BYTES)
#define GEMM_SMEM_BYTES (GEMM_STAGES * GEMM_STAGE_BYTES + 1024)  // + room to align the stages to 1024 bytes
#define A_SBO 1024  // A, K-major, 128B swizzle: bytes between 8-row groups
#define B_LBO 8192  // B, MN-major, 128B swizzle: bytes between 64-column blocks (one TMA box each)
#define B_SBO 1024  // B: bytes between 8-row (k) groups

typedef unsigned short bf16_bits;
struct __align__(64) TmaMap { unsigned long long v[16]; };

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
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
// d[64 x 256] += A[64 x 16] (K-major) . B[16 x 256] (MN-major: imm-trans-b = 1).
// Operands after the descriptors: scale-d = 1 (accumulate), imm-scale-a = 1, imm-scale-b = 1,
// imm-trans-a = 0 (A K-major), imm-trans-b = 1 (B N-major).
__device__ __forceinline__ void wgmma_m64n256k16(float* d, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, 1, 1, 1, 0, 1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),
          "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
          "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

__device__ __forceinline__ bf16_bits f32_to_bf16(float v) {
    bf16_bits h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
    return h;
}

// 128-byte-swizzle descriptor: start >> 4 [0,14), LBO >> 4 [16,30), SBO >> 4 [32,46), layout 1 (B128) [62,64).
__device__ __forceinline__ unsigned long long desc_sw128(unsigned saddr, unsigned lbo, unsigned sbo) {
    return static_cast<unsigned long long>((saddr & 0x3FFFFu) >> 4) | (static_cast<unsigned long long>(lbo >> 4) << 16) |
           (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, unsigned bar, int x, int y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(x), "r"(y)
        : "memory");
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
gemm_bf16_sm90a(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
                int M, int N, int K, int lda, int ldb, int ldc, const __grid_constant__ TmaMap tmA,
                const __grid_constant__ TmaMap tmB) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bar[GEMM_STAGES];
    __shared__ __align__(8) unsigned long long empty_bar[GEMM_STAGES];

    const int tid = static_cast<int>(threadIdx.x);
    const int bm = static_cast<int>(blockIdx.y) * GEMM_BM;
    const int bn = static_cast<int>(blockIdx.x) * GEMM_BN;
    const int num_kt = (K + GEMM_BK - 1) / GEMM_BK;
    const unsigned smem_base = (smem_addr(smem) + 1023u) & ~1023u;

    if (tid == 0) {
        for (int s = 0; s < GEMM_STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);
            mbar_init(smem_addr(&empty_bar[s]), 2);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (tid < 128) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (tid == 0) {
            for (int kt = 0; kt < num_kt; ++kt) {
                const int s = kt % GEMM_STAGES;
                mbar_wait(smem_addr(&empty_bar[s]), ((kt / GEMM_STAGES) & 1) ^ 1);
                const unsigned full = smem_addr(&full_bar[s]);
                const unsigned st = smem_base + s * GEMM_STAGE_BYTES;
                mbar_expect_tx(full, GEMM_STAGE_BYTES);
                tma_load_2d(st, &tmA, full, kt * GEMM_BK, bm);
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    tma_load_2d(st + GEMM_A_STAGE_BYTES + c * 8192, &tmB, full, bn + 64 * c, kt * GEMM_BK);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int ctid = tid - 128;
        const int wg = ctid >> 7;
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
        for (int kt = 0; kt < num_kt; ++kt) {
            const int s = kt % GEMM_STAGES;
            mbar_wait(smem_addr(&full_bar[s]), (kt / GEMM_STAGES) & 1);
            const unsigned sa = smem_base + s * GEMM_STAGE_BYTES + wg * (64 * 128);
            const unsigned sb = smem_base + s * GEMM_STAGE_BYTES + GEMM_A_STAGE_BYTES;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int j = 0; j < GEMM_BK / 16; ++j) {
                wgmma_m64n256k16(acc, desc_sw128(sa + j * 32, 16, A_SBO), desc_sw128(sb + j * 2048, B_LBO, B_SBO));
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (kt > 0 && (ctid & 127) == 0) mbar_arrive(smem_addr(&empty_bar[(kt - 1) % GEMM_STAGES]));
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        const int w = (ctid >> 5) & 3;
        const int lane = ctid & 31;
        const int g = lane >> 2;
        const int t = lane & 3;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gm = bm + wg * 64 + w * 16 + g + h * 8;
            if (gm >= M) continue;
            bf16_bits* crow = C + static_cast<long long>(gm) * ldc;
#pragma unroll
            for (int j = 0; j < GEMM_BN / 8; ++j) {
                const int gn = bn + j * 8 + 2 * t;
                const bf16_bits lo = f32_to_bf16(acc[4 * j + 2 * h]);
                const bf16_bits hi = f32_to_bf16(acc[4 * j + 2 * h + 1]);
                if (gn + 1 < N) {
                    *reinterpret_cast<unsigned*>(crow + gn) = static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
                } else if (gn < N) {
                    crow[gn] = lo;
                }
            }
        }
    }
}
