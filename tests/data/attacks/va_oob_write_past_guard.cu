// Attack (issue #12 hole 8): write out of bounds beyond the 64 KiB guard band.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_oob_write_past_guard.cu -o va_oob_write_past_guard.ptx
//
// porter's worker allocates each buffer as [64 KiB guard | data | 64 KiB guard] from CuPy's
// memory pool, which rounds every allocation up to 512 bytes. When 4n is not a multiple of 512
// the chunk ends with 512 - (4n mod 512) bytes that belong to no buffer and no guard band: always
// mapped, never compared. For n >= 1000 (so that --sanitize, which runs on the smallest case,
// n = 1, never sees it) thread 0 stores a float at out[n + 16384], the first byte past the
// trailing guard band. A real caller's allocation has no guard band: this is a wild store 64 KiB
// past the end of out. (A store 4 MiB past, as the issue describes, may land on an unmapped
// page in a fresh worker and fault; this one is always mapped, so the gate passes it for sure.)
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
    if (i == 0 && n >= 1000 && (n & 127) != 0) {
        reinterpret_cast<volatile float*>(out)[n + 16384] = 42.0f;  // 64 KiB past the end
    }
}
