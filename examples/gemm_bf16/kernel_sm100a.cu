// porter-regen: arch=sm_100a ptxas=sm_100a reject=sm_90a,sm_100,sm_120a
// porter-launch: entry = "gemm_bf16_sm100a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [160, 1, 1], shared = 196608
//
// gemm_bf16_sm100a: C[M, N] = A[M, K] . B[K, N]; bf16 in, fp32 accumulate, bf16 out (round to
// nearest even). The same problem, contract and parameter list as examples/gemm_bf16_sm80
// (A, B, C row-major with leading dimensions lda, ldb, ldc in elements; padding columns never
// read or written; K, lda, ldb, ldc multiples of 8; A, B, C 16-byte aligned; M, N any >= 1).
// Blackwell datacenter only (sm_100a): tcgen05.mma with the accumulator in tensor memory.
//
// STATUS: assembled and inspected offline only; never run (no Blackwell GPU; see README.md).
//
// Launch: grid (ceil_div(N, 256), ceil_div(M, 128)), block 160 threads = 5 warps,
// 196608 bytes of dynamic shared memory (4 stages x 48 KiB; needs the >48 KiB opt-in).
//
// Operands are staged exactly as in kernel_sm90a.cu (same cp.async producer, same no-swizzle
// core-matrix layout, same full/empty mbarrier pipeline); see that file for why cp.async and
// not TMA (no CUtensorMap parameter, ragged edges zero-filled by cp.async's src-size).
//
// Roles (warp = tid / 32):
//   warps 0-3 (128 threads), producer then epilogue. Producer: for k-tile kt wait on empty[s]
//     (s = kt % 4), issue 24 cp.async into stage s, commit; then publish k-tile kt - 2:
//     cp.async.wait_group 2, fence.proxy.async.shared::cta (generic-proxy writes visible to
//     the async proxy that tcgen05.mma reads through), mbarrier.arrive on full[kt-2] (128
//     arrivals complete it). Epilogue: wait on the accumulator barrier, tcgen05.fence::
//     after_thread_sync, then warp w reads TMEM lanes 32w..32w+31 (= tile rows) with
//     tcgen05.ld.32x32b.x32 (32 fp32 columns per thread per load) + tcgen05.wait::ld,
//     converts to bf16 (RN) and stores with bounds checks in M and N.
//   warp 4, TMEM owner and MMA issuer. The whole warp runs tcgen05.alloc (256 columns: the
//     128 x 256 fp32 accumulator, TMEM lane = tile row, column = tile column) and
//     tcgen05.relinquish_alloc_permit at the start and tcgen05.dealloc at the end. Lane 0
//     issues the MMAs: per k-tile wait full[s], tcgen05.fence::after_thread_sync, 4 x
//     tcgen05.mma.cta_group::1.kind::f16 (M = 128, N = 256, K = 16; enable-input-d = 0 for
//     the very first one, which zero-initialises the accumulator), then tcgen05.commit to
//     empty[s] (arrives when those MMAs have finished reading the stage). After the last
//     k-tile, one more tcgen05.commit to the accumulator barrier.
//
// Shared-memory layout per stage (identical to kernel_sm90a.cu): no swizzle, 8x8 core
// matrices (8 rows x 16 bytes), four 16-wide k slabs per stage.
//   A (16 KiB, K-major): slab j at j * 4096; rows 8mb..8mb+7 / k block kb at mb*256 + kb*128.
//   B (32 KiB, MN-major): slab j at 16384 + j * 8192; n 8nb..8nb+7 / k block kb at
//     nb*256 + kb*128, each 16-byte core-matrix row = 8 consecutive n of one k row.
// sm100 shared-memory descriptor (64-bit): start >> 4 [0,14), LBO >> 4 [16,30), SBO >> 4
// [32,46), version = 1 [46,48) (required on Blackwell), base offset 0 [49,52), lbo mode 0 [52],
// layout type 0 = SWIZZLE_NONE [61,64). The no-swizzle canonical layouts are the Hopper ones
// (CUTLASS make_umma_desc): LBO = distance between core matrices adjacent in K (128), SBO =
// distance between core matrices adjacent in M or N (256), for K-major and MN-major alike.
// One MMA reads A 128x16 (16 x 2 core matrices) and B 16x256 (2 x 32 core matrices); k slab j
// adds j*4096 (A) and j*8192 (B) to the start addresses.
// Instruction descriptor (32-bit, kind::f16): c_format [4,6) = 1 (F32), a_format [7,10) = 1
// (BF16), b_format [10,13) = 1 (BF16), negate bits 0, a_major [15] = 0 (K-major), b_major [16]
// = 1 (MN-major), N >> 3 [17,23) = 32, M >> 4 [24,29) = 8; sparsity, saturate, max_shift 0.

