"""What a cubin keeps between launches: its module-scope ``.global`` variables, read from the ELF.

A kernel's ``__device__`` variables live as long as its module is loaded, so a candidate can count
its launches, latch the first case's scalars or cache whole results there. The worker restores
every such variable to its load-time image before each launch; this module finds them: symbols
of type OBJECT in the ``.nv.global`` (zero-initialised) and ``.nv.global.init`` sections. Pure
parsing, no GPU: tested on cubins that ptxas writes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_SHT_SYMTAB = 2
_STT_OBJECT = 1


@dataclass(frozen=True)
class ModuleGlobal:
    name: str
    size: int  # bytes
    section: str  # ".nv.global" or ".nv.global.init"


def module_globals(cubin: bytes) -> tuple[ModuleGlobal, ...]:
    """The module-scope global variables of an ELF64 little-endian cubin; () for anything else."""
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        return ()
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(cubin) or shstrndx >= max(shnum, 1):
        return ()
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def text(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        end = cubin.find(b"\0", start)
        return cubin[start:end if end >= 0 else len(cubin)].decode("utf-8", "replace")

    names = [text(shstrndx, s[0]) for s in sections]
    found = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != _SHT_SYMTAB or entsize < 24 or link >= shnum:
            continue
        for at in range(offset, min(offset + size, len(cubin) - 23), entsize):
            st_name, st_info, _other, st_shndx, _value, st_size = struct.unpack_from("<IBBHQQ", cubin, at)
            if st_info & 0xF != _STT_OBJECT or not 0 < st_shndx < shnum:
                continue
            section = names[st_shndx]
            if section == ".nv.global" or section.startswith(".nv.global."):
                found.append(ModuleGlobal(text(link, st_name), int(st_size), section))
    return tuple(found)
