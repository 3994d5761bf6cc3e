// porter-regen: arch=sm_100a ptxas=sm_100a reject=sm_90a,sm_100,sm_120a
// porter-launch: entry = "gemm_bf16_sm100a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [160, 1, 1], shared = 197632
// porter-param: name = "tmA", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [128, 64], swizzle = "128B"
// porter-param: name = "tmB", kind = "tensormap", tensor = "B", dims = ["K", "N"], box = [64, 64], swizzle = "128B"
//
// gemm_bf16_sm100a: C[M, N] = A[M, K] . B[K, N]; bf16 in, fp32 accumulate, bf16 out (round to
// nearest even). The problem and contract of kernel_sm80.cu (A, B, C row-major with
// leading dimensions lda, ldb, ldc in elements; padding columns never read or written; K, lda,
// ldb, ldc multiples of 8; A, B, C 16-byte aligned; M, N any >= 1). Blackwell datacenter only
// (sm_100a): TMA loads with 128-byte swizzle, tcgen05.mma with the accumulator in tensor memory.
//
// STATUS: NOT RUN. Assembled with ptxas and inspected (SASS, an offline address model of the TMA
// swizzle against the descriptors) only; there is no Blackwell GPU here. The TMA loads, the
// swizzle and the A/B descriptor values mirror kernel_sm90a.cu (TMA + wgmma, the same tiles,
// stages, boxes and shared-memory placement), which passes porter's gate on an H200. New here and unverified on hardware: the sm_100 descriptor encoding, the instruction
// descriptor and the TMEM side.
//
// Parameters: (A, B, C, M, N, K, lda, ldb, ldc, tmA, tmB). tmA and tmB are CUtensorMaps (128
// bytes, passed by value as __grid_constant__) that the host encodes before the launch:
//   tmA: A as a 2-D bf16 tensor, dims (inner first) {K, M}, row stride lda * 2 bytes, box {64, 128}
//        (64 k x 128 rows), 128B swizzle, no interleave, element strides 1, OOB fill zero.
//   tmB: B as a 2-D bf16 tensor, dims {N, K}, row stride ldb * 2 bytes, box {64, 64} (64 n x 64 k
//        rows), 128B swizzle, OOB fill zero.
// Reads outside [0, M) x [0, K) / [0, K) x [0, N) land as zeros in shared memory, so ragged
// tiles in M, N and K need no code; the epilogue bounds-checks C.
//
// Launch: grid (ceil_div(N, 256), ceil_div(M, 128)), block 160 threads = 5 warps, 197632 bytes
// of dynamic shared memory: 4 stages x 48 KiB plus 1024 bytes of slack, because the kernel rounds
// the dynamic shared-memory base up to 1024 bytes at run time (the 128B swizzle pattern repeats
// every 1024 bytes and the descriptors below assume base offset 0). Needs the >48 KiB opt-in.
//
// Roles (warp = tid / 32):
//   thread 0 (warp 0 lane 0), TMA producer: for k-tile kt (stage s = kt % 4) wait on empty[s]
//     (parity ((kt / 4) & 1) ^ 1: a fresh barrier's "previous" phase counts as complete), then
//     mbarrier.arrive.expect_tx on full[s] (count 1) for 49152 bytes and issue 5 TMA loads
//     (cp.async.bulk.tensor.2d ... mbarrier::complete_tx::bytes) that complete full[s]:
//       A box at coords {k0, bm}           -> stage + 0      (16 KiB)
//       B box at coords {bn + 64c, k0}     -> stage + 16384 + c * 8192, c = 0..3 (8 KiB each)
//     TMA credits the full box bytes even for boxes partly or wholly out of bounds (it fills
//     zeros), so the expected byte count is always 49152.
//   warps 0-3 (128 threads), epilogue (thread 0 joins after its producer loop): wait on the
//     accumulator barrier, tcgen05.fence::after_thread_sync, then warp w reads TMEM lanes
//     32w..32w+31 (= tile rows) with tcgen05.ld.32x32b.x32 (32 fp32 columns per thread per load)
//     + tcgen05.wait::ld, converts to bf16 (RN) and stores with bounds checks in M and N.
//   warp 4, TMEM owner and MMA issuer. The whole warp runs tcgen05.alloc (256 columns: the
//     128 x 256 fp32 accumulator, TMEM lane = tile row, column = tile column) and
//     tcgen05.relinquish_alloc_permit at the start and tcgen05.dealloc at the end. Lane 0
//     issues the MMAs: per k-tile wait full[s], tcgen05.fence::after_thread_sync, 4 x
//     tcgen05.mma.cta_group::1.kind::f16 (M = 128, N = 256, K = 16; enable-input-d = 0 for
//     the very first one, which zero-initialises the accumulator), then tcgen05.commit to
//     empty[s] (count 1; arrives when those MMAs have finished reading the stage). After the
//     last k-tile, one more tcgen05.commit to the accumulator barrier.
// TMA writes and tcgen05.mma reads are both async-proxy operations ordered by the mbarriers
// (complete_tx on full[s], tcgen05.commit on empty[s]); no generic-proxy fence is needed.
//
// Shared-memory layout per stage (base 1024-byte aligned), as TMA's 128B swizzle writes it:
// a box row of 128 bytes (64 bf16) at row * 128, its 16-byte chunk c stored at chunk position
// c ^ (row % 8) (byte-address bits [4,7) ^= bits [7,10)).
//   A (16 KiB, K-major): tile row m (0..127) at m * 128; k 0..63 along the row.
//   B (32 KiB, MN-major): four 8 KiB blocks, block c = n 64c..64c+63; in a block, k row
//     (0..63) at k * 128, n along the row.
// sm100 shared-memory (UMMA) descriptor, 64 bits, from CUTLASS include/cute/arch/mma_sm100_desc.hpp
// (union UMMA::SmemDescriptor, enum UMMA::LayoutType): start address >> 4 in [0,14), LBO >> 4 in
// [16,30), SBO >> 4 in [32,46), version = 1 in [46,48) ("version for blackwell"), base_offset in
// [49,52) = 0, lbo_mode [52] = 0 (legacy), layout_type in [61,64) with SWIZZLE_NONE = 0,
// SWIZZLE_128B_BASE32B = 1, SWIZZLE_128B = 2, SWIZZLE_64B = 4, SWIZZLE_32B = 6. (Hopper's GMMA
// descriptor has a 2-bit field at [62,64) with B128 = 1; 2 << 61 here.)
// LBO / SBO for 128B swizzle, from CUTLASS include/cute/atom/mma_traits_sm100.hpp make_umma_desc
// (canonical layouts in 16-byte units, T = 8 bf16) and DeepGEMM
// deep_gemm/include/deep_gemm/common/sm100_utils.cuh make_umma_desc / advance_umma_desc_lo:
//   K-major  B128: Swizzle<3,4,3> o ((8,m),(T,2)):((8T,SBO),(1,T)) -> SBO = stride between 8-row
//     groups = 1024; LBO unused for swizzled K-major (CUTLASS writes 1, i.e. 16 bytes; DeepGEMM 0).
//   MN-major B128: Swizzle<3,4,3> o ((T,8,n),(8,k)):((1,T,LBO),(8T,SBO)) -> LBO = stride between
//     64-element MN blocks = 8192 (DeepGEMM: BLOCK_K * 64 * 2), SBO = stride between 8-row K
//     groups = 1024 (DeepGEMM: 8 * 128). The same meaning as GMMA's MN-major B128, so the values
//     are those of the H200-verified wgmma kernel.
//   One MMA reads A 128 x 16 and B 16 x 256. k slab j (k 16j..16j+15) advances the start address
//   inside the swizzle atom: A by j * 32 bytes (K-major: 16 bf16), B by j * 2048 bytes (MN-major:
//   16 k rows of 128 bytes), as DeepGEMM's advance_umma_desc_lo does; address bits [7,10) of
//   every start stay 0, so base_offset stays 0.
// Instruction descriptor (32-bit, kind::f16; CUTLASS UMMA::InstrDescriptor): c_format [4,6) = 1
// (F32), a_format [7,10) = 1 (BF16), b_format [10,13) = 1 (BF16), negate bits 0, a_major [15] = 0
// (K-major), b_major [16] = 1 (MN-major), N >> 3 [17,23) = 32, M >> 4 [24,29) = 8; sparsity,
// saturate, max_shift 0.

