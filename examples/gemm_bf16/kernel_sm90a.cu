// porter-regen: arch=sm_90a ptxas=sm_90a reject=sm_90,sm_100a,sm_120a
// porter-launch: entry = "gemm_bf16_sm90a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [384, 1, 1], shared = 196608
//
// gemm_bf16_sm90a: C[M, N] = A[M, K] . B[K, N]; bf16 in, fp32 accumulate, bf16 out (round to
// nearest even). The same problem, contract and parameter list as examples/gemm_bf16_sm80
// (A, B, C row-major with leading dimensions lda, ldb, ldc in elements; padding columns never
// read or written; K, lda, ldb, ldc multiples of 8; A, B, C 16-byte aligned; M, N any >= 1).
// Hopper only (sm_90a): wgmma + setmaxnreg, warp-specialised, with an mbarrier pipeline.
//
// STATUS: assembled and inspected offline only; NOT YET RUN on a GPU (see README.md).
//
// Launch: grid (ceil_div(N, 256), ceil_div(M, 128)), block 384 threads = 3 warpgroups,
// 196608 bytes of dynamic shared memory (4 stages x 48 KiB; needs the >48 KiB opt-in).
//
// Why cp.async and not TMA: a TMA load needs a CUtensorMap kernel parameter (a
// __grid_constant__ 128-byte struct), which would change the parameter list shared with the
// sm_80 kernel. A 1-D cp.async.bulk cannot write the core-matrix layout either (a bulk copy
// lands contiguously, and a 128-byte row of A is spread over 8 core matrices), and it cannot
// zero-fill ragged edges. Plain 16-byte cp.async (LDGSTS, sm_80's instruction) can place every
// 16-byte chunk anywhere and zero-fills out-of-range chunks through its src-size operand, so
// the producer uses it. Consequence: no expect_tx (there are no transaction bytes to count);
// the "full" barrier is a plain 128-arrival barrier, completed by the producer threads.
//
// Roles (tid / 128 = warpgroup):
//   warpgroup 0, producer: setmaxnreg.dec 40. For k-tile kt it waits on empty[s] (s = kt % 4),
//     issues its 24 cp.async of the 128x64 A tile and the 64x256 B tile into stage s and
//     commits a group. Then it publishes k-tile kt - 2: cp.async.wait_group 2 (its own copies
//     of that tile have landed), fence.proxy.async.shared::cta (generic-proxy writes made
//     visible to the async proxy that wgmma reads through), mbarrier.arrive on full[kt-2].
//     Every producer thread does this for its own copies, so full[] completes (128 arrivals)
//     exactly when the whole tile is in shared memory and fenced. This is the writer-side
//     pattern of the H200-verified examples/inspect/wgmma_sm90a.cu (store, fence, arrive),
//     with cp.async + wait_group in place of the plain stores.
//   warpgroups 1 and 2, consumers: setmaxnreg.inc 232. Consumer c computes rows 64c..64c+63
//     of the 128x256 block tile. Per k-tile: wait full[s], wgmma.fence, 4 x
//     wgmma.mma_async.m64n256k16 (one per 16-wide k slab), commit_group, wait_group 1 (the
//     previous k-tile's wgmmas are done), then every consumer thread arrives on that previous
//     stage's empty[] barrier (256 arrivals complete it). The 128 fp32 accumulators per thread
//     are zeroed before the loop and stored to global memory at the end (bf16, RN, bounds
//     checked in M and N).
//   Register budget: 128 x 40 + 256 x 232 = 64512 <= 65536, with 168 per thread at launch
//   (__launch_bounds__(384, 1)), so setmaxnreg.inc can always be satisfied.
//
// Shared-memory layout: no swizzle ("interleave"), 8x8 core matrices of 8 rows x 16 bytes
// (128 contiguous bytes), the layout whose descriptor values (LBO 128, SBO 256) were checked on
// an H200 by examples/inspect/wgmma_sm90a.cu. Each stage holds the k-tile as four 16-wide k
// slabs, and each slab is laid out exactly like that verified kernel's operand tiles:
//   A stage (16 KiB): slab j (k 16j..16j+15) at j * 4096; within it, the core matrix of rows
//     8*mb..8*mb+7 and k block kb (0 or 1) at mb * 256 + kb * 128, row r%8 at +16*(r%8).
//     K-major: a 16-byte core-matrix row is 8 consecutive k of one m row of A.
//   B stage (32 KiB): slab j at 16384 + j * 8192; within it, the core matrix of columns
//     8*nb..8*nb+7 and k block kb at nb * 256 + kb * 128, k row k%8 at +16*(k%8).
//     MN-major (transposed): a 16-byte core-matrix row is 8 consecutive n of one k row of B,
//     which is how B is stored in global memory, so each 16-byte cp.async chunk is a core-
//     matrix row and no transpose is needed anywhere.
// Descriptors (64-bit): start address >> 4 in bits [0,14), LBO >> 4 in [16,30), SBO >> 4 in
// [32,46), base offset 0, layout type 0 (no swizzle) in [62,64). For the no-swizzle layout the
// leading byte offset is the distance between core matrices adjacent in K and the stride byte
// offset the distance between core matrices adjacent in M (A) or N (B), for the K-major and
// the MN-major canonical layouts alike (CUTLASS make_gmma_desc: for INTERLEAVE, MN-major,
// SBO = the MN stride of the ((1,n),(8,k)) u128 layout and LBO = its K stride). So both
// operands use LBO = 128 and SBO = 256, the verified values; B differs only by imm-trans-b = 1
// (MN-major) in the wgmma instruction. The A descriptor of consumer c starts at +c*2048 (8 core-
// matrix rows of 256 bytes), one wgmma covers A 64x16 (8 x 2 core matrices) and B 16x256
// (2 x 32 core matrices); k slab j adds j*4096 (A) and j*8192 (B) to the start address.
//
// Accumulator layout of m64nNk16 (verified in wgmma_sm90a.cu): warp w of the warpgroup owns
// rows 16w..16w+15; acc[4j + e] holds row 16w + g + 8*(e >= 2), column 8j + 2t + (e & 1),
// where g = lane / 4 and t = lane % 4.

