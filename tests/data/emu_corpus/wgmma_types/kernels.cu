// wgmma.mma_async beyond f32 += f16/bf16/tf32: e4m3/e5m2 inputs (f32 and f16 accumulators), s8/u8
// (s32, wrapping and .satfinite), f16 accumulators for f16 inputs, and A from registers for e4m3.
// One warpgroup computes D (64 x 16) = A (64 x K) B (K x 16) + C in four instructions of 32 bytes of
// K each. A (row-major, 128 bytes a row) is staged in shared memory in the no-swizzle K-major
// canonical layout (core matrices of 8 rows x 16 bytes: LBO 128 between K chunks, SBO 1024 between
// 8-row groups; each instruction's start 256 bytes on); Bt (B's columns, 128 bytes each) in the
// 128B-swizzle K-major layout (SBO 1024; each instruction's start 32 bytes on within the row).
// C and D are 64 x 16 row-major (32-bit, or f16 for f16 accumulators). Register fragments: PTX ISA
// "Register fragments for wgmma"; the async-tensor-core reference §2.4.
#include <cstdint>

__device__ __forceinline__ uint64_t desc(const void* p, unsigned lbo, unsigned sbo, unsigned layout) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32 |
         (uint64_t)layout << 62;
}

__device__ __forceinline__ void stage(const uint4* A, const uint4* Bt, unsigned char* sa, unsigned char* sb) {
  for (int i = threadIdx.x; i < 64 * 8; i += 128) {
    int mn = i / 8, c = i % 8;
    *(uint4*)(sa + (mn / 8) * 1024 + c * 128 + (mn % 8) * 16) = A[i];
  }
  for (int i = threadIdx.x; i < 16 * 8; i += 128) {
    int mn = i / 8, c = i % 8;
    int off = (mn / 8) * 1024 + (mn % 8) * 128 + c * 16;
    *(uint4*)(sb + (off ^ (((off >> 7) & 7) << 4))) = Bt[i];
  }
}

// The word of accumulator register q (NR = 8: one 32-bit element; NR = 4: an f16x2 pair) in D.
__device__ __forceinline__ int acc_word(int nr, int q, int w, int g, int t) {
  if (nr == 8) return (16 * w + g + 8 * ((q >> 1) & 1)) * 16 + 8 * (q >> 2) + 2 * t + (q & 1);
  return ((16 * w + g + 8 * (q & 1)) * 16 + 8 * (q >> 1) + 2 * t) / 2;
}

#define PRED(N) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #N ", 0;\n"
#define ACC8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define OUT8 "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7])
#define SS8(I, TAIL) asm volatile(PRED(10) I " " ACC8 ", %8, %9, p" TAIL ";\n}\n" : OUT8 : "l"(ad), "l"(bd), "r"(1))
#define SS4(I, TAIL) asm volatile(PRED(6) I " {%0, %1, %2, %3}, %4, %5, p" TAIL ";\n}\n"                  \
                                  : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]) : "l"(ad), "l"(bd), "r"(1))
#define RS8(I, TAIL)                                                                                     \
  {                                                                                                      \
    const unsigned* a32 = (const unsigned*)A;                                                            \
    unsigned a[4];                                                                                       \
    for (int r = 0; r < 4; ++r) a[r] = a32[(16 * w + g + 8 * (r % 2)) * 32 + 8 * s + t + 4 * (r / 2)];  \
    asm volatile(PRED(13) I " " ACC8 ", {%8, %9, %10, %11}, %12, p" TAIL ";\n}\n"                        \
                 : OUT8 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bd), "r"(1));                 \
  }

#define WG_KERNEL(NAME, NR, CALL)                                                                      \
  extern "C" __global__ void __launch_bounds__(128) NAME(const uint4* A, const uint4* Bt, const unsigned* C, \
                                                          unsigned* D) {                               \
    __shared__ __align__(1024) unsigned char sa[64 * 128];                                            \
    __shared__ __align__(1024) unsigned char sb[16 * 128];                                            \
    stage(A, Bt, sa, sb);                                                                              \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                      \
    __syncthreads();                                                                                   \
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;                    \
    unsigned d[NR];                                                                                    \
    for (int q = 0; q < NR; ++q) d[q] = C[acc_word(NR, q, w, g, t)];                                   \
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                                           \
    _Pragma("unroll") for (int s = 0; s < 4; ++s) {                                                    \
      uint64_t ad = desc(sa + 256 * s, 128, 1024, 0), bd = desc(sb + 32 * s, 16, 1024, 1);            \
      CALL;                                                                                            \
    }                                                                                                  \
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                                    \
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                                    \
    for (int q = 0; q < NR; ++q) D[acc_word(NR, q, w, g, t)] = d[q];                                   \
  }

WG_KERNEL(wgmma_e4m3_f32, 8, SS8("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3", ", 1, 1"))
WG_KERNEL(wgmma_e5m2e4m3_f16, 4, SS4("wgmma.mma_async.sync.aligned.m64n16k32.f16.e5m2.e4m3", ", 1, 1"))
WG_KERNEL(wgmma_e4m3_rs_f32, 8, RS8("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3", ", 1, -1"))
WG_KERNEL(wgmma_s8_s32, 8, SS8("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8", ""))
WG_KERNEL(wgmma_u8s8_sat, 8, SS8("wgmma.mma_async.sync.aligned.m64n16k32.satfinite.s32.u8.s8", ""))
WG_KERNEL(wgmma_f16_f16, 4, SS4("wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16", ", -1, 1, 0, 0"))
