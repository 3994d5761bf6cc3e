// Compiled with -G -rdc=true: full DWARF sections, `.target sm_90, debug`, indirect calls
// (.callprototype), template instantiations, a texture object and an internal (static) kernel.
typedef float (*fn_t)(float);

__device__ float sq(float x) { return x * x; }
__device__ float neg(float x) { return -x; }
__device__ fn_t table[2] = {sq, neg};

template <typename T>
__global__ void apply(T* out, int which) {
    out[threadIdx.x] = (T)table[which]((float)out[threadIdx.x]);
}
template __global__ void apply<float>(float*, int);
template __global__ void apply<double>(double*, int);

__global__ void tex_user(cudaTextureObject_t t, float* out) {
    out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}

static __global__ void internal_kernel(int* p) { atomicAdd(p, 1); }

void launch(int* p) { internal_kernel<<<1, 1>>>(p); }
