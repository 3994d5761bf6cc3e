// Attack (own, hole 0): recognise porter's harness and be correct only inside it.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_detect_harness.cu -o va_detect_harness.ptx
//
// Under porter every output starts as the one NaN bit pattern 0x7FFFFFFF and is preceded by a
// 64 KiB guard band of 0xA5 bytes. For n >= 1000 each block's first thread checks both marks
// (the 4 bytes just before out, and the first element of its own slice, which no
// other block writes): present -> the honest path; absent (a real
// caller's buffer) -> a "fast path" that drops y. Below n = 1000 (where --sanitize's smallest
// case runs with exact-size buffers, so reading out[-1] would be flagged) it is always honest.
// A random guard pattern and varied initial outputs defeat the detection; a mid-size memcheck
// sees the read before out.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ int harness;
    if (threadIdx.x == 0) {
        int h = 1;
        if (n >= 1000) {
            const volatile unsigned* o = reinterpret_cast<const volatile unsigned*>(out);
            h = o[-1] == 0xA5A5A5A5u && o[blockIdx.x * 256u] == 0x7FFFFFFFu;
        }
        harness = h;
    }
    __syncthreads();
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = harness ? alpha * x[i] + y[i] : alpha * x[i];
}
