// Warp-level intrinsics as nvcc lowers them: shfl.sync in its four modes (whole warp and
// segments of 8 and 16 lanes, as tiled partitions use), vote (any, all, ballot, uni via
// __activemask under divergence), match.any/all, redux.sync (add, min, max, and, or, xor).
extern "C" __global__ void shuffles(const int* x, int* out) {
  int lane = threadIdx.x & 31;
  int v = x[threadIdx.x];
  int* o = out + 8 * threadIdx.x;
  o[0] = __shfl_sync(0xffffffff, v, (lane * 7 + 3) & 31);
  o[1] = __shfl_up_sync(0xffffffff, v, 3);
  o[2] = __shfl_down_sync(0xffffffff, v, 5);
  o[3] = __shfl_xor_sync(0xffffffff, v, 6);
  o[4] = __shfl_sync(0xffffffff, v, lane + 2, 8);
  o[5] = __shfl_up_sync(0xffffffff, v, 2, 16);
  o[6] = __shfl_down_sync(0xffffffff, v, 3, 8);
  o[7] = __shfl_xor_sync(0xffffffff, v, 9, 16);
}
extern "C" __global__ void votes(const int* x, unsigned* out) {
  int v = x[threadIdx.x];
  unsigned* o = out + 8 * threadIdx.x;
  o[0] = __any_sync(0xffffffff, v > 40);
  o[1] = __all_sync(0xffffffff, v > -100);
  o[2] = __ballot_sync(0xffffffff, v & 1);
  o[3] = __match_any_sync(0xffffffff, v & 3);
  int pred;
  o[4] = __match_all_sync(0xffffffff, v / 1000, &pred);
  o[5] = pred;
  if (v & 2) {
    o[6] = __activemask();
    o[7] = __ballot_sync(__activemask(), v & 4);
  } else {
    o[6] = 0;
    o[7] = 1;
  }
}
extern "C" __global__ void reduxes(const int* x, unsigned* out) {
  int v = x[threadIdx.x];
  unsigned u = (unsigned)v;
  unsigned* o = out + 6 * threadIdx.x;
  o[0] = __reduce_add_sync(0xffffffff, u);
  o[1] = (unsigned)__reduce_min_sync(0xffffffff, v);
  o[2] = (unsigned)__reduce_max_sync(0xffffffff, v);
  o[3] = __reduce_and_sync(0xffffffff, u | 0x10);
  o[4] = __reduce_or_sync(0xffffffff, u & 0xF0F0);
  o[5] = __reduce_xor_sync(0xffffffff, u);
}