#define GEMM_BM 128
#define GEMM_BN 256
#define GEMM_BK 64
#define GEMM_STAGES 4
#define GEMM_THREADS 160
#define GEMM_MMA_WARP 4
#define GEMM_TMEM_COLS 256                                          // fp32 accumulator columns (a power of two, 32..512)
#define GEMM_A_STAGE_BYTES (GEMM_BM * GEMM_BK * 2)                  // 16384: one TMA box {64, 128}
#define GEMM_B_BLOCK_BYTES (64 * GEMM_BK * 2)                       // 8192: one TMA box {64, 64}
#define GEMM_B_STAGE_BYTES (GEMM_B_BLOCK_BYTES * (GEMM_BN / 64))    // 32768
#define GEMM_STAGE_BYTES (GEMM_A_STAGE_BYTES + GEMM_B_STAGE_BYTES)  // 49152 = expect_tx per stage
#define GEMM_SMEM_ALIGN 1024
// dynamic shared memory: GEMM_STAGES * GEMM_STAGE_BYTES + GEMM_SMEM_ALIGN = 197632 bytes

// 128B-swizzle descriptor fields (bytes; see the header).
#define GEMM_A_LBO 16    // unused for swizzled K-major; CUTLASS's value
#define GEMM_A_SBO 1024  // 8 rows x 128 bytes
#define GEMM_A_KSTEP 32  // start advance per 16-wide k slab: 16 bf16
#define GEMM_B_LBO GEMM_B_BLOCK_BYTES  // 8192: between 64-wide N blocks
#define GEMM_B_SBO 1024                // 8 k rows x 128 bytes
#define GEMM_B_KSTEP 2048              // start advance per 16-wide k slab: 16 k rows x 128 bytes
#define UMMA_LAYOUT_SWIZZLE_128B 2ull  // UMMA::LayoutType::SWIZZLE_128B, bits [61,64)

