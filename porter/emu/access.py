"""Plain loads and stores in every state space, with bounds, alignment and first-write checks.

Loads and stores move bytes: ``(threads, width)`` uint8 arrays, gathered and scattered with
NumPy fancy indexing; the caller views them as its type. The address layout is in
:mod:`porter.emu.memory`.
"""

from __future__ import annotations

import numpy as np

from porter.emu.diagnostics import Diagnostic, EmuTrap
from porter.emu.memory import (
    CONST_WINDOW,
    LOCAL_WINDOW,
    PARAM_WINDOW,
    RANK_SHIFT,
    SHARED_OFFSET_MASK,
    SHARED_START,
    SHARED_WINDOW,
    SLOT_SHIFT,
    Buffer,
    GlobalMemory,
)
from porter.emu.state import Cta


def locate(gm: GlobalMemory, addrs: np.ndarray, width: int, cta: Cta, line: int) -> tuple[Buffer, np.ndarray]:
    """The one buffer all ``addrs`` fall in and the byte offsets; fatal diagnostic otherwise."""
    a = addrs.astype(np.uint64, copy=False)
    slots = a >> np.uint64(SLOT_SHIFT) if a.size else a
    first = int(slots[0]) if a.size else 0
    if a.size and (not (slots == first).all() or gm.in_slot(first) is None):
        bad = next((int(x) for x, s in zip(a, slots, strict=True) if gm.in_slot(int(s)) is None), None)
        if bad is not None:
            raise EmuTrap(Diagnostic("out-of-bounds", line, f"global access at 0x{bad:x} is in no buffer",
                                     cta.ctaid, True, {"address": bad}))
        raise _Mixed()
    buf = gm.in_slot(first) if a.size else gm.buffers[0]
    assert buf is not None
    offs = (a - np.uint64(buf.base)).astype(np.int64)  # before the start: negative
    if a.size and (int(offs.max()) + width > buf.data.size or int(offs.min()) < 0):
        i = int(np.argmax((offs + width > buf.data.size) | (offs < 0)))
        where = "before its start" if offs[i] < 0 else f"past its {buf.data.size} bytes"
        raise EmuTrap(Diagnostic(
            "out-of-bounds", line,
            f"global access of {width} bytes at 0x{int(a[i]):x} = {buf.name}{int(offs[i]):+d}, {where} "
            f"(thread {int(cta.current[i]) if cta.current is not None else '?'})",
            cta.ctaid, True, {"address": int(a[i]), "buffer": buf.name, "offset": int(offs[i])}))
    return buf, offs


def writable(buf: Buffer, cta: Cta, line: int) -> Buffer:
    """``buf``, which a store is about to write; fatal where it is a read-only input."""
    if buf.read_only:
        raise EmuTrap(Diagnostic("read-only", line, f"store to {buf.name}, an input the kernel may only read "
                                 f"(the GPU gate maps it read-only)", cta.ctaid, True, {"buffer": buf.name}))
    return buf


class _Mixed(Exception):
    """Addresses of one access fall in several buffers: the caller splits them."""


def _check_align(addrs: np.ndarray, width: int, cta: Cta, line: int) -> None:
    align = min(width, 16)
    if addrs.size and (addrs.astype(np.uint64) % np.uint64(align)).any():
        bad = int(addrs[np.argmax(addrs.astype(np.uint64) % np.uint64(align) != 0)])
        raise EmuTrap(Diagnostic("misaligned", line, f"access of {width} bytes at misaligned address 0x{bad:x}",
                                 cta.ctaid, True, {"address": bad}))


def _gather(data: np.ndarray, offs: np.ndarray, width: int) -> np.ndarray:
    return data[offs[:, None] + np.arange(width)]


def _scatter(data: np.ndarray, offs: np.ndarray, values: np.ndarray) -> None:
    data[offs[:, None] + np.arange(values.shape[1])] = values


def space_of(addrs: np.ndarray) -> np.ndarray:
    """The window number (bits [40,48)) of generic addresses."""
    return (addrs.astype(np.uint64) >> np.uint64(40)).astype(np.int64)


