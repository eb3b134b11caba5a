"""The extents of a cir body's loops and tensors as keys that compare, static or not.

A raising pass checks that loops cover tensors exactly (cir-raise-attention: the key loop
runs over all of K's keys). With static shapes an extent is a number. With run-time
sizes it is a size argument of the body (`for j in 0..seq_len`), a `tensor.dim` of one of
its inputs, or one of the output's extents; two of them are the same extent when they
read the same dimension of main's inputs, or dimensions the call checks equal
(`cir.equal_dims`: `Q[b, h, j]` and `K[b, h, j]` under one loop bind Q's and K's axis 2
to one size). `BodyExtents` turns each into a key:

    17                          a static extent
    ("input", n, axis)          main's input n along `axis` (the smallest of its group of
                                equal dims)
    ("value", v, axis)          another tensor of main along `axis` (axis -1: v is an
                                index value of main, the extent itself)

Equal keys are equal extents; different keys may still be equal at run time (nothing
proves it), so a pass that needs equality leaves the body alone.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir

from .cir_ops import constant_int, defining_op, i64_array
from .cir_terms import Terms
from .linalg_emit import equal_dims

__all__ = ["BodyExtents", "is_size_expression"]


class BodyExtents:
    def __init__(self, compute: ir.Operation, body: ir.Operation, terms: Terms):
        block = body.regions[0].blocks[0]
        self._outer = dict(zip(block.arguments, compute.operands))
        self._compute = compute
        self._terms = terms
        self._groups = equal_dims(compute)

    def of_tensor(self, value: ir.Value, axis: int):
        """The key of a body tensor's extent along `axis` (negative: from the end)."""
        shape = list(ir.RankedTensorType(value.type).shape)
        axis %= len(shape)
        if not ir.ShapedType.is_dynamic_size(shape[axis]):
            return shape[axis]
        return self._outer_dim(self._outer.get(value), axis)

    def of_shape(self, value: ir.Value) -> list:
        """The keys of a body tensor's extents, one per axis."""
        return [self.of_tensor(value, axis)
                for axis in range(ir.RankedTensorType(value.type).rank)]

    def of_out(self, out: ir.Value, axis: int):
        """The key of the output's extent along `axis`: static, or the size operand
        that the compute's `out_dims` names for it."""
        shape = list(ir.RankedTensorType(out.type).shape)
        if not ir.ShapedType.is_dynamic_size(shape[axis]):
            return shape[axis]
        out_dims = i64_array(self._compute, "out_dims") or []
        if axis >= len(out_dims):
            return None
        return self._outer_index(self._compute.operands[out_dims[axis]])

    def of_tree(self, tree: tuple):
        """The key of a loop bound read as a `Terms` tree: a constant, a size argument,
        or `tensor.dim` of an input; None for anything else."""
        if tree[0] == "const" and isinstance(tree[1], int):
            return tree[1]
        if tree[0] == "free":
            value = self._terms.free[tree[1]]
            return self._outer_index(self._outer[value]) \
                if value in self._outer and isinstance(value.type, ir.IndexType) else None
        if tree[0] == "tensor.dim" and tree[2][0] == "free" and tree[3][0] == "const":
            value = self._terms.free[tree[2][1]]
            if value in self._outer and isinstance(value.type, ir.RankedTensorType):
                return self.of_tensor(value, tree[3][1])
        return None

    def _outer_index(self, value: ir.Value):
        static = constant_int(value)
        if static is not None:
            return static
        op = defining_op(value)
        if op is not None and op.name == "tensor.dim":
            axis = constant_int(op.operands[1])
            if axis is not None:
                shape = list(ir.RankedTensorType(op.operands[0].type).shape)
                if not ir.ShapedType.is_dynamic_size(shape[axis]):
                    return shape[axis]
                return self._outer_dim(op.operands[0], axis)
        return ("value", value, -1)

    def _outer_dim(self, value: Optional[ir.Value], axis: int):
        if value is None:
            return None
        if isinstance(value, ir.BlockArgument) and \
                value.owner.owner.operation.name == "func.func":
            pair = (value.arg_number, axis)
            group = next((g for g in self._groups if pair in g), {pair})
            return ("input",) + min(group)
        return ("value", value, axis)


def is_size_expression(tree: tuple, extents: BodyExtents) -> bool:
    """Is `tree` a number computed from constants and extents only (`sqrt(head_dim)`
    with head_dim a run-time size): arith and math ops over them, no loop's variable,
    no load?"""
    if tree[0] == "const":
        return True
    if tree[0] in ("free", "tensor.dim"):
        return extents.of_tree(tree) is not None
    if not isinstance(tree[0], str) or not tree[0].startswith(("arith.", "math.")):
        return False
    return all(is_size_expression(t, extents) for t in tree[2:])
