// Attack (issue #28, memory): read one element past the end of x, and let it decide.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_read_past_end.cu -o va_read_past_end.ptx
// (then .version 7.8, which CUDA 12's ptxas reads too)
//
// The last thread loads x[n] (out of bounds) and, if it happens to be the bit pattern 0x12345678,
// writes garbage. Inside the mapped guard bytes porter used to leave after every buffer the read
// is harmless and invisible without --sanitize; in a caller's tightly packed buffers it reads
// a neighbour's data. Buffers that end at unmapped memory turn the read into a fault.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    float v = alpha * x[i] + y[i];
    if (i == n - 1) {
        const volatile unsigned* past = reinterpret_cast<const volatile unsigned*>(x + n);
        if (*past == 0x12345678u) v = 0.0f;
    }
    out[i] = v;
}
