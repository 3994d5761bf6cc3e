// Shared memory, #pragma unroll, __launch_bounds__, inline asm scopes and a noinline device function.
struct Coeffs {
    float w[8];
};

__device__ __noinline__ float scale(float x, float k) {
    return x * k + 1.0f;
}

__device__ __forceinline__ unsigned lane_is_odd(unsigned v) {
    unsigned r;
    asm volatile("{\n\t"
                 ".reg .pred p;\n\t"
                 "and.b32 %0, %1, 1;\n\t"
                 "setp.ne.u32 p, %0, 0;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t"
                 "}"
                 : "=r"(r)
                 : "r"(v));
    return r;
}

extern "C" __global__ void __launch_bounds__(256, 2)
block_reduce(const float* __restrict__ in, float* __restrict__ out, Coeffs coeffs, int n) {
    __shared__ float tile[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    float v = i < n ? in[i] : 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        v += coeffs.w[k] * (float)k;
    }
    tile[tid] = scale(v, 0.5f);
    __syncthreads();
#pragma unroll
    for (int s = 128; s > 0; s >>= 1) {
        if (tid < s) {
            tile[tid] += tile[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[blockIdx.x] = tile[0] + (float)lane_is_odd(blockIdx.x);
    }
}

extern "C" __global__ void __launch_bounds__(128) dynamic_smem_copy(float* out, int n) {
    extern __shared__ float buf[];
    int tid = threadIdx.x;
    buf[tid] = (float)tid;
    __syncthreads();
    if (tid < n) {
        out[tid] = buf[(tid + 1) % blockDim.x];
    }
}