// kind::f16 instruction descriptor: F32 accumulator, BF16 A and B, A K-major, B MN-major,
// N = 256, M = 128.
#define GEMM_IDESC                                                                              \
    ((1u << 4) | (1u << 7) | (1u << 10) | (0u << 15) | (1u << 16) | ((GEMM_BN >> 3) << 17) |   \
     ((GEMM_BM >> 4) << 24))

typedef unsigned short bf16_bits;  // raw bf16 storage; no cuda_bf16.h needed

// A CUtensorMap by value (cuda.h's is 64-byte aligned, 128 bytes).
struct __align__(64) TmaMap {
    unsigned long long v[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarrier

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrive (the barrier's one expected arrival) and add `bytes` to its pending transaction count;
// the phase completes once the TMA loads have delivered that many bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
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

// Wait until the barrier's phase with this parity has completed (parity 1 of a fresh barrier
// counts as completed, which lets the producer's first pass over empty[] through).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------- TMA

// 2-D tiled TMA load of one box at coordinates {x (inner), y} into shared memory at dst; the
// bytes are counted on the mbarrier bar (complete_tx). map is the generic address of a
// __grid_constant__ CUtensorMap parameter.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, unsigned bar, int x, int y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
            dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(x), "r"(y)
        : "memory");
}

// ---------------------------------------------------------------- tcgen05

// sm100 128B-swizzle shared-memory descriptor (see the header): version 1, base offset 0,
// lbo_mode 0, layout SWIZZLE_128B.
__device__ __forceinline__ unsigned long long make_desc_sw128(unsigned saddr, unsigned lbo, unsigned sbo) {
    const unsigned long long start = (saddr & 0x3FFFFu) >> 4;
    return start | (static_cast<unsigned long long>(lbo >> 4) << 16) |
           (static_cast<unsigned long long>(sbo >> 4) << 32) | (1ull << 46) | (UMMA_LAYOUT_SWIZZLE_128B << 61);
}

__device__ __forceinline__ void tc_fence_before() {
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
}

__device__ __forceinline__ void tc_fence_after() {
    asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
}

// D[tmem] (+)= A[smem] . B[smem], 128 x 256 x 16; accumulate != 0 keeps D's contents.
__device__ __forceinline__ void tc_mma(unsigned tmem_d, unsigned long long desc_a, unsigned long long desc_b,
                                       unsigned idesc, unsigned accumulate) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}\n" ::"r"(tmem_d),
        "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(accumulate)
        : "memory");
}

