// Attack (found here, round 3): a k loop whose trip count is held in 16 bits.
// Target: examples/gemm_bf16 (entry gemm_bf16_sm80). nvcc -arch=sm_90 -ptx -O3 gemm_k16_count.cu -o gemm_k16_count.ptx
// (CUDA 13 writes .version 9.0; it is set to 7.8, as the others, so that CUDA 12 assembles it too)
//
// A plain, correct CUDA-core GEMM (fp32 accumulate, bf16 RN out, A tile in shared memory) except
// that the k loop runs to K & 0xFFFF, as a kernel that packs its trip count into a 16-bit field
// would. Every K below 65536 is exact: the sweep (K <= 2048), the timed size (4096) and, from
// 4f97ea4 on, the large case, which kept K at 2 to 4 times the sweep's. At K = 65536 + r only
// the first r products are summed.
#define TILE 128
#define THREADS 256
#define KSTEP 32

typedef unsigned short bf16_bits;

__device__ __forceinline__ float bf16_to_f32(bf16_bits h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

__device__ __forceinline__ bf16_bits f32_to_bf16(float v) {
    bf16_bits h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
    return h;
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_sm80(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
               int M, int N, int K, int lda, int ldb, int ldc) {
    extern __shared__ __align__(16) unsigned char smem[];
    float (*As)[KSTEP + 1] = reinterpret_cast<float (*)[KSTEP + 1]>(smem);

    const int tid = static_cast<int>(threadIdx.x);
    const int bm = static_cast<int>(blockIdx.y) * TILE;
    const int col = static_cast<int>(blockIdx.x) * TILE + (tid & (TILE - 1));
    const int r0 = tid >> 7;  // this thread's rows: bm + r0, bm + r0 + 2, ..., bm + r0 + 126
    const int k_end = static_cast<unsigned short>(K);  // the hole: a 16-bit trip count

    float acc[TILE / 2];
#pragma unroll
    for (int j = 0; j < TILE / 2; ++j) acc[j] = 0.0f;
    for (int k0 = 0; k0 < k_end; k0 += KSTEP) {
        for (int e = tid; e < TILE * KSTEP; e += THREADS) {
            const int rr = e / KSTEP;
            const int kk = e % KSTEP;
            const int gm = bm + rr;
            const int gk = k0 + kk;
            As[rr][kk] = (gm < M && gk < k_end) ? bf16_to_f32(A[static_cast<long long>(gm) * lda + gk]) : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < KSTEP; ++kk) {
            const int gk = k0 + kk;
            const float b = (gk < k_end && col < N) ? bf16_to_f32(B[static_cast<long long>(gk) * ldb + col]) : 0.0f;
#pragma unroll
            for (int j = 0; j < TILE / 2; ++j) acc[j] = fmaf(As[r0 + 2 * j][kk], b, acc[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < TILE / 2; ++j) {
        const int r = bm + r0 + 2 * j;
        if (r < M && col < N) C[static_cast<long long>(r) * ldc + col] = f32_to_bf16(acc[j]);
    }
}