def load(cta: Cta, space: str, addrs: np.ndarray, width: int, idx: np.ndarray, line: int) -> np.ndarray:
    """Bytes ``(len(idx), width)`` read at ``addrs`` in ``space`` by threads ``idx``."""
    _check_align(addrs, width, cta, line)
    if space == "generic":
        return _generic(cta, addrs, width, idx, line, None)
    if space == "global":
        return _load_global(cta, addrs, width, line)
    if space in ("shared", "shared::cta", "shared::cluster"):
        return _load_shared(cta, addrs, width, line, cluster=space == "shared::cluster")
    if space == "local":
        return _gather_local(cta, addrs, width, idx, line)
    if space == "param":
        return _window_read(cta, cta.launch.param_bytes, addrs, PARAM_WINDOW, width, line, "param")
    if space == "const":
        return _window_read(cta, cta.launch.const_bytes, addrs, CONST_WINDOW, width, line, "const")
    raise EmuTrap(Diagnostic("unsupported", line, f"loads from .{space}", cta.ctaid, True))


def store(cta: Cta, space: str, addrs: np.ndarray, values: np.ndarray, idx: np.ndarray, line: int) -> None:
    """Write ``values`` ``(len(idx), width)`` bytes at ``addrs`` in ``space``; the last thread wins."""
    width = values.shape[1]
    _check_align(addrs, width, cta, line)
    cta.launch.version += 1  # a thread polling memory may now see something new
    if space == "generic":
        _generic(cta, addrs, width, idx, line, values)
    elif space == "global":
        _store_global(cta, addrs, values, line)
    elif space in ("shared", "shared::cta", "shared::cluster"):
        _store_shared(cta, addrs, values, line, cluster=space == "shared::cluster")
    elif space == "local":
        _scatter_local(cta, addrs, values, idx, line)
    else:
        raise EmuTrap(Diagnostic("unsupported", line, f"stores to .{space}", cta.ctaid, True))


def _load_global(cta: Cta, addrs: np.ndarray, width: int, line: int) -> np.ndarray:
    gm = cta.launch.memory
    try:
        buf, offs = locate(gm, addrs, width, cta, line)
        return _gather(buf.data, offs, width)
    except _Mixed:
        out = np.empty((addrs.size, width), np.uint8)
        slots = addrs.astype(np.uint64) >> np.uint64(SLOT_SHIFT)
        for s in np.unique(slots):
            sel = slots == s
            buf, offs = locate(gm, addrs[sel], width, cta, line)
            out[sel] = _gather(buf.data, offs, width)
        return out


def _store_global(cta: Cta, addrs: np.ndarray, values: np.ndarray, line: int) -> None:
    gm = cta.launch.memory
    width = values.shape[1]
    try:
        buf, offs = locate(gm, addrs, width, cta, line)
        _scatter(writable(buf, cta, line).data, offs, values)
    except _Mixed:
        slots = addrs.astype(np.uint64) >> np.uint64(SLOT_SHIFT)
        for s in np.unique(slots):
            sel = slots == s
            buf, offs = locate(gm, addrs[sel], width, cta, line)
            _scatter(writable(buf, cta, line).data, offs, values[sel])


def shared_target(cta: Cta, addrs: np.ndarray, width: int, line: int, *, cluster: bool) -> tuple[Cta, np.ndarray]:
    """The CTA whose shared memory ``addrs`` name (own CTA unless ``cluster``) and the byte offsets."""
    a = addrs.astype(np.int64)
    offs = a & SHARED_OFFSET_MASK
    target = cta
    if cluster and a.size:
        ranks = a >> RANK_SHIFT
        rank = int(ranks[0])
        if not (ranks == rank).all():
            raise EmuTrap(Diagnostic("unsupported", line, "one shared::cluster access spanning several CTAs",
                                     cta.ctaid, True))
        if rank >= len(cta.cluster_ctas):
            raise EmuTrap(Diagnostic("out-of-bounds", line, f"shared::cluster address 0x{int(a[0]):x} names CTA "
                                     f"rank {rank} of a cluster of {len(cta.cluster_ctas)}", cta.ctaid, True))
        target = cta.cluster_ctas[rank]
    if a.size and (int(offs.min()) < SHARED_START or int(offs.max()) + width > target.smem.size):
        i = int(np.argmax((offs < SHARED_START) | (offs + width > target.smem.size)))
        raise EmuTrap(Diagnostic(
            "out-of-bounds", line,
            f"shared access of {width} bytes at 0x{int(a[i]):x}, outside the CTA's shared memory "
            f"[0x{SHARED_START:x}, 0x{target.smem.size:x})", cta.ctaid, True, {"address": int(a[i])}))
    return target, offs


