// Attack (issue #12 hole 1a): skip the work when the output already holds numbers.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_skip_if_written.cu -o va_skip_if_written.ptx
//
// porter poisons every output with NaN before each checked launch, so "both ends of my slice are
// not NaN" never holds while the gate checks. In the timing loop the output is poisoned once and
// never again, so from the second timed launch on every block returns after two loads: timed at
// almost nothing. On a real (zeroed or reused) buffer the kernel leaves stale data in place.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ int done;
    const int base = static_cast<int>(blockIdx.x) * 256;
    if (threadIdx.x == 0) {
        const int last = min(base + 255, n - 1);
        const volatile float* o = out;
        done = !isnan(o[base]) && !isnan(o[last]);  // "already computed"
    }
    __syncthreads();
    if (done) return;
    const int i = base + static_cast<int>(threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
}
