"""pointwise's vector path for run-time extents (pointwise.py's docstring has the static
one): one kernel for every size, which takes 16-byte chunks when the size allows and
single points when it does not, the way Triton specializes on divisibility by 16 and
16-byte alignment, but checked per launch instead of compiled per case:

    if last extent % W == 0:          (the same for every thread: no divergence)
        chunk t of thread t, as the static vector path (alignment of each buffer, and
        strides and offsets the type leaves to run time, checked: else scalar accesses)
    else:
        points t, t + T, ..., t + (W - 1) T of the T = grid's threads, each in range

The grid, ceil(ceil(points / W) / block), is host arithmetic on the operands' sizes
(extents.py). Generics with reductions, or whose operands cannot be read in chunks along
the last loop, take pointwise's thread per point."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from . import Launch
from .extents import as_index, ceil_div, host_extents, kernel_extents, loop_extents, product
from .kernel_builder import (REDUCTION, KernelScope, delinearize, index_const, iterator_kinds,
                             new_kernel)
from .row_registers import aligned, only_if, vector_type

__all__ = ["aligned_at_run_time", "build_vectors"]


def build_vectors(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
                  signature, params, pointwise) -> Launch | None:
    """The kernel above, or None when the generic takes no chunks. `pointwise`: the
    pointwise module, whose pieces this kernel reuses (passed: it imports this one)."""
    _thread_index, _vector_chunks = pointwise._thread_index, pointwise._vector_chunks
    _vector_width, emit_point = pointwise._vector_width, pointwise.emit_point
    if REDUCTION in iterator_kinds(generic):
        return None
    width = _vector_width(generic, loop_extents(generic), params.vector_bytes,
                          typer=_chunk_type)
    if not width:
        return None
    block = params.vector_block
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        ranges = kernel_extents(generic, scope)
        total = as_index(product(ranges))
        linear = _thread_index(block)
        last = as_index(ranges[-1])
        divisible = arith.CmpIOp(arith.CmpIPredicate.eq,
                                 arith.RemUIOp(last, index_const(width)).result,
                                 index_const(0)).result
        branch = scf.IfOp(divisible, has_else=True)
        with ir.InsertionPoint(branch.then_block):
            chunks = arith.DivUIOp(total, index_const(width)).result
            with only_if(arith.CmpIOp(arith.CmpIPredicate.ult, linear, chunks).result):
                _vector_chunks(generic, scope, ranges, width, 1, None, linear, None, None,
                               typer=_chunk_type, is_aligned=aligned_at_run_time)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            threads = arith.MulIOp(gpu.grid_dim(gpu.Dimension.x), index_const(block)).result
            for lane in range(width):
                point = linear if not lane else arith.AddIOp(
                    linear, arith.MulIOp(threads, index_const(lane)).result).result
                with only_if(arith.CmpIOp(arith.CmpIPredicate.ult, point, total).result):
                    emit_point(generic, scope, delinearize(point, ranges), [], ranges)
            scf.YieldOp([])
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:
        grid = ceil_div(ceil_div(product(host_extents(generic)), width), block)
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1))


def _chunk_type(buffer: ir.Value, amap: ir.AffineMap, width: int):
    return vector_type(buffer, amap, width, run_time_strides=True)


def aligned_at_run_time(scope: KernelScope, buffer: ir.Value, vec: ir.Type) -> ir.Value:
    """The buffer's start is aligned to a chunk's bytes, and its strides and offset
    that only run time knows (but the last stride, 1) are multiples of a chunk's
    points."""
    ok = aligned(scope, buffer, vec)
    memref_type = ir.MemRefType(buffer.type)
    strides, offset = memref_type.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if dynamic not in list(strides[:-1]) + [offset]:
        return ok
    rank = memref_type.rank
    meta = memref.ExtractStridedMetadataOp(scope.value(buffer)).results
    width = ir.VectorType(vec).shape[0]
    for static, value in zip([offset] + list(strides[:-1]),
                             [meta[1]] + list(meta[2 + rank:2 + 2 * rank - 1])):
        if static == dynamic:
            rest = arith.RemUIOp(value, index_const(width)).result
            ok = arith.AndIOp(ok, arith.CmpIOp(arith.CmpIPredicate.eq, rest,
                                               index_const(0)).result).result
    return ok
