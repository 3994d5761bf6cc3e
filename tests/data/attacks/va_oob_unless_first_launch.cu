// Attack (own, hole 0; against hole 8's planned defence): misbehave on every launch but the
// module's first, so that a sanitizer, which runs one launch in a fresh process, never sees it.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_oob_unless_first_launch.cu -o va_oob_unless_first_launch.ptx
//
// compute-sanitizer runs porter.runner.launch_once: a new process, the module loaded afresh, one
// launch. Block 0 keeps a __device__ flag "this module has launched before" and, on every launch
// after the first, stores a float at out[n + 16384] (the first byte past out's 64 KiB trailing
// guard band, in CuPy's 512-byte rounding slack, as in va_oob_write_past_guard) when n % 128 != 0.
// The worker's first launch (the sweep's first case) and every sanitizer launch, at whatever size,
// are clean; memcheck on a mid-size case as well as the smallest does not help. Only a check of
// the worker's own launches whose reach does not end at the guard band does.
__device__ int g_launched;

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
    if (i == 0) {
        volatile int* flag = &g_launched;
        const int before = *flag;
        *flag = 1;
        if (before && (n & 127) != 0) {
            reinterpret_cast<volatile float*>(out)[n + 16384] = 42.0f;  // 64 KiB past the end
        }
    }
}
