// Attack (issue #28, fingerprint: "timing"): right until a date, wrong after it.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_time_bomb.cu -o va_time_bomb.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// %globaltimer is the GPU's nanosecond clock. Honest until 2027-01-01 00:00 UTC, then it drops y:
// every check porter can run before that date sees an exact kernel. Nothing a check does can make
// the timer read as it will in production, so a candidate may not read it unless its source does.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    const bool armed = now >= 1798761600ull * 1000000000ull;
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = armed ? alpha * x[i] : alpha * x[i] + y[i];
}
