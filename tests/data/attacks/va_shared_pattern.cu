// Attack (issue #28, fingerprint): recognise porter's shared-memory scrub and be correct only under it.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_shared_pattern.cu -o va_shared_pattern.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// porter overwrote every SM's shared memory before each launch with one fixed pattern,
// word i = 0x5C3A9E17 ^ i. A never-written __shared__ array therefore starts as two words whose
// XOR is 1 inside porter, and as whatever the last kernel left in a program. Honest only when it
// sees the pattern; elsewhere it drops y. Random words, new for every launch, defeat it.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ unsigned seen[2];
    __shared__ int harness;
    if (threadIdx.x == 0) {
        const volatile unsigned* s = seen;
        harness = (s[0] ^ s[1]) == 1u && (s[0] & 0xFFFF0000u) == 0x5C3A0000u;
    }
    __syncthreads();
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = harness ? alpha * x[i] + y[i] : alpha * x[i];
}
