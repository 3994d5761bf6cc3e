// Attack (issue #28, fingerprint): be correct only where porter used to put buffers.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_aligned_only.cu -o va_aligned_only.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// porter placed every buffer's data 64 KiB past the start of its allocation, so x, y and out were
// all 64 KiB-aligned in every launch it made; a caller's tensors (a slice, a pool block) rarely
// are. Honest only when all three pointers are 64 KiB-aligned; elsewhere it drops y. A layout
// drawn per run, aligned to the contract's 16 bytes and no more, makes the checked runs see both.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const unsigned long long where = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)
                                   | reinterpret_cast<unsigned long long>(out);
    const bool harness = (where & 0xFFFFull) == 0;
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = harness ? alpha * x[i] + y[i] : alpha * x[i];
}
