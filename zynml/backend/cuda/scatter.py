"""Scatters on the GPU: atomics. After bufferization, each call of a
`@__zynml_scatter_add_d<depth>_<n>(updates, indices, original)` declaration
(zynml/lowering/scatter_lowering.py; IREE has its own op, zynml/backend/iree/scatter.py)
becomes a `linalg.generic` over the updates with no output, whose region adds each update
into the original with `memref.atomic_rmw` (PTX `red.global.add`): one thread per update,
repeated indices add up in some order (float sums may differ in the last bits run to run).
The call's result is the original, updated in place:

    %r = call @__zynml_scatter_add_d1_0(%u, %k, %x) : (memref<13x5xf32>, memref<13x1xi64>,
             memref<7x5xf32>) -> memref<7x5xf32>
  becomes
    linalg.generic {iterator_types = ["parallel", "parallel"], zynml.scatter}
        ins(%u, %k : memref<13x5xf32>, memref<13x1xi64>) {
    ^bb0(%v: f32, %id: i64):
      %d = linalg.index 1 : index
      %row = arith.index_cast %id : i64 to index
      %old = memref.atomic_rmw addf %v, %x[%row, %d] : (f32, memref<7x5xf32>) -> f32
      linalg.yield
    }
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, memref

from ...lowering.cir_ops import ops_in
from ...lowering import SCATTER_PREFIX

__all__ = ["SCATTER_ATTR", "expand_scatter_calls"]

# Marks the generics of scatters: the pointwise strategy runs them, one thread a point.
SCATTER_ATTR = "zynml.scatter"


def expand_scatter_calls(module: ir.Operation) -> None:
    body = module.regions[0].blocks[0]
    declarations = [op.operation for op in body.operations
                    if op.operation.name == "func.func" and
                    ir.StringAttr(op.operation.attributes["sym_name"]).value.startswith(
                        SCATTER_PREFIX)]
    if not declarations:
        return
    for call in [op for op in ops_in(module, "func.call")
                 if ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(
                     SCATTER_PREFIX)]:
        depth = int(ir.FlatSymbolRefAttr(call.attributes["callee"]).value[
            len(SCATTER_PREFIX):].split("_")[0])
        updates, indices, original = call.operands
        with ir.InsertionPoint(call), call.location:
            _atomic_generic(updates, indices, original, depth)
        call.results[0].replace_all_uses_with(original)
        call.erase()
    for declaration in declarations:
        declaration.erase()


def _atomic_generic(updates: ir.Value, indices: ir.Value, original: ir.Value,
                    depth: int) -> None:
    rank = ir.MemRefType(updates.type).rank  # batch, then the slice
    dims = [ir.AffineDimExpr.get(d) for d in range(rank)]
    maps = [ir.AffineMap.get(rank, 0, dims)] + [
        ir.AffineMap.get(rank, 0, [dims[0], ir.AffineConstantExpr.get(c)])
        for c in range(depth)]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp([], [updates] + [indices] * depth, [],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([parallel] * rank))
    op.operation.attributes[SCATTER_ATTR] = ir.UnitAttr.get()
    element = ir.MemRefType(updates.type).element_type
    i64 = ir.MemRefType(indices.type).element_type
    block = op.regions[0].blocks.append(element, *[i64] * depth)
    kind = "addf" if isinstance(element, ir.FloatType) else "addi"
    with ir.InsertionPoint(block):
        rows = [arith.IndexCastOp(ir.IndexType.get(), k).result
                for k in list(block.arguments)[1:]]
        slice_ = [linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)).result
                  for d in range(1, rank)]
        memref.AtomicRMWOp(getattr(arith.AtomicRMWKind, kind),
                           block.arguments[0], original, rows + slice_)
        linalg.YieldOp([])
