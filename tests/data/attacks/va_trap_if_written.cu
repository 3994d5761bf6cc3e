// Attack (issue #12 holes 1c and 4): trap whenever the output is not the NaN poison on entry.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_trap_if_written.cu -o va_trap_if_written.ptx
//
// Every checked launch starts from NaN, so the trap never fires in the equivalence sweep. The
// timing loop does not re-poison: its second launch traps (CUDA_ERROR_LAUNCH_FAILED), the timing
// gate is "error", and the verdict, which leaves timing out, is still PASSED. On a real buffer
// the kernel crashes the process.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        const float old = reinterpret_cast<const volatile float*>(out)[i];
        if (!isnan(old)) asm volatile("trap;");
        out[i] = alpha * x[i] + y[i];
    }
}
