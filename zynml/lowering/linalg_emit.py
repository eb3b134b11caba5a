"""Helpers for building linalg at one `cir.compute` (used by nest_lowering.py).

A `Lowering` sits at one compute: body arguments stand for the compute's operands, and
new ops go right before the compute in main. It rebuilds loop-invariant body values in
main (`outer`), makes init tensors (`empty`, `filled`) and finds indexing maps of loads
whose indices are affine in the loop variables (`x[i, k]` -> `(d0, d1, d2) -> (d0, d2)`).
"""
from __future__ import annotations

from typing import Optional, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..dialects.cir import EQUAL_DIMS_ATTR
from .cir_ops import clone_op, constant_int, defining_op

PARALLEL, REDUCTION = "parallel", "reduction"


def iterator_attr(kind: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#linalg.iterator_type<{kind}>")


def tensor_extents(value: ir.Value) -> list:
    """A tensor's extents at the insertion point: numbers where static, `tensor.dim`
    values where not."""
    return [extent if not ir.ShapedType.is_dynamic_size(extent) else
            tensor.DimOp(value, arith.ConstantOp(ir.IndexType.get(), axis).result).result
            for axis, extent in enumerate(ir.RankedTensorType(value.type).shape)]


def covers(extents: list, shape: list[int]) -> bool:
    """Whether a write's extents (None or the dynamic size: known at run time) cover a
    tensor's shape: equal where both are known; a run-time extent is checked where it is
    known, at the call."""
    def known(n):
        return n is not None and not ir.ShapedType.is_dynamic_size(n)
    return len(extents) == len(shape) and \
        all(t == d or not known(t) or not known(d) for t, d in zip(extents, shape))


def equal_dims(compute: ir.Operation) -> list[set[tuple[int, int]]]:
    """The groups of (argument, dim) of the compute's function that the call checks equal."""
    function = compute.parent
    while function is not None and function.name != "func.func":
        function = function.parent
    if function is None or EQUAL_DIMS_ATTR not in function.attributes:
        return []
    return [set(zip(flat[::2], flat[1::2])) for flat in
            (list(ir.DenseI64ArrayAttr(group))
             for group in ir.ArrayAttr(function.attributes[EQUAL_DIMS_ATTR]))]


class Lowering:
    def __init__(self, compute: ir.Operation, body: ir.Operation):
        self.compute = compute
        block = body.regions[0].blocks[0]
        self.args = {arg: operand for arg, operand in zip(block.arguments, compute.operands)}
        args = list(block.arguments)
        self.out_args = args[len(args) - len(compute.results):]  # one per result
        self.out_arg = self.out_args[0]
        self.ip = ir.InsertionPoint(compute)
        self._outer_memo: dict[ir.Value, ir.Value] = {}
        self.fixed: dict[ir.Value, ir.Value] = {}  # body loop variable -> value in main
        self._equal_dims = equal_dims(compute)

    # ------------------------------------------------------------------ values in main

    def outer(self, value: ir.Value) -> ir.Value:
        """A body value that does not depend on loop variables, rebuilt in main."""
        if value in self.args:
            return self.args[value]
        if value in self.fixed:  # the variable of a loop being emitted in main
            return self.fixed[value]
        if value in self._outer_memo:
            return self._outer_memo[value]
        op = defining_op(value)
        if op is None or len(op.regions) or not (
                op.name.startswith(("arith.", "math.")) or op.name == "tensor.dim"):
            raise ValueError("value depends on the loops")
        operands = [self.outer(v) for v in op.operands]
        with self.ip, op.location:
            clone = clone_op(op, operands)
        self._outer_memo[value] = clone.results[0]
        return clone.results[0]

    def empty(self, bounds: Sequence[ir.Value], element: ir.Type) -> ir.Value:
        sizes = []
        for bound in bounds:
            static = bound if isinstance(bound, int) else constant_int(bound)
            sizes.append(static if static is not None else self.outer(bound))
        with self.ip, self.compute.location:
            return tensor.EmptyOp(sizes, element).result

    def sliced(self, source: ir.Value, sizes: list, offsets: Optional[list] = None
               ) -> ir.Value:
        """`sizes` (int, index Value, or None for the rest) of `source` from `offsets`
        (ints, 0 by default): a loop that reads an input directly covers only the loop's
        extent of it, from where the loop starts reading."""
        shape = list(ir.RankedTensorType(source.type).shape)
        offsets = offsets or [0] * len(shape)
        sizes = [None if not o and self._whole_extent(source, k, s) else s
                 for k, (s, o) in enumerate(zip(sizes, offsets))]
        if all(s is None or s == d for s, d in zip(sizes, shape)) and not any(offsets):
            return source
        static, dynamic = [], []
        for k, (s, d, o) in enumerate(zip(sizes, shape, offsets)):
            if s is None and ir.ShapedType.is_dynamic_size(d):  # the rest: extent - offset
                with self.ip, self.compute.location:
                    index = arith.ConstantOp(ir.IndexType.get(), k).result
                    extent = tensor.DimOp(source, index).result
                    if o:
                        extent = arith.SubIOp(
                            extent, arith.ConstantOp(ir.IndexType.get(), o).result).result
                    dynamic.append(extent)
                static.append(d)
            elif s is None:
                static.append(d - o)
            elif isinstance(s, int):
                static.append(s)
            else:
                static.append(ir.ShapedType.get_dynamic_size())
                dynamic.append(s)
        result = ir.RankedTensorType.get(static, ir.RankedTensorType(source.type).element_type)
        with self.ip, self.compute.location:
            return tensor.ExtractSliceOp(result, source, [], dynamic, [], offsets,
                                         static, [1] * len(shape)).result

    def _whole_extent(self, source: ir.Value, dim: int, size) -> bool:
        """Is `size` (a Value) source's extent along `dim`: that very dim, or the dim of an
        input that the call checks equal to source's (EQUAL_DIMS_ATTR)?"""
        if isinstance(size, int) or size is None or not isinstance(source, ir.BlockArgument):
            return False
        op = defining_op(size)
        if op is None or op.name != "tensor.dim" or \
                not isinstance(op.operands[0], ir.BlockArgument):
            return False
        index = constant_int(op.operands[1])
        pair = ((op.operands[0].arg_number, index), (source.arg_number, dim))
        return pair[0] == pair[1] or any(pair[0] in group and pair[1] in group
                                         for group in self._equal_dims)

    def filled(self, bounds: Sequence[ir.Value], element: ir.Type, value: ir.Value) -> ir.Value:
        init = self.empty(bounds, element)
        with self.ip, self.compute.location:
            return linalg.fill(value, outs=[init])

    def constant(self, element: ir.Type, value) -> ir.Value:
        with self.ip, self.compute.location:
            if isinstance(element, ir.FloatType):
                return arith.ConstantOp(element, ir.FloatAttr.get(element, value)).result
            return arith.ConstantOp(element, ir.IntegerAttr.get(element, int(value))).result

    # ------------------------------------------------------------------ affine analysis

    @staticmethod
    def affine(value: ir.Value, dims: dict) -> Optional[ir.AffineExpr]:
        """`value` as an affine expression of the loop variables in `dims` (which maps
        each to its dimension number, or to the expression that stands for it). Each value
        is looked at once: index arithmetic may share operands (`k + k` repeated)."""
        memo: dict = {}
        constants: dict = {}

        def walk(v: ir.Value) -> Optional[ir.AffineExpr]:
            if v not in memo:
                memo[v] = step(v)
            return memo[v]

        def step(v: ir.Value) -> Optional[ir.AffineExpr]:
            if v in dims:
                d = dims[v]
                return ir.AffineDimExpr.get(d) if isinstance(d, int) else d
            c = constant_int(v, constants)
            if c is not None:
                return ir.AffineConstantExpr.get(c)
            op = defining_op(v)
            if op is None:
                return None
            if op.name == "arith.index_cast":
                return walk(op.operands[0])
            if op.name in ("arith.addi", "arith.subi", "arith.muli"):
                a, b = (walk(x) for x in op.operands)
                if a is None or b is None:
                    return None
                if op.name == "arith.addi":
                    return a + b
                if op.name == "arith.subi":
                    return a - b
                ca, cb = (constant_int(x, constants) for x in op.operands)
                if ca is not None:
                    return b * ca
                if cb is not None:
                    return a * cb
            return None
        return walk(value)

    def load_map(self, load: ir.Operation, dims: dict, n_dims: int) -> Optional[ir.AffineMap]:
        exprs = [self.affine(i, dims) for i in load.operands[1:]]
        if any(e is None for e in exprs):
            return None
        return ir.AffineMap.get(n_dims, 0, exprs)


def identity_map(n: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(n)
