"""Transposes through shared memory: out[.., r, c] = f(in[.., c, r]).

A generic that writes its output in order while reading its one input with the last two
axes swapped (the transposed copies before matrix products: x^T of a linear layer's
weight gradient, P^T and dS^T of the attention backward) makes `pointwise` either read
or write across rows: a warp touches 32 rows, each for 2 or 4 bytes. Here a block takes
a TILE x TILE tile of the output: its threads read the tile's rows of the input along
the input's contiguous axis into shared memory (a row of TILE + 1 elements, so that the
column reads that follow hit different banks), then write the output along its
contiguous axis, each value through the generic's body (a conversion, a scale). Tiles
at the edges check their bounds; leading axes are batch entries (blockIdx counts them
with the tiles). Run-time sizes too (a dynamic compile, TF32's transposed B: the kernel
reads the extents off its operands, the host sizes the grid from them), where pointwise
would read across rows: 3x the time for the transposed copy of a 4096 x 4096 f32 B
(0.122 against 0.041 ms, docs/performance.md, Session 40).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from .extents import as_index, ceil_div, host_extents, kernel_extents, loop_extents, product
from .kernel_builder import (KernelScope, KernelSignature, delinearize, generic_operands,
                             index_const, new_kernel, swaps_last_two_axes)
from . import Launch
from .tuning import problem_key, tuned

NAME = "transpose"
DYNAMIC = True  # run-time extents (module docstring)
_ELEMENTS = ("f32", "f16", "bf16", "i32", "i16")


@dataclass(frozen=True)
class Params:
    tile: int = 32  # output rows and columns per block
    rows_per_step: int = 8  # thread rows: each thread moves tile / rows_per_step values
    min_side: int = 16  # a smaller output side stays pointwise


def _swapped(generic: ir.Operation) -> bool:
    """One input read with the last two axes swapped, the output written in order, and
    a body that does not read the output's old value."""
    if not swaps_last_two_axes(generic):
        return False
    ins, outs = generic_operands(generic)
    if any(str(ir.MemRefType(v.type).element_type) not in _ELEMENTS for v in ins + outs):
        return False
    old = generic.regions[0].blocks[0].arguments[1]
    return not any(True for _ in old.uses)


def matches(generic: ir.Operation, target) -> bool:
    if not _swapped(generic):
        return False
    p = tuned(NAME, Params(), target, problem_key(generic.operands))
    known = [extent for extent in loop_extents(generic)[-2:] if extent is not None]
    return min(known, default=p.min_side) >= p.min_side and p.tile % p.rows_per_step == 0


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    p = tuned(NAME, Params(), target, problem_key(generic.operands))
    ins, outs = generic_operands(generic)
    element = ir.MemRefType(ins[0].type).element_type
    shared_type = ir.MemRefType.get([p.tile, p.tile + 1], element,
                                    memory_space=ir.Attribute.parse(
                                        "#gpu.address_space<workgroup>"))
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        memref.GlobalOp(f"{kernel_name}_tile", ir.TypeAttr.get(shared_type),
                        sym_visibility="private")
    signature = KernelSignature.of(generic)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [p.tile, p.rows_per_step])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        *batch, rows, cols = kernel_extents(generic, scope)  # numbers where static
        tiles_r, tiles_c = ceil_div(rows, p.tile), ceil_div(cols, p.tile)
        tile = memref.get_global(shared_type, f"{kernel_name}_tile")
        *entry, tile_r, tile_c = delinearize(gpu.block_id(gpu.Dimension.x),
                                             [*batch, tiles_r, tiles_c])
        r0, c0 = (arith.MulIOp(t, index_const(p.tile)).result for t in (tile_r, tile_c))
        tx, ty = gpu.thread_id(gpu.Dimension.x), gpu.thread_id(gpu.Dimension.y)
        steps = p.tile // p.rows_per_step

        def inside(r, c):
            return arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.ult, r, as_index(rows)).result,
                arith.CmpIOp(arith.CmpIPredicate.ult, c, as_index(cols)).result).result

        # the input's rows c0 + ty + 8 s, read along r (its contiguous axis)
        for s in range(steps):
            local_c = arith.AddIOp(ty, index_const(s * p.rows_per_step)).result
            r, c = arith.AddIOp(r0, tx).result, arith.AddIOp(c0, local_c).result
            guard = scf.IfOp(inside(r, c))
            with ir.InsertionPoint(guard.then_block):
                value = scope.load(ins[0], [*entry, c, r])
                memref.StoreOp(value, tile, [local_c, tx])
                scf.YieldOp([])
        gpu.BarrierOp()
        # the output's rows r0 + ty + 8 s, written along c
        for s in range(steps):
            local_r = arith.AddIOp(ty, index_const(s * p.rows_per_step)).result
            r, c = arith.AddIOp(r0, local_r).result, arith.AddIOp(c0, tx).result
            guard = scf.IfOp(inside(r, c))
            with ir.InsertionPoint(guard.then_block):
                value = memref.LoadOp(tile, [tx, local_r]).result
                point = [*entry, r, c]
                [result] = scope.clone_body(generic, [value, value], lambda d: point[d])
                scope.store(result, outs[0], point)
                scf.YieldOp([])
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:  # the grid: host arithmetic
        *batch, rows, cols = host_extents(generic)  # numbers where static: no ops
        blocks = product([*batch, ceil_div(rows, p.tile), ceil_div(cols, p.tile)])
    return Launch(kernel_name, signature.values, (blocks, 1, 1), (p.tile, p.rows_per_step, 1))
