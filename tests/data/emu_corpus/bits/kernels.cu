// Bit intrinsics as nvcc lowers them (prmt, shf, brev, clz, bfind, popc, mul.hi, mul24).
extern "C" __global__ void bits(const unsigned* x, const unsigned* y, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned a = x[i], b = y[i];
  unsigned* o = out + 8 * i;
  o[0] = __byte_perm(a, b, 0x5140);
  o[1] = __byte_perm(a, b, (b >> 3) & 0x7777);
  o[2] = __funnelshift_l(a, b, i);
  o[3] = __funnelshift_rc(a, b, i);
  o[4] = __brev(a);
  o[5] = __clz(b) + 64 * __ffs(a);
  o[6] = __popc(b) + 64 * __umulhi(a, b);
  o[7] = __umul24(a, b);
}
