// Hand-written PTX (inline asm): carry chains as big-integer code writes them (add.cc/addc,
// sub.cc/subc, mad.lo.cc/madc.hi for a 64 x 64 -> 128-bit product, 64-bit and signed links),
// prmt's six modes, bmsk and szext, the 24-bit and high-half multiplies with .sat, 16-bit
// widening multiplies and cvt.pack.sat.

// 24 words per thread from two 128-bit numbers x, y (four words each, least significant first).
extern "C" __global__ void carries(const uint4* x, const uint4* y, unsigned* out) {
  int t = threadIdx.x;
  uint4 a = x[t], b = y[t];
  unsigned* o = out + 24 * t;
  asm("add.cc.u32 %0, %5, %9;\n\taddc.cc.u32 %1, %6, %10;\n\taddc.cc.u32 %2, %7, %11;\n\t"
      "addc.cc.u32 %3, %8, %12;\n\taddc.u32 %4, 0, 0;"
      : "=r"(o[0]), "=r"(o[1]), "=r"(o[2]), "=r"(o[3]), "=r"(o[4])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(b.z), "r"(b.w));
  asm("sub.cc.u32 %0, %5, %9;\n\tsubc.cc.u32 %1, %6, %10;\n\tsubc.cc.u32 %2, %7, %11;\n\t"
      "subc.cc.u32 %3, %8, %12;\n\tsubc.u32 %4, 0, 0;"
      : "=r"(o[5]), "=r"(o[6]), "=r"(o[7]), "=r"(o[8]), "=r"(o[9])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y), "r"(b.z), "r"(b.w));
  // (a.y:a.x) * (b.y:b.x), schoolbook over 32-bit words
  asm("mul.lo.u32 %0, %4, %6;\n\tmul.hi.u32 %1, %4, %6;\n\t"
      "mad.lo.cc.u32 %1, %4, %7, %1;\n\tmadc.hi.u32 %2, %4, %7, 0;\n\t"
      "mad.lo.cc.u32 %1, %5, %6, %1;\n\tmadc.hi.cc.u32 %2, %5, %6, %2;\n\tmadc.hi.u32 %3, %5, %7, 0;\n\t"
      "mad.lo.cc.u32 %2, %5, %7, %2;\n\taddc.u32 %3, %3, 0;"
      : "=r"(o[10]), "=r"(o[11]), "=r"(o[12]), "=r"(o[13])
      : "r"(a.x), "r"(a.y), "r"(b.x), "r"(b.y));
  unsigned long long lo, hi, c;
  asm("add.cc.u64 %0, %3, %5;\n\taddc.cc.u64 %1, %4, %6;\n\taddc.u64 %2, 0, 0;"
      : "=l"(lo), "=l"(hi), "=l"(c)
      : "l"((unsigned long long)a.y << 32 | a.x), "l"((unsigned long long)a.w << 32 | a.z),
        "l"((unsigned long long)b.y << 32 | b.x), "l"((unsigned long long)b.w << 32 | b.z));
  o[14] = (unsigned)lo; o[15] = (unsigned)(lo >> 32); o[16] = (unsigned)hi; o[17] = (unsigned)(hi >> 32);
  o[18] = (unsigned)c;
  // signed: the high half of a signed product plus a, then the carry; a borrow into a signed word
  asm("mad.hi.cc.s32 %0, %2, %3, %4;\n\taddc.s32 %1, 0, 0;" : "=r"(o[19]), "=r"(o[20])
      : "r"(a.x), "r"(b.x), "r"(a.y));
  asm("sub.cc.s32 %0, %2, %3;\n\tsubc.s32 %1, %4, %5;" : "=r"(o[21]), "=r"(o[22])
      : "r"(a.z), "r"(b.z), "r"(a.w), "r"(b.w));
  // a carry flag left by one chain is read by the next addc (no .cc in between)
  asm("add.cc.u32 %0, %1, %2;\n\tadd.u32 %0, %0, 1;\n\taddc.u32 %0, %0, 0;" : "=r"(o[23]) : "r"(a.x), "r"(b.x));
}

