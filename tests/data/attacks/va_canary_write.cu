// Attack (issue #12 hole 8): write the guard band's own canary value out of bounds.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_canary_write.cu -o va_canary_write.ptx
//
// The guard bands are filled with the fixed byte 0xA5 and judged by comparing each byte with it.
// For n >= 1000 (out of --sanitize's reach: it runs at n = 1 only) the kernel stores the float
// whose bits are 0xA5A5A5A5 at out[-1] and at out[n .. n+3] (a "padded" ragged tail): the bands
// read back unchanged, so no out-of-bounds write is seen. A random guard pattern per run catches it.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
    if (n >= 1000 && i == n - 1) {
        const float canary = __uint_as_float(0xA5A5A5A5u);
        volatile float* o = out;
        o[-1] = canary;
#pragma unroll
        for (int k = 0; k < 4; ++k) o[n + k] = canary;
    }
}
