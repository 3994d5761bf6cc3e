// Attack (issue #28, initial states): wrong only when the caller's output memory starts zeroed.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_skip_where_zero.cu -o va_skip_where_zero.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// porter started every checked launch's outputs as NaN poison or random finite values, never as
// zeros; a caller's output from cudaMemset or torch.zeros is all zeros. Where an element of the
// upper half is still 0.0f the kernel leaves it: exact from poison and from random values, wrong
// from zeros. A third initial state, zeros, makes one checked run see it.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    if (i >= n / 2 && out[i] == 0.0f) return;
    out[i] = alpha * x[i] + y[i];
}
