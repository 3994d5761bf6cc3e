// Attack (issue #28, timing): fast at the timed size only, ten times slower everywhere else.
// Target: examples/vector_add (checked --against its kernel.ptx, which is timed beside it).
// nvcc -arch=sm_90 -ptx -O3 va_tuned_for_timed.cu -o va_tuned_for_timed.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// Correct at every size. At n = 16777216 ([sizes], the one size porter timed) it is the plain
// kernel; at any other n each thread first spins through a dependent chain of FMAs on a value
// the result does not depend on, so the kernel is many times slower than the source there. A
// check that times only [sizes] reports the same speed as the source; timing also at a size the
// check draws (headline: the lower) reports the slowdown.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    float v = alpha * x[i] + y[i];
    if (n != 16777216) {
        float spin = static_cast<float>(i & 7);
        for (int k = 0; k < 4000; ++k) spin = fmaf(spin, 0.999f, 0.5f);
        if (spin == -1.0f) v = 0.0f;  // never true: keeps the loop
    }
    out[i] = v;
}
