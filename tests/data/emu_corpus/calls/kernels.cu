// Device-function calls as nvcc emits them (call.uni with .param arguments and return values,
// stack frames in callees, nested calls, calls under divergence), the double-precision math whose
// slow paths are calls, printf (vprintf), assert (__assertfail), recursion and a function pointer.
#include <cassert>
#include <cstdio>

// A float function kept out of line; the _rn intrinsics keep nvcc from contracting into an fma.
__device__ __noinline__ float mad_rn(float a, float b, float c) { return __fadd_rn(__fmul_rn(a, b), c); }

extern "C" __global__ void noinline_float(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = mad_rn(x[i], y[i], 1.5f) - mad_rn(y[i], 0.25f, x[i]);
}

// Aggregates by value: a float4 in and out, a struct of mixed types out.
struct Stats {
  float lo, hi;
  int count;
  double sum;
};

__device__ __noinline__ float4 scale4(float4 v, float s) {
  return make_float4(__fmul_rn(v.x, s), __fmul_rn(v.y, s), __fmul_rn(v.z, s), __fmul_rn(v.w, s));
}

__device__ __noinline__ Stats stats_of(float4 v, int k) {
  Stats s;
  s.lo = fminf(fminf(v.x, v.y), fminf(v.z, v.w));
  s.hi = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
  s.count = (v.x > 0) + (v.y > 0) + (v.z > 0) + (v.w > 0) + k;
  s.sum = ((double)v.x + (double)v.y) + ((double)v.z + (double)v.w);
  return s;
}

extern "C" __global__ void aggregates(const float4* in, float4* scaled, float* lohi, int* counts, double* sums) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = scale4(in[i], 0.5f + i);
  scaled[i] = v;
  Stats s = stats_of(v, i);
  lohi[2 * i] = s.lo;
  lohi[2 * i + 1] = s.hi;
  counts[i] = s.count;
  sums[i] = s.sum;
}

// Stack frames: a callee with a local array indexed at run time, and a caller whose local array
// the callee fills through a pointer (the callee's frame must not overlap the caller's).
__device__ __noinline__ int kth_smallest(const int* p, int n, int k) {
  int buf[16];
  for (int j = 0; j < n; ++j) buf[j] = p[j];
  for (int j = 1; j < n; ++j) {
    int v = buf[j], m = j - 1;
    while (m >= 0 && buf[m] > v) {
      buf[m + 1] = buf[m];
      --m;
    }
    buf[m + 1] = v;
  }
  return buf[k];
}

__device__ __noinline__ void fill_squares(int* dst, int n, int seed) {
  int scratch[12];
  for (int j = 0; j < n; ++j) scratch[j] = (seed + 7 * j) % 23;
  for (int j = 0; j < n; ++j) dst[j] = scratch[(j * 5) % n] * scratch[j];
}

extern "C" __global__ void frames(const int* seeds, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int arr[12];
  int n = 5 + i % 8;
  fill_squares(arr, n, seeds[i]);
  out[2 * i] = kth_smallest(arr, n, i % n);
  out[2 * i + 1] = arr[(i * 3) % n];
}

// A callee with a frame calling another with a frame, handing it a pointer into its own.
__device__ __noinline__ int weighted_sum(const int* p, int n) {
  int doubled[8];
  for (int j = 0; j < n; ++j) doubled[j] = 2 * p[j];
  int s = 0;
  for (int j = 0; j < n; ++j) s += (j + 1) * doubled[(j * 3) % n];
  return s;
}

__device__ __noinline__ int chained_frames(int seed, int n) {
  int mine[8];
  for (int j = 0; j < n; ++j) mine[j] = seed ^ (j * 13);
  return weighted_sum(mine, n) - mine[(seed & 0x7fff) % n];
}

extern "C" __global__ void frames_nested(const int* seeds, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = chained_frames(seeds[i], 1 + i % 8);
}

// Nested calls: outer calls middle twice, middle calls leaf twice.
__device__ __noinline__ unsigned leaf(unsigned x) { return x * 2654435761u + (x >> 7); }
__device__ __noinline__ unsigned middle(unsigned x) { return leaf(x) ^ (leaf(x + 1) >> 3); }
__device__ __noinline__ unsigned outer(unsigned x) { return middle(x) + 3u * middle(x >> 1); }

extern "C" __global__ void nested(const unsigned* x, unsigned* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = outer(x[i]);
}

// Calls under divergence: each half of an if calls another function, the callee returns early
// for some threads, and a call sits in a loop whose trip count differs per thread.
__device__ __noinline__ int collatz_steps(int x, int cap) {
  if (x <= 1) return 0;
  int s = 0;
  while (x != 1 && s < cap) {
    x = (x & 1) ? 3 * x + 1 : x / 2;
    ++s;
  }
  return s;
}

__device__ __noinline__ int digit_sum(int x) {
  if (x < 0) return -1;
  int s = 0;
  for (; x; x /= 10) s += x % 10;
  return s;
}

extern "C" __global__ void divergent(const int* x, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  int r;
  if (i % 3 == 0) {
    r = collatz_steps(v, 200);
  } else {
    r = digit_sum(v);
  }
  for (int j = 0; j < i % 4; ++j) r += digit_sum(v + j);
  out[i] = r;
}

// Double-precision functions; sin's Payne-Hanek reduction (|x| > 105615) and pow's accurate path
// are calls.
extern "C" __global__ void math_f64(const double* x, const double* y, double* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double a = x[i], b = y[i];
  out[4 * i] = sin(a);
  out[4 * i + 1] = exp(b);
  out[4 * i + 2] = pow(fabs(a), b);
  out[4 * i + 3] = log1p(fabs(b));
}

// printf and assert.
extern "C" __global__ void say(const int* x, const float* f, const char* name) {
  int i = threadIdx.x;
  printf("thread %d of %u: x=%5d hex=%#x oct=%o f=%.3f e=%e g=%g c=%c s=%s\n", i, blockDim.x, x[i], x[i], x[i],
         f[i], f[i], f[i], 'a' + i, name);
  if (i == 1) printf("%ld %lld %lu %llu %-4i| %X %+.2e %10.4g %%\n", -5L, 1LL << 40, 7UL, ~0ULL, -3, 255u, -1234.5,
                     3.14159);
}

extern "C" __global__ void say_count(int* out) {
  out[0] = printf("%d %s|%5.1f\n", 7, "ab", 2.25);
  out[1] = printf("no arguments\n");
}

extern "C" __global__ void checked(const int* x, int* out) {
  int i = threadIdx.x;
  assert(x[i] < 100);
  out[i] = 2 * x[i];
}

// Recursion (direct and through a second function) and a function pointer: the emulator
// declines all three.
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

extern "C" __global__ void recursive(const int* x, int* out) {
  int i = threadIdx.x;
  out[i] = i < 2 ? x[i] : fib(x[i]);
}

__device__ __noinline__ int pong(int n, int acc);
__device__ __noinline__ int ping(int n, int acc) { return n <= 0 ? acc : pong(n - 1, acc * 3 + n) ^ n; }
__device__ __noinline__ int pong(int n, int acc) { return n <= 0 ? acc : ping(n - 2, acc + n) * 5; }

extern "C" __global__ void mutual(const int* x, int* out) {
  int i = threadIdx.x;
  out[i] = ping(x[i], i);
}

__device__ int twice(int v) { return 2 * v; }
__device__ int thrice(int v) { return 3 * v; }

extern "C" __global__ void indirect(const int* x, int* out) {
  int i = threadIdx.x;
  int (*volatile fn)(int) = (i & 1) ? twice : thrice;
  out[i] = fn(x[i]);
}