#define GEMM_BM 128
#define GEMM_BN 256
#define GEMM_BK 64
#define GEMM_STAGES 4
#define GEMM_LAG 2  // the producer publishes k-tile kt - GEMM_LAG after issuing k-tile kt
#define GEMM_THREADS 384
#define GEMM_PRODUCER_THREADS 128
#define GEMM_CONSUMER_THREADS 256
#define GEMM_A_SLAB_BYTES (GEMM_BM * 16 * 2)                                // 4096
#define GEMM_B_SLAB_BYTES (GEMM_BN * 16 * 2)                                // 8192
#define GEMM_A_STAGE_BYTES (GEMM_A_SLAB_BYTES * (GEMM_BK / 16))             // 16384
#define GEMM_B_STAGE_BYTES (GEMM_B_SLAB_BYTES * (GEMM_BK / 16))             // 32768
#define GEMM_STAGE_BYTES (GEMM_A_STAGE_BYTES + GEMM_B_STAGE_BYTES)          // 49152
// dynamic shared memory: GEMM_STAGES * GEMM_STAGE_BYTES = 196608 bytes
#define GEMM_LBO 128  // bytes between core matrices adjacent in K
#define GEMM_SBO 256  // bytes between core matrices adjacent in M (A) or N (B)

typedef unsigned short bf16_bits;  // raw bf16 storage; no cuda_bf16.h needed

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- cp.async (as in the sm_80 kernel)

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

// ---------------------------------------------------------------- mbarrier (as in wgmma_sm90a.cu)

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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

