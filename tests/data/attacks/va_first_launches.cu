// Attack (issue #12 hole 2): do the work on the first two launches on the same buffers only.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_first_launches.cu -o va_first_launches.ptx
//
// A __device__ launch counter, one slot per block (so no cross-block race): each block counts
// the consecutive launches that saw the same (out pointer, n, x[block start]) and works only on
// the first two. Each equivalence case launches twice on its buffers (and the next case has other
// buffers, another n or another seed), so every checked launch works. The timing loop launches
// 12+ times on one set of buffers without re-poisoning or reading back: from its third launch on
// every block returns after one load, and the "speed-up" is the skipping speed. The counter
// resets whenever the fingerprint changes, so a warm worker re-checking the same cubin is fine.
#define SLOTS (1 << 17)

__device__ unsigned long long g_key[SLOTS];
__device__ unsigned g_count[SLOTS];

extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    __shared__ int work;
    const unsigned b = blockIdx.x;
    const int base = static_cast<int>(b) * 256;
    if (threadIdx.x == 0) {
        int w = 1;
        if (b < SLOTS) {
            const unsigned long long key =
                (reinterpret_cast<unsigned long long>(out) * 0x9E3779B97F4A7C15ull) ^
                (static_cast<unsigned long long>(static_cast<unsigned>(n)) << 32) ^
                static_cast<unsigned long long>(__float_as_uint(x[base]));
            const unsigned c = (g_key[b] == key) ? g_count[b] : 0u;
            g_key[b] = key;
            g_count[b] = c + 1u;
            w = c < 2u;
        }
        work = w;
    }
    __syncthreads();
    if (!work) return;
    const int i = base + static_cast<int>(threadIdx.x);
    if (i < n) out[i] = alpha * x[i] + y[i];
}
