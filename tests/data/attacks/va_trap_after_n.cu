// Attack (issue #12 hole 4): crash only after the launches the gate checks.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_trap_after_n.cu -o va_trap_after_n.ptx
//
// The same per-block launch counter as va_first_launches (consecutive launches on the same
// out pointer, n and x[block start]); the third such launch traps. Every equivalence case is two
// launches on fresh buffers, so the sweep is clean; the timing loop's third launch dies with
// CUDA_ERROR_LAUNCH_FAILED, the timing gate is "error", and the verdict leaves timing out:
// PASSED (porter ci: "speed not measured", exit 0). A caller that launches it three times crashes.
#define SLOTS (1 << 17)

__device__ unsigned long long g_key[SLOTS];
__device__ unsigned g_count[SLOTS];

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ int crash;
    const unsigned b = blockIdx.x;
    const int base = static_cast<int>(b) * 256;
    if (threadIdx.x == 0) {
        int c3 = 0;
        if (b < SLOTS) {
            const unsigned long long key =
                (reinterpret_cast<unsigned long long>(out) * 0x9E3779B97F4A7C15ull) ^
                (static_cast<unsigned long long>(static_cast<unsigned>(n)) << 32) ^
                static_cast<unsigned long long>(__float_as_uint(x[base]));
            const unsigned c = (g_key[b] == key) ? g_count[b] : 0u;
            g_key[b] = key;
            g_count[b] = c + 1u;
            c3 = c >= 2u;
        }
        crash = c3;
    }
    __syncthreads();
    if (crash) asm volatile("trap;");
    const int i = base + static_cast<int>(threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
}
