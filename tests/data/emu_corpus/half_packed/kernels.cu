// Packed and scalar half-precision (f16, bf16) comparisons, min/max, abs/neg, fma with .relu/.sat
// and the .approx functions, as nvcc lowers the cuda_fp16.h / cuda_bf16.h intrinsics, plus
// hand-written forms (setp with p|q, .ftz, .xorsign.abs, ex2.approx on halves) in inline asm.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T> __device__ unsigned bits(T v) { return *reinterpret_cast<unsigned*>(&v); }
template <typename T> __device__ unsigned short bits16(T v) { return *reinterpret_cast<unsigned short*>(&v); }

// Comparisons of f16 pairs: 20 words per thread.
extern "C" __global__ void cmp_f16(const __half2* x, const __half2* y, unsigned* out) {
  int t = threadIdx.x;
  __half2 a = x[t], b = y[t];
  __half al = __low2half(a), bl = __low2half(b);
  unsigned* o = out + 20 * t;
  o[0] = __hbgt2(a, b) | __hbeq2(a, b) << 1 | __hbne2(a, b) << 2 | __hbltu2(a, b) << 3 |
         __hbgeu2(a, b) << 4 | __hbequ2(a, b) << 5 | __hbneu2(a, b) << 6 | __hble2(a, b) << 7;
  o[1] = bits(__hgt2(a, b));
  o[2] = bits(__heq2(a, b));
  o[3] = bits(__hne2(a, b));
  o[4] = bits(__hltu2(a, b));
  o[5] = bits(__hneu2(a, b));
  o[6] = bits(__hge2(a, b));
  o[7] = __hgt2_mask(a, b);
  o[8] = __hne2_mask(a, b);
  o[9] = __hltu2_mask(a, b);
  o[10] = __hgt(al, bl) | __heq(al, bl) << 1 | __hne(al, bl) << 2 | __hltu(al, bl) << 3 |
          __hisnan(al) << 4 | __hneu(al, bl) << 5 | __hge(al, bl) << 6 | (__hisinf(al) & 3) << 7;
  o[11] = bits(__hisnan2(a));
  unsigned r;
  asm("{ .reg .pred p, q; setp.lt.f16x2 p|q, %1, %2; selp.u32 %0, 1, 0, p; @q or.b32 %0, %0, 2; }"
      : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[12] = r;
  asm("{ .reg .pred p, q, c; setp.ne.u32 c, %3, 0;\n\t"
      "setp.geu.and.f16x2 p|q, %1, %2, !c; selp.u32 %0, 1, 0, p; @q or.b32 %0, %0, 2; }"
      : "=r"(r) : "r"(bits(a)), "r"(bits(b)), "r"(t & 1));
  o[13] = r;
  asm("{ .reg .pred p, q; setp.eq.ftz.f16x2 p|q, %1, %2; selp.u32 %0, 1, 0, p; @q or.b32 %0, %0, 2; }"
      : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[14] = r;
  asm("set.le.ftz.f16x2.f16x2 %0, %1, %2;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[15] = r;
  asm("set.num.s32.f16x2 %0, %1, %2;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[16] = r;
  asm("{ .reg.b16 d; set.gtu.f16.f16 d, %1, %2; cvt.u32.u16 %0, d; }" : "=r"(r) : "h"(bits16(al)), "h"(bits16(bl)));
  o[17] = r;
  asm("{ .reg .pred c; setp.ne.u32 c, %3, 0; set.lt.or.u32.f16 %0, %1, %2, c; }"
      : "=r"(r) : "h"(bits16(al)), "h"(bits16(bl)), "r"(t & 2));
  o[18] = r;
  asm("{ .reg .pred p; setp.nan.f16 p, %1, %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(r) : "h"(bits16(al)), "h"(bits16(bl)));
  o[19] = r;
}

// Comparisons of bf16 pairs: 12 words per thread.
extern "C" __global__ void cmp_bf16(const __nv_bfloat162* x, const __nv_bfloat162* y, unsigned* out) {
  int t = threadIdx.x;
  __nv_bfloat162 a = x[t], b = y[t];
  __nv_bfloat16 al = __low2bfloat16(a), bl = __low2bfloat16(b);
  unsigned* o = out + 12 * t;
  o[0] = __hbgt2(a, b) | __hbeq2(a, b) << 1 | __hbne2(a, b) << 2 | __hbltu2(a, b) << 3 |
         __hbgeu2(a, b) << 4 | __hbequ2(a, b) << 5 | __hbneu2(a, b) << 6 | __hble2(a, b) << 7;
  o[1] = bits(__hgt2(a, b));
  o[2] = bits(__heq2(a, b));
  o[3] = bits(__hne2(a, b));
  o[4] = bits(__hltu2(a, b));
  o[5] = __hgt2_mask(a, b);
  o[6] = __hne2_mask(a, b);
  o[7] = __hgt(al, bl) | __heq(al, bl) << 1 | __hne(al, bl) << 2 | __hltu(al, bl) << 3 |
         __hisnan(al) << 4 | __hneu(al, bl) << 5 | __hge(al, bl) << 6 | (__hisinf(al) & 3) << 7;
  o[8] = bits(__hisnan2(a));
  unsigned r;
  asm("{ .reg .pred p, q; setp.gtu.bf16x2 p|q, %1, %2; selp.u32 %0, 1, 0, p; @q or.b32 %0, %0, 2; }"
      : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[9] = r;
  asm("set.ne.bf16x2.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[10] = r;
  asm("{ .reg.b16 d; set.le.bf16.bf16 d, %1, %2; cvt.u32.u16 %0, d; }" : "=r"(r) : "h"(bits16(al)), "h"(bits16(bl)));
  o[11] = r;
}

// Arithmetic on f16: 14 pairs per thread (scalar results in both halves).
extern "C" __global__ void arith_f16(const __half2* x, const __half2* y, const __half2* z, __half2* out) {
  int t = threadIdx.x;
  __half2 a = x[t], b = y[t], c = z[t];
  __half al = __low2half(a), bl = __low2half(b), cl = __low2half(c);
  __half2* o = out + 14 * t;
  o[0] = __hmax2(a, b);
  o[1] = __hmin2_nan(a, b);
  o[2] = __habs2(a);
  o[3] = __hneg2(a);
  o[4] = __hfma2_relu(a, b, c);
  o[5] = __hfma2(a, b, c);
  o[6] = __hfma2_sat(a, b, c);
  o[7] = __hadd2(a, b);
  o[8] = __hsub2(a, b);
  o[9] = __hmul2(a, b);
  o[10] = __halves2half2(__hmax_nan(al, bl), __hmin(al, bl));
  o[11] = __halves2half2(__hfma_relu(al, bl, cl), __hadd_sat(al, bl));
  unsigned r;
  asm("min.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[12] = *reinterpret_cast<__half2*>(&r);
  asm("fma.rn.ftz.relu.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)), "r"(bits(c)));
  o[13] = *reinterpret_cast<__half2*>(&r);
}

// Arithmetic on bf16: 10 pairs per thread.
extern "C" __global__ void arith_bf16(const __nv_bfloat162* x, const __nv_bfloat162* y, const __nv_bfloat162* z,
                                      __nv_bfloat162* out) {
  int t = threadIdx.x;
  __nv_bfloat162 a = x[t], b = y[t], c = z[t];
  __nv_bfloat16 al = __low2bfloat16(a), bl = __low2bfloat16(b), cl = __low2bfloat16(c);
  __nv_bfloat162* o = out + 10 * t;
  o[0] = __hmax2(a, b);
  o[1] = __hmin2_nan(a, b);
  o[2] = __habs2(a);
  o[3] = __hneg2(a);
  o[4] = __hfma2_relu(a, b, c);
  o[5] = __hfma2(a, b, c);
  o[6] = __hmul2(a, b);
  o[7] = __halves2bfloat162(__hmax_nan(al, bl), __hfma_relu(al, bl, cl));
  unsigned r;
  asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(bits(a)), "r"(bits(b)));
  o[8] = *reinterpret_cast<__nv_bfloat162*>(&r);
  asm("{ .reg.b16 l, h; mov.b32 {l, h}, %1; neg.bf16 l, l; abs.bf16 h, h; mov.b32 %0, {l, h}; }"
      : "=r"(r) : "r"(bits(a)));
  o[9] = *reinterpret_cast<__nv_bfloat162*>(&r);
}

// ex2.approx on f16 (hand-written: nvcc lowers h2exp2 through float): the pair and the scalar.
extern "C" __global__ void ex2_f16(const __half2* x, __half2* out) {
  int t = threadIdx.x;
  unsigned r, a = bits(x[t]);
  asm("ex2.approx.f16x2 %0, %1;" : "=r"(r) : "r"(a));
  out[2 * t] = *reinterpret_cast<__half2*>(&r);
  asm("{ .reg.b16 l, h; mov.b32 {l, h}, %1; ex2.approx.f16 l, l; ex2.approx.f16 h, h; mov.b32 %0, {l, h}; }"
      : "=r"(r) : "r"(a));
  out[2 * t + 1] = *reinterpret_cast<__half2*>(&r);
}

// ex2.approx.ftz on bf16.
extern "C" __global__ void ex2_bf16(const __nv_bfloat162* x, __nv_bfloat162* out) {
  int t = threadIdx.x;
  unsigned r, a = bits(x[t]);
  asm("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(r) : "r"(a));
  out[2 * t] = *reinterpret_cast<__nv_bfloat162*>(&r);
  asm("{ .reg.b16 l, h; mov.b32 {l, h}, %1; ex2.approx.ftz.bf16 l, l; ex2.approx.ftz.bf16 h, h; mov.b32 %0, {l, h}; }"
      : "=r"(r) : "r"(a));
  out[2 * t + 1] = *reinterpret_cast<__nv_bfloat162*>(&r);
}

// tanh.approx as h2tanh_approx / htanh_approx lower it.
extern "C" __global__ void tanh_f16(const __half2* x, __half2* out) {
  int t = threadIdx.x;
  out[2 * t] = h2tanh_approx(x[t]);
  out[2 * t + 1] = __halves2half2(htanh_approx(__low2half(x[t])), htanh_approx(__high2half(x[t])));
}

extern "C" __global__ void tanh_bf16(const __nv_bfloat162* x, __nv_bfloat162* out) {
  int t = threadIdx.x;
  out[2 * t] = h2tanh_approx(x[t]);
  out[2 * t + 1] = __halves2bfloat162(htanh_approx(__low2bfloat16(x[t])), htanh_approx(__high2bfloat16(x[t])));
}

// h2exp and hexp: ex2.approx.ftz.f32 of x*log2(e), rounded to f16, then per-input fixes
// (set.eq.f16x2 and fma.rn.f16x2 inside the header's inline asm, which declares `.reg.b32 h`).
extern "C" __global__ void exp_f16(const __half2* x, __half2* out) {
  int t = threadIdx.x;
  out[2 * t] = h2exp(x[t]);
  out[2 * t + 1] = __halves2half2(hexp(__low2half(x[t])), hexp(__high2half(x[t])));
}