// Wait until the barrier's phase with this parity has completed. On a fresh barrier, parity 1
// counts as completed (the "previous" phase), which is how the producer's first pass over the
// empty[] barriers goes through without anyone having arrived.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------- wgmma

// No-swizzle shared-memory matrix descriptor (see the header): LBO 128, SBO 256, layout 0.
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr) {
    const unsigned long long start = (saddr & 0x3FFFFu) >> 4;
    const unsigned long long lbo = GEMM_LBO >> 4;
    const unsigned long long sbo = GEMM_SBO >> 4;
    return start | (lbo << 16) | (sbo << 32);
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

// ---------------------------------------------------------------- producer: one k-tile

// Issue this producer thread's 24 cp.async copies of k-tile `kt` into the stage at `stage_base`
// (no commit). p = producer thread 0..127. Eight consecutive threads fill one core matrix (8 rows
// x 16 bytes, 128 contiguous bytes), so every 8-lane phase of a warp's shared-memory writes is
// free of bank conflicts; in global memory a warp reads 4 consecutive 16-byte chunks (64 bytes)
// of each of 8 rows. Addresses advance by constant strides so that the producer fits in the 40
// registers that setmaxnreg.dec leaves it.
//   A: 128 rows x 8 chunks (k 0..63) = 1024 chunks, 8 per thread: row (p>>6)*8 + (p&7) + 16i,
//      k block kb = (p>>3)&7, for i = 0..7.
//   B: 64 k rows x 32 chunks (n 0..255) = 2048 chunks, 16 per thread: k row 8*kb + (p&7) for
//      kb = 0..7, n block (p>>3)&15 and that + 16.
__device__ __forceinline__ void load_tile(unsigned stage_base, const bf16_bits* __restrict__ A,
                                          const bf16_bits* __restrict__ B, int M, int N, int K, int lda,
                                          int ldb, int bm, int bn, int kt, int p) {
    const int k0 = kt * GEMM_BK;
    const int r8 = p & 7;
    {
        const int kb = (p >> 3) & 7;
        const int row = (p >> 6) * 8 + r8;  // + 16 i
        const int gk = k0 + kb * 8;
        const int kbytes = gk < K ? min(16, (K - gk) * 2) : 0;
        const bf16_bits* src = A + static_cast<long long>(bm + row) * lda + gk;
        unsigned dst =
            stage_base + (kb >> 1) * GEMM_A_SLAB_BYTES + (kb & 1) * GEMM_LBO + (row >> 3) * GEMM_SBO + r8 * 16;
        const int rows_left = M - bm - row;  // chunk i is in range when 16 i < rows_left
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const bool ok = 16 * i < rows_left && kbytes > 0;
            // Nothing is read when the size is 0; A itself stands in as a valid address.
            cp_async_16(dst, ok ? static_cast<const void*>(src) : static_cast<const void*>(A),
                        ok ? kbytes : 0);
            src += 16 * static_cast<long long>(lda);
            dst += 2 * GEMM_SBO;
        }
    }
    {
        const int nb = (p >> 3) & 15;  // and nb + 16
        const int gn0 = bn + nb * 8;
        const int gn1 = gn0 + 128;
        const int nbytes0 = gn0 < N ? min(16, (N - gn0) * 2) : 0;
        const int nbytes1 = gn1 < N ? min(16, (N - gn1) * 2) : 0;
        const bf16_bits* src = B + static_cast<long long>(k0 + r8) * ldb + gn0;
        unsigned dst = stage_base + GEMM_A_STAGE_BYTES + nb * GEMM_SBO + r8 * 16;
        int k = k0 + r8;
#pragma unroll
        for (int kb = 0; kb < 8; ++kb) {
            const bool kin = k < K;
            const unsigned d = dst + (kb >> 1) * GEMM_B_SLAB_BYTES + (kb & 1) * GEMM_LBO;
            cp_async_16(d, kin && nbytes0 ? static_cast<const void*>(src) : static_cast<const void*>(B),
                        kin ? nbytes0 : 0);
            cp_async_16(d + 16 * GEMM_SBO,
                        kin && nbytes1 ? static_cast<const void*>(src + 128) : static_cast<const void*>(B),
                        kin ? nbytes1 : 0);
            src += 8 * static_cast<long long>(ldb);
            k += 8;
        }
    }
}

