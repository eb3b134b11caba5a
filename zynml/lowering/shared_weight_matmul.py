"""A matrix product whose left operand has leading dims the right one does not index,
as a projection of activations by one weight matrix:

    for b in 0..B, s in 0..S, h in 0..H:          C[b, s, h] = sum_i A[b, s, i] * W[i, h]

This is one `linalg.matmul` of A seen as a (B*S) x I matrix, not a `batch_matmul` (W has
no batch dim): the leading dims are collapsed, multiplied and expanded back, all three
views of the same data, so the matmul strategies see a plain M x N x K product.

    %a2 = tensor.collapse_shape %a [[0, 1], [2]] : tensor<BxSxIxf32> into tensor<(B*S)xIxf32>
    %c2 = tensor.collapse_shape %init [[0, 1], [2]]
    %p  = linalg.matmul ins(%a2, %w) outs(%c2)
    %c  = tensor.expand_shape %p [[0, 1], [2]] output_shape [B, S, H]
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

__all__ = ["shared_weight_maps", "shared_weight_matmul"]


def shared_weight_maps(n: int) -> tuple[ir.AffineMap, ir.AffineMap]:
    """(A's map, W's map) over `n` parallel dims and one reduction dim (the last):
    A[d0, .., d(n-2), k] and W[k, d(n-1)]."""
    d = [ir.AffineDimExpr.get(i) for i in range(n + 1)]
    return (ir.AffineMap.get(n + 1, 0, d[:n - 1] + [d[n]]),
            ir.AffineMap.get(n + 1, 0, [d[n], d[n - 1]]))


def shared_weight_matmul(a: ir.Value, w: ir.Value, init: ir.Value) -> ir.Value:
    """C = A @ W over A's leading dims, as collapse -> linalg.matmul -> expand (at the
    current insertion point and location)."""
    shape = list(ir.RankedTensorType(init.type).shape)
    lead = len(shape) - 1
    groups = [list(range(lead)), [lead]]
    a_flat = _collapse(a, groups)
    product = linalg.matmul(a_flat, w, outs=[_collapse(init, groups)])
    dynamic = [tensor.DimOp(init, arith.ConstantOp(ir.IndexType.get(), k).result).result
               for k, size in enumerate(shape) if ir.ShapedType.is_dynamic_size(size)]
    return tensor.ExpandShapeOp(init.type, product, _reassociation(groups), dynamic,
                                shape).result


def _collapse(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    source = ir.RankedTensorType(value.type)
    shape = list(source.shape)
    sizes = []
    for group in groups:
        extents = [shape[k] for k in group]
        if any(ir.ShapedType.is_dynamic_size(e) for e in extents):
            sizes.append(ir.ShapedType.get_dynamic_size())
        else:
            total = 1
            for e in extents:
                total *= e
            sizes.append(total)
    result = ir.RankedTensorType.get(sizes, source.element_type)
    return tensor.CollapseShapeOp(result, value, _reassociation(groups)).result


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in group])
                             for group in groups])
