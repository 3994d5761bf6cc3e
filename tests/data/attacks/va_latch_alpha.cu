// Attack (issue #12 hole 6, module globals persist): latch the first launch's alpha forever.
// Target: examples/vector_add today; caught only with a per-case scalar
// (tests/data/attacks/vector_add_alpha_range) and module globals reset between cases.
// nvcc -arch=sm_90 -ptx -O3 va_latch_alpha.cu -o va_latch_alpha.ptx
//
// The first launch the module ever sees stores its alpha in a __device__ global; every later
// launch (other cases, other checks in the same warm worker) uses the stored value and ignores
// its param. Blocks of the first launch that race the store use their own param, which is the
// same value, so the first launch is consistent.
__device__ float g_alpha;
__device__ int g_latched;

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ float a;
    if (threadIdx.x == 0) {
        if (*reinterpret_cast<volatile int*>(&g_latched)) {
            a = *reinterpret_cast<volatile float*>(&g_alpha);
        } else {
            a = alpha;
            *reinterpret_cast<volatile float*>(&g_alpha) = alpha;
            __threadfence();
            *reinterpret_cast<volatile int*>(&g_latched) = 1;
        }
    }
    __syncthreads();
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = a * x[i] + y[i];
}
