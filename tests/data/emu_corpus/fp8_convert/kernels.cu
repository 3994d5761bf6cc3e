// fp8 and tf32 conversions as nvcc lowers cuda_fp8.h's intrinsics and the inline PTX kernels use
// (cvt to and from .e4m3x2 / .e5m2x2 with .satfinite and .relu, cvt to .tf32 in every rounding).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#define PAIR(OP, D, A, B) asm("cvt." OP " %0, %1, %2;" : "=h"(D) : "f"(A), "f"(B))
#define ONE(OP, D, A, DC, AC) asm("cvt." OP " %0, %1;" : "=" DC(D) : AC(A))

// Row i of each output: five pairs converted from x[2i] (upper byte) and x[2i+1] (lower byte).
extern "C" __global__ void fp8_from_f32(const float* x, unsigned short* e4m3, unsigned short* e5m2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[2 * i], b = x[2 * i + 1];
  unsigned short* p = e4m3 + 5 * i;
  unsigned short* q = e5m2 + 5 * i;
  unsigned short r;
  PAIR("rn.satfinite.e4m3x2.f32", r, a, b); p[0] = r;
  PAIR("rn.satfinite.relu.e4m3x2.f32", r, a, b); p[1] = r;
  PAIR("rn.satfinite.e5m2x2.f32", r, a, b); q[0] = r;
  PAIR("rn.satfinite.relu.e5m2x2.f32", r, a, b); q[1] = r;
  // the intrinsic puts .y in the upper byte
  p[2] = __nv_cvt_float2_to_fp8x2(make_float2(b, a), __NV_SATFINITE, __NV_E4M3);
  q[2] = __nv_cvt_float2_to_fp8x2(make_float2(b, a), __NV_SATFINITE, __NV_E5M2);
  __half2_raw h;
  h.x = __half_as_ushort(__float2half_rn(b));
  h.y = __half_as_ushort(__float2half_rn(a));
  p[3] = __nv_cvt_halfraw2_to_fp8x2(h, __NV_SATFINITE, __NV_E4M3);
  q[3] = __nv_cvt_halfraw2_to_fp8x2(h, __NV_SATFINITE, __NV_E5M2);
  unsigned hw = (unsigned)h.y << 16 | h.x;
  ONE("rn.satfinite.relu.e4m3x2.f16x2", r, hw, "h", "r"); p[4] = r;
  ONE("rn.satfinite.relu.e5m2x2.f16x2", r, hw, "h", "r"); q[4] = r;
}

// Row i: the pair of codes c[i] unpacked to f16x2 (plain and .relu, as e4m3 and as e5m2), and
// its low byte as an __nv_fp8_e4m3, its high byte as an __nv_fp8_e5m2, widened to float.
extern "C" __global__ void fp8_to_f16(const unsigned short* c, unsigned* out, float* wide, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned short v = c[i];
  unsigned r;
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3);
  out[4 * i] = (unsigned)h.y << 16 | h.x;
  ONE("rn.relu.f16x2.e4m3x2", r, v, "r", "h"); out[4 * i + 1] = r;
  h = __nv_cvt_fp8x2_to_halfraw2(v, __NV_E5M2);
  out[4 * i + 2] = (unsigned)h.y << 16 | h.x;
  ONE("rn.relu.f16x2.e5m2x2", r, v, "r", "h"); out[4 * i + 3] = r;
  __nv_fp8_e4m3 lo;
  __nv_fp8_e5m2 hi;
  lo.__x = (__nv_fp8_storage_t)(v & 0xFF);
  hi.__x = (__nv_fp8_storage_t)(v >> 8);
  wide[2 * i] = float(lo);
  wide[2 * i + 1] = float(hi);
}

// Row i: x[i] to tf32 (a .b32 with the low 13 bits clear) in each rounding (.satfinite with .rn
// and .rz needs sm_100: topic narrow_convert).
extern "C" __global__ void tf32_from_f32(const float* x, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i];
  unsigned* o = out + 6 * i;
  unsigned r;
  ONE("rna.tf32.f32", r, a, "r", "f"); o[0] = r;
  ONE("rna.satfinite.tf32.f32", r, a, "r", "f"); o[1] = r;
  ONE("rn.tf32.f32", r, a, "r", "f"); o[2] = r;
  ONE("rn.relu.tf32.f32", r, a, "r", "f"); o[3] = r;
  ONE("rz.tf32.f32", r, a, "r", "f"); o[4] = r;
  ONE("rz.relu.tf32.f32", r, a, "r", "f"); o[5] = r;
}
