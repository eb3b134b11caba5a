"""f32 products on TF32 tensor cores read B K-major (what a compilation with `tf32`
asks: CudaTarget.tf32). wgmma multiplies TF32 operands only K-major, and a user's
`C[i, j] += A[i, k] * B[k, j]` has B [K, N] (MN-major), so before the strategies choose:

    linalg.generic {maps A (i, k), B (k, j), C (i, j)} ins(%a, %b) outs(%c)
  becomes
    %bt = memref.alloc(..) : memref<NxKxf32>
    linalg.generic {parallel, (n, k) -> (k, n), (n, k) -> (n, k)} ins(%b) outs(%bt)
    linalg.generic {maps A (i, k), B (j, k), C (i, j)} ins(%a, %bt) outs(%c)

The transposed copy is a kernel of its own (a copy's traffic, about a tenth of a 4096^3
product's time). Where B already is a transposed copy made only for the product (a
library's `w^T`), nothing changes: matmul_wgmma reads the copy's source K-major and the
copy is never made. Only products that matmul_wgmma then takes are rewritten (as it
decides with B K-major): the others stay f32 products on the SIMT strategies.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, memref

from .strategies.kernel_builder import (filled_products, index_const,
                                        indexing_maps)
from .strategies.matmul_wgmma_params import TF32_ELEMENT, operand_layout, params_for
from .strategies.transposed_copies import transposed_copy

__all__ = ["read_b_k_major_for_tf32"]


def read_b_k_major_for_tf32(generics: list, target) -> None:
    """Rewrite each f32 product of `generics` (host generics, in order) that
    matmul_wgmma takes as TF32 to read B K-major (module docstring)."""
    if not (target.tf32 and target.has({"wgmma"})):
        return

    def takes(product, c_written):
        layout = operand_layout(product)
        return layout is not None and not layout[1] and \
            str(ir.MemRefType(product.operands[1].type).element_type) == TF32_ELEMENT and \
            transposed_copy(product, generics, operand=1) is None and \
            params_for(product, target, c_written=c_written, b_k_major=True) is not None

    filled = {id(group.product) for group in filled_products(
        generics, lambda product: takes(product, True))}
    for product in [p for p in generics if takes(p, id(p) in filled)]:
        with ir.InsertionPoint(product), product.location:
            _read_k_major(product, _transposed(product.operands[1]))


def _transposed(b: ir.Value) -> ir.Value:
    """A new buffer holding `b` ([.., K, N]) with its last two axes swapped, and the
    generic that fills it (inserted at the insertion point)."""
    source = ir.MemRefType(b.type)
    shape = list(source.shape)
    shape[-2:] = shape[-1], shape[-2]
    dynamic = ir.ShapedType.get_dynamic_size()
    rank = len(shape)
    # the run-time sizes of the result, in its order: b's axes with the last two swapped
    axes = list(range(rank - 2)) + [rank - 1, rank - 2]
    sizes = [memref.DimOp(b, index_const(axis)).result
             for axis, extent in zip(axes, shape) if extent == dynamic]
    result = memref.AllocOp(ir.MemRefType.get(shape, source.element_type), sizes, []).result
    dims = [ir.AffineDimExpr.get(d) for d in range(rank)]
    read = ir.AffineMap.get(rank, 0, dims[:-2] + [dims[-1], dims[-2]])
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    copy = linalg.GenericOp([], [b], [result], ir.ArrayAttr.get(
        [ir.AffineMapAttr.get(read), ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
        ir.ArrayAttr.get([parallel] * rank))
    block = copy.regions[0].blocks.append(source.element_type, source.element_type)
    with ir.InsertionPoint(block):
        linalg.YieldOp([block.arguments[0]])
    return result


def _read_k_major(product: ir.Operation, b_k_major: ir.Value) -> None:
    """The product reads B from `b_k_major` ([.., N, K]): its B map's last two results
    swapped."""
    maps = indexing_maps(product)
    results = list(maps[1].results)
    results[-2:] = results[-1], results[-2]
    maps[1] = ir.AffineMap.get(maps[1].n_dims, 0, results)
    product.operands[1] = b_k_major
    product.attributes["indexing_maps"] = ir.ArrayAttr.get(
        [ir.AffineMapAttr.get(m) for m in maps])
