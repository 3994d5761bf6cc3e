"""porter.emu with clusters: distributed shared memory (mapa, ld/st.shared::cluster),
barrier.cluster, and a multicast TMA that fills both CTAs' shared memory and barriers."""

from __future__ import annotations

import numpy as np

from porter.emu import TensorMap, emulate

PTX = """
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 src, .param .align 64 .b8 tmap[128])
.reqnctapercluster 2, 1, 1
{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b8 bar[8];
    .shared .align 4 .b8 word[4];
    .shared .align 1024 .b8 tile[512];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r2, 0;
    // each CTA: word = 100 + rank; its barrier expects 512 bytes
    mov.u32 %r3, word;
    add.s32 %r4, %r1, 100;
    @%p1 st.shared.u32 [%r3], %r4;
    mov.u32 %r5, bar;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r5], 512;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    // thread 0 of rank 0 loads one 16x16 f16 box into both CTAs
    setp.eq.u32 %p2, %r1, 0;
    and.pred %p3, %p1, %p2;
    mov.u32 %r6, tile;
    mov.b64 %rd3, tmap;
    mov.u16 %rs1, 3;
    @%p3 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r6], [%rd3, {16, 0}], [%r5], %rs1;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r5], 0;
    @!%p4 bra WAIT;
    // read the peer's word through distributed shared memory
    xor.b32 %r7, %r1, 1;
    mapa.shared::cluster.u32 %r8, %r3, %r7;
    ld.shared::cluster.u32 %r9, [%r8];
    // out[rank] = peer word; out[2 + rank * 256 + tid] = tile element tid (as u32)
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    @%p1 st.global.u32 [%rd5], %r9;
    shl.b32 %r10, %r2, 1;
    add.s32 %r11, %r6, %r10;
    ld.shared.u16 %rs2, [%r11];
    cvt.u32.u16 %r12, %rs2;
    mad.lo.s32 %r13, %r1, 256, %r2;
    add.s32 %r14, %r13, 2;
    mul.wide.u32 %rd6, %r14, 4;
    add.s64 %rd7, %rd1, %rd6;
    st.global.u32 [%rd7], %r12;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}
""".replace(".reg .b64 %rd<16>;", ".reg .b64 %rd<16>;\n    .reg .b16 %rs<4>;")


def test_cluster_dsmem_barrier_and_multicast_tma() -> None:
    src = np.arange(16 * 64, dtype=np.uint16).reshape(16, 64)
    out = np.zeros(2 + 2 * 256, np.uint32)
    tmap = TensorMap(1, 2, (16, 64), (128,), (16, 16), "none")
    for schedule in ("minpc", "round_robin", "random:3"):
        out[:] = 0
        res = emulate(PTX, "k", (2, 1, 1), 256, [out, src, tmap], schedule=schedule)  # .reqnctapercluster 2
        assert res.ok and not res.diagnostics, [str(d) for d in res.diagnostics]
        assert out[0] == 101 and out[1] == 100  # each CTA read the other's word
        box = src[0:16, 16:32].reshape(-1).astype(np.uint32)  # coordinates {x=16, y=0}: columns 16..31
        assert np.array_equal(out[2:258], box) and np.array_equal(out[258:], box)


def test_cluster_grid_must_be_whole_clusters() -> None:
    out = np.zeros(2 + 2 * 256, np.uint32)
    src = np.zeros((16, 64), np.uint16)
    try:
        emulate(PTX, "k", (3, 1, 1), 256, [out, src, TensorMap(1, 2, (16, 64), (128,), (16, 16))], cluster=(2, 1, 1))
    except ValueError as err:
        assert "whole number of clusters" in str(err)
    else:
        raise AssertionError("a grid of 3 CTAs in clusters of 2 was accepted")
