// Attack (issue #12 hole 8): read out of bounds without it changing the result.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_oob_read.cu -o va_oob_read.ptx
//
// For n >= 1000 the first thread of every block reads x 32 KiB past its end and y 32 KiB before
// its start (inside porter's guard bands, so always mapped under porter; a real allocation has
// nothing there: a wild read that faults or leaks another buffer). The values are folded in with a
// test that never holds for the guard's canary bytes, so the output is exact. Reads are never
// checked; memcheck runs on the smallest case (n = 1) only, where the kernel does not misbehave.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    float bias = 0.0f;
    if (threadIdx.x == 0 && n >= 1000) {
        const unsigned k = blockIdx.x & 1023u;
        const float past = reinterpret_cast<const volatile float*>(x)[n + 8192 + k];
        const float before = reinterpret_cast<const volatile float*>(y)[-8192 - static_cast<int>(k)];
        if (__float_as_uint(past) == 0x12345678u && __float_as_uint(before) == 0x9abcdef0u) bias = 1.0f;
    }
    if (i < n) out[i] = alpha * x[i] + y[i] + bias;
}
