"""A transposed copy made only for a matrix product, which the product's kernel reads
in place instead (matmul_wgmma's groups: TMA copies the source's tiles and wgmma reads
them MN-major, so the copy is never made).

    linalg.generic {parallel, (d0, d1) -> (d1, d0)} ins(%x) outs(%xt) { yield %in }
    ...
    linalg.generic {matmul maps} ins(%xt, %g) outs(%c)

is `xt = x^T; c = xt @ g`: a linear layer's weight gradient x^T @ grad, and the fused
loss's hidden^T @ grad_logits, which the library writes with the copy so that every
backend runs a plain row-major product. The copy is taken when it is a fresh buffer
that only the copy writes and only the product reads, the copy moves its input's values
unchanged (same element type) with the last two axes swapped and any leading ones in
order, its input is dense and row-major (TMA's rows), and nothing between the two uses
its input.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .kernel_builder import (dense_row_major, generic_operands, swaps_last_two_axes,
                             untouched_between)
from ....lowering.cir_ops import defining_op

__all__ = ["transposed_copy"]


def transposed_copy(product: ir.Operation, generics: Sequence[ir.Operation],
                    operand: int = 0) -> ir.Operation | None:
    """The generic of `generics` that makes the product's input `operand` as a
    transposed copy the product alone reads (module docstring), or None."""
    copy_of = generic_operands(product)[0][operand]
    alloc = defining_op(copy_of)
    if alloc is None or alloc.name != "memref.alloc":
        return None
    users = [use.owner for use in copy_of.uses]
    writers = [g for g in generics if any(g == user for user in users)
               and copy_of in generic_operands(g)[1]]
    if len(writers) != 1 or len(users) != 2 or \
            not any(product == user for user in users):
        return None
    [copy] = writers
    if not _copies_transposed(copy):
        return None
    [source] = generic_operands(copy)[0]
    if not dense_row_major(source.type):
        return None  # TMA reads rows of 16-byte multiples, and collapses batch axes
    return copy if untouched_between(copy, product, source) else None


def _copies_transposed(generic: ir.Operation) -> bool:
    """A transposed copy's nest whose body moves the input's value unchanged."""
    if not swaps_last_two_axes(generic):
        return False
    ins, outs = generic_operands(generic)
    if ir.MemRefType(ins[0].type).element_type != ir.MemRefType(outs[0].type).element_type:
        return False
    body = generic.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    return len(ops) == 1 and list(ops[0].operands) == [body.arguments[0]]
