// Memory instructions: vector loads and stores of several widths, cp.async with a source size
// below the copy size (the rest zero-filled, as ragged tiles use it), ldmatrix (x1, x2, x4 and
// .trans) and stmatrix, byte-sized and volatile accesses.
#include <cuda_fp16.h>
extern "C" __global__ void vectors(const float4* x, const uint2* y, const unsigned char* z, float4* a, uint2* b,
                                   unsigned* c) {
  int i = threadIdx.x;
  float4 v = x[i];
  a[i] = make_float4(v.w, v.z, v.y, v.x);
  uint2 u;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(u.x), "=r"(u.y) : "l"(y + i));
  b[i] = make_uint2(u.y, u.x);
  unsigned s = 0;
  for (int k = 0; k < 4; ++k) s = s * 256 + z[4 * i + k];
  volatile unsigned* vc = c;
  vc[i] = s;
}
extern "C" __global__ void zfill(const unsigned* src, unsigned* out, int valid) {
  __shared__ __align__(16) unsigned tile[64 * 4];
  int i = threadIdx.x;
  unsigned dst = (unsigned)__cvta_generic_to_shared(tile + 4 * i);
  int bytes = max(0, min(16, 4 * (valid - 4 * i)));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src + 4 * i), "r"(bytes));
  unsigned d2 = (unsigned)__cvta_generic_to_shared(tile + 4 * ((i + 32) & 63));
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 0;");
  __syncthreads();
  for (int k = 0; k < 4; ++k) out[4 * i + k] = tile[4 * i + k];
  (void)d2;
}
extern "C" __global__ void matrices(const unsigned short* m, unsigned* out) {
  __shared__ __align__(16) unsigned short s[4 * 8 * 8];
  __shared__ __align__(16) unsigned short back[4 * 8 * 8];
  int lane = threadIdx.x;
  for (int k = lane; k < 256; k += 32) s[k] = m[k];
  __syncwarp();
  unsigned row = (unsigned)__cvta_generic_to_shared(s + 8 * lane);  // lane l names row l of the four 8x8 matrices
  unsigned r0, r1, r2, r3, t0, t1, q0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(t0), "=r"(t1) : "r"(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(q0) : "r"(row));
  unsigned* o = out + 8 * lane;
  o[0] = r0; o[1] = r1; o[2] = r2; o[3] = r3; o[4] = t0; o[5] = t1; o[6] = q0;
  unsigned brow = (unsigned)__cvta_generic_to_shared(back + 8 * lane);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(brow), "r"(r0), "r"(r1), "r"(r2), "r"(r3));
  __syncwarp();
  o[7] = back[8 * lane] | ((unsigned)back[8 * lane + 1] << 16);
}
