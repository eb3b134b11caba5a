"""Loop extents known only at run time (a `?` dimension of an operand).

A strategy that takes such a generic (its module has `DYNAMIC = True`; the others never
see one: linalg-to-gpu-kernels gives them static generics only) reads each extent as a
number when it is static and as an index value otherwise: `memref.dim` of a kernel
argument inside the kernel (`kernel_extents`), of the outer operand on the host
(`host_extents`, for grids, which the launch plan computes with "dim" and "scalar"
steps). `product`, `ceil_div` and `as_index` take either kind, folding numbers."""
from __future__ import annotations

import math
from typing import Sequence, Union

from mlir import ir
from mlir.dialects import arith, memref

from ....lowering.cir_ops import defining_op
from .kernel_builder import generic_operands, index_const, indexing_maps

Extent = Union[int, ir.Value]

__all__ = ["Extent", "extent_keys", "loop_extents", "has_dynamic_extent", "kernel_extents",
           "host_extents", "buffer_extents", "product", "ceil_div", "minus", "as_index",
           "is_static"]


def loop_extents(generic: ir.Operation) -> list[int | None]:
    """Each loop's trip count, None where only run time knows it."""
    return [None if source is None else source[2] for source in _sources(generic)]


def has_dynamic_extent(generic: ir.Operation) -> bool:
    """Whether an operand has a run-time size (then some loop has a run-time extent)."""
    return any(isinstance(v.type, ir.MemRefType) and not ir.MemRefType(v.type).has_static_shape
               for v in generic.operands)


def kernel_extents(generic: ir.Operation, scope) -> list[Extent]:
    """Inside a kernel (`scope`: its KernelScope): numbers, or memref.dim of the kernel
    argument that a loop indexes."""
    return [extent if extent is not None else
            memref.DimOp(scope.value(value), index_const(axis)).result
            for value, axis, extent in _sources(generic)]


def host_extents(generic: ir.Operation) -> list[Extent]:
    """On the host (insertion point before the launch): numbers, or memref.dim of the
    outer operand."""
    return [extent if extent is not None else
            memref.DimOp(value, index_const(axis)).result
            for value, axis, extent in _sources(generic)]


def buffer_extents(buffer: ir.Value) -> list[Extent]:
    """A buffer's extents at the insertion point (in a kernel or on the host): numbers
    where static, memref.dim where not."""
    return [n if not ir.ShapedType.is_dynamic_size(n) else
            memref.DimOp(buffer, index_const(axis)).result
            for axis, n in enumerate(ir.MemRefType(buffer.type).shape)]


def is_static(extent: Extent) -> bool:
    return isinstance(extent, int)


def as_index(extent: Extent) -> ir.Value:
    return extent if isinstance(extent, ir.Value) else index_const(extent)


def product(extents: Sequence[Extent]) -> Extent:
    numbers = math.prod(e for e in extents if isinstance(e, int))
    values = [e for e in extents if not isinstance(e, int)]
    if not values:
        return numbers
    result = values[0]
    for value in values[1:]:
        result = arith.MulIOp(result, value).result
    return arith.MulIOp(result, index_const(numbers)).result if numbers != 1 else result


def minus(a: Extent, b: int) -> Extent:
    """a - b: a number, or an index value (a run-time size)."""
    if isinstance(a, int):
        return a - b
    return arith.SubIOp(a, index_const(b)).result


def ceil_div(a: Extent, b: int) -> Extent:
    if isinstance(a, int):
        return -(-a // b)
    return arith.CeilDivSIOp(a, index_const(b)).result


def _sources(generic: ir.Operation) -> list[tuple]:
    """Per loop: (operand, axis, static extent or None) of the first operand dimension
    indexed by the loop alone; a static one wins."""
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    found: list = [None] * maps[0].n_dims
    for value, amap in zip(ins + outs, maps):
        if not isinstance(value.type, ir.MemRefType):
            continue
        shape = ir.MemRefType(value.type).shape
        for axis, expr in enumerate(amap.results):
            if not isinstance(expr, ir.AffineDimExpr):
                continue
            dim = ir.AffineDimExpr(expr).position
            static = None if ir.ShapedType.is_dynamic_size(shape[axis]) else shape[axis]
            if found[dim] is None or (found[dim][2] is None and static is not None):
                found[dim] = (value, axis, static)
    if any(f is None for f in found):
        raise ValueError("a loop of the generic indexes no operand dimension alone")
    return found


def extent_keys(generic: ir.Operation) -> list:
    """Each loop's extent as something to compare across generics: the number, or where
    the run-time size comes from (a function argument's dimension, an allocation's or a
    subview's size, followed back through memref.dim), so two loops of one size compare
    equal (the module is canonicalized and CSE'd before the pass)."""
    return [extent if extent is not None else _size_key(value, axis)
            for value, axis, extent in _sources(generic)]


def _size_key(value: ir.Value, axis: int):
    owner = defining_op(value)
    shape = ir.MemRefType(value.type).shape
    dynamic_before = sum(1 for s in shape[:axis] if ir.ShapedType.is_dynamic_size(s))
    if owner is not None and owner.name == "memref.alloc":
        return _normal(list(owner.operands)[dynamic_before])
    if owner is not None and owner.name == "memref.subview":
        sizes = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
        segments = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))
        if len(sizes) == len(shape):  # not rank-reducing: axis k is the source's k
            given = list(owner.operands)[1 + segments[1]:1 + segments[1] + segments[2]]
            return _normal(given[sum(1 for s in sizes[:axis]
                                     if ir.ShapedType.is_dynamic_size(s))])
    return (value, axis)


def _normal(size: ir.Value):
    """A size value, or (memref, axis) when it is a memref.dim of a constant axis."""
    owner = defining_op(size)
    if owner is not None and owner.name == "memref.dim":
        index = defining_op(owner.operands[1])
        if index is not None and index.name == "arith.constant":
            return _size_key(owner.operands[0], ir.IntegerAttr(index.attributes["value"]).value)
    return size


def fold_whole_subviews(ops) -> None:
    """Generics read a subview of run-time sizes that is all of its source (offsets 0,
    the source's sizes, steps 1; bufferization makes them of every slice, and
    canonicalize keeps those whose type differs) as the source itself: row_fused then
    sees the buffers a run writes, and kernels get the source's simpler layout."""
    for op in list(ops):
        if op.name != "memref.subview" or ir.MemRefType(op.results[0].type).has_static_shape:
            continue
        source = op.operands[0]
        shape = ir.MemRefType(source.type).shape
        if not _whole(op, source, shape):
            continue
        for use in list(op.results[0].uses):
            if use.owner.name == "linalg.generic":
                use.owner.operands[use.operand_number] = source
        if not any(True for _ in op.results[0].uses):
            op.erase()


def _whole(op: ir.Operation, source: ir.Value, shape) -> bool:
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if len(sizes) != len(shape) or any(offsets) or any(s != 1 for s in steps) or \
            ir.MemRefType(op.results[0].type).rank != len(shape):
        return False
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    given = iter(list(op.operands)[1 + segments[1]:1 + segments[1] + segments[2]])
    for axis, size in enumerate(sizes):
        if ir.ShapedType.is_dynamic_size(size):
            if ir.ShapedType.is_static_size(shape[axis]) or \
                    _normal(next(given)) != _size_key(source, axis):
                return False
        elif size != shape[axis]:
            return False
    return True
