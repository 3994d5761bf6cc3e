// Fixtures for `porter spec`: what nvcc 13 writes for kernels of known interface.
// Compiled with: nvcc -arch=sm_90a --ptx -lineinfo kernels.cu -o kernels.ptx
// The truth each test asserts is written beside each kernel. The module holds several entries
// on purpose (`--entry`). Not run anywhere: these are read, and assembled by ptxas.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

// x: f16 in [rows, cols]; out: f32 out [rows]; dynamic shared memory of blockDim.x floats; at most 256 threads.
__global__ void __launch_bounds__(256) row_sum(const __half* __restrict__ x, float* __restrict__ out, int rows,
                                               int cols) {
    extern __shared__ float partial[];
    int row = blockIdx.x;
    if (row >= rows) return;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += __half2float(x[(size_t)row * cols + c]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = partial[0];
}

// in: bf16 in [n]; out: bf16 out [n]; clusters of 2 blocks of exactly 128 threads.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128) scale_bf16(const __nv_bfloat16* in,
                                                                             __nv_bfloat16* out, int n,
                                                                             float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(__bfloat162float(in[i]) * alpha);
}

// One warp per 16x16 tile of C = A B: A bf16 [M, K], B bf16 [K, N] (row-major), C f32 [M, N]; M, N, K multiples of 16.
__global__ void wmma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    using namespace nvcuda;
    int tm = blockIdx.y, tn = blockIdx.x;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)tm * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)k * N + tn * 16, N);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + (size_t)tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

// values: i32 in [n]; bins: u32 inout [nbins] (accumulated with atomics).
__global__ void histogram(const int* __restrict__ values, unsigned int* bins, int n, int nbins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[((values[i] % nbins) + nbins) % nbins], 1u);
}

// x: f32 in [n]; y: f32 inout [n]; workspace: never touched (a scratch pointer). Unmangled name.
extern "C" __global__ void axpy_inplace(const float* x, float* y, float* workspace, int n, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}

// The same contract as axpy_inplace, two elements a thread: a variant in the same module (`--entry`).
extern "C" __global__ void axpy_inplace_x2(const float* x, float* y, float* workspace, int n, float alpha) {
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    for (int k = i; k < i + 2 && k < n; ++k) y[k] = alpha * x[k] + y[k];
}

__device__ static inline uint64_t smem_desc(const void* p) {
    uint64_t addr = static_cast<uint64_t>(__cvta_generic_to_shared(p));
    return ((addr & 0x3FFFF) >> 4) | (uint64_t(8) << 16) | (uint64_t(64) << 32);  // no swizzle, LBO 128 B, SBO 1024 B
}

// One warpgroup: C[64, 8] (f32 out) = A[64, 16] (bf16 in) * B[8, 16]^T (bf16 in), with one wgmma.
__global__ void __launch_bounds__(128, 1) wgmma_tile(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C) {
    __shared__ alignas(128) __nv_bfloat16 sa[64 * 16];
    __shared__ alignas(128) __nv_bfloat16 sb[8 * 16];
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) sa[i] = A[i];
    for (int i = threadIdx.x; i < 8 * 16; i += blockDim.x) sb[i] = B[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    uint64_t da = smem_desc(sa), db = smem_desc(sb);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(0));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = warp * 16 + lane / 4, col = (lane % 4) * 2;
    C[row * 8 + col] = d0;
    C[row * 8 + col + 1] = d1;
    C[(row + 8) * 8 + col] = d2;
    C[(row + 8) * 8 + col + 1] = d3;
}
