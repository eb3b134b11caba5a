"""pointwise's reductions of few outputs and long sums, split over a block's warps.

A thread per output leaves the GPU nearly idle where the outputs are few and each sums
many points in turn: the second step of a column sum (768 outputs, each of 256 group
sums) took 14 us on a handful of multiprocessors. Here a block of `split_warps` warps
takes 32 neighbouring outputs, a lane each (their loads coalesce where the outputs are
contiguous, as a column sum's are), the warps split the reduction's points (warp w takes
points w, w + warps, ...), and their partials meet in shared memory, where warp 0
combines each output's and stores it:

    lane l, warp w of block b:   output p = 32 b + l
      acc = identity;  for r = w, w + warps, ... < R:  acc = combine(acc, f(ins at p, r))
      partial[w][l] = acc;  barrier
      warp 0:  out[p] = combine(out[p] (or the fill's constant), combine over w of partial[w][l])

Taken (`takes`) for static extents, inputs that neighbouring lanes read at neighbouring
addresses (the innermost parallel loop indexes their last dimension: a column sum, not
a row sum, which is row_reduce's), bodies whose outputs are
combinable reductions (row_reduce's: add, mul, max, min, ...), at most `split_outputs`
outputs and reductions of at least `split_min_points` points. The order of a sum's additions differs from a
thread's sequential loop, the same on every run.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from . import Launch
from .extents import has_dynamic_extent
from .kernel_builder import (PARALLEL, REDUCTION, KernelScope, apply_map, delinearize,
                             fill_value, generic_operands, index_const, indexing_maps,
                             iterator_kinds, loop_dims, new_kernel)
from .row_reduce import (WARP, accumulator_types, combinable, combiners_of, fold_strided,
                         identities)

__all__ = ["takes", "build"]


def takes(generic: ir.Operation, params) -> bool:
    """Whether the split kernel takes `generic` (pointwise Params: split_outputs,
    split_min_points)."""
    kinds = iterator_kinds(generic)
    if REDUCTION not in kinds or PARALLEL not in kinds or params.split_warps < 2 or \
            has_dynamic_extent(generic) or not combinable(generic) or \
            not _lanes_coalesce(generic):
        return False
    ranges, parallel, reduction = loop_dims(generic)
    outputs = math.prod(ranges[d] for d in parallel)
    return outputs <= params.split_outputs and \
        math.prod(ranges[d] for d in reduction) >= params.split_min_points


def _lanes_coalesce(generic: ir.Operation) -> bool:
    """Whether neighbouring lanes (neighbouring points of the innermost parallel loop)
    read neighbouring elements: every input that this loop indexes indexes its last
    dimension by it alone, and one does (a column sum's, not a row sum's: that one is
    row_reduce's)."""
    innermost = [d for d, k in enumerate(iterator_kinds(generic)) if k != REDUCTION][-1]
    ins, _ = generic_operands(generic)
    uses = []
    for value, amap in zip(ins, indexing_maps(generic)):
        if not isinstance(value.type, ir.MemRefType) or not amap.results:
            continue
        if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
            return False  # an index computed from loops (a reshape's): not judged here
        dims = [ir.AffineDimExpr(e).position for e in amap.results]
        if innermost in dims[:-1]:
            return False
        uses.append(dims[-1] == innermost)
    return any(uses)


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str, signature,
          warps: int, initial: float | None = None) -> Launch:
    """The kernel (see the module's doc); `initial`: the constant the outputs start
    from (a fill taken with the reduction) instead of what they hold."""
    ranges, parallel, reduction = loop_dims(generic)
    outputs = math.prod(ranges[d] for d in parallel)
    length = math.prod(ranges[d] for d in reduction)
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    partials = _shared_partials(gpu_module, generic, f"{kernel_name}_partials", warps)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [WARP * warps])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        point = arith.AddIOp(arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                          index_const(WARP)).result, lane).result
        # a lane past the outputs reads the last one's points and stores nothing
        safe = arith.MinUIOp(point, index_const(outputs - 1)).result
        ivs: list = [None] * len(ranges)
        for d, coord in zip(parallel, delinearize(safe, [ranges[d] for d in parallel])):
            ivs[d] = coord
        accs = fold_strided(generic, scope, ivs, ranges, warp, index_const(length), warps,
                            identities(generic))
        buffers = [memref.get_global(type_, name) for type_, name in partials]
        slot = arith.AddIOp(arith.MulIOp(warp, index_const(WARP)).result, lane).result
        for acc, buffer in zip(accs, buffers):
            memref.StoreOp(acc, buffer, [slot])
        gpu.BarrierOp()
        first = arith.CmpIOp(arith.CmpIPredicate.eq, warp, index_const(0)).result
        inside = arith.CmpIOp(arith.CmpIPredicate.ult, point, index_const(outputs)).result
        writer = scf.IfOp(arith.AndIOp(first, inside).result)
        with ir.InsertionPoint(writer.then_block):
            at = [iv if iv is not None else index_const(0) for iv in ivs]
            for out, amap, buffer, combine in zip(outs, maps[len(ins):], buffers,
                                                  combiners_of(generic)):
                total = memref.LoadOp(buffer, [lane]).result
                for w in range(1, warps):
                    total = combine(total, memref.LoadOp(buffer, [arith.AddIOp(
                        lane, index_const(w * WARP)).result]).result)
                index = apply_map(amap, at)
                start = scope.load(out, index) if initial is None else \
                    fill_value(total.type, initial)
                scope.store(combine(start, total), out, index)
            scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (-(-outputs // WARP), 1, 1),
                  (WARP * warps, 1, 1))


def _shared_partials(gpu_module: ir.Operation, generic: ir.Operation, name: str,
                     warps: int) -> list[tuple[ir.Type, str]]:
    """A workgroup buffer of warps x 32 partials per output of `generic`."""
    buffers = []
    space = ir.Attribute.parse("#gpu.address_space<workgroup>")
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        for k, acc in enumerate(accumulator_types(generic)):
            shared_type = ir.MemRefType.get([warps * WARP], acc, memory_space=space)
            memref.GlobalOp(f"{name}{k}", ir.TypeAttr.get(shared_type),
                            sym_visibility="private")
            buffers.append((shared_type, f"{name}{k}"))
    return buffers
