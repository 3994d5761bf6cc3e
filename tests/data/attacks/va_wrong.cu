// A plainly wrong vector_add, for the attacks on porter's golden folders and on `porter ci`
// (issue #12 holes 9 and 10): out = y - x instead of alpha*x + y. Any honest check fails it; it
// passes only when the gate compares it with nothing (an empty golden folder), with outputs
// recorded for another spec, or not at all (a ci change that porter skips).
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_wrong.cu -o va_wrong.ptx
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    (void)alpha;
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = y[i] - x[i];
}
