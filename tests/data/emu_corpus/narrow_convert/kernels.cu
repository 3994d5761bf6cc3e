// The sm_100a conversions: cvt to and from the fp6 (.e2m3x2, .e3m2x2) and fp4 (.e2m1x2) pairs,
// to .ue8m0x2 (.rz/.rp, .satfinite, from .f32 and .bf16x2) and back to .bf16x2, and cvt to .tf32
// with .satfinite under .rn and .rz. The first source goes to the upper element.
#define PAIR(OP, D, A, B) asm("cvt." OP " %0, %1, %2;" : "=h"(D) : "f"(A), "f"(B))
#define ONE(OP, D, A, DC, AC) asm("cvt." OP " %0, %1;" : "=" DC(D) : AC(A))

// Row i: pairs from x[2i] (upper) and x[2i+1]: e2m3x2, e2m3x2.relu, e3m2x2, e3m2x2.relu, e2m1x2
// (a byte, stored in a u16), e2m1x2.relu; then from y[2i] and y[2i+1] (positive, infinite or NaN:
// ue8m0 has no sign and no zero): ue8m0x2.rz, .rp, .rz.satfinite, .rp.satfinite, and .rp from the
// pair as bf16x2 (each rounded to bf16 first).
extern "C" __global__ void narrow_from_f32(const float* x, const float* y, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[2 * i], b = x[2 * i + 1];
  unsigned short* o = out + 11 * i;
  unsigned short r;
  PAIR("rn.satfinite.e2m3x2.f32", r, a, b); o[0] = r;
  PAIR("rn.satfinite.relu.e2m3x2.f32", r, a, b); o[1] = r;
  PAIR("rn.satfinite.e3m2x2.f32", r, a, b); o[2] = r;
  PAIR("rn.satfinite.relu.e3m2x2.f32", r, a, b); o[3] = r;
  asm("{\n.reg .b8 q;\ncvt.rn.satfinite.e2m1x2.f32 q, %1, %2;\ncvt.u16.u8 %0, q;\n}" : "=h"(r) : "f"(a), "f"(b));
  o[4] = r;
  asm("{\n.reg .b8 q;\ncvt.rn.satfinite.relu.e2m1x2.f32 q, %1, %2;\ncvt.u16.u8 %0, q;\n}" : "=h"(r) : "f"(a), "f"(b));
  o[5] = r;
  a = y[2 * i];
  b = y[2 * i + 1];
  PAIR("rz.ue8m0x2.f32", r, a, b); o[6] = r;
  PAIR("rp.ue8m0x2.f32", r, a, b); o[7] = r;
  PAIR("rz.satfinite.ue8m0x2.f32", r, a, b); o[8] = r;
  PAIR("rp.satfinite.ue8m0x2.f32", r, a, b); o[9] = r;
  unsigned bf;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(bf) : "f"(a), "f"(b));
  ONE("rp.satfinite.ue8m0x2.bf16x2", r, bf, "h", "r"); o[10] = r;
}

// Row i: the codes c6[i] (the 2 bits above each element 0) as e2m3x2 and e3m2x2 to f16x2 (plain
// and .relu); the low byte of c8[i] as e2m1x2 to f16x2 (plain, .relu), and c8[i] as ue8m0x2 to bf16x2.
extern "C" __global__ void narrow_to_half(const unsigned short* c6, const unsigned short* c8, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned short v = c6[i];
  unsigned* o = out + 7 * i;
  unsigned r;
  ONE("rn.f16x2.e2m3x2", r, v, "r", "h"); o[0] = r;
  ONE("rn.relu.f16x2.e2m3x2", r, v, "r", "h"); o[1] = r;
  ONE("rn.f16x2.e3m2x2", r, v, "r", "h"); o[2] = r;
  ONE("rn.relu.f16x2.e3m2x2", r, v, "r", "h"); o[3] = r;
  v = c8[i];
  asm("{\n.reg .b8 q;\ncvt.u8.u16 q, %1;\ncvt.rn.f16x2.e2m1x2 %0, q;\n}" : "=r"(r) : "h"(v)); o[4] = r;
  asm("{\n.reg .b8 q;\ncvt.u8.u16 q, %1;\ncvt.rn.relu.f16x2.e2m1x2 %0, q;\n}" : "=r"(r) : "h"(v)); o[5] = r;
  ONE("rn.bf16x2.ue8m0x2", r, v, "r", "h"); o[6] = r;
}

// Row i: x[i] to tf32 with .satfinite: .rn, .rn.relu, .rz, .rz.relu.
extern "C" __global__ void tf32_satfinite(const float* x, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i];
  unsigned r;
  ONE("rn.satfinite.tf32.f32", r, a, "r", "f"); out[4 * i] = r;
  ONE("rn.satfinite.relu.tf32.f32", r, a, "r", "f"); out[4 * i + 1] = r;
  ONE("rz.satfinite.tf32.f32", r, a, "r", "f"); out[4 * i + 2] = r;
  ONE("rz.satfinite.relu.tf32.f32", r, a, "r", "f"); out[4 * i + 3] = r;
}
