// Broken variants of examples/vector_add, one per way a candidate can cheat or crash.
// The gate must reject each for the right reason. Regenerate the PTX with:
//   for v in PARTIAL OOB WRITES_INPUT HANG ILLEGAL CONSTANT RACE READS_UNWRITTEN SMEM_RACE RAGGED; do
//     nvcc -ptx -arch=sm_80 -O3 -D$v vector_add_broken.cu -o $(echo $v | tr A-Z a-z).ptx; done
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
#if defined(PARTIAL)          // writes only the first half of its output
    if (i < n / 2) out[i] = alpha * x[i] + y[i];
#elif defined(OOB)            // writes one element past the end
    if (i <= n) out[i] = alpha * x[i] + y[i];
#elif defined(WRITES_INPUT)   // right answer, but scribbles on an input
    if (i < n) { out[i] = alpha * x[i] + y[i]; const_cast<float*>(x)[i] = 0.0f; }
#elif defined(HANG)           // never terminates: x is in [-1, 1]
    while (reinterpret_cast<const volatile float*>(x)[0] < 100.0f) { }
    if (i < n) out[i] = alpha * x[i] + y[i];
#elif defined(ILLEGAL)        // stores through a wild pointer
    if (i < n) reinterpret_cast<float*>(0x10)[i] = alpha * x[i] + y[i];
#elif defined(CONSTANT)       // returns a constant
    if (i < n) out[i] = 1.0f;
#elif defined(RACE)           // reads another block's output with no ordering: varies run to run
    if (i < n) {
        out[i] = alpha * x[i] + y[i];
        if (threadIdx.x == 0 && i > 0) out[i] = reinterpret_cast<volatile float*>(out)[i - 1];
    }
#elif defined(READS_UNWRITTEN) // accumulates into an output nothing initialised
    if (i < n) out[i] = out[i] + alpha * x[i] + y[i];
#elif defined(SMEM_RACE)       // reads a neighbour's shared-memory slot with no barrier (racecheck)
    __shared__ float stage[256];
    const int t = static_cast<int>(threadIdx.x);
    stage[t] = i < n ? x[i] : 0.0f;
    const float neighbour = reinterpret_cast<volatile float*>(stage)[(t + 32) % 256];
    if (i < n) out[i] = alpha * x[i] + y[i] + 0.0f * neighbour;
#elif defined(RAGGED)         // drops the last partial block: wrong only when n % 256 != 0
    if (i < (n & ~255)) out[i] = alpha * x[i] + y[i];
#else
#error "choose a variant"
#endif
}