// Arrive (once) on the mbarrier when every tcgen05 async operation this thread issued so far
// has completed.
__device__ __forceinline__ void tc_commit(unsigned bar) {
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(bar)
                 : "memory");
}

// 32 consecutive fp32 columns of this thread's TMEM lane (32x32b shape: thread i of the warp
// reads lane (taddr >> 16) + i). The wait is in the same asm statement, so no register of v can
// be read before the load has completed.
__device__ __forceinline__ void tc_ld_32cols(unsigned taddr, unsigned* v) {
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x32.b32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];\n\t"
        "tcgen05.wait::ld.sync.aligned;\n"
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
          "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15]),
          "=r"(v[16]), "=r"(v[17]), "=r"(v[18]), "=r"(v[19]), "=r"(v[20]), "=r"(v[21]), "=r"(v[22]), "=r"(v[23]),
          "=r"(v[24]), "=r"(v[25]), "=r"(v[26]), "=r"(v[27]), "=r"(v[28]), "=r"(v[29]), "=r"(v[30]), "=r"(v[31])
        : "r"(taddr)
        : "memory");
}

// Two fp32 (as raw bits) -> packed bf16x2, round to nearest even; lo in the low half.
__device__ __forceinline__ unsigned pack_bf16x2(unsigned lo, unsigned hi) {
    unsigned out;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(__uint_as_float(hi)), "f"(__uint_as_float(lo)));
    return out;
}