// 15 words per thread: prmt in every mode and the default one, bmsk, szext, and fns (__fns).
extern "C" __global__ void bits(const unsigned* x, const unsigned* y, const unsigned* z, unsigned* out) {
  int t = threadIdx.x;
  unsigned a = x[t], b = y[t], c = z[t], r;
  unsigned* o = out + 15 * t;
  asm("prmt.b32.f4e %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[0] = r;
  asm("prmt.b32.b4e %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[1] = r;
  asm("prmt.b32.rc8 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[2] = r;
  asm("prmt.b32.ecl %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[3] = r;
  asm("prmt.b32.ecr %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[4] = r;
  asm("prmt.b32.rc16 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[5] = r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[6] = r;
  unsigned p = c & 63, q = (c >> 8) & 63;  // positions and widths from 0 to 63
  asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(r) : "r"(p), "r"(q)); o[7] = r;
  asm("bmsk.wrap.b32 %0, %1, %2;" : "=r"(r) : "r"(p), "r"(q)); o[8] = r;
  asm("szext.clamp.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(q)); o[9] = r;
  asm("szext.wrap.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(q)); o[10] = r;
  asm("szext.clamp.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(q)); o[11] = r;
  asm("szext.wrap.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(q)); o[12] = r;
  o[13] = __fns(a, c & 31, (int)((c >> 16) & 7) - 3);
  o[14] = __fns(b, (c >> 5) & 31, (int)((c >> 24) & 63) - 32);
}

// 18 words per thread: 24-bit and high-half multiplies, 16-bit widening ones, cvt.pack.sat.
extern "C" __global__ void multiplies(const unsigned* x, const unsigned* y, const unsigned* z, unsigned* out) {
  int t = threadIdx.x;
  unsigned a = x[t], b = y[t], c = z[t], r;
  unsigned* o = out + 18 * t;
  asm("mul24.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[0] = r;
  asm("mul24.hi.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[1] = r;
  asm("mad24.lo.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[2] = r;
  asm("mad24.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[3] = r;
  asm("mad24.hi.sat.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[4] = r;
  asm("mad.hi.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[5] = r;
  asm("mad.hi.sat.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[6] = r;
  unsigned long long w, u = (unsigned long long)a << 32 | b, v = (unsigned long long)c << 32 | a;
  asm("mul.hi.u64 %0, %1, %2;" : "=l"(w) : "l"(u), "l"(v)); o[7] = (unsigned)w; o[8] = (unsigned)(w >> 32);
  asm("mul.hi.s64 %0, %1, %2;" : "=l"(w) : "l"(u), "l"(v)); o[9] = (unsigned)w; o[10] = (unsigned)(w >> 32);
  asm("{ .reg .u16 h, k; cvt.u16.u32 h, %1; cvt.u16.u32 k, %2; mul.wide.u16 %0, h, k; }" : "=r"(r) : "r"(a), "r"(b));
  o[11] = r;
  asm("{ .reg .s16 h, k; cvt.u16.u32 h, %1; cvt.u16.u32 k, %2; mul.wide.s16 %0, h, k; }" : "=r"(r) : "r"(a), "r"(b));
  o[12] = r;
  asm("{ .reg .s16 h, k; cvt.u16.u32 h, %1; cvt.u16.u32 k, %2; mad.wide.s16 %0, h, k, %3; }"
      : "=r"(r) : "r"(a), "r"(b), "r"(c));
  o[13] = r;
  asm("cvt.pack.sat.s16.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[14] = r;
  asm("cvt.pack.sat.u16.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); o[15] = r;
  asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[16] = r;
  asm("cvt.pack.sat.s4.s32.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); o[17] = r;
}
