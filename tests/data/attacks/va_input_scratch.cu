// Attack (issue #12, own: against "inputs unchanged"): use an input buffer as scratch and restore
// it before the kernel ends.
// Target: examples/vector_add. nvcc -arch=sm_90 -ptx -O3 va_input_scratch.cu -o va_input_scratch.ptx
//
// porter compares the inputs with their uploaded contents only after the kernel has finished.
// Each thread parks alpha*x[i] in x[i] (a "staging" store), adds y from there, and puts the
// original x[i] back. The end state is bit-identical, so "wrote its input" never fires; but the
// kernel writes memory it was handed as const, so another stream or kernel reading x meanwhile
// (or a read-only mapping) sees or faults on the scribble.
extern "C" __global__ void __launch_bounds__(256)
vector_add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
           float alpha, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        volatile float* xs = const_cast<float*>(x);
        const float keep = xs[i];
        xs[i] = alpha * keep;            // scratch write into an input
        const float scaled = xs[i];
        out[i] = scaled + y[i];
        xs[i] = keep;                    // restored: the input "is unchanged"
    }
}