// Publish a k-tile: this thread's copies have landed (cp.async.wait_group by the caller); make
// them visible to the async proxy, then arrive (release) on the stage's full barrier.
__device__ __forceinline__ void publish(unsigned full_bar) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_arrive(full_bar);
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
gemm_bf16_sm90a(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
                int M, int N, int K, int lda, int ldb, int ldc) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bar[GEMM_STAGES];
    __shared__ __align__(8) unsigned long long empty_bar[GEMM_STAGES];

    const int tid = static_cast<int>(threadIdx.x);
    const int bm = static_cast<int>(blockIdx.y) * GEMM_BM;
    const int bn = static_cast<int>(blockIdx.x) * GEMM_BN;
    const int num_kt = (K + GEMM_BK - 1) / GEMM_BK;
    const unsigned smem_base = smem_addr(smem);

    if (tid == 0) {
        for (int s = 0; s < GEMM_STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), GEMM_PRODUCER_THREADS);
            mbar_init(smem_addr(&empty_bar[s]), GEMM_CONSUMER_THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (tid < GEMM_PRODUCER_THREADS) {
        // ---------------- producer warpgroup ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        for (int kt = 0; kt < num_kt; ++kt) {
            const int s = kt % GEMM_STAGES;
            // Wait until the consumers have released this stage's previous k-tile (kt - STAGES).
            mbar_wait(smem_addr(&empty_bar[s]), ((kt / GEMM_STAGES) & 1) ^ 1);
            load_tile(smem_base + s * GEMM_STAGE_BYTES, A, B, M, N, K, lda, ldb, bm, bn, kt, tid);
            cp_async_commit();
            if (kt >= GEMM_LAG) {
                // Groups committed: kt + 1; at most LAG pending, so k-tile kt - LAG has landed.
                cp_async_wait<GEMM_LAG>();
                publish(smem_addr(&full_bar[(kt - GEMM_LAG) % GEMM_STAGES]));
            }
        }
        // Drain: the last min(LAG, num_kt) k-tiles.
        cp_async_wait<0>();
#pragma unroll 1
        for (int kt = max(num_kt - GEMM_LAG, 0); kt < num_kt; ++kt) {
            publish(smem_addr(&full_bar[kt % GEMM_STAGES]));
        }
    } else {
        // ---------------- consumer warpgroups ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int ctid = tid - GEMM_PRODUCER_THREADS;  // 0..255
        const int wg = ctid >> 7;                      // consumer 0 or 1: rows 64*wg .. +63
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

        for (int kt = 0; kt < num_kt; ++kt) {
            const int s = kt % GEMM_STAGES;
            mbar_wait(smem_addr(&full_bar[s]), (kt / GEMM_STAGES) & 1);
            const unsigned sa = smem_base + s * GEMM_STAGE_BYTES + wg * (8 * GEMM_SBO);
            const unsigned sb = smem_base + s * GEMM_STAGE_BYTES + GEMM_A_STAGE_BYTES;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int j = 0; j < GEMM_BK / 16; ++j) {
                wgmma_m64n256k16(acc, make_desc(sa + j * GEMM_A_SLAB_BYTES), make_desc(sb + j * GEMM_B_SLAB_BYTES));
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // At most one group in flight: k-tile kt - 1's wgmmas have finished reading their stage.
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (kt > 0) mbar_arrive(smem_addr(&empty_bar[(kt - 1) % GEMM_STAGES]));
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

        // Epilogue: fp32 -> bf16 (RN), straight from the accumulators to global memory.
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
