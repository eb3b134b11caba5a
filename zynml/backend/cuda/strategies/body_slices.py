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

loop_index_clamps finds the front end's guards on an index that the loop's own range
already keeps in bounds (`min(max(%k, 0), K - 1)` where the loop of %k runs to K), which
a strategy evaluating the body at in-range coordinates may drop.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .kernel_builder import generic_operands, indexing_maps
from ....lowering.cir_ops import defining_op

__all__ = ["RUNNING", "backward_slice", "body_dims", "loop_index_clamps"]

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


def loop_index_clamps(generic: ir.Operation) -> dict:
    """The body's clamps of a loop's index to that loop's own extent, {the clamp's
    result: the loop}: `min(index, E - 1)` and `min(max(index, 0), E - 1)` where E is
    the loop's extent, a number or the run-time size that an operand of the generic
    has along the loop (the size it is allocated with, or a `memref.dim` of it). At
    coordinates within the loops' ranges such a clamp is its index."""
    extents = _loop_extents(generic)
    clamps = {}
    for op in generic.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "arith.minsi":
            continue
        index, bound = op.operands
        inner = defining_op(index)
        if inner is not None and inner.name == "arith.maxsi" and \
                _constant(inner.operands[1]) == 0:
            inner = defining_op(inner.operands[0])
        if inner is None or inner.name != "linalg.index":
            continue
        loop = ir.IntegerAttr(inner.attributes["dim"]).value
        if _one_less(bound, extents.get(loop, ([], set()))):
            clamps[op.results[0]] = loop
    return clamps


def _loop_extents(generic: ir.Operation) -> dict:
    """loop -> (its static extents, {(operand, position)} along which operands run it)."""
    ins, outs = generic_operands(generic)
    found: dict = {}
    for operand, amap in zip(ins + outs, indexing_maps(generic)):
        if not isinstance(operand.type, ir.MemRefType):
            continue
        shape = ir.MemRefType(operand.type).shape
        for position, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                numbers, places = found.setdefault(ir.AffineDimExpr(expr).position,
                                                   ([], set()))
                if shape[position] != ir.ShapedType.get_dynamic_size():
                    numbers.append(shape[position])
                places.add((operand, position))
    return found


def _one_less(bound: ir.Value, extent: tuple) -> bool:
    """Whether `bound` is the loop's extent less one."""
    numbers, places = extent
    if _constant(bound) is not None:
        return bool(numbers) and _constant(bound) == numbers[0] - 1
    op = defining_op(bound)
    if op is None or op.name != "arith.subi" or _constant(op.operands[1]) != 1:
        return False
    size = op.operands[0]
    return any(_is_size(size, operand, position) for operand, position in places)


def _is_size(value: ir.Value, operand: ir.Value, position: int) -> bool:
    """Whether `value` is `operand`'s run-time size along `position`."""
    op = defining_op(value)
    if op is not None and op.name == "memref.dim" and op.operands[0] == operand and \
            _constant(op.operands[1]) == position:
        return True
    made = defining_op(operand)
    if made is None or made.name not in ("memref.alloc", "memref.alloca"):
        return False
    shape = ir.MemRefType(operand.type).shape
    if shape[position] != ir.ShapedType.get_dynamic_size():
        return False
    dynamic = sum(1 for d in shape[:position] if d == ir.ShapedType.get_dynamic_size())
    return list(made.operands)[dynamic] == value


def _constant(value: ir.Value) -> int | None:
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or \
            not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return ir.IntegerAttr(op.attributes["value"]).value


def _expr_dims(exprs) -> set[int]:
    found: set[int] = set()
    for expr in exprs:
        if isinstance(expr, ir.AffineDimExpr):
            found.add(ir.AffineDimExpr(expr).position)
        elif isinstance(expr, ir.AffineBinaryExpr):
            binary = ir.AffineBinaryExpr(expr)
            found |= _expr_dims([binary.lhs, binary.rhs])
    return found
