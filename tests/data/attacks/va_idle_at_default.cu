// Attack (issue #12 hole 3): idle half the blocks at the spec's [sizes] only.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_idle_at_default.cu -o va_idle_at_default.ptx
//
// examples/vector_add has a sweep, so its [sizes] (n = 16777216) is not among the checked size
// sets, yet timing (and --native's ncu run) happen exactly there. At that one size every odd
// block returns at once: half the output stays unwritten and the kernel times about 2x faster.
// Correct at every sweep size.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    if (n == 16777216 && (blockIdx.x & 1u)) return;  // the timed size: nobody checks it
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
}
