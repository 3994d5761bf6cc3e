// Compiled with -rdc=true: an extern device function, a visible device function,
// an initialised __device__ array, printf, cluster launch attributes and __maxnreg__.
#include <cstdio>

__device__ int lookup[4] = {1, 2, 3, 4};

extern __device__ float external_op(float x);

__device__ float twice(float x) {
    return 2.0f * x + (float)lookup[0];
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_kernel(float* out, float bias) {
    unsigned r;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    out[threadIdx.x] = twice(bias) + (float)r;
}

extern "C" __global__ void __launch_bounds__(256, 1, 4) bounded_kernel(float* out) {
    out[threadIdx.x] = external_op(out[threadIdx.x]);
    if (threadIdx.x == 0) {
        printf("block %d\n", blockIdx.x);
    }
}

extern "C" __global__ void __maxnreg__(64) capped_kernel(int* out) {
    out[threadIdx.x] = lookup[threadIdx.x & 3];
}
