// porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a
//
// softmax_rows: y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r)
//
//   x: rows x cols f32, row stride ld (ld >= cols; columns cols..ld-1 are padding, never read)
//   y: rows x cols f32, dense (row stride cols)
//
// One block of 256 threads (8 warps) per row; grid = (rows, 1, 1).
//   pass 1: each thread walks the columns tid, tid+256, ... keeping an online (max, sum)
//           pair: sum is always relative to the running max, so nothing overflows.
//           The 256 pairs are merged with warp shuffles, then across the 8 warps
//           through shared memory.
//   pass 2: each thread re-reads its columns (L1/L2 hits for rows up to tens of KB) and
//           writes exp(x - max) * (1 / sum).
// Threads with no columns (cols < 256) carry (max = -inf, sum = 0); merge() treats a
// -inf max as "empty" so no exp(-inf - -inf) = NaN appears.

#define SOFTMAX_THREADS 256
#define SOFTMAX_WARPS (SOFTMAX_THREADS / 32)

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    const float f1 = (m == -INFINITY) ? 0.0f : expf(m - mx);
    const float f2 = (m2 == -INFINITY) ? 0.0f : expf(m2 - mx);
    s = s * f1 + s2 * f2;
    m = mx;
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int ld) {
    __shared__ float s_max[SOFTMAX_WARPS];
    __shared__ float s_sum[SOFTMAX_WARPS];

    const int row = static_cast<int>(blockIdx.x);
    if (row >= rows) {
        return;  // uniform across the block
    }
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const float* xr = x + static_cast<long long>(row) * ld;
    float* yr = y + static_cast<long long>(row) * cols;

    // Pass 1: online max / sum over this thread's columns.
    float m = -INFINITY;
    float s = 0.0f;
    for (int c = tid; c < cols; c += SOFTMAX_THREADS) {
        const float v = xr[c];
        if (v > m) {
            s = s * ((m == -INFINITY) ? 0.0f : expf(m - v)) + 1.0f;
            m = v;
        } else if (v > -INFINITY) {  // a -inf entry adds 0 (and no NaN when m is -inf too)
            s += expf(v - m);
        }
    }

    // Merge the 32 pairs of the warp (butterfly: every lane ends with the warp total).
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, m2, s2);
    }
    if (lane == 0) {
        s_max[warp] = m;
        s_sum[warp] = s;
    }
    __syncthreads();

    // Every warp merges the 8 warp totals itself (no second barrier needed); the full
    // butterfly leaves the row total in every lane.
    m = (lane < SOFTMAX_WARPS) ? s_max[lane] : -INFINITY;
    s = (lane < SOFTMAX_WARPS) ? s_sum[lane] : 0.0f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, m2, s2);
    }
    const float row_max = m;
    const float inv_sum = 1.0f / s;

    // Pass 2: write the normalised exponentials.
    for (int c = tid; c < cols; c += SOFTMAX_THREADS) {
        yr[c] = expf(xr[c] - row_max) * inv_sum;
    }
}
