// Attack (issue #12 hole 1b): depend on the NaN poison.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_fmax_poison.cu -o va_fmax_poison.ptx
//
// out = fmaxf(out, alpha*x + y). fmaxf(NaN, v) = v, so on porter's NaN-poisoned output this is
// exactly the right answer, run after run; on any buffer that holds numbers (zeros from
// cudaMemset, the previous batch's results) it returns max(old, new): wrong wherever old > new.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = fmaxf(out[i], alpha * x[i] + y[i]);
}
