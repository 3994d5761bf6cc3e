// Barrier reductions as nvcc lowers __syncthreads_count/_and/_or (bar.red.popc.u32,
// bar.red.and.pred, bar.red.or.pred on barrier 0), and hand-written bar.red / barrier.red on
// named barriers with thread counts.

// The three CTA-wide votes; warps at or past `live` exit first and take no part.
extern "C" __global__ void votes(const int* x, unsigned* out, int live) {
  int t = threadIdx.x;
  if (t >= live) return;
  int v = x[t];
  unsigned* o = out + 3 * t;
  o[0] = __syncthreads_count(v > 0);
  o[1] = __syncthreads_and(v != 0);
  o[2] = __syncthreads_or(v < 0);
}

// One barrier reused: a population count per bit of x, each a new generation of barrier 0.
extern "C" __global__ void bit_counts(const unsigned* x, unsigned* out) {
  unsigned v = x[threadIdx.x], acc = 0;
  for (int k = 0; k < 8; ++k) acc = acc * 16 + __syncthreads_count((v >> k) & 1);
  out[threadIdx.x] = acc;
}

// Warps 0-1 reduce on barrier 1 and warps 2-3 on barrier 2, each with a count of 64 threads;
// the second half also negates its predicate.
extern "C" __global__ void named(const int* x, unsigned* out) {
  int t = threadIdx.x;
  unsigned p = x[t] > 0, count, any, all;
  if (t < 64) {
    asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %3, 0;\n\t"
                 "bar.red.popc.u32 %0, 1, 64, p;\n\t"
                 "bar.red.or.pred q, 1, 64, p; selp.u32 %1, 1, 0, q;\n\t"
                 "bar.red.and.pred q, 1, 64, p; selp.u32 %2, 1, 0, q; }"
                 : "=r"(count), "=r"(any), "=r"(all) : "r"(p));
  } else {
    asm volatile("{ .reg .pred p, q; setp.ne.u32 p, %3, 0;\n\t"
                 "barrier.cta.red.popc.aligned.u32 %0, 2, 64, !p;\n\t"
                 "barrier.red.or.pred q, 2, 64, !p; selp.u32 %1, 1, 0, q;\n\t"
                 "barrier.red.and.pred q, 2, 64, !p; selp.u32 %2, 1, 0, q; }"
                 : "=r"(count), "=r"(any), "=r"(all) : "r"(p));
  }
  out[3 * t] = count;
  out[3 * t + 1] = any;
  out[3 * t + 2] = all;
}
