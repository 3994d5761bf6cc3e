// Not an attack: a probe of the gate. vector_add that marks its local frame with its output's
// address and adds 1 to each output whose thread found the mark of a launch on another output in
// its slot (a block of the same launch, in a slot an earlier block of it left, is not counted; nor
// is a launch on the same buffers: the launch id, which would tell, is refused by the interface). Under porter
// every launch finds random words there (the local scrub before each launch), so the check passes;
// without the scrub a case's second run lands on the first's slots and is off by one.
// nvcc -arch=sm_80 -ptx -O3 va_local_mark.cu -o va_local_mark.ptx (then .version 7.8, as the attacks)
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, float alpha, int n) {
    // 2 KB, above the default 1 KB window: the window grows, and the mark lies at its bottom
    volatile unsigned int frame[512];
    const unsigned at = static_cast<unsigned>(n) >> 31;  // 0 at every n, but not to the compiler
    const unsigned long long grid = reinterpret_cast<unsigned long long>(out);
    const unsigned lo = static_cast<unsigned>(grid), hi = static_cast<unsigned>(grid >> 32);
    // 64 bits of magic: no chance match among random words
    const bool found = frame[at] == 0x5EC0DE01u && frame[at + 1] == 0x7E57AB1Eu &&
                       (frame[at + 2] != lo || frame[at + 3] != hi);
    frame[at] = 0x5EC0DE01u;
    frame[at + 1] = 0x7E57AB1Eu;
    frame[at + 2] = lo;
    frame[at + 3] = hi;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha * x[i] + y[i] + (found ? 1.0f : 0.0f);
}
