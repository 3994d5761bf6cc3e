"""Bulk copies: cp.async.bulk (plain) and cp.async.bulk.tensor (TMA through a CUtensorMap).

Tile mode, both directions, per the async-tensor-core reference §5: the box is row-major in
shared memory; unswizzled rows are packed at boxDim[0]·elemsize bytes, swizzled rows take a
whole span (32/64/128 bytes, the padding left unwritten), and the swizzle of
:func:`porter.emu.smemdesc.swizzle` (base offset 0) moves each 16-byte chunk. Elements outside
the tensor read as zero (or 0x7FF7 for 16-bit floats with the NaN fill) and the mbarrier is
credited with the full box bytes. A box whose inner start is not 16-byte aligned traps, as it
does on the H200. A load completes (reads global memory, writes shared memory, credits the
mbarrier) when issued under the min-PC schedule, at the scheduler's next decision under the
others (:meth:`porter.emu.state.Launch.defer`); stores complete when issued.
"""

from __future__ import annotations

import numpy as np

from porter.emu.access import load, shared_target, store, writable
from porter.emu.args import SWIZZLE_SPANS, TensorMap
from porter.emu.context import Context, Exec, builder, trap
from porter.emu.decode import Op, TensorAddr
from porter.emu.memory import PARAM_WINDOW, RANK_SHIFT, SHARED_OFFSET_MASK, WINDOWS, Buffer
from porter.emu.smemdesc import swizzle
from porter.emu.state import Cta
from porter.emu.sync import complete_tx

# The emulator's own layout of the 128 bytes of a tensor map that a kernel builds itself
# (tensormap.replace in shared memory, tensormap.cp_fenceproxy to global memory). The hardware's
# layout is not documented; nothing but these instructions and the TMA reads it.
_FIELDS = {  # field -> (byte offset, bytes per entry)
    "global_address": (0, 8), "rank": (8, 4), "elemtype": (12, 4), "interleave_layout": (16, 4),
    "swizzle_mode": (20, 4), "fill_mode": (24, 4), "box_dim": (28, 4), "global_dim": (48, 4),
    "element_stride": (68, 4), "global_stride": (88, 8),
}
_ITEMSIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_SWIZZLES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}


def _field(raw: bytes, name: str, index: int = 0) -> int:
    off, size = _FIELDS[name]
    start = off + index * size
    return int.from_bytes(raw[start : start + size], "little")


def _tensormap(cta: Cta, op: Op, addr: int) -> tuple[TensorMap, Buffer, int]:
    """The tensor map at generic address ``addr``, the buffer it maps and the tensor's byte offset in it."""
    memory = cta.launch.memory
    found = cta.launch.tensormaps.get(addr - PARAM_WINDOW)
    if found is not None:
        tm, base = found
        return tm, next(b for b in memory.buffers if b.base == base), 0
    if addr >> 40 in WINDOWS:
        raise trap(cta, op, "unsupported", f"tensor map at 0x{addr:x}: neither a CUtensorMap kernel parameter nor "
                   "one built in global memory with tensormap.replace")
    if cta.current is None:
        raise RuntimeError("a tensor map is read only while an instruction runs (cta.current is set)")
    raw = bytes(load(cta, "global", np.array([addr], np.uint64), 128, cta.current[:1], op.line).reshape(-1))
    rank = _field(raw, "rank") + 1  # the field holds rank - 1, as tensormap.replace writes it
    code = _field(raw, "elemtype")
    if code not in _ITEMSIZE or _field(raw, "swizzle_mode") not in _SWIZZLES or _field(raw, "interleave_layout"):
        raise trap(cta, op, "descriptor", f"tensor map at 0x{addr:x}: element type {code}, swizzle "
                   f"{_field(raw, 'swizzle_mode')}, interleave {_field(raw, 'interleave_layout')} are not emulated")
    if any(_field(raw, "element_stride", i) not in (0, 1) for i in range(rank)):
        raise trap(cta, op, "unsupported", f"tensor map at 0x{addr:x}: element strides other than 1")
    itemsize = _ITEMSIZE[code]
    inner_first_dims = [_field(raw, "global_dim", i) for i in range(rank)]
    inner_first_box = [_field(raw, "box_dim", i) for i in range(rank)]
    strides = [_field(raw, "global_stride", i) for i in range(rank - 1)]
    tm = TensorMap(-1, itemsize, tuple(inner_first_dims[::-1]), tuple(strides[::-1]), tuple(inner_first_box[::-1]),
                   _SWIZZLES[_field(raw, "swizzle_mode")], oob_nan=bool(_field(raw, "fill_mode")))
    start = _field(raw, "global_address")
    buf = memory.holding(start)
    if buf is None or start < buf.base:
        raise trap(cta, op, "out-of-bounds", f"tensor map at 0x{addr:x} maps global address 0x{start:x}, in no buffer")
    return tm, buf, start - buf.base


