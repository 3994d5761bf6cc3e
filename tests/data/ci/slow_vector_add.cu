// slow_vector_add: the result of examples/vector_add (out[i] = alpha * x[i] + y[i]), computed 20
// times over. The loads are volatile so that the compiler cannot fold the repeats away: every pass
// reads x[i] and y[i] from memory again. tests/test_ci.py uses it as a pull request that keeps the
// kernel correct but makes it slower, which `porter ci` must fail with the ratio.
//
// Regenerate: nvcc -ptx -arch=sm_80 -O3 slow_vector_add.cu -o slow_vector_add.ptx
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        const volatile float* vx = x;
        const volatile float* vy = y;
        float r = 0.0f;
        for (int k = 0; k < 20; ++k) {
            r = alpha * vx[i] + vy[i];
        }
        out[i] = r;
    }
}
