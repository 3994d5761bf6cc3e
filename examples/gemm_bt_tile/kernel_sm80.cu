// porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a
//
// gemm_bt_tile: C (M x N, f32) = A (M x K, bf16, row-major) . Bt (N x K, bf16, row-major)^T,
// the Ampere way: mma.sync.m16n8k16 with fragments loaded straight from global memory.
// M and N are multiples of 64, K a multiple of 16. Grid (N/64, M/64), 256 threads: eight warps
// share a 64x64 tile; warp w owns rows 16*(w%4)..+15 and columns 32*(w/4)..+31 (four n8 tiles).
// This is the sm_80 source of porter's scripted port to Hopper (sm_90a, wgmma).
typedef unsigned short bf16_bits;

__device__ __forceinline__ unsigned load_pair(const bf16_bits* p) {
    return *reinterpret_cast<const unsigned*>(p);  // two consecutive bf16, lower index in the low half
}

extern "C" __global__ void __launch_bounds__(256)
gemm_bt_tile(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ Bt, float* __restrict__ C,
             int M, int N, int K) {
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int g = lane >> 2;  // group: row within the fragment
    const int t = lane & 3;   // thread in group: column pair
    const int row0 = static_cast<int>(blockIdx.y) * 64 + 16 * (warp & 3);
    const int col0 = static_cast<int>(blockIdx.x) * 64 + 32 * (warp >> 2);
    float acc[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += 16) {
        const bf16_bits* a_lo = A + static_cast<long long>(row0 + g) * K + k0 + 2 * t;
        const bf16_bits* a_hi = A + static_cast<long long>(row0 + g + 8) * K + k0 + 2 * t;
        const unsigned a0 = load_pair(a_lo), a1 = load_pair(a_hi), a2 = load_pair(a_lo + 8), a3 = load_pair(a_hi + 8);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bf16_bits* b = Bt + static_cast<long long>(col0 + 8 * j + g) * K + k0 + 2 * t;
            const unsigned b0 = load_pair(b), b1 = load_pair(b + 8);
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int col = col0 + 8 * j + 2 * t;
        *reinterpret_cast<float2*>(C + static_cast<long long>(row0 + g) * N + col) = make_float2(acc[j][0], acc[j][1]);
        *reinterpret_cast<float2*>(C + static_cast<long long>(row0 + g + 8) * N + col) = make_float2(acc[j][2], acc[j][3]);
    }
}
