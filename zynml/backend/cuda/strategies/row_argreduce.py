"""Row argreduce: `reduce(argmax)` / `reduce(argmin)` over rows, a block per row.

A greedy decoder's next token is the argmax of a [rows, vocab] row; a thread per row
(pointwise) walks 32000 values alone. Here the block's threads each fold a strided
slice of the row, then the (value, index) pairs meet as row_reduce's sums do: shuffles
within warps, one pair per warp through shared memory, warp 0's shuffles, thread 0
stores both outputs.

The generic is cirgen's form of `yield (x[r, c], c)`: two outputs (the value and its i64
index, starting from their fills), and a body that picks the new pair or keeps the
accumulated one (`select(better, x, value)`, `select(better, c, index)`, with ties and
NaN going to the lower index). That pick is a join: any two pairs combine through the
same body (the other pair as the "new" value, its index as the point's), in any order
and any number of times, so every thread may start from the fills. Values cross the
shuffles as 32 bits (f16 and bf16 widened exactly to f32, the index as i32: a row is
shorter than 2^31); f64 and 64-bit integer values stay pointwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from ....lowering.cir_ops import defining_op
from .kernel_builder import (REDUCTION, KernelScope, KernelSignature, apply_map,
                             delinearize, generic_operands, index_const, indexing_maps,
                             iterator_kinds, loop_ranges, new_kernel)
from . import Launch
from .row_reduce import WARP, _read_warp_partials, _store_warp_partials, block_size
from .tuning import problem_key, tuned

NAME = "row_argreduce"


@dataclass(frozen=True)
class Params:
    max_block: int = 256  # threads per block (a power of two, multiple of 32)
    min_row: int = 32     # shorter rows stay pointwise (a thread each)


def _form(generic: ir.Operation) -> int | None:
    """The reduction loop when `generic` is an arg-reduction this strategy builds (one
    input read along that loop, the value and i64 index outputs, the picking body),
    else None."""
    ins, outs = generic_operands(generic)
    kinds = iterator_kinds(generic)
    if len(ins) != 1 or len(outs) != 2 or kinds.count(REDUCTION) != 1 or \
            not all(isinstance(v.type, ir.MemRefType) for v in ins + outs):
        return None
    value_type = ir.MemRefType(outs[0].type).element_type
    if str(value_type) not in ("f32", "f16", "bf16", "i32", "i16", "i8") or \
            str(ir.MemRefType(outs[1].type).element_type) != "i64":
        return None
    reduction = kinds.index(REDUCTION)
    in_map = indexing_maps(generic)[0]
    last = in_map.results[-1] if in_map.results else None
    if not isinstance(last, ir.AffineDimExpr) or last.position != reduction:
        return None  # the row must be contiguous in the input
    block = generic.regions[0].blocks[0]
    x, value, index = block.arguments
    yielded = list(list(block.operations)[-1].operation.operands)
    picks = [defining_op(v) for v in yielded]
    if any(p is None or p.name != "arith.select" for p in picks):
        return None
    (cond_v, new_v, old_v), (cond_i, new_i, old_i) = (list(p.operands) for p in picks)
    cast = defining_op(new_i)
    position = defining_op(cast.operands[0]) if cast is not None and \
        cast.name == "arith.index_cast" else None
    if cond_v != cond_i or new_v != x or old_v != value or old_i != index or \
            position is None or position.name != "linalg.index" or \
            ir.IntegerAttr(position.attributes["dim"]).value != reduction:
        return None
    return reduction


def matches(generic: ir.Operation, target) -> bool:
    reduction = _form(generic)
    if reduction is None:
        return False
    params = tuned(NAME, Params(), target, problem_key(generic.operands))
    return loop_ranges(generic)[reduction] >= params.min_row


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    params = tuned(NAME, Params(), target, problem_key(generic.operands))
    reduction = _form(generic)
    ranges = loop_ranges(generic)
    row_length = ranges[reduction]
    parallel = [d for d in range(len(ranges)) if d != reduction]
    rows = math.prod(ranges[d] for d in parallel)
    block = block_size(row_length, params)
    ins, outs = generic_operands(generic)
    value_type = ir.MemRefType(outs[0].type).element_type
    wide = _wide(value_type)
    i32 = ir.IntegerType.get_signless(32)
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    buffer_types = [ir.MemRefType.get([block // WARP], t, memory_space=shared)
                    for t in (wide, i32)]
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        for k, type_ in enumerate(buffer_types):
            memref.GlobalOp(f"{kernel_name}_partials{k}", ir.TypeAttr.get(type_),
                            sym_visibility="private")
    signature = KernelSignature.of(generic)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        maps = indexing_maps(generic)
        point: list = [index_const(0)] * len(ranges)
        for d, coord in zip(parallel, delinearize(gpu.block_id(gpu.Dimension.x),
                                                  [ranges[d] for d in parallel])):
            point[d] = coord
        out_index = [apply_map(amap, point) for amap in maps[1:]]
        start = [scope.load(out, where) for out, where in zip(outs, out_index)]
        tid = gpu.thread_id(gpu.Dimension.x)

        def pick(acc, value, index):
            """The body: (value, index: an index) against the accumulated pair."""
            return scope.clone_body(generic, [value] + list(acc),
                                    lambda d: index if d == reduction else point[d])

        loop = scf.ForOp(tid, index_const(row_length), index_const(block), start)
        with ir.InsertionPoint(loop.body):
            here = list(point)
            here[reduction] = loop.induction_variable
            x = scope.load(ins[0], apply_map(maps[0], here))
            scf.YieldOp(pick(list(loop.inner_iter_args), x, loop.induction_variable))
        acc = _warp_pick(list(loop.results), pick, value_type)
        narrow = [_to_wide(acc[0]), arith.TruncIOp(i32, acc[1]).result]
        buffers = [memref.get_global(t, f"{kernel_name}_partials{k}")
                   for k, t in enumerate(buffer_types)]
        lane, warp = _store_warp_partials(narrow, buffers, tid)
        first_warp = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, warp,
                                           index_const(0)).result)
        with ir.InsertionPoint(first_warp.then_block):
            wide_start = [_to_wide(start[0]), arith.TruncIOp(i32, start[1]).result]
            parts = _read_warp_partials(buffers, lane, block // WARP, wide_start)
            total = _warp_pick([_from_wide(parts[0], value_type),
                                arith.ExtSIOp(start[1].type, parts[1]).result],
                               pick, value_type)
            writer = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid,
                                           index_const(0)).result)
            with ir.InsertionPoint(writer.then_block):
                for value, out, where in zip(total, outs, out_index):
                    scope.store(value, out, where)
                scf.YieldOp([])
            scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (rows, 1, 1), (block, 1, 1))


def _warp_pick(acc: list, pick, value_type: ir.Type) -> list:
    """Butterfly over the 32 lanes: every lane ends with the warp's pair."""
    i32 = ir.IntegerType.get_signless(32)
    width = arith.ConstantOp(i32, WARP).result
    offset = WARP // 2
    while offset:
        shift = arith.ConstantOp(i32, offset).result
        value = gpu.shuffle(_to_wide(acc[0]), shift, width, gpu.ShuffleMode.XOR)[0]
        index = gpu.shuffle(arith.TruncIOp(i32, acc[1]).result, shift, width,
                            gpu.ShuffleMode.XOR)[0]
        acc = pick(acc, _from_wide(value, value_type),
                   arith.IndexCastOp(ir.IndexType.get(), index).result)
        offset //= 2
    return acc


def _wide(value_type: ir.Type) -> ir.Type:
    """The 32-bit type a value crosses a shuffle (and shared memory) as."""
    if isinstance(value_type, ir.IntegerType):
        return ir.IntegerType.get_signless(32)
    return ir.F32Type.get()


def _to_wide(value: ir.Value) -> ir.Value:
    wide = _wide(value.type)
    if value.type == wide:
        return value
    if isinstance(value.type, ir.IntegerType):
        return arith.ExtSIOp(wide, value).result
    return arith.ExtFOp(wide, value).result


def _from_wide(value: ir.Value, value_type: ir.Type) -> ir.Value:
    if value.type == value_type:
        return value
    if isinstance(value_type, ir.IntegerType):
        return arith.TruncIOp(value_type, value).result
    return arith.TruncFOp(value_type, value).result