__device__ __forceinline__ bf16_bits f32_to_bf16(unsigned bits) {
    bf16_bits h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(__uint_as_float(bits)));
    return h;
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
gemm_bf16_sm100a(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
                 int M, int N, int K, int lda, int ldb, int ldc, const __grid_constant__ TmaMap tmA,
                 const __grid_constant__ TmaMap tmB) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bar[GEMM_STAGES];
    __shared__ __align__(8) unsigned long long empty_bar[GEMM_STAGES];
    __shared__ __align__(8) unsigned long long accum_bar;
    __shared__ unsigned tmem_slot;

    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int bm = static_cast<int>(blockIdx.y) * GEMM_BM;
    const int bn = static_cast<int>(blockIdx.x) * GEMM_BN;
    const int num_kt = (K + GEMM_BK - 1) / GEMM_BK;
    // The 128B swizzle and the descriptors' base offset 0 need 1024-byte aligned stages; the
    // launch asks for GEMM_SMEM_ALIGN bytes more than the stages use.
    const unsigned smem_base = (smem_addr(smem) + (GEMM_SMEM_ALIGN - 1)) & ~static_cast<unsigned>(GEMM_SMEM_ALIGN - 1);

    if (tid == 0) {
        for (int s = 0; s < GEMM_STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);   // the producer's arrive.expect_tx (+ TMA bytes)
            mbar_init(smem_addr(&empty_bar[s]), 1);  // one tcgen05.commit per use
        }
        mbar_init(smem_addr(&accum_bar), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (warp == GEMM_MMA_WARP) {
        // Whole warp: allocate the accumulator's TMEM columns; the base address goes to tmem_slot.
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(
                         smem_addr(&tmem_slot)),
                     "n"(GEMM_TMEM_COLS)
                     : "memory");
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
    }
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const unsigned tmem_base = *reinterpret_cast<volatile unsigned*>(&tmem_slot);

    if (warp < 4) {
        // ---------------- TMA producer (thread 0 only) ----------------
        if (tid == 0) {
            for (int kt = 0; kt < num_kt; ++kt) {
                const int s = kt % GEMM_STAGES;
                // Wait until the MMAs of this stage's previous k-tile (kt - STAGES) have completed.
                mbar_wait(smem_addr(&empty_bar[s]), ((kt / GEMM_STAGES) & 1) ^ 1);
                const unsigned full = smem_addr(&full_bar[s]);
                const unsigned st = smem_base + s * GEMM_STAGE_BYTES;
                const int k0 = kt * GEMM_BK;
                mbar_arrive_expect_tx(full, GEMM_STAGE_BYTES);
                tma_load_2d(st, &tmA, full, k0, bm);
#pragma unroll
                for (int c = 0; c < GEMM_BN / 64; ++c) {
                    tma_load_2d(st + GEMM_A_STAGE_BYTES + c * GEMM_B_BLOCK_BYTES, &tmB, full, bn + 64 * c, k0);
                }
            }
        }

        // ---------------- epilogue (warps 0-3: TMEM lanes 32*warp .. +31) ----------------
        mbar_wait(smem_addr(&accum_bar), 0);
        __syncwarp();  // reconverge (warp 0's lane 0 was the producer): tcgen05.ld is .sync.aligned
        tc_fence_after();
        const int gm = bm + warp * 32 + lane;  // this thread's row = its TMEM lane
        bf16_bits* crow = C + static_cast<long long>(gm) * ldc;
        const unsigned lane_addr = tmem_base + (static_cast<unsigned>(warp * 32) << 16);
#pragma unroll 1
        for (int c = 0; c < GEMM_BN / 32; ++c) {
            const int gn0 = bn + c * 32;
            if (gn0 >= N) break;  // the same for the whole warp, so tcgen05.ld stays convergent
            unsigned v[32];
            tc_ld_32cols(lane_addr + c * 32, v);
            if (num_kt == 0) {  // K == 0 (outside the contract): the accumulator was never written
#pragma unroll
                for (int e = 0; e < 32; ++e) v[e] = 0u;
            }
            if (gm < M) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int gn = gn0 + q * 8;
                    if (gn + 8 <= N) {
                        // gn % 8 == 0 and ldc % 8 == 0: a 16-byte aligned store of 8 bf16.
                        uint4 out;
                        out.x = pack_bf16x2(v[8 * q + 0], v[8 * q + 1]);
                        out.y = pack_bf16x2(v[8 * q + 2], v[8 * q + 3]);
                        out.z = pack_bf16x2(v[8 * q + 4], v[8 * q + 5]);
                        out.w = pack_bf16x2(v[8 * q + 6], v[8 * q + 7]);
                        *reinterpret_cast<uint4*>(crow + gn) = out;
                    } else {
#pragma unroll
                        for (int e = 0; e < 8; ++e) {
                            if (gn + e < N) crow[gn + e] = f32_to_bf16(v[8 * q + e]);
                        }
                    }
                }
            }
        }
        tc_fence_before();
    } else {
        // ---------------- MMA issuer (warp 4, lane 0) ----------------
        if (lane == 0) {
            for (int kt = 0; kt < num_kt; ++kt) {
                const int s = kt % GEMM_STAGES;
                mbar_wait(smem_addr(&full_bar[s]), (kt / GEMM_STAGES) & 1);
                tc_fence_after();
                const unsigned sa = smem_base + s * GEMM_STAGE_BYTES;
                const unsigned sb = sa + GEMM_A_STAGE_BYTES;
#pragma unroll
                for (int j = 0; j < GEMM_BK / 16; ++j) {
                    tc_mma(tmem_base, make_desc_sw128(sa + j * GEMM_A_KSTEP, GEMM_A_LBO, GEMM_A_SBO),
                           make_desc_sw128(sb + j * GEMM_B_KSTEP, GEMM_B_LBO, GEMM_B_SBO), GEMM_IDESC,
                           (kt > 0 || j > 0) ? 1u : 0u);
                }
                tc_commit(smem_addr(&empty_bar[s]));  // frees the stage once these MMAs are done
            }
            if (num_kt > 0) {
                tc_commit(smem_addr(&accum_bar));  // the accumulator is complete
            } else {
                mbar_arrive(smem_addr(&accum_bar));
            }
        }
        __syncwarp();
    }

    // Teardown: every TMEM read is done (fenced before the barrier); the allocating warp frees.
    __syncthreads();
    if (warp == GEMM_MMA_WARP) {
        tc_fence_after();
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem_base),
                     "n"(GEMM_TMEM_COLS)
                     : "memory");
    }
}
