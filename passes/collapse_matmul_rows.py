"""collapse-matmul-rows: a matrix product whose rows are several loops (a projection of
activations by one weight matrix) becomes a plain matrix product of row-major views.

cir-to-linalg emits `C[b, s, h] = sum_i A[b, s, i] * W[i, h]` as collapse_shape ->
linalg.matmul -> expand_shape (zynml/lowering/shared_weight_matmul.py), but
linalg-fuse-elementwise-ops folds the reshapes back into the generic, whose rows are then
two loops: the matmul strategies, which take one row loop, would leave it pointwise.
After bufferization the rows collapse again, as views (no copy; the launch plan's
"view"), when A and C are row-major:

    linalg.generic {indexing_maps = [(b, s, h, i) -> (b, s, i), (b, s, h, i) -> (i, h),
                                     (b, s, h, i) -> (b, s, h)],
                    iterator_types = [parallel, parallel, parallel, reduction]}
        ins(%a, %w : memref<2x3x8xf32>, memref<8x24xf32>) outs(%c : memref<2x3x24xf32>)
  becomes
    %a2 = memref.collapse_shape %a [[0, 1], [2]] : memref<2x3x8xf32> into memref<6x8xf32>
    %c2 = memref.collapse_shape %c [[0, 1], [2]] : memref<2x3x24xf32> into memref<6x24xf32>
    linalg.generic {indexing_maps = [(m, h, i) -> (m, i), (m, h, i) -> (i, h),
                                     (m, h, i) -> (m, h)],
                    iterator_types = [parallel, parallel, reduction]}
        ins(%a2, %w : ...) outs(%c2 : ...)

The body is kept as it is (it sees elements, not indices): generics whose body reads
`linalg.index`, or whose operands are strided views, are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import memref

from ..lowering.cir_ops import ops_in

NAME = "collapse-matmul-rows"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for generic in [op for op in ops_in(module) if op.name == "linalg.generic"]:
        rows = _row_loops(generic)
        if rows:
            _collapse(generic, rows)


def _row_loops(generic: ir.Operation) -> int:
    """How many leading loops are rows of C = A @ W (A[r.., k], W[k, j], C[r.., j] on
    row-major memrefs); 0 when the generic is not that product with 2 or more."""
    sizes = list(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"]))
    operands = list(generic.operands)
    if sizes != [2, 1] or not all(isinstance(v.type, ir.MemRefType) for v in operands):
        return 0
    if any(op.name == "linalg.index" for op in ops_in(generic)):
        return 0
    kinds = ["reduction" in str(a) for a in ir.ArrayAttr(generic.attributes["iterator_types"])]
    n = len(kinds) - 1  # the loops: rows 0..n-2, column n-1, reduction n
    if n < 3 or kinds != [False] * n + [True]:
        return 0
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    d = [ir.AffineDimExpr.get(i) for i in range(n + 1)]
    expected = [d[:n - 1] + [d[n]], [d[n], d[n - 1]], d[:n]]
    if [list(m.results) for m in maps] != expected:
        return 0
    if not (_row_major(operands[0].type) and _row_major(operands[2].type)):
        return 0
    return n - 1


def _collapse(generic: ir.Operation, rows: int) -> None:
    a, w, c = generic.operands
    with ir.InsertionPoint(generic), generic.location:
        generic.operands[0] = _collapsed(a, rows)
        generic.operands[2] = _collapsed(c, rows)
    m, j, k = (ir.AffineDimExpr.get(i) for i in range(3))
    generic.attributes["indexing_maps"] = ir.ArrayAttr.get(
        [ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, e)) for e in ([m, k], [k, j], [m, j])])
    kinds = list(ir.ArrayAttr(generic.attributes["iterator_types"]))
    generic.attributes["iterator_types"] = ir.ArrayAttr.get(kinds[rows - 1:])


def _collapsed(value: ir.Value, rows: int) -> ir.Value:
    """`value` (row-major, rank rows + 1) viewed as a matrix of its rows."""
    source = ir.MemRefType(value.type)
    shape = list(source.shape)
    lead = shape[:rows]
    dynamic = ir.ShapedType.get_dynamic_size()
    total = dynamic if dynamic in lead else _product(lead)
    result = ir.MemRefType.get([total, shape[rows]], source.element_type,
                               memory_space=source.memory_space)
    i64 = ir.IntegerType.get_signless(64)
    groups = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, r) for r in group])
                               for group in (range(rows), [rows])])
    return memref.CollapseShapeOp(result, value, groups).result


def _row_major(type_: ir.Type) -> bool:
    memref_type = ir.MemRefType(type_)
    layout = memref_type.layout
    return isinstance(layout, ir.AffineMapAttr) and \
        ir.AffineMapAttr(layout).value == ir.AffineMap.get_identity(memref_type.rank)


def _product(sizes: list[int]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total
