// porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a
//
// vector_add: out[i] = alpha * x[i] + y[i] for 0 <= i < n (f32).
//
// One thread per element, no grid-stride loop: launch ceil_div(n, 256) blocks of 256
// threads, so the last block is ragged whenever n % 256 != 0 and the bound check matters.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        out[i] = alpha * x[i] + y[i];
    }
}
