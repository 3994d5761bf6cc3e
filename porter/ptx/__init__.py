"""PTX module model, parser and mechanical retarget."""

from porter.ptx.model import Directive, Entry, Instruction, Param, PtxModule
from porter.ptx.parser import parse_ptx, read_ptx
from porter.ptx.retarget import retarget, version_tuple

__all__ = ["Directive", "Entry", "Instruction", "Param", "PtxModule", "parse_ptx", "read_ptx", "retarget", "version_tuple"]
