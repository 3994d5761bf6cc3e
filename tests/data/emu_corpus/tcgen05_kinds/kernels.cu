// tcgen05.mma kinds beyond kind::f16: kind::tf32, kind::f8f6f4 (e4m3, e5m2, e2m3, e3m2) and kind::i8
// (s8/u8, wrapping or saturating), M = 128, N = 32, each kernel four instructions of 32 bytes of
// K. A (128 rows of 128 bytes) is staged in shared memory in the no-swizzle K-major layout (LBO 128,
// SBO 1024, start 256 bytes on per instruction); Bt (B's 32 columns, 128 bytes each) in the
// 128B-swizzle K-major layout (SBO 1024, start 32 bytes on); the descriptors carry the sm_100
// version bit 46. C (128 x 32 words) is stored into TMEM with tcgen05.st.32x32b (warp w: lanes
// 32w..32w+31, row m at lane m), thread 0 issues the MMAs with the instruction descriptor given as
// an argument and commits to an mbarrier, and every warp reads D back with tcgen05.ld.
#include <cstdint>

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint64_t desc(const void* p, unsigned lbo, unsigned sbo, unsigned layout) {
  return (uint64_t)((smem(p) & 0x3FFFF) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32 |
         1ull << 46 | (uint64_t)layout << 61;
}

#define X8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define R8(v) "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7])
#define W8(v) "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7])
#define MMA(KIND)                                                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"                                        \
               "tcgen05.mma.cta_group::1.kind::" KIND " [%0], %1, %2, %3, p;\n}\n" ::"r"(tmem),   \
               "l"(ad), "l"(bd), "r"(idesc), "r"(1) : "memory")

#define TC_KERNEL(NAME, KIND)                                                                         \
  extern "C" __global__ void __launch_bounds__(128) NAME(const uint4* A, const uint4* Bt, const unsigned* C, \
                                                          unsigned* D, unsigned idesc) {              \
    __shared__ __align__(1024) unsigned char sa[128 * 128];                                          \
    __shared__ __align__(1024) unsigned char sb[32 * 128];                                           \
    __shared__ __align__(8) uint64_t bar;                                                             \
    __shared__ unsigned tmem_base;                                                                    \
    const int w = threadIdx.x / 32, row = threadIdx.x;                                                \
    for (int i = threadIdx.x; i < 128 * 8; i += 128) {                                                \
      int mn = i / 8, c = i % 8;                                                                      \
      *(uint4*)(sa + (mn / 8) * 1024 + c * 128 + (mn % 8) * 16) = A[i];                              \
    }                                                                                                 \
    for (int i = threadIdx.x; i < 32 * 8; i += 128) {                                                 \
      int mn = i / 8, c = i % 8, off = (mn / 8) * 1024 + (mn % 8) * 128 + c * 16;                     \
      *(uint4*)(sb + (off ^ (((off >> 7) & 7) << 4))) = Bt[i];                                         \
    }                                                                                                 \
    if (threadIdx.x == 0) {                                                                           \
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar)) : "memory");          \
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");                             \
    }                                                                                                 \
    if (w == 0) {                                                                                     \
      asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::"r"(smem(&tmem_base))); \
      asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");                   \
    }                                                                                                 \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                      \
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                                  \
    __syncthreads();                                                                                  \
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                                   \
    const unsigned tmem = tmem_base, mine = tmem + ((32 * w) << 16);                                  \
    for (int c = 0; c < 4; ++c) {                                                                     \
      const unsigned* v = C + row * 32 + 8 * c;                                                       \
      asm volatile("tcgen05.st.sync.aligned.32x32b.x8.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};"  \
                   ::"r"(mine + 8 * c), R8(v) : "memory");                                            \
    }                                                                                                 \
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");                                      \
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                                  \
    __syncthreads();                                                                                  \
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                                   \
    if (threadIdx.x == 0) {                                                                           \
      for (int s = 0; s < 4; ++s) {                                                                   \
        uint64_t ad = desc(sa + 256 * s, 128, 1024, 0), bd = desc(sb + 32 * s, 16, 1024, 2);         \
        MMA(KIND);                                                                                    \
      }                                                                                               \
      asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"     \
                   ::"r"(smem(&bar)) : "memory");                                                     \
    }                                                                                                 \
    unsigned done = 0;                                                                                \
    while (!done) {                                                                                   \
      asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"        \
                   "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(smem(&bar)) : "memory");          \
    }                                                                                                 \
    __syncwarp();                                                                                     \
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                                   \
    for (int c = 0; c < 4; ++c) {                                                                     \
      unsigned v[8];                                                                                  \
      asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 " X8 ", [%8];\ntcgen05.wait::ld.sync.aligned;" \
                   : W8(v) : "r"(mine + 8 * c) : "memory");                                           \
      for (int j = 0; j < 8; ++j) D[row * 32 + 8 * c + j] = v[j];                                    \
    }                                                                                                 \
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                                  \
    __syncthreads();                                                                                  \
    if (w == 0) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" ::"r"(tmem));   \
  }

TC_KERNEL(tc_tf32, "tf32")
TC_KERNEL(tc_f8f6f4, "f8f6f4")
TC_KERNEL(tc_i8, "i8")
