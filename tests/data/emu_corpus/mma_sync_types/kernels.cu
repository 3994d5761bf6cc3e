// mma.sync beyond f16/bf16 with f32 accumulators: tf32 (m16n8k8, m16n8k4), s8/u8 (m16n8k16,
// m16n8k32, wrapping and .satfinite), e4m3/e5m2 (m16n8k32, sm_89+), f16 accumulators (m16n8k8,
// m16n8k16, and e4m3 inputs), f64 (m8n8k4). Each warp w of the block multiplies its own matrices:
// A (16 x K, row-major), Bt (8 x K: B's columns, each contiguous in k), C and D (16 x 8, row-major,
// 32-bit or f16 elements). The fragments are loaded per the PTX ISA's "Matrix fragments for
// mma.m16n8kK": with g = lane / 4, t = lane % 4 and P elements per 32-bit register, A register r
// holds row g + 8 (r % 2), columns P t + 4P (r / 2) ...; B register r holds rows P t + 4P r ... of
// column g; 32-bit accumulator i sits at row g + 8 (i / 2), column 2t + i % 2; f16x2 register i at
// row g + 8i, columns 2t, 2t + 1.

#define D4 "{%0, %1, %2, %3}"
#define D2 "{%0, %1}"
#define ASM_A4B2C4(I) asm volatile(I " " D4 ", {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"             \
    : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                                          \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]))
#define ASM_A2B1C4(I) asm volatile(I " " D4 ", {%4, %5}, {%6}, {%7, %8, %9, %10};"                              \
    : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                                          \
    : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]))
#define ASM_A4B2C2(I) asm volatile(I " " D2 ", {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"                           \
    : "=r"(d[0]), "=r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]))
#define ASM_A2B1C2(I) asm volatile(I " " D2 ", {%2, %3}, {%4}, {%5, %6};"                                       \
    : "=r"(d[0]), "=r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]))

// The accumulator word of register i (NC = 4: 32-bit elements, NC = 2: f16x2) in a 16 x 8 matrix.
__device__ __forceinline__ int acc_word(int nc, int i, int g, int t) {
  return nc == 4 ? (g + 8 * (i / 2)) * 8 + 2 * t + i % 2 : ((g + 8 * i) * 8 + 2 * t) / 2;
}

#define MMA_KERNEL(NAME, K, P, NC, ASM, INSTR)                                                       \
  extern "C" __global__ void NAME(const unsigned* A, const unsigned* Bt, const unsigned* C, unsigned* D) { \
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, kw = K / P;      \
    A += w * 16 * kw;                                                                                     \
    Bt += w * 8 * kw;                                                                                     \
    C += w * 32 * NC;                                                                                     \
    D += w * 32 * NC;                                                                                     \
    unsigned a[K / (2 * P)], b[K / (4 * P)], c[NC], d[NC];                                               \
    for (int r = 0; r < K / (2 * P); ++r) a[r] = A[(g + 8 * (r % 2)) * kw + t + 4 * (r / 2)];            \
    for (int r = 0; r < K / (4 * P); ++r) b[r] = Bt[g * kw + t + 4 * r];                                  \
    for (int i = 0; i < NC; ++i) c[i] = C[acc_word(NC, i, g, t)];                                         \
    ASM(INSTR);                                                                                           \
    for (int i = 0; i < NC; ++i) D[acc_word(NC, i, g, t)] = d[i];                                         \
  }

MMA_KERNEL(mma_tf32_k8, 8, 1, 4, ASM_A4B2C4, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
MMA_KERNEL(mma_tf32_k4, 4, 1, 4, ASM_A2B1C4, "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")
MMA_KERNEL(mma_s8_k16, 16, 4, 4, ASM_A2B1C4, "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32")
MMA_KERNEL(mma_u8_k16_sat, 16, 4, 4, ASM_A2B1C4, "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.u8.u8.s32")
MMA_KERNEL(mma_u8s8_k32, 32, 4, 4, ASM_A4B2C4, "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32")
MMA_KERNEL(mma_s8_k32_sat, 32, 4, 4, ASM_A4B2C4, "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32")
MMA_KERNEL(mma_e4m3_k32, 32, 4, 4, ASM_A4B2C4, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
MMA_KERNEL(mma_e5m2e4m3_k32, 32, 4, 4, ASM_A4B2C4, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32")
MMA_KERNEL(mma_e4m3_k32_f16, 32, 4, 2, ASM_A4B2C2, "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16")
MMA_KERNEL(mma_f16_k8_f16, 8, 2, 2, ASM_A2B1C2, "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16")
MMA_KERNEL(mma_f16_k16_f16, 16, 2, 2, ASM_A4B2C2, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")

// m8n8k4 .f64: A (8 x 4) register at row g, column t; B (Bt, 8 x 4) at row t of column g;
// C and D (8 x 8) registers i at row g, column 2t + i.
extern "C" __global__ void mma_f64(const double* A, const double* Bt, const double* C, double* D) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  A += w * 32;
  Bt += w * 32;
  C += w * 64;
  D += w * 64;
  double d0, d1;
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%4, %5};"
               : "=d"(d0), "=d"(d1) : "d"(A[g * 4 + t]), "d"(Bt[g * 4 + t]), "d"(C[g * 8 + 2 * t]), "d"(C[g * 8 + 2 * t + 1]));
  D[g * 8 + 2 * t] = d0;
  D[g * 8 + 2 * t + 1] = d1;
}