#define GEMM_BM 128
#define GEMM_BN 256
#define GEMM_BK 64
#define GEMM_STAGES 4
#define GEMM_LAG 2  // the producer publishes k-tile kt - GEMM_LAG after issuing k-tile kt
#define GEMM_THREADS 160
#define GEMM_PRODUCER_THREADS 128
#define GEMM_MMA_WARP 4
#define GEMM_TMEM_COLS 256  // fp32 accumulator columns (a power of two, 32..512)
#define GEMM_A_SLAB_BYTES (GEMM_BM * 16 * 2)                                // 4096
#define GEMM_B_SLAB_BYTES (GEMM_BN * 16 * 2)                                // 8192
#define GEMM_A_STAGE_BYTES (GEMM_A_SLAB_BYTES * (GEMM_BK / 16))             // 16384
#define GEMM_B_STAGE_BYTES (GEMM_B_SLAB_BYTES * (GEMM_BK / 16))             // 32768
#define GEMM_STAGE_BYTES (GEMM_A_STAGE_BYTES + GEMM_B_STAGE_BYTES)          // 49152
// dynamic shared memory: GEMM_STAGES * GEMM_STAGE_BYTES = 196608 bytes
#define GEMM_LBO 128  // bytes between core matrices adjacent in K
#define GEMM_SBO 256  // bytes between core matrices adjacent in M (A) or N (B)

// kind::f16 instruction descriptor: F32 accumulator, BF16 A and B, A K-major, B MN-major,
// N = 256, M = 128.
#define GEMM_IDESC                                                                              \
    ((1u << 4) | (1u << 7) | (1u << 10) | (0u << 15) | (1u << 16) | ((GEMM_BN >> 3) << 17) |   \
     ((GEMM_BM >> 4) << 24))

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

// Wait until the barrier's phase with this parity has completed (parity 1 of a fresh barrier
// counts as completed, which lets the producer's first pass over empty[] through).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------- tcgen05

// sm100 no-swizzle shared-memory descriptor (see the header): LBO 128, SBO 256, version 1.
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr) {
    const unsigned long long start = (saddr & 0x3FFFFu) >> 4;
    const unsigned long long lbo = GEMM_LBO >> 4;
    const unsigned long long sbo = GEMM_SBO >> 4;
    return start | (lbo << 16) | (sbo << 32) | (1ull << 46);
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

// ---------------------------------------------------------------- producer: one k-tile
// (identical to kernel_sm90a.cu)

// Issue this producer thread's 24 cp.async copies of k-tile `kt` into the stage at `stage_base`
// (no commit). p = producer thread 0..127. Eight consecutive threads fill one core matrix (8 rows
// x 16 bytes, 128 contiguous bytes), so every 8-lane phase of a warp's shared-memory writes is
// free of bank conflicts; in global memory a warp reads 4 consecutive 16-byte chunks (64 bytes)
// of each of 8 rows. Addresses advance by constant strides (in kernel_sm90a.cu this keeps the
// producer within the 40 registers that setmaxnreg.dec leaves it).
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
gemm_bf16_sm100a(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
                 int M, int N, int K, int lda, int ldb, int ldc) {
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
    const unsigned smem_base = smem_addr(smem);

    if (tid == 0) {
        for (int s = 0; s < GEMM_STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), GEMM_PRODUCER_THREADS);
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
        // ---------------- producer (warps 0-3) ----------------
        for (int kt = 0; kt < num_kt; ++kt) {
            const int s = kt % GEMM_STAGES;
            // Wait until the MMAs of this stage's previous k-tile (kt - STAGES) have completed.
            mbar_wait(smem_addr(&empty_bar[s]), ((kt / GEMM_STAGES) & 1) ^ 1);
            load_tile(smem_base + s * GEMM_STAGE_BYTES, A, B, M, N, K, lda, ldb, bm, bn, kt, tid);
            cp_async_commit();
            if (kt >= GEMM_LAG) {
                // Groups committed: kt + 1; at most LAG pending, so k-tile kt - LAG has landed.
                cp_async_wait<GEMM_LAG>();
                publish(smem_addr(&full_bar[(kt - GEMM_LAG) % GEMM_STAGES]));
            }
        }
        cp_async_wait<0>();
#pragma unroll 1
        for (int kt = max(num_kt - GEMM_LAG, 0); kt < num_kt; ++kt) {
            publish(smem_addr(&full_bar[kt % GEMM_STAGES]));
        }

        // ---------------- epilogue (warps 0-3: TMEM lanes 32*warp .. +31) ----------------
        mbar_wait(smem_addr(&accum_bar), 0);
        __syncwarp();  // reconverge: tcgen05.ld is .sync.aligned
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
                    tc_mma(tmem_base, make_desc(sa + j * GEMM_A_SLAB_BYTES), make_desc(sb + j * GEMM_B_SLAB_BYTES),
                           GEMM_IDESC, (kt > 0 || j > 0) ? 1u : 0u);
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
