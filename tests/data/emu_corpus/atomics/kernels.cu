// Atomics as nvcc lowers them: every thread of two CTAs updates a few shared words. The final
// values do not depend on the order of the updates (or, for exch/cas, the test reads only what is
// order-free), so the model is the sequential fold.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void atomics(const int* x, int* ints, unsigned* uints, float* floats, double* doubles,
                                   unsigned long long* wide, __half2* halves, __nv_bfloat162* bhalves) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[t];
  atomicAdd(ints + 0, v);
  atomicSub(ints + 1, v);
  atomicMin(ints + 2, v);
  atomicMax(ints + 3, v);
  atomicAnd(ints + 4, v | 0x0F0F0F0F);
  atomicOr(ints + 5, v & 0x00F0F000);
  atomicXor(ints + 6, v);
  atomicMin(uints + 0, (unsigned)v);
  atomicMax(uints + 1, (unsigned)v);
  atomicInc(uints + 2, 37u);
  atomicDec(uints + 3, 41u);
  atomicExch(uints + 4, 7u);
  atomicCAS(uints + 5, 0u, 9u);
  atomicAdd(floats + 0, (float)(v & 1023) * 0.25f);
  atomicAdd(doubles + 0, (double)v * 0.5);
  atomicAdd(wide + 0, (unsigned long long)(unsigned)v);
  atomicMax(wide + 1, (unsigned long long)(unsigned)v << 20);
  atomicAdd(halves, __halves2half2(__float2half(0.25f), __float2half((float)(v & 7))));
  atomicAdd(bhalves, __floats2bfloat162_rn(1.0f, (float)(v & 1)));
  int old = atomicAdd(ints + 7, 1);  // every old value 0 .. n-1 exactly once, in some order
  ints[8 + old] += 1;
}
extern "C" __global__ void shared_atomics(const int* x, int* out) {
  __shared__ int s[4];
  __shared__ float f;
  if (threadIdx.x < 4) s[threadIdx.x] = threadIdx.x == 2 ? 0x7fffffff : 0;
  if (threadIdx.x == 0) f = 0.f;
  __syncthreads();
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  atomicAdd(&s[0], v);
  atomicMax(&s[1], v);
  atomicMin(&s[2], v);
  atomicAdd(&f, (float)(v & 255));
  atomicOr(&s[3], 1 << (threadIdx.x & 31));
  __syncthreads();
  if (threadIdx.x < 4) out[blockIdx.x * 5 + threadIdx.x] = s[threadIdx.x];
  if (threadIdx.x == 4) out[blockIdx.x * 5 + 4] = __float_as_int(f);
}
