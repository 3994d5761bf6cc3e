// The SIMD intrinsics of the CUDA Math API ("SIMD Intrinsics") as nvcc lowers them (mostly to
// plain logic; vabsdiff4 and vabsdiff2/4.add appear), the dot products and sums of absolute
// differences (dp4a, dp2a, sad), the 16-bit pair forms of add/min/max with .relu, and the video
// instructions written by hand (selectors, masks, .sat, .add, vset).

// 82 words per thread: 8 unary intrinsics of a, then 74 binary ones of (a, b).
extern "C" __global__ void intrinsics(const unsigned* x, const unsigned* y, unsigned* out) {
  int t = threadIdx.x;
  unsigned a = x[t], b = y[t];
  unsigned* o = out + 82 * t;
  o[0] = __vabs2(a);
  o[1] = __vabs4(a);
  o[2] = __vabsss2(a);
  o[3] = __vabsss4(a);
  o[4] = __vneg2(a);
  o[5] = __vneg4(a);
  o[6] = __vnegss2(a);
  o[7] = __vnegss4(a);
  o[8] = __vabsdiffs2(a, b);
  o[9] = __vabsdiffs4(a, b);
  o[10] = __vabsdiffu2(a, b);
  o[11] = __vabsdiffu4(a, b);
  o[12] = __vadd2(a, b);
  o[13] = __vadd4(a, b);
  o[14] = __vaddss2(a, b);
  o[15] = __vaddss4(a, b);
  o[16] = __vaddus2(a, b);
  o[17] = __vaddus4(a, b);
  o[18] = __vavgs2(a, b);
  o[19] = __vavgs4(a, b);
  o[20] = __vavgu2(a, b);
  o[21] = __vavgu4(a, b);
  o[22] = __vhaddu2(a, b);
  o[23] = __vhaddu4(a, b);
  o[24] = __vcmpeq2(a, b);
  o[25] = __vcmpeq4(a, b);
  o[26] = __vcmpges2(a, b);
  o[27] = __vcmpges4(a, b);
  o[28] = __vcmpgeu2(a, b);
  o[29] = __vcmpgeu4(a, b);
  o[30] = __vcmpgts2(a, b);
  o[31] = __vcmpgts4(a, b);
  o[32] = __vcmpgtu2(a, b);
  o[33] = __vcmpgtu4(a, b);
  o[34] = __vcmples2(a, b);
  o[35] = __vcmples4(a, b);
  o[36] = __vcmpleu2(a, b);
  o[37] = __vcmpleu4(a, b);
  o[38] = __vcmplts2(a, b);
  o[39] = __vcmplts4(a, b);
  o[40] = __vcmpltu2(a, b);
  o[41] = __vcmpltu4(a, b);
  o[42] = __vcmpne2(a, b);
  o[43] = __vcmpne4(a, b);
  o[44] = __vmaxs2(a, b);
  o[45] = __vmaxs4(a, b);
  o[46] = __vmaxu2(a, b);
  o[47] = __vmaxu4(a, b);
  o[48] = __vmins2(a, b);
  o[49] = __vmins4(a, b);
  o[50] = __vminu2(a, b);
  o[51] = __vminu4(a, b);
  o[52] = __vsads2(a, b);
  o[53] = __vsads4(a, b);
  o[54] = __vsadu2(a, b);
  o[55] = __vsadu4(a, b);
  o[56] = __vseteq2(a, b);
  o[57] = __vseteq4(a, b);
  o[58] = __vsetges2(a, b);
  o[59] = __vsetges4(a, b);
  o[60] = __vsetgeu2(a, b);
  o[61] = __vsetgeu4(a, b);
  o[62] = __vsetgts2(a, b);
  o[63] = __vsetgts4(a, b);
  o[64] = __vsetgtu2(a, b);
  o[65] = __vsetgtu4(a, b);
  o[66] = __vsetles2(a, b);
  o[67] = __vsetles4(a, b);
  o[68] = __vsetleu2(a, b);
  o[69] = __vsetleu4(a, b);
  o[70] = __vsetlts2(a, b);
  o[71] = __vsetlts4(a, b);
  o[72] = __vsetltu2(a, b);
  o[73] = __vsetltu4(a, b);
  o[74] = __vsetne2(a, b);
  o[75] = __vsetne4(a, b);
  o[76] = __vsub2(a, b);
  o[77] = __vsub4(a, b);
  o[78] = __vsubss2(a, b);
  o[79] = __vsubss4(a, b);
  o[80] = __vsubus2(a, b);
  o[81] = __vsubus4(a, b);
}

// 16 words per thread.
extern "C" __global__ void dots(const unsigned* x, const unsigned* y, const unsigned* z, unsigned* out) {
  int t = threadIdx.x;
  unsigned a = x[t], b = y[t], c = z[t];
  unsigned* o = out + 16 * t;
  bool ge;
  o[0] = __dp4a(a, b, c);
  o[1] = __dp4a((int)a, (int)b, (int)c);
  o[2] = __dp2a_lo(a, b, c);
  o[3] = __dp2a_hi(a, b, c);
  o[4] = __dp2a_lo((int)a, (int)b, (int)c);
  o[5] = __dp2a_hi((int)a, (int)b, (int)c);
  o[6] = __sad((int)a, (int)b, c);
  o[7] = __usad(a, b, c);
  o[8] = __viaddmax_s32(a, b, c);
  o[9] = __vimax3_u32(a, b, c);
  o[10] = __vimax_s16x2_relu(a, b);
  o[11] = __vibmax_s32(a, b, &ge) + ge;
  o[12] = __vimin3_s16x2_relu(a, b, c);
  o[13] = __viaddmin_u16x2(a, b, c);
  unsigned r;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  o[14] = r;
  asm("dp2a.hi.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  o[15] = r;
}

// 16 words per thread, each a video instruction or a packed-integer form written by hand.
extern "C" __global__ void video(const unsigned* x, const unsigned* y, const unsigned* z, unsigned* out) {
  int t = threadIdx.x;
  unsigned a = x[t], b = y[t], c = z[t];
  unsigned* o = out + 16 * t;
  unsigned r;
  asm("vadd4.u32.u32.u32.sat %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[0] = r;
  asm("vsub2.s32.s32.s32.sat %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[1] = r;
  asm("vmax4.s32.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[2] = r;
  asm("vavrg2.u32.u32.u32.add %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[3] = r;
  asm("vset4.u32.u32.lt %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[4] = r;
  asm("vset2.s32.s32.ne.add %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[5] = r;
  asm("vadd2.s32.s32.u32.sat %0.h1, %1.h01, %2.h23, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[6] = r;
  asm("vmin4.s32.u32.s32.add %0.b20, %1.b0213, %2.b7744, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[7] = r;
  asm("vsub4.s32.s32.u32.sat %0.b31, %1, %2.b3210, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[8] = r;
  asm("vabsdiff2.s32.s32.s32 %0, %1.h11, %2.h30, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[9] = r;
  asm("vset2.u32.s32.ge %0.h0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[10] = r;
  asm("vavrg4.s32.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[11] = r;
  asm("add.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[12] = r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[13] = r;
  asm("min.relu.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[14] = r;
  asm("max.relu.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[15] = r;
}