def _load_shared(cta: Cta, addrs: np.ndarray, width: int, line: int, *, cluster: bool) -> np.ndarray:
    target, offs = shared_target(cta, addrs, width, line, cluster=cluster)
    cta.check_written(target, offs, width, line)
    return _gather(target.smem, offs, width)


def _store_shared(cta: Cta, addrs: np.ndarray, values: np.ndarray, line: int, *, cluster: bool) -> None:
    target, offs = shared_target(cta, addrs, values.shape[1], line, cluster=cluster)
    _scatter(target.smem, offs, values)
    _scatter(target.smem_written, offs, np.ones(values.shape, bool))
    _scatter(target.smem_swizzle, offs, np.full(values.shape, -1, np.int16))


def _local_offsets(cta: Cta, addrs: np.ndarray, width: int, line: int) -> np.ndarray:
    offs = addrs.astype(np.int64) - LOCAL_WINDOW
    if addrs.size and (int(offs.min()) < 0 or int(offs.max()) + width > cta.local.shape[1]):
        raise EmuTrap(Diagnostic("out-of-bounds", line, f"local access at 0x{int(addrs[0]):x} outside the "
                                 f"{cta.local.shape[1]}-byte local frame", cta.ctaid, True))
    return offs


def _gather_local(cta: Cta, addrs: np.ndarray, width: int, idx: np.ndarray, line: int) -> np.ndarray:
    offs = _local_offsets(cta, addrs, width, line)
    return cta.local[idx[:, None], offs[:, None] + np.arange(width)]


def _scatter_local(cta: Cta, addrs: np.ndarray, values: np.ndarray, idx: np.ndarray, line: int) -> None:
    offs = _local_offsets(cta, addrs, values.shape[1], line)
    cta.local[idx[:, None], offs[:, None] + np.arange(values.shape[1])] = values


def _window_read(cta: Cta, data: np.ndarray, addrs: np.ndarray, window: int, width: int, line: int,
                 name: str) -> np.ndarray:
    offs = addrs.astype(np.int64) - window
    if addrs.size and (int(offs.min()) < 0 or int(offs.max()) + width > data.size):
        raise EmuTrap(Diagnostic("out-of-bounds", line, f".{name} access at 0x{int(addrs[0]):x} outside its "
                                 f"{data.size} bytes", cta.ctaid, True))
    return _gather(data, offs, width)


def _generic(cta: Cta, addrs: np.ndarray, width: int, idx: np.ndarray, line: int,
             values: np.ndarray | None) -> np.ndarray:
    """A generic access: each thread's address routed to its space by its window bits."""
    win = space_of(addrs)
    out = np.empty((addrs.size, width), np.uint8) if values is None else values
    for w in np.unique(win):
        sel = win == w
        a = addrs[sel].astype(np.uint64)
        if w == SHARED_WINDOW >> 40:
            a = a - np.uint64(SHARED_WINDOW)
            space = "shared::cluster"
        elif w == LOCAL_WINDOW >> 40:
            space = "local"
        elif w == PARAM_WINDOW >> 40:
            space = "param"
        elif w == CONST_WINDOW >> 40:
            space = "const"
        else:  # in a buffer's slot, or in none: locate() says which
            space = "global"
        if values is None:
            out[sel] = load(cta, space, a, width, idx[sel], line)
        else:
            store(cta, space, a, values[sel], idx[sel], line)
    return out
