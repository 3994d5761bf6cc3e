// porter-regen: arch=sm_90 ptxas=sm_90,sm_90a,sm_100a,sm_120 reject=sm_80
//
// bulk_scale_sm90: a plain sm_90 kernel (Hopper features that every later target keeps, no
// 'a'-only instruction), for `porter inspect` demos.
//
//   out[i] = in[i] * scale + %cluster_ctarank      for 0 <= i < n   (f32; n % 4 == 0)
//
// Launch: grid (round_up(ceil_div(n, 1024), 2), 1, 1), block 128 threads, clusters of 2 CTAs
// (__cluster_dims__ -> .reqnctapercluster 2, 1, 1, so a plain launch forms the clusters).
// Each CTA handles one 1024-float (4 KiB) tile: warp 0 picks one lane with elect.sync, which
// announces the byte count on an mbarrier (mbarrier.arrive.expect_tx) and starts a bulk copy
// (cp.async.bulk ... mbarrier::complete_tx::bytes) of the tile into shared memory; everyone
// waits on the mbarrier (try_wait.parity), then scales and stores. The mbarrier's
// initialisation is made visible to the async proxy with fence.proxy.async.

#define TILE_FLOATS 1024

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_nctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_id_x() {
    unsigned r;
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
    return r;
}

__device__ __forceinline__ bool elect_one() {
    unsigned is_elected;
    asm volatile(
        "{\n\t.reg .pred p;\n\t.reg .b32 leader;\n\t"
        "elect.sync leader|p, 0xffffffff;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}\n"
        : "=r"(is_elected));
    return is_elected != 0;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
bulk_scale_sm90(const float* __restrict__ in, float* __restrict__ out, float scale, int n) {
    __shared__ __align__(128) float tile[TILE_FLOATS];
    __shared__ __align__(8) unsigned long long bar;

    // The CTA's tile: clusterid.x * nctarank + ctarank is blockIdx.x for a 1-D grid.
    const int cta = static_cast<int>(cluster_id_x() * cluster_nctarank() + cluster_ctarank());
    const int base = cta * TILE_FLOATS;
    if (base >= n) {
        return;  // padding CTA of the last cluster; uniform across the block
    }
    const int count = min(TILE_FLOATS, n - base);
    const unsigned bytes = static_cast<unsigned>(count) * 4u;  // a multiple of 16 when n % 4 == 0
    const unsigned bar_addr = smem_addr(&bar);

    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_addr) : "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (threadIdx.x < 32 && elect_one()) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_addr), "r"(bytes)
                     : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                smem_addr(tile)),
            "l"(static_cast<unsigned long long>(__cvta_generic_to_global(in + base))), "r"(bytes), "r"(bar_addr)
            : "memory");
    }

    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}\n"
            : "=r"(done)
            : "r"(bar_addr)
            : "memory");
    }

    const float rank = static_cast<float>(cluster_ctarank());
    for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
        out[base + i] = tile[i] * scale + rank;
    }
}
