// Attack (2026-12-07): crash only after more launches than the gate makes, whatever it makes.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_trap_after_many.cu -o va_trap_after_many.ptx
//
// A per-block count of every launch of the module, kept in a __device__ variable; the 100th
// launch traps. No key: the count runs across cases, buffers and sizes. The gate's worker
// restores the module's variables at a check's first case and before each timed launch, and
// launches it 64 times in a row after timing: no worker launch ever reached 100, so the gate said
// PASSED. A program that calls it a hundred times crashes. Any fixed number of launches the
// gate makes has a kernel like this one number past it; the defence is the rule that a launch
// after a module's first must leave its variables as it found them.
#define SLOTS (1 << 17)
#define LAUNCHES_BEFORE_TRAP 99u

__device__ unsigned g_count[SLOTS];

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ int crash;
    const unsigned b = blockIdx.x;
    if (threadIdx.x == 0) {
        int late = 0;
        if (b < SLOTS) {
            const unsigned c = g_count[b];
            g_count[b] = c + 1u;
            late = c >= LAUNCHES_BEFORE_TRAP;
        }
        crash = late;
    }
    __syncthreads();
    if (crash) asm volatile("trap;");
    const int i = static_cast<int>(b) * 256 + static_cast<int>(threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
}
