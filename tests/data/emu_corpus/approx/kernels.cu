// The .approx functions of f32 (ex2, sqrt, rsqrt, lg2, tanh, sin, cos), each named through inline
// PTX. The emulator computes them in float64 and rounds once; on a GPU each is within the bound
// the PTX ISA documents (9.7.3.15 to 9.7.3.22): the calibration measures by how much.
extern "C" __global__ void approx(const float* x, float* e, float* s, float* r, float* l, float* t, float* sn,
                                  float* cs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], m = fabsf(a);
  asm("ex2.approx.f32 %0, %1;" : "=f"(e[i]) : "f"(a));
  asm("sqrt.approx.f32 %0, %1;" : "=f"(s[i]) : "f"(m));
  asm("rsqrt.approx.f32 %0, %1;" : "=f"(r[i]) : "f"(m));
  asm("lg2.approx.f32 %0, %1;" : "=f"(l[i]) : "f"(m));
  asm("tanh.approx.f32 %0, %1;" : "=f"(t[i]) : "f"(a));
  asm("sin.approx.f32 %0, %1;" : "=f"(sn[i]) : "f"(a));
  asm("cos.approx.f32 %0, %1;" : "=f"(cs[i]) : "f"(a));
}
