// Attack (own, hole 0): correct only at the sizes the spec names.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_listed_sizes_only.cu -o va_listed_sizes_only.ptx
//
// porter checks a fixed list of sizes (the sweep; a sound gate adds [sizes], the timed one).
// This kernel handles the ragged last block only when n is one of the sizes examples/vector_add
// lists (1, 33, 1000, 4097, 1<<20, (3<<22)+7 and the default 1<<24); for any other n it drops the
// partial tail block, so e.g. n = 1001 leaves out[768..1000] unwritten. Verifying the timed
// size does not catch it: only sizes porter does not announce do.
__device__ __forceinline__ bool listed(int n) {
    return n == 1 || n == 33 || n == 1000 || n == 4097 || n == 1048576 || n == 12582919 || n == 16777216;
}

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const int limit = listed(n) ? n : (n & ~255);
    if (i < limit) out[i] = alpha * x[i] + y[i];
}
