// Integer arithmetic at its edges, each instruction named through inline PTX: division and
// remainder (signed, by -1 and by 0 are left out: the ISA leaves them unspecified), wide and high
// multiplies, 64-bit shifts past the width, bfe/bfi with out-of-range positions, abs/neg of the
// minimum, min/max, 16-bit arithmetic.
extern "C" __global__ void ints(const int* x, const int* y, const long long* p, const long long* q, unsigned* out) {
  int i = threadIdx.x;
  int a = x[i], b = y[i];
  long long c = p[i], d = q[i];
  unsigned* o = out + 24 * i;
  int r;
  asm("div.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[0] = r;
  asm("rem.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[1] = r;
  asm("div.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[2] = r;
  asm("rem.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[3] = r;
  long long w;
  asm("div.s64 %0, %1, %2;" : "=l"(w) : "l"(c), "l"(d)); o[4] = (unsigned)w; o[5] = (unsigned)(w >> 32);
  asm("rem.u64 %0, %1, %2;" : "=l"(w) : "l"(c), "l"(d)); o[6] = (unsigned)w; o[7] = (unsigned)(w >> 32);
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(w) : "r"(a), "r"(b)); o[8] = (unsigned)w; o[9] = (unsigned)(w >> 32);
  asm("mul.hi.u64 %0, %1, %2;" : "=l"(w) : "l"(c), "l"(d)); o[10] = (unsigned)w; o[11] = (unsigned)(w >> 32);
  asm("mad.hi.s32 %0, %1, %2, %1;" : "=r"(r) : "r"(a), "r"(b)); o[12] = r;
  asm("shl.b64 %0, %1, %2;" : "=l"(w) : "l"(c), "r"(b & 127)); o[13] = (unsigned)w; o[14] = (unsigned)(w >> 32);
  asm("shr.s64 %0, %1, %2;" : "=l"(w) : "l"(c), "r"(b & 127)); o[15] = (unsigned)w;
  asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b & 63), "r"((b >> 8) & 63)); o[16] = r;
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"((a >> 4) & 63), "r"((b >> 12) & 63)); o[17] = r;
  asm("abs.s32 %0, %1;" : "=r"(r) : "r"(a)); o[18] = r;
  asm("neg.s32 %0, %1;" : "=r"(r) : "r"(a)); o[19] = r;
  asm("min.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[20] = r;
  asm("max.s64 %0, %1, %2;" : "=l"(w) : "l"(c), "l"(d)); o[21] = (unsigned)(w >> 32);
  short h;
  asm("mul.lo.s16 %0, %1, %2;" : "=h"(h) : "h"((short)a), "h"((short)b)); o[22] = (unsigned short)h;
  asm("add.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[23] = r;
}
