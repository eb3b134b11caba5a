"""Backward slices of a linalg.generic's body: which loops each body value depends on,
and which ops compute a value.

GPU strategies that evaluate parts of a body at points of their own use these, e.g.
implicit_gemm, which stages `a` and `b` of a body `out + a * b` as the operands of a
matrix product, each at coordinates of the loops it depends on:

    %i = linalg.index 2 : index
    %k = linalg.index 4 : index
    %j = arith.addi %i, %k : index
    %x = memref.load %in[%j] : memref<9xf32>
  body_dims: %x depends on loops {2, 4}; backward_slice([%x]): these four ops
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .kernel_builder import generic_operands, indexing_maps

__all__ = ["RUNNING", "backward_slice", "body_dims"]

RUNNING = -1  # in body_dims: the value depends on an output block argument


def body_dims(generic: ir.Operation) -> dict | None:
    """The loops each value of the generic's body depends on: {value: frozenset of dims},
    through `linalg.index` and the input block arguments' maps; RUNNING marks values
    that depend on an output (the running value). None if an op of the body has regions."""
    block = generic.regions[0].blocks[0]
    ins, _ = generic_operands(generic)
    maps = indexing_maps(generic)
    dims: dict = {}
    for i, arg in enumerate(block.arguments):
        dims[arg] = frozenset(_expr_dims(maps[i].results)) if i < len(ins) \
            else frozenset([RUNNING])
    for op in block.operations:
        op = op.operation
        if len(op.regions):
            return None
        here = frozenset().union(*(dims.get(v, frozenset()) for v in op.operands))
        if op.name == "linalg.index":
            here = frozenset([ir.IntegerAttr(op.attributes["dim"]).value])
        for result in op.results:
            dims[result] = here
    return dims


def backward_slice(generic: ir.Operation, roots: Sequence[ir.Value]
                   ) -> tuple[list[ir.Operation], list[ir.Value]]:
    """(the body ops that compute `roots`, in body order; the block arguments they read)."""
    block = generic.regions[0].blocks[0]
    wanted = set(roots)
    ops = []
    for op in reversed(list(block.operations)):
        op = op.operation
        if any(r in wanted for r in op.results):
            ops.append(op)
            wanted.update(op.operands)
    args = [a for a in block.arguments if a in wanted]
    return list(reversed(ops)), args


def _expr_dims(exprs) -> set[int]:
    found: set[int] = set()
    for expr in exprs:
        if isinstance(expr, ir.AffineDimExpr):
            found.add(ir.AffineDimExpr(expr).position)
        elif isinstance(expr, ir.AffineBinaryExpr):
            binary = ir.AffineBinaryExpr(expr)
            found |= _expr_dims([binary.lhs, binary.rhs])
    return found
