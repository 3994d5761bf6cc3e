// Attack (found here, round 3): a k loop whose trip count is held in 16 bits.
// Target: examples/gemm_bf16 (entry gemm_bf16_sm80). nvcc -arch=sm_90 -ptx -O3 gemm_k16_count.cu -o gemm_k16_count.ptx
// (CUDA 13 writes .version 9.0; it is set to 7.8, as the others, so that CUDA 12 assembles it too)
//
// A plain, correct CUDA-core GEMM (fp32 accumulate, bf16 RN out, straight from global memory) except
// that the k loop runs to K & 0xFFFF, as a kernel that packs its trip count into a 16-bit field
// would. Every K below 65536 is exact: the sweep (K <= 2048), the timed size (4096) and, from
// 4f97ea4 on, the large case, which kept K at 2 to 4 times the sweep's. At K = 65536 + r only
// the first r products are summed.
#define TILE 128
#define THREADS 256

typedef unsigned short bf16_bits;

__device__ __forceinline__ float bf16_to_f32(bf16_bits h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

// Each thread owns one column of the block's 128 x 128 tile and every other row of it (64
// accumulators); the rows' A elements are the same for every thread of a warp (broadcast loads).
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_sm80(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
               int M, int N, int K, int lda, int ldb, int ldc) {
    const int col = static_cast<int>(blockIdx.x) * TILE + static_cast<int>(threadIdx.x % TILE);
    const int first = static_cast<int>(blockIdx.y) * TILE + static_cast<int>(threadIdx.x / TILE);
    const int k_end = static_cast<unsigned short>(K);  // the hole: a 16-bit trip count
    if (col >= N) return;

    float acc[TILE / 2] = {};
    for (int k = 0; k < k_end; ++k) {
        const float b = bf16_to_f32(B[static_cast<long long>(k) * ldb + col]);
#pragma unroll
        for (int j = 0; j < TILE / 2; ++j) {
            const int row = min(first + 2 * j, M - 1);  // rows past M read row M - 1 and are not stored
            acc[j] = fmaf(bf16_to_f32(A[static_cast<long long>(row) * lda + k]), b, acc[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < TILE / 2; ++j) {
        const int row = first + 2 * j;
        if (row < M) {
            bf16_bits h;
            asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(acc[j]));
            C[static_cast<long long>(row) * ldc + col] = h;
        }
    }
}
