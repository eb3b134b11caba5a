"""Pointwise: one thread per point of the generic's parallel loops.

The parallel loops are flattened row-major (the last loop fastest, so neighbouring threads
touch neighbouring addresses) and cut into blocks of `block` threads; a thread runs the
reduction loops, if any, sequentially. This handles every generic, so it is the fallback
strategy; the others are faster on the kernels they match.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, scf

from ..gpu_kernel_builder import (KernelScope, KernelSignature, apply_map, delinearize,
                                  generic_operands, index_const, indexing_maps, loop_dims,
                                  new_kernel)
from . import Launch

NAME = "pointwise"


@dataclass(frozen=True)
class Params:
    block: int = 256            # threads per block
    items: int = 4              # points per thread on large loop nests without reductions
    items_from: int = 1 << 20   # "large": at least this many points


def matches(generic: ir.Operation) -> bool:
    return True


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          params: Params = Params()) -> Launch:
    signature = KernelSignature.of(generic)
    ranges, parallel, reduction = loop_dims(generic)
    total = math.prod(ranges[d] for d in parallel)
    items = params.items if not reduction and total >= params.items_from else 1
    if items > 1:
        return _build_multi(generic, gpu_module, kernel_name, signature, ranges, parallel,
                            total, params.block, items)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [params.block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        linear = arith.AddIOp(
            arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(params.block)).result,
            gpu.thread_id(gpu.Dimension.x)).result
        in_range = arith.CmpIOp(arith.CmpIPredicate.ult, linear, index_const(total)).result
        guard = scf.IfOp(in_range)
        with ir.InsertionPoint(guard.then_block):
            ivs: list = [None] * len(ranges)
            for d, coord in zip(parallel, delinearize(linear, [ranges[d] for d in parallel])):
                ivs[d] = coord
            emit_point(generic, scope, ivs, reduction, ranges)
            scf.YieldOp([])
        gpu.ReturnOp([])
    grid = (total + params.block - 1) // params.block
    return Launch(kernel_name, signature.values, (grid, 1, 1), (params.block, 1, 1))


def _build_multi(generic, gpu_module, kernel_name, signature, ranges, parallel, total,
                 block, items) -> Launch:
    """`items` points per thread, `threads` apart (each load instruction of a warp stays
    coalesced): every input of every point is loaded first, then each point's body runs
    and stores, so a thread has `items` loads in flight instead of one."""
    threads = -(-total // items)
    grid = -(-threads // block)
    threads = grid * block
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    block_args = list(generic.regions[0].blocks[0].arguments)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        first = arith.AddIOp(arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                          index_const(block)).result,
                             gpu.thread_id(gpu.Dimension.x)).result
        points = []
        for k in range(items):
            linear = arith.AddIOp(first, index_const(k * threads)).result if k else first
            in_range = arith.CmpIOp(arith.CmpIPredicate.ult, linear, index_const(total)).result
            ivs: list = [None] * len(ranges)
            # out-of-range points read index 0 instead (loads stay unconditional)
            safe = arith.SelectOp(in_range, linear, index_const(0)).result
            for d, coord in zip(parallel, delinearize(safe, [ranges[d] for d in parallel])):
                ivs[d] = coord
            loaded = [scope.load(v, apply_map(m, ivs)) if isinstance(v.type, ir.MemRefType)
                      else scope.value(v) for v, m in zip(ins, maps)]
            outs_read = [scope.load(o, apply_map(m, ivs)) if _used(a) else _undef(a.type)
                         for o, m, a in zip(outs, maps[len(ins):], block_args[len(ins):])]
            points.append((in_range, ivs, loaded + outs_read))
        for in_range, ivs, values in points:
            results = scope.clone_body(generic, values, lambda d, ivs=ivs: ivs[d])
            guard = scf.IfOp(in_range)
            with ir.InsertionPoint(guard.then_block):
                for value, out, amap in zip(results, outs, maps[len(ins):]):
                    scope.store(value, out, apply_map(amap, ivs))
                scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1))


def emit_point(generic: ir.Operation, scope: KernelScope, ivs: list, reduction: list[int],
               ranges: list[int]) -> None:
    """Compute and store the generic's outputs at one point of its parallel loops
    (`ivs` set for the parallel dims), looping over the reduction dims in order."""
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    out_maps = maps[len(ins):]
    block_args = list(generic.regions[0].blocks[0].arguments)

    def read_ins(points) -> list[ir.Value]:
        values = []
        for value, amap in zip(ins, maps):
            if isinstance(value.type, ir.MemRefType):
                values.append(scope.load(value, apply_map(amap, points)))
            else:
                values.append(scope.value(value))
        return values

    if not reduction:
        out_values = [scope.load(buf, apply_map(amap, ivs)) if _used(arg) else _undef(arg.type)
                      for buf, amap, arg in zip(outs, out_maps, block_args[len(ins):])]
        results = scope.clone_body(generic, read_ins(ivs) + out_values, lambda d: ivs[d])
    else:
        # Outputs do not depend on reduction loops: read them once, carry them through.
        partial = [scope.load(buf, apply_map(amap, _zero_unset(ivs)))
                   for buf, amap in zip(outs, out_maps)]
        results = _reduction_loops(generic, scope, ivs, reduction, ranges, read_ins, partial)
    for value, buf, amap in zip(results, outs, out_maps):
        scope.store(value, buf, apply_map(amap, _zero_unset(ivs)))


def _zero_unset(ivs: list) -> list:
    """Loop variables with the reduction loops' (unused by output maps) set to 0."""
    return [iv if iv is not None else index_const(0) for iv in ivs]


def _reduction_loops(generic, scope, ivs, reduction, ranges, read_ins, carried):
    if not reduction:
        return scope.clone_body(generic, read_ins(ivs) + carried, lambda d: ivs[d])
    dim, rest = reduction[0], reduction[1:]
    loop = scf.ForOp(index_const(0), index_const(ranges[dim]), index_const(1), carried)
    with ir.InsertionPoint(loop.body):
        inner = list(ivs)
        inner[dim] = loop.induction_variable
        results = _reduction_loops(generic, scope, inner, rest, ranges, read_ins,
                                   list(loop.inner_iter_args))
        scf.YieldOp(results)
    return list(loop.results)


def _used(arg: ir.Value) -> bool:
    return any(True for _ in arg.uses)


def _undef(type_: ir.Type) -> ir.Value:
    """A stand-in for an output block argument the body never reads."""
    from mlir.dialects import ub
    return ub.PoisonOp(type_).result
