"""Elementwise work that follows a matrix product, done by the product's kernel as it
stores C: `y = x @ w + b` becomes one kernel, not a product that stores C and a
pointwise kernel that reads it back (matmul_wgmma's groups).

    linalg.generic {matmul maps} ins(%x, %w) outs(%c)              // the product
    linalg.generic {parallel} ins(%c, %b) outs(%c) { addf, yield }  // its epilogue

The epilogue is the op right after the product. Its loops are C's, all parallel; it
reads C only at the point it writes (identity maps) and writes one buffer with the
identity map: C itself, or another buffer when nothing but the two generics (and C's
fill) uses C, which then never reaches memory. Its other inputs are scalars or buffers
read at affine functions of the point (a bias b[j], a residual r[i, j]), none of them the
buffer it writes unless at the same point. The kernel rounds the accumulators to C's
element type (what the product alone stores), runs the epilogue's body on them and
stores what it yields.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mlir import ir

from .kernel_builder import (KernelScope, apply_map, dense_row_major, generic_operands,
                             indexing_maps, iterator_kinds)
from ....lowering.cir_ops import defining_op

__all__ = ["Epilogue", "find_epilogue", "EpilogueValues"]


@dataclass(frozen=True)
class Epilogue:
    generic: ir.Operation
    source: ir.Value  # the product's C, which the epilogue reads
    target: ir.Value  # the buffer it writes: C, or another one (C is then not stored)

    @property
    def stores_source(self) -> bool:
        return self.target == self.source


def find_epilogue(product: ir.Operation, generics: Sequence[ir.Operation],
                  fill: ir.Operation | None = None) -> Epilogue | None:
    """The generic of `generics` that is `product`'s epilogue (module docstring), or None."""
    [source] = generic_operands(product)[1]
    after = _next_op(product)
    if after is None or not any(after == g for g in generics) or \
            after.name != "linalg.generic":
        return None
    ins, outs = generic_operands(after)
    maps = indexing_maps(after)
    rank = ir.MemRefType(source.type).rank
    if len(outs) != 1 or maps[-1] != ir.AffineMap.get_identity(rank) or \
            any(kind != "parallel" for kind in iterator_kinds(after)):
        return None
    [target] = outs
    if ir.MemRefType(target.type).shape != ir.MemRefType(source.type).shape or \
            not dense_row_major(target.type) or target in generic_operands(product)[0]:
        return None
    identity = ir.AffineMap.get_identity(rank)
    reads_source = False
    for value, amap in zip(ins, maps):
        if value in (source, target):
            if amap != identity:
                return None  # another point of C, or of what it writes
            reads_source |= value == source
        elif isinstance(value.type, ir.ShapedType) and \
                not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
            return None  # a constant index: read through a view the plan made
    body = after.regions[0].blocks[0]
    if not reads_source or any(len(op.operation.regions) for op in body.operations):
        return None
    if target != source:
        if any(True for _ in body.arguments[len(ins)].uses):
            return None  # the body reads what the target held before
        allowed = [product, after] + ([fill] if fill is not None else [])
        if not all(any(use.owner == op for op in allowed) for use in source.uses) or \
                defining_op(source) is None or defining_op(source).name != "memref.alloc":
            return None  # C is read elsewhere (or is the caller's): it must be stored
    return Epilogue(after, source, target)


def _next_op(op: ir.Operation) -> ir.Operation | None:
    ops = [o.operation for o in op.operation.block.operations]
    at = ops.index(op.operation)
    return ops[at + 1] if at + 1 < len(ops) else None


class EpilogueValues:
    """The epilogue's body at points of C inside a kernel: `at(products, dims)` gives its
    yielded values where C's (rounded) value is `product` at loop indices `dims`. Loads of
    its other inputs are kept per index values, so a bias b[j] is read once per column
    (the kernel passes the same index values for the rows of one column)."""

    def __init__(self, epilogue: Epilogue, scope: KernelScope):
        self.epilogue, self.scope = epilogue, scope
        self.ins, _ = generic_operands(epilogue.generic)
        self.maps = indexing_maps(epilogue.generic)
        self.loaded: dict = {}

    def at(self, product: ir.Value, dims: Sequence[ir.Value]) -> ir.Value:
        values = []
        for number, (value, amap) in enumerate(zip(self.ins, self.maps)):
            if value in (self.epilogue.source, self.epilogue.target):
                values.append(product)
            elif not isinstance(value.type, ir.ShapedType):
                values.append(self.scope.value(value))
            else:
                indices = apply_map(amap, dims)
                key = (number, tuple(indices))
                if key not in self.loaded:
                    self.loaded[key] = self.scope.load(value, indices)
                values.append(self.loaded[key])
        out = product if self.epilogue.stores_source else None
        [result] = self.scope.clone_body(self.epilogue.generic, values + [out],
                                         lambda d: dims[d])
        return result
