// A small hot loop of three kernels sharing buffers, shaped like attention backward's
// (preprocess -> a kernel per output, one of them accumulated with atomics), for porter's
// spec vocabulary: [[kernels]], a padded input and output (ld), a derived input, a [values]
// entry, a float scalar and an output declared deterministic = false.
//
//   X [R, C] f32, rows ldx apart (padded);  W [C];  mean [R] = row means of X (a derived input)
//   delta[r] = sum_c X[r, c] * W[c]                        (rn_delta, into scratch)
//   Y[r, c]  = (X[r, c] - mean[r]) * delta[r] + eps        (rn_center; Y's rows ldy apart, padded)
//   S[c]     = sum_r X[r, c] * delta[r]                    (S zeroed, then rn_colsum: atomicAdd
//                                                           over blocks of 32 rows, in no fixed order)
//
// Variants (each a .cu of its own that defines one macro and includes this file):
//   PORTER_FUSED           two kernels: delta and Y in one (rn_fused), then rn_colsum
//   PORTER_WRITES_PADDING  rn_center also writes Y's padding columns C..ldy-1
//   PORTER_SKIPS_WORK      rn_colsum leaves out row 0's contribution to S
#pragma once

#define BLOCK 256
#define ROWS_PER_BLOCK 32

__device__ __forceinline__ float block_sum(float v, float* shared) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = threadIdx.x < BLOCK / 32 ? shared[threadIdx.x] : 0.0f;
    if (warp == 0) {
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;  // the sum, in thread 0
}

// One block per row: delta[r] = sum_c X[r, c] * W[c].
__device__ __forceinline__ float row_delta(const float* __restrict__ X, const float* __restrict__ W, int r, int C,
                                           int ldx, float* shared) {
    float acc = 0.0f;
    for (int c = threadIdx.x; c < C; c += BLOCK) acc += X[(long long)r * ldx + c] * W[c];
    return block_sum(acc, shared);
}

#ifndef PORTER_FUSED
extern "C" __global__ void __launch_bounds__(BLOCK)
rn_delta(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ delta, int R, int C, int ldx) {
    __shared__ float shared[BLOCK / 32];
    const int r = blockIdx.x;
    const float d = row_delta(X, W, r, C, ldx, shared);
    if (threadIdx.x == 0) delta[r] = d;
}

// grid (ceil(C / 256), R): one thread per element of Y's view.
extern "C" __global__ void __launch_bounds__(BLOCK)
rn_center(const float* __restrict__ X, const float* __restrict__ mean, const float* __restrict__ delta,
          float* __restrict__ Y, float eps, int R, int C, int ldx, int ldy) {
    const int r = blockIdx.y;
    const int c = blockIdx.x * BLOCK + threadIdx.x;
#ifdef PORTER_WRITES_PADDING
    const int width = ldy;  // rounds the row up to its pitch: the padding is overwritten
#else
    const int width = C;
#endif
    if (r < R && c < width) {
        const float x = c < C ? X[(long long)r * ldx + c] : 0.0f;
        Y[(long long)r * ldy + c] = (x - mean[r]) * delta[r] + eps;
    }
}
#else
// One block per row: delta[r] as rn_delta, then the row of Y, in one kernel.
extern "C" __global__ void __launch_bounds__(BLOCK)
rn_fused(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ mean,
         float* __restrict__ delta, float* __restrict__ Y, float eps, int R, int C, int ldx, int ldy) {
    __shared__ float shared[BLOCK / 32];
    __shared__ float row;
    const int r = blockIdx.x;
    const float d = row_delta(X, W, r, C, ldx, shared);
    if (threadIdx.x == 0) {
        delta[r] = d;
        row = d;
    }
    __syncthreads();
    const float m = mean[r];
    for (int c = threadIdx.x; c < C; c += BLOCK) Y[(long long)r * ldy + c] = (X[(long long)r * ldx + c] - m) * row + eps;
}
#endif

// grid (ceil(C / 256), ceil(R / 32)): each thread sums its column over 32 rows and adds that
// to S[c] with atomicAdd: the blocks of rows land in no fixed order, so S's last bits vary.
extern "C" __global__ void __launch_bounds__(BLOCK)
rn_colsum(const float* __restrict__ X, const float* __restrict__ delta, float* __restrict__ S, int R, int C, int ldx) {
    const int c = blockIdx.x * BLOCK + threadIdx.x;
    if (c >= C) return;
    const int first = blockIdx.y * ROWS_PER_BLOCK;
    const int last = min(R, first + ROWS_PER_BLOCK);
    float acc = 0.0f;
    for (int r = first; r < last; ++r) {
#ifdef PORTER_SKIPS_WORK
        if (r == 0) continue;  // one row's share of S is never added
#endif
        acc += X[(long long)r * ldx + c] * delta[r];
    }
    atomicAdd(S + c, acc);
}