def _rows(tm: TensorMap, coords: list[int]) -> list[np.ndarray]:
    """Per outer dimension (1, 2, ...), the source coordinate of every box row, dimension 1 fastest."""
    box = tm.box[::-1]
    outer = [np.arange(b) + c for b, c in zip(box[1:], coords[1:], strict=True)]
    if not outer:
        return []
    mesh = np.meshgrid(*outer[::-1], indexing="ij")  # outermost first, so dim 1 varies fastest
    return [m.reshape(-1) for m in mesh[::-1]]


def _dst_addresses(dst: int, rows: int, row_bytes: int, span: int) -> np.ndarray:
    """Shared offsets (rows, row_bytes) of the box, swizzled in 16-byte chunks."""
    pitch = span if span else row_bytes
    pre = dst + np.arange(rows, dtype=np.int64)[:, None] * pitch + np.arange(row_bytes, dtype=np.int64)[None, :]
    return swizzle(pre, span, 0)


def _box(tm: TensorMap, buf: Buffer, start: int, coords: list[int], cta: Cta, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """Byte indices (rows, box0, itemsize) into the buffer of every box element (clamped into the
    tensor), and which elements lie inside the tensor (the others read as the OOB fill)."""
    dims = tm.dims[::-1]
    box = tm.box[::-1]
    strides = (tm.itemsize, *tm.strides[::-1])
    e = tm.itemsize
    if (coords[0] * e) % 16:
        raise trap(cta, op, "trap", f"TMA box starts at inner coordinate {coords[0]} ({coords[0] * e} bytes), not "
                   "16-byte aligned: the GPU raises an illegal instruction")
    outer = _rows(tm, coords)
    nrows = outer[0].size if outer else 1
    row_ok = np.ones(nrows, bool)
    row_off = np.zeros(nrows, np.int64)
    for d, vals in enumerate(outer, start=1):
        row_ok &= (vals >= 0) & (vals < dims[d])
        row_off += np.clip(vals, 0, dims[d] - 1) * strides[d]
    x = np.arange(box[0], dtype=np.int64) + coords[0]
    col_ok = (x >= 0) & (x < dims[0])
    cols = start + row_off[:, None, None] + (np.clip(x, 0, dims[0] - 1) * e)[None, :, None] + np.arange(e)[None, None, :]
    if cols.size and int(cols.max()) >= buf.data.size:
        raise trap(cta, op, "out-of-bounds", f"tensor map reaches byte {int(cols.max())} of {buf.name}, past its "
                   f"{buf.data.size} bytes (dims or strides larger than the array)")
    ok = row_ok[:, None] & col_ok[None, :]
    return cols, ok


@builder("cp.async.bulk")
def _bulk(op: Op, ctx: Context) -> Exec:
    if "tensor" in op.parts:
        return _tensor(op, ctx)
    if op.parts[3] in ("commit_group", "wait_group"):
        return lambda cta, idx: None
    if op.parts[3] == "prefetch":
        return lambda cta, idx: None
    to_shared = op.parts[3].startswith("shared")
    dst = ctx.address(op.operands[0], "shared" if to_shared else "global")
    src = ctx.address(op.operands[1], "global" if to_shared else "shared")
    size = ctx.read(op.operands[2], "u32")
    mbar = ctx.address(op.operands[3], "shared") if to_shared and len(op.operands) > 3 else None
    line = op.line

    def run(cta: Cta, idx: np.ndarray) -> None:
        d, s = dst(cta, idx), src(cta, idx)
        n = np.broadcast_to(np.asarray(size(cta, idx)), idx.shape)
        for i in range(idx.size):
            k = int(n[i])
            one = idx[i : i + 1]
            if to_shared:
                bar = int(mbar(cta, one)[0]) if mbar is not None else None

                def land(k: int = k, src: int = int(s[i]), dst: int = int(d[i]), one: np.ndarray = one,
                         bar: int | None = bar) -> None:
                    if k:
                        data = load(cta, "global", np.array([src], np.uint64), k, one, line)
                        store(cta, "shared::cluster", np.array([dst], np.uint64), data, one, line)
                    if bar is not None:
                        complete_tx(cta, bar, k, op)

                cta.launch.defer(land)
            elif k:
                data = load(cta, "shared", np.array([int(s[i])], np.uint64), k, one, line)
                store(cta, "global", np.array([int(d[i])], np.uint64), data, one, line)

    return run


def _tensor(op: Op, ctx: Context) -> Exec:
    rank_part = next(p for p in op.parts if p.endswith("d") and p[:-1].isdigit())
    rank = int(rank_part[:-1])
    if "tile" not in op.parts and any(p in op.parts for p in ("im2col", "im2col_no_offs", "tile::gather4")):
        raise ValueError("im2col / gather TMA")
    load_dir = op.parts[op.parts.index(rank_part) + 1].startswith("shared")
    multicast = "multicast::cluster" in op.parts
    ops = op.operands
    tensor = ops[1] if load_dir else ops[0]
    if not isinstance(tensor, TensorAddr) or len(tensor.coords) != rank:
        raise ValueError("tensor operand")
    tmap = ctx.read(tensor.base, "u64")
    coords = [ctx.read(c, "s32") for c in tensor.coords]
    smem = ctx.address(ops[0] if load_dir else ops[1], "shared")
    mbar = ctx.address(ops[2], "shared") if load_dir else None
    mask = ctx.read(ops[3], "u16") if multicast and len(ops) > 3 else None

    def run(cta: Cta, idx: np.ndarray) -> None:
        taddr = np.broadcast_to(np.asarray(tmap(cta, idx)), idx.shape)
        cs = [np.broadcast_to(np.asarray(c(cta, idx)), idx.shape) for c in coords]
        sm = smem(cta, idx)
        for i in range(idx.size):
            tm, buf, start = _tensormap(cta, op, int(taddr[i]))
            if len(tm.box) != rank:
                raise trap(cta, op, "descriptor", f"a {rank}-d TMA through a {len(tm.box)}-d tensor map")
            span = SWIZZLE_SPANS[tm.swizzle]
            row_bytes = tm.box[-1] * tm.itemsize
            cols, ok = _box(tm, buf, start, [int(c[i]) for c in cs], cta, op)
            nrows = cols.shape[0]
            box_bytes = int(np.prod(tm.box)) * tm.itemsize
            if load_dir:
                targets = [cta]
                if mask is not None:
                    m = int(np.asarray(mask(cta, idx[i : i + 1])).reshape(-1)[0])
                    targets = [c for c in cta.cluster_ctas if m >> c.rank & 1]
                assert mbar is not None
                own = int(sm[i]) & SHARED_OFFSET_MASK
                bar = int(mbar(cta, idx[i : i + 1])[0]) & SHARED_OFFSET_MASK
                where = _dst_addresses(own, nrows, row_bytes, span).reshape(-1)

                def land(tm: TensorMap = tm, buf: Buffer = buf, cols: np.ndarray = cols, ok: np.ndarray = ok,
                         targets: list[Cta] = targets, where: np.ndarray = where, bar: int = bar,
                         nrows: int = nrows, box_bytes: int = box_bytes) -> None:
                    """The copy itself, when it completes: global read then, shared written, tx credited."""
                    fill = (np.frombuffer((0x7FF7).to_bytes(2, "little"), np.uint8) if tm.oob_nan and tm.itemsize == 2
                            else np.zeros(tm.itemsize, np.uint8))
                    data = np.where(ok[:, :, None], buf.data[cols], fill).reshape(-1)
                    for target in targets:
                        dest, offs = shared_target(cta, (where | (target.rank << RANK_SHIFT)).astype(np.int64), 1,
                                                   op.line, cluster=True)
                        dest.smem[offs] = data
                        dest.smem_written[offs] = True
                        dest.smem_swizzle[offs] = SWIZZLE_SPANS[tm.swizzle]
                        complete_tx(cta, bar | (target.rank << RANK_SHIFT), box_bytes, op)

                cta.launch.defer(land)
            else:
                own = int(sm[i]) & SHARED_OFFSET_MASK
                where = _dst_addresses(own, nrows, row_bytes, span)
                cta.check_written(cta, where.reshape(-1), 1, op.line)
                data = cta.smem[where].reshape(nrows, -1, tm.itemsize)
                writable(buf, cta, op.line).data[cols[ok]] = data[ok]

    return run


@builder("tensormap")
def _tensormap_edit(op: Op, ctx: Context) -> Exec:
    """``tensormap.replace.tile.FIELD.SPACE.b1024.bN [map], {index,} value`` and
    ``tensormap.cp_fenceproxy.global.shared::cta... [dst], [src], 128`` (see _FIELDS)."""
    if op.parts[1] == "cp_fenceproxy":
        dst = ctx.address(op.operands[0], "global")
        src = ctx.address(op.operands[1], "shared")

        def copy(cta: Cta, idx: np.ndarray) -> None:
            data = load(cta, "shared", src(cta, idx), 128, idx, op.line)
            store(cta, "global", dst(cta, idx), data, idx, op.line)

        return copy
    if op.parts[1] != "replace" or op.parts[2] != "tile":
        raise ValueError(f"tensormap.{'.'.join(op.parts[1:3])}")
    name = op.parts[3]
    if name not in _FIELDS:
        raise ValueError(f"tensormap field {name}")
    space = "shared" if any(p.startswith("shared") for p in op.parts) else "global"
    where = ctx.address(op.operands[0], space)
    indexed = len(op.operands) == 3
    index = ctx.read(op.operands[1], "u32") if indexed else None
    value = ctx.read(op.operands[-1], "b64" if op.parts[-1] == "b64" else "b32")
    off, size = _FIELDS[name]

    def replace(cta: Cta, idx: np.ndarray) -> None:
        at = where(cta, idx).astype(np.uint64) + np.uint64(off)
        if index is not None:
            at = at + np.broadcast_to(np.asarray(index(cta, idx)), idx.shape).astype(np.uint64) * np.uint64(size)
        v = np.broadcast_to(np.asarray(value(cta, idx)), idx.shape).astype(np.uint64)
        data = np.ascontiguousarray(v).view(np.uint8).reshape(idx.size, 8)[:, :size]
        store(cta, space, at, np.ascontiguousarray(data), idx, op.line)

    return replace
