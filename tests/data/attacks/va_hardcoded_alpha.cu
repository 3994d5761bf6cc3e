// Attack (issue #12 hole 6, constant scalars): hard-code the spec's alpha.
// Target: examples/vector_add (alpha = "3 / 2" in every case). With a spec whose alpha is drawn
// from a range per case (tests/data/attacks/vector_add_alpha_range) it must fail.
// nvcc -arch=sm_90 -ptx -O3 va_hardcoded_alpha.cu -o va_hardcoded_alpha.ptx
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    (void)alpha;  // the param is there, and never read: porter always passes 1.5
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = 1.5f * x[i] + y[i];
}
