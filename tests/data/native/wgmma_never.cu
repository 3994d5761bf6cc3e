// Test variant of examples/inspect/wgmma_sm90a.cu whose wgmma sits behind a never-taken branch.
// nvcc -ptx -arch=sm_90a -O3 wgmma_never.cu -o wgmma_never.ptx
// porter-regen: arch=sm_90a ptxas=sm_90a reject=sm_90,sm_100a,sm_120a
//
// wgmma_tile_sm90a: a small but real Hopper (sm_90a-only) warp-specialised GEMM, for
// `porter inspect` demos. C[M, N] (f32) = A[M, K] . Bt[N, K]^T with bf16 inputs; A and Bt are
// both row-major and K-contiguous ("K-major"), the layout wgmma reads without transposes.
// Toy limits: M, N multiples of 64, K a multiple of 16.
//
// Launch: grid (N / 64, M / 64), block 256 threads = 2 warpgroups, no dynamic shared memory.
//   warpgroup 0 (producer): setmaxnreg.dec to 40 registers; for each 16-wide k-step it waits for
//     its stage's "empty" mbarrier, copies the 64x16 A and Bt slices into shared memory with
//     plain loads/stores in the no-swizzle core-matrix layout, fences the generic->async proxy
//     and arrives on the stage's "full" mbarrier (128 arrivals complete a phase).
//   warpgroup 1 (consumer): setmaxnreg.inc to 232 registers; for each k-step it waits (try_wait
//     .parity) on "full", runs wgmma.fence / wgmma.mma_async m64n64k16 / commit_group /
//     wait_group 0, arrives on "empty", and finally stores its 32 fp32 accumulators per thread.
//   Two stages, so the producer fills one while the consumer multiplies the other.
//
// Shared-memory operand layout (per stage, per operand: 64 rows x 16 k of bf16 = 2 KiB): an 8x8
// "core matrix" is 8 rows of 16 contiguous bytes (128 B). Core matrix (row block rb = row / 8,
// k block kb = k / 8) starts at rb * 256 + kb * 128. In the matrix descriptor the leading byte
// offset (between core matrices adjacent in K) is 128 and the stride byte offset (adjacent in
// M or N) is 256; swizzle mode 0.

#define WG_TILE_M 64
#define WG_TILE_N 64
#define WG_TILE_K 16
#define WG_STAGES 2
#define WG_OPERAND_BYTES (64 * WG_TILE_K * 2)  // 2048

typedef unsigned short bf16_bits;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

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

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// Descriptor of a no-swizzle K-major operand: start >> 4 in bits 0-13, LBO >> 4 in 16-29,
// SBO >> 4 in 32-45, base offset 0, layout type 0 (bits 62-63).
__device__ __forceinline__ unsigned long long make_desc(unsigned saddr) {
    const unsigned long long start = (saddr & 0x3FFFFu) >> 4;
    const unsigned long long lbo = 128u >> 4;
    const unsigned long long sbo = 256u >> 4;
    return start | (lbo << 16) | (sbo << 32);
}

__device__ __forceinline__ void wgmma_m64n64k16(float* d, unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

extern "C" __global__ void __launch_bounds__(256, 1)
wgmma_tile_sm90a(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ Bt, float* __restrict__ C,
                 int M, int N, int K) {
    __shared__ __align__(128) unsigned char tiles[WG_STAGES][2 * WG_OPERAND_BYTES];  // A then Bt
    __shared__ __align__(8) unsigned long long full_bar[WG_STAGES];
    __shared__ __align__(8) unsigned long long empty_bar[WG_STAGES];

    const int tid = static_cast<int>(threadIdx.x);
    const int row0 = static_cast<int>(blockIdx.y) * WG_TILE_M;
    const int col0 = static_cast<int>(blockIdx.x) * WG_TILE_N;
    const int ksteps = K / WG_TILE_K;

    if (tid == 0) {
        for (int s = 0; s < WG_STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 128);
            mbar_init(smem_addr(&empty_bar[s]), 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (tid < 128) {
        // ---------------- producer warpgroup ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const int r = tid >> 1;  // operand row 0..63
        const int kb = tid & 1;  // which 8-wide k block
        const unsigned dst_off = (r >> 3) * 256 + kb * 128 + (r & 7) * 16;
        const bf16_bits* a_src = A + static_cast<long long>(row0 + r) * K + kb * 8;
        const bf16_bits* b_src = Bt + static_cast<long long>(col0 + r) * K + kb * 8;
        for (int ks = 0; ks < ksteps; ++ks) {
            const int s = ks % WG_STAGES;
            // First pass over a stage: parity 1 of a fresh barrier counts as completed.
            mbar_wait(smem_addr(&empty_bar[s]), ((ks / WG_STAGES) & 1) ^ 1);
            const uint4 va = *reinterpret_cast<const uint4*>(a_src + ks * WG_TILE_K);
            const uint4 vb = *reinterpret_cast<const uint4*>(b_src + ks * WG_TILE_K);
            *reinterpret_cast<uint4*>(&tiles[s][dst_off]) = va;
            *reinterpret_cast<uint4*>(&tiles[s][WG_OPERAND_BYTES + dst_off]) = vb;
            // Make the generic-proxy stores visible to wgmma (async proxy), then publish.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(smem_addr(&full_bar[s]));
        }
    } else {
        // ---------------- consumer warpgroup ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        float acc[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
        for (int ks = 0; ks < ksteps; ++ks) {
            const int s = ks % WG_STAGES;
            mbar_wait(smem_addr(&full_bar[s]), (ks / WG_STAGES) & 1);
            const unsigned sa = smem_addr(&tiles[s][0]);
            if (M == -1) {  // never taken: the wgmma path is present in SASS but never executes
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                wgmma_m64n64k16(acc, make_desc(sa), make_desc(sa + WG_OPERAND_BYTES));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            }
            mbar_arrive(smem_addr(&empty_bar[s]));
        }
        // Accumulator layout of m64nNk16: warp w of the warpgroup owns rows 16w..16w+15;
        // acc[4j + e]: row 16w + g + 8*(e >= 2), column 8j + 2t + (e & 1).
        const int ctid = tid - 128;
        const int w = ctid >> 5;
        const int lane = ctid & 31;
        const int g = lane >> 2;
        const int t = lane & 3;
#pragma unroll
        for (int j = 0; j < WG_TILE_N / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int gm = row0 + 16 * w + g + 8 * h;
                const int gn = col0 + 8 * j + 2 * t;
                float2 v;
                v.x = acc[4 * j + 2 * h];
                v.y = acc[4 * j + 2 * h + 1];
                *reinterpret_cast<float2*>(C + static_cast<long long>(gm) * N + gn) = v;
            }
        }
    }
}
