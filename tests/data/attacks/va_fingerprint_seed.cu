// Attack (issue #12 hole 6, fixed seeds): exact only on porter's own inputs.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_fingerprint_seed.cu -o va_fingerprint_seed.ptx
//
// porter always checks seeds 0 and 1 and fills x from numpy default_rng([seed, 0]).uniform(-1, 1),
// whose prefix does not depend on n. So x[0] is one of two known floats, at every size, in every
// case and in the timing run (seed 0):
//   seed 0: x[0] = 0.27392337 (0x3e8c3faf)      seed 1: x[0] = 0.02364325 (0x3cc1af7d)
// (computed on the host: np.random.default_rng([s, 0]).uniform(-1, 1, 1).astype(np.float32)).
// When x[0] is one of them the kernel computes alpha*x + y; on any other input it takes a
// "cheap path" (drops y), which is wrong everywhere.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const unsigned first = __float_as_uint(x[0]);
    const bool porter = first == 0x3e8c3fafu || first == 0x3cc1af7du;
    if (i < n) out[i] = porter ? alpha * x[i] + y[i] : alpha * x[i];
}
