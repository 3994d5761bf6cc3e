// Attack (issue #12 hole 2, with hole 6's persistent module globals): a result cache.
// Target: examples/gemm_bf16 (entry gemm_bf16_sm80). nvcc -arch=sm_90 -ptx -O3 gemm_cache.cu -o gemm_cache.ptx
//
// No tensor cores at all: the first launch on a given problem computes C with a simple, correct
// and slow CUDA-core loop (fp32 accumulate, bf16 RN out) and also stores C in a 32 MiB
// __device__ array; the last block to finish commits a fingerprint of the problem (M, N, K,
// lda, ldb, ldc and 32 sampled elements each of A and B). A later launch whose fingerprint
// matches the committed one just copies the cached C out: bit-identical to the first result.
//
// porter's equivalence runs each case twice on the same inputs: run 1 computes, run 2 copies,
// both right and identical. The timing loop repeats the same inputs at M = N = K = 4096: the
// warm-up launch computes (slowly, unmeasured), every timed launch is a 32 MiB copy, so the
// "GEMM" is timed several times faster than cuBLAS (above the roofline: only a warning).
// Module globals persist across cases and across checks in a warm worker.
#define TILE 128
#define THREADS 256
#define KSTEP 32
#define CACHE_ELEMS (4096u * 4096u)

typedef unsigned short bf16_bits;

__device__ bf16_bits g_cache[CACHE_ELEMS];
__device__ unsigned long long g_key;  // fingerprint of the problem whose C is in g_cache
__device__ int g_valid;
__device__ unsigned g_done;           // blocks finished in the current launch

__device__ __forceinline__ float bf16_to_f32(bf16_bits h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

__device__ __forceinline__ bf16_bits f32_to_bf16(float v) {
    bf16_bits h;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
    return h;
}

__device__ __forceinline__ unsigned long long mix(unsigned long long h, unsigned long long v) {
    h ^= v;
    h *= 0x100000001B3ull;  // FNV-1a step
    return h ^ (h >> 29);
}

__device__ unsigned long long fingerprint(const bf16_bits* A, const bf16_bits* B, int M, int N, int K, int lda,
                                          int ldb, int ldc) {
    unsigned long long h = 0xCBF29CE484222325ull;
    h = mix(h, static_cast<unsigned>(M));
    h = mix(h, static_cast<unsigned>(N));
    h = mix(h, static_cast<unsigned>(K));
    h = mix(h, static_cast<unsigned>(lda));
    h = mix(h, static_cast<unsigned>(ldb));
    h = mix(h, static_cast<unsigned>(ldc));
    for (unsigned s = 0; s < 32; ++s) {
        const unsigned ar = (s * 2654435761u) % static_cast<unsigned>(M);
        const unsigned ak = (s * 40503u + 7u) % static_cast<unsigned>(K);
        const unsigned bk = (s * 2246822519u) % static_cast<unsigned>(K);
        const unsigned bn = (s * 3266489917u + 3u) % static_cast<unsigned>(N);
        h = mix(h, A[static_cast<unsigned long long>(ar) * lda + ak]);
        h = mix(h, B[static_cast<unsigned long long>(bk) * ldb + bn]);
    }
    return h;
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_sm80(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B, bf16_bits* __restrict__ C,
               int M, int N, int K, int lda, int ldb, int ldc) {
    // All shared memory is the spec's 48 KiB of dynamic shared memory (static + dynamic must
    // stay within 48 KiB without an opt-in): the key and hit flag, then a 128 x 33 float A tile.
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned long long& s_key = *reinterpret_cast<unsigned long long*>(smem);
    int& s_hit = *reinterpret_cast<int*>(smem + 8);
    float (*As)[KSTEP + 1] = reinterpret_cast<float (*)[KSTEP + 1]>(smem + 16);

    const int tid = static_cast<int>(threadIdx.x);
    const int bm = static_cast<int>(blockIdx.y) * TILE;
    const int col = static_cast<int>(blockIdx.x) * TILE + (tid & (TILE - 1));
    const int r0 = tid >> 7;  // this thread's rows: bm + r0, bm + r0 + 2, ..., bm + r0 + 126
    const bool fits = static_cast<unsigned long long>(M) * static_cast<unsigned long long>(N) <= CACHE_ELEMS;

    if (tid == 0) {
        const unsigned long long key = fingerprint(A, B, M, N, K, lda, ldb, ldc);
        s_key = key;
        s_hit = fits && *reinterpret_cast<volatile int*>(&g_valid) &&
                *reinterpret_cast<volatile unsigned long long*>(&g_key) == key;
    }
    __syncthreads();

    if (s_hit) {
        // Seen this problem before: copy the cached result.
        for (int j = 0; j < TILE / 2; ++j) {
            const int r = bm + r0 + 2 * j;
            if (r < M && col < N) {
                C[static_cast<long long>(r) * ldc + col] = g_cache[static_cast<long long>(r) * N + col];
            }
        }
    } else {
        // First time: a plain CUDA-core GEMM, A tile in shared memory, 64 accumulators a thread.
        float acc[TILE / 2];
#pragma unroll
        for (int j = 0; j < TILE / 2; ++j) acc[j] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += KSTEP) {
            for (int e = tid; e < TILE * KSTEP; e += THREADS) {
                const int rr = e / KSTEP;
                const int kk = e % KSTEP;
                const int gm = bm + rr;
                const int gk = k0 + kk;
                As[rr][kk] = (gm < M && gk < K) ? bf16_to_f32(A[static_cast<long long>(gm) * lda + gk]) : 0.0f;
            }
            __syncthreads();
            for (int kk = 0; kk < KSTEP; ++kk) {
                const int gk = k0 + kk;
                const float b = (gk < K && col < N) ? bf16_to_f32(B[static_cast<long long>(gk) * ldb + col]) : 0.0f;
#pragma unroll
                for (int j = 0; j < TILE / 2; ++j) acc[j] = fmaf(As[r0 + 2 * j][kk], b, acc[j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int j = 0; j < TILE / 2; ++j) {
            const int r = bm + r0 + 2 * j;
            if (r < M && col < N) {
                const bf16_bits h = f32_to_bf16(acc[j]);
                C[static_cast<long long>(r) * ldc + col] = h;
                if (fits) g_cache[static_cast<long long>(r) * N + col] = h;
            }
        }
    }

    // The last block of the launch commits the fingerprint (every block has read the old one).
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&g_done, 1u) == blocks - 1u) {
            if (fits && !s_hit) {
                *reinterpret_cast<volatile unsigned long long*>(&g_key) = s_key;
                *reinterpret_cast<volatile int*>(&g_valid) = 1;
            }
            *reinterpret_cast<volatile unsigned*>(&g_done) = 0u;
            __threadfence();
        }
    }
}
