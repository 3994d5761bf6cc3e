"""Turn decoded instructions into Python closures over NumPy, once per launch.

The instruction families register their builders on import (:func:`porter.emu.context.builder`);
this module imports them all and looks each instruction's builder up by its opcode.
"""

from __future__ import annotations

from porter.emu import (
    alu,
    carry,
    convert,
    cpasync,
    mem_ops,
    simd,
    sync,
    syscalls,
    tcgen05,
    tensorcore,
    tma,
    warp,
)
from porter.emu.context import Context, Exec, find_builder, unsupported
from porter.emu.decode import Op, Program
from porter.emu.state import Launch

FAMILIES = (alu, carry, convert, cpasync, mem_ops, simd, sync, syscalls, tcgen05, tensorcore, tma, warp)


def compile_op(op: Op, ctx: Context) -> Exec:
    if op.problem:
        return unsupported(op, op.problem)
    build = find_builder(op.parts)
    if build is None:
        return unsupported(op)
    try:
        return build(op, ctx)
    except (ValueError, KeyError, IndexError) as err:
        return unsupported(op, f"form ({err})")


def compile_program(program: Program, launch: Launch) -> list[Exec]:
    ctx = Context(program, launch)
    return [compile_op(op, ctx) for op in program.ops]
