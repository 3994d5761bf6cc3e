// racecheck and named barriers: the probe behind examples/attention_fwd's merge buffer.
//
//   nvcc -arch=sm_90 -o /tmp/race tools/racecheck_probe.cu
//   compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/race 0   # WAR hazards reported
//   compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/race 1   # 0 hazards
//
// Warpgroup 0 writes, passes its named barrier (bar.sync 1, 128) and reads shared memory; then
// every thread passes __syncthreads, and warpgroup 1 overwrites what warpgroup 0 read. The
// __syncthreads orders every read before the overwrite, so there is no race. On the H200
// (compute-sanitizer of CUDA 13.0, driver 580.159.04, 2026-12-04) racecheck reports WAR hazards
// in mode 0, where warpgroup 1 never ran a named barrier of its own, and none in mode 1, where it
// runs one once.
#include <cstdio>
__global__ void probe(float* out, int mode) {
    __shared__ float buf[128];
    const int t = threadIdx.x, wg = t >> 7, w = t & 127;
    if (wg == 0) {
        buf[w] = float(w);
        asm volatile("bar.sync 1, 128;" ::: "memory");
        out[t] = buf[(w + 1) & 127];  // read group 0's data
    } else if (mode == 1) {
        asm volatile("bar.sync 2, 128;" ::: "memory");
    }
    __syncthreads();
    if (wg == 1) buf[w] = 0.0f;  // overwrite: ordered after every read above by the __syncthreads
    __syncthreads();
    if (wg == 0) out[t] += buf[w];
}
#include <cstdlib>
int main(int argc, char** argv) {
    float* out;
    cudaMalloc(&out, 256 * 4);
    const int mode = argc > 1 ? atoi(argv[1]) : 0;
    probe<<<1, 256>>>(out, mode);
    printf("mode %d: %s\n", mode, cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
