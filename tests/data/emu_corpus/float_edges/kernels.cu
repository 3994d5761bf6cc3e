// Float conversions and arithmetic at their edges: int <-> float with each rounding mode and
// saturation, f64 -> f32 and f32 -> f16 rounding, correctly rounded division, square root and
// reciprocal, min/max with NaN and signed zeros, unordered compares. Inline PTX names each
// instruction so that nvcc cannot fold it into another.
extern "C" __global__ void to_int(const float* x, const double* y, int* out) {
  int i = threadIdx.x;
  float a = x[i];
  double b = y[i];
  int* o = out + 12 * i;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(o[0]) : "f"(a));
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(o[1]) : "f"(a));
  asm("cvt.rmi.s32.f32 %0, %1;" : "=r"(o[2]) : "f"(a));
  asm("cvt.rpi.s32.f32 %0, %1;" : "=r"(o[3]) : "f"(a));
  asm("cvt.rni.u32.f32 %0, %1;" : "=r"(o[4]) : "f"(a));
  asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(o[5]) : "d"(b));
  asm("cvt.rni.u32.f64 %0, %1;" : "=r"(o[6]) : "d"(b));
  long long w;
  asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(w) : "f"(a));
  o[7] = (int)w;
  o[8] = (int)(w >> 32);
  short h;
  asm("cvt.rni.s16.f32 %0, %1;" : "=h"(h) : "f"(a));
  o[9] = h;
  unsigned short uh;
  asm("cvt.rni.u8.f32 %0, %1;" : "=h"(uh) : "f"(a));
  o[10] = uh;
  asm("cvt.rni.sat.s32.f32 %0, %1;" : "=r"(o[11]) : "f"(a));
}
extern "C" __global__ void to_float(const int* x, const long long* y, const double* z, float* out) {
  int i = threadIdx.x;
  float* o = out + 10 * i;
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(o[0]) : "r"(x[i]));
  asm("cvt.rz.f32.s32 %0, %1;" : "=f"(o[1]) : "r"(x[i]));
  asm("cvt.rm.f32.u32 %0, %1;" : "=f"(o[2]) : "r"(x[i]));
  asm("cvt.rp.f32.u32 %0, %1;" : "=f"(o[3]) : "r"(x[i]));
  asm("cvt.rn.f32.s64 %0, %1;" : "=f"(o[4]) : "l"(y[i]));
  asm("cvt.rn.f32.f64 %0, %1;" : "=f"(o[5]) : "d"(z[i]));
  asm("cvt.rz.f32.f64 %0, %1;" : "=f"(o[6]) : "d"(z[i]));
  asm("cvt.rm.f32.f64 %0, %1;" : "=f"(o[7]) : "d"(z[i]));
  asm("cvt.rp.f32.f64 %0, %1;" : "=f"(o[8]) : "d"(z[i]));
  asm("cvt.rn.sat.f32.f64 %0, %1;" : "=f"(o[9]) : "d"(z[i]));
}
extern "C" __global__ void arith(const float* x, const float* y, unsigned* out) {
  int i = threadIdx.x;
  float a = x[i], b = y[i];
  float r[12];
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r[0]) : "f"(a), "f"(b));
  asm("sqrt.rn.f32 %0, %1;" : "=f"(r[1]) : "f"(a));
  asm("rcp.rn.f32 %0, %1;" : "=f"(r[2]) : "f"(b));
  asm("min.f32 %0, %1, %2;" : "=f"(r[3]) : "f"(a), "f"(b));
  asm("max.f32 %0, %1, %2;" : "=f"(r[4]) : "f"(a), "f"(b));
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r[5]) : "f"(a), "f"(b));
  asm("fma.rn.f32 %0, %1, %2, %1;" : "=f"(r[6]) : "f"(a), "f"(b));
  asm("mul.rz.f32 %0, %1, %2;" : "=f"(r[7]) : "f"(a), "f"(b));
  asm("add.rm.f32 %0, %1, %2;" : "=f"(r[8]) : "f"(a), "f"(b));
  asm("div.rz.f32 %0, %1, %2;" : "=f"(r[9]) : "f"(a), "f"(b));
  asm("sqrt.rp.f32 %0, %1;" : "=f"(r[10]) : "f"(b));
  asm("add.sat.f32 %0, %1, %2;" : "=f"(r[11]) : "f"(a), "f"(b));
  unsigned* o = out + 14 * i;
  for (int k = 0; k < 12; ++k) o[k] = __float_as_uint(r[k]);
  unsigned p;
  asm("{.reg .pred q; setp.ltu.f32 q, %1, %2; selp.u32 %0, 1, 0, q;}" : "=r"(p) : "f"(a), "f"(b));
  o[12] = p;
  asm("{.reg .pred q; setp.num.f32 q, %1, %2; selp.u32 %0, 1, 0, q;}" : "=r"(p) : "f"(a), "f"(b));
  o[13] = p;
}
