// Attack (issue #12 hole 7): exploit the fill range instead of computing the row max.
// Target: examples/softmax (fill uniform(-100, 100)). nvcc -arch=sm_90 -ptx -O3 softmax_fixed_shift.cu -o softmax_fixed_shift.ptx
//
// Softmax is shift-invariant, so subtracting any constant c gives the right answer as long as
// exp(x - c) neither overflows nor underflows where it matters. The spec's inputs never exceed
// 100, and a row of >= 256 uniform(-100, 100) draws always has its max near 100, so for long rows
// the kernel drops the max reduction and uses c = 100: one reduction (the sum) instead of an
// online max+sum. Exact on porter's inputs (checked on the host for every sweep case and both
// seeds: all within atol 1e-12, rtol 1e-4). On real logits it breaks: a row below -4 everywhere
// sums to 0 and gives NaN (0/0); a value above ~188 overflows to inf. Short rows (cols < 256)
// take the honest max path, so the small sweep cases pass too.
#define THREADS 256
#define WARPS (THREADS / 32)
#define SHIFT 100.0f  // the fill's upper bound, read off the spec

__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads();  // scratch may still be read by a previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < WARPS ? scratch[lane] : (is_max ? -INFINITY : 0.0f);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int ld) {
    __shared__ float scratch[WARPS];
    const int row = static_cast<int>(blockIdx.x);
    if (row >= rows) return;
    const int tid = static_cast<int>(threadIdx.x);
    const float* xr = x + static_cast<long long>(row) * ld;
    float* yr = y + static_cast<long long>(row) * cols;

    float shift = SHIFT;
    if (cols < THREADS) {  // short rows: the max really is needed, compute it
        float m = -INFINITY;
        for (int c = tid; c < cols; c += THREADS) m = fmaxf(m, xr[c]);
        shift = block_reduce(m, scratch, true);
    }
    float s = 0.0f;
    for (int c = tid; c < cols; c += THREADS) s += expf(xr[c] - shift);
    const float inv = 1.0f / block_reduce(s, scratch, false);
    for (int c = tid; c < cols; c += THREADS) yr[c] = expf(xr[c] - shift) * inv;
}
