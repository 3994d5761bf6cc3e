// Attack (issue #12 hole 7): assume the inputs are "nice" (porter's default fill, uniform(-1, 1)).
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_clamp_inputs.cu -o va_clamp_inputs.ptx
//
// Both inputs are clamped to [-1, 1] before use (the kind of shortcut a kernel takes to use a
// fixed-point or low-range fast path). Every value porter generates is already in [-1, 1), so the
// result is exact; any input outside that range (2.0, 1e6, inf) gives a wrong answer.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        const float xv = fminf(fmaxf(x[i], -1.0f), 1.0f);
        const float yv = fminf(fmaxf(y[i], -1.0f), 1.0f);
        out[i] = alpha * xv + yv;
    }
}
