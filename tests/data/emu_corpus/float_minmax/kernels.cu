// min/max on f32 with the modifiers PTX has beyond fminf/fmaxf (hand-written): .NaN,
// .xorsign.abs, .ftz, and the three-input forms sm_100 added (with .abs and .NaN).

// 8 results per thread from x[t], x[t + n], x[t + 2n].
extern "C" __global__ void minmax(const float* x, float* out, int n) {
  int t = threadIdx.x;
  float a = x[t], b = x[t + n], c = x[t + 2 * n], r;
  float* o = out + 8 * t;
  asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[0] = r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[1] = r;
  asm("min.xorsign.abs.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[2] = r;
  asm("max.NaN.xorsign.abs.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[3] = r;
  asm("min.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); o[4] = r;
  asm("max.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c)); o[5] = r;
  asm("min.NaN.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c)); o[6] = r;
  asm("max.abs.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c)); o[7] = r;
}
