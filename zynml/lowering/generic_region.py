"""One linalg.generic's region, built from the body values it computes (used by
nest_lowering.py): a first pass over the roots collects the generic's inputs (loads at
affine indices, reduction results, tensors of loops run in order), a second builds the
region's ops. Loads at other indices are gathers, clamped into their tensor.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .cir_ops import defining_op
from .combiners import constant_like

__all__ = ["LoweringError", "Derived", "Plan", "gather"]


class LoweringError(ValueError):
    """The body has a shape this lowering does not handle; `location` says where."""

    def __init__(self, message: str, location: Optional[ir.Location] = None):
        super().__init__(message)
        self.location = location


class Derived:
    """A region value built from body values: `build(materialized deps)`."""

    def __init__(self, deps: list[ir.Value], build):
        self.deps = deps
        self.build = build


class Plan:
    """One generic's region: the first pass over the roots collects the inputs (affine
    loads, reduction tensors), the second (after begin_emit) builds the region's ops."""

    def __init__(self, owner, dims: list[ir.Value]):  # owner: the NestLowering
        self.owner = owner
        self.dim_list = dims
        self.dims = {iv: d for d, iv in enumerate(dims)}
        self.exprs = {iv: owner.loop_expr(iv, d) for d, iv in enumerate(dims)}
        self.n = len(dims)
        self.inputs: list[tuple[ir.Value, ir.AffineMap]] = []
        self.slot: dict[ir.Value, int] = {}
        self.args: Optional[list[ir.Value]] = None
        self.memo: dict[ir.Value, ir.Value] = {}

    def begin_emit(self, args: list[ir.Value]) -> None:
        self.args = args
        self.memo = {}

    @property
    def emitting(self) -> bool:
        return self.args is not None

    def _input(self, key: ir.Value, tensor_value: ir.Value, affine_map: ir.AffineMap):
        if key not in self.slot:
            for i, (t, m) in enumerate(self.inputs):
                if t == tensor_value and m == affine_map:
                    self.slot[key] = i
                    break
            else:
                self.slot[key] = len(self.inputs)
                self.inputs.append((tensor_value, affine_map))
        return self.args[self.slot[key]] if self.emitting else None

    def visit(self, value):
        if isinstance(value, Derived):
            values = [self.visit(d) for d in value.deps]
            return value.build(values) if self.emitting else None
        # Both passes visit each value once (the first pass records None): a body value
        # read twice (`v = v * v` repeated) is not walked twice, so work stays linear.
        if value in self.memo:
            return self.memo[value]
        result = self._visit(value)
        self.memo[value] = result
        return result

    def _visit(self, value: ir.Value):
        owner, L = self.owner, self.owner.L
        if value in self.dims:
            if not self.emitting:
                return None
            index = linalg.IndexOp(self.dims[value]).result
            lb, step = owner.start_step(value)
            if step != 1:
                index = arith.MulIOp(index, constant_like(index.type, step)).result
            if lb:
                index = arith.AddIOp(index, constant_like(index.type, lb)).result
            return index
        if value in L.args:
            return L.args[value]
        if value in L.fixed:
            return L.fixed[value] if self.emitting else None
        if value in owner.state:
            tensor_value, ctx = owner.state[value]
            exprs = [ir.AffineDimExpr.get(self.dims[iv]) for iv in ctx]
            return self._input(value, tensor_value, ir.AffineMap.get(self.n, 0, exprs))
        if isinstance(value, ir.BlockArgument):
            raise LoweringError("a loop variable or accumulator is used outside the loops "
                                "it belongs to", self.owner.compute.location)
        op = defining_op(value)
        if op.name == "cir.load":
            return self._load(op, value)
        if op.name == "scf.for":
            return self._reduction_result(op, value)
        if op.name == "scf.if":
            return self._select(op, value)
        if op.name.startswith(("arith.", "math.")) or op.name == "tensor.dim":
            operands = [self.visit(v) for v in op.operands]
            if not self.emitting:
                return None
            return ir.Operation.create(op.name, results=[r.type for r in op.results],
                                       operands=operands,
                                       attributes={k: op.attributes[k] for k in op.attributes}
                                       ).results[0]
        raise LoweringError(f"'{op.name}' cannot be lowered inside a kernel body", op.location)

    def _load(self, op: ir.Operation, value: ir.Value):
        L = self.owner.L
        source = op.operands[0]
        if source in L.out_args:
            raise LoweringError("reading 'out' is not lowered yet; keep the value in a var",
                                op.location)
        local = defining_op(source)
        if local is not None and local.name == "cir.alloc":
            return self._local_load(op, value, local)
        if source not in L.args:
            raise LoweringError("loads must read a compute input", op.location)
        guarded = self.owner.guarded(op)
        affine_map = None if guarded else L.load_map(op, self.exprs, self.n)
        if affine_map is not None:
            return self._input(value, *self.owner.input_for(op, affine_map, self.dim_list))
        indices = [self.visit(i) for i in op.operands[1:]]
        if not self.emitting:
            return None
        return gather(L.outer(source), indices, value.type,
                      self._ranges(op, op.operands[1:]))

    def _local_load(self, op: ir.Operation, value: ir.Value, alloc: ir.Operation):
        prefix = self.owner.context(alloc)
        if any(iv not in self.dims for iv in prefix):
            raise LoweringError("a local array is read outside the loops it is declared in",
                                op.location)
        source = self.owner.local(alloc)
        indices = prefix + list(op.operands[1:])
        exprs = [ir.AffineDimExpr.get(self.dims[iv]) for iv in prefix] + \
            [self.owner.L.affine(i, self.exprs) for i in op.operands[1:]]
        if not self.owner.guarded(op) and all(e is not None for e in exprs):
            return self._input(value, source, ir.AffineMap.get(self.n, 0, exprs))
        materialized = [self.visit(i) for i in indices]
        if not self.emitting:
            return None
        return gather(source, materialized, value.type, self._ranges(op, indices))

    def _ranges(self, load: ir.Operation, indices) -> list:
        """What is known of a gather's indices, to leave out clamps that cannot matter.
        Under an `if` (a convolution's padding), every index is clamped, as it was before
        gathers elsewhere were: the code made for those stays as it was."""
        if self.owner.guarded(load):
            return [None] * len(indices)
        return [self.owner.index_range(i) for i in indices]

    def _reduction_result(self, loop: ir.Operation, value: ir.Value):
        k = list(loop.results).index(value)
        ctx = self.owner.context(loop)
        missing = [iv for iv in ctx if iv not in self.dims]
        if missing:
            raise LoweringError("a loop's result is used outside the loops around it",
                                loop.location)
        tensors = self.owner.reduction(loop)
        exprs = [ir.AffineDimExpr.get(self.dims[iv]) for iv in ctx]
        return self._input(value, tensors[k], ir.AffineMap.get(self.n, 0, exprs))

    def _select(self, op: ir.Operation, value: ir.Value):
        k = list(op.results).index(value)
        if len(op.regions[1].blocks) == 0:
            raise LoweringError("an 'if' without 'else' yields no value", op.location)
        then_v = list(op.regions[0].blocks[0].operations)[-1].operands[k]
        else_v = list(op.regions[1].blocks[0].operations)[-1].operands[k]
        cond, a, b = self.visit(op.operands[0]), self.visit(then_v), self.visit(else_v)
        return arith.SelectOp(cond, a, b).result if self.emitting else None


def gather(source: ir.Value, indices: list[ir.Value], element: ir.Type,
            ranges: list) -> ir.Value:
    """`source[indices]` with each index clamped into its dimension (min(max(i, 0),
    n - 1)) unless `ranges` (a (lo, hi) per index, or None) shows it stays inside: out of
    range, a gather reads the nearest element, never outside the tensor. An empty tensor
    has no element to read: the value is 0."""
    shape = ir.RankedTensorType(source.type).shape
    if any(d == 0 for d in shape):
        return constant_like(element, 0)
    idx = ir.IndexType.get()
    clamped = []
    for dim, (index, extent, known) in enumerate(zip(indices, shape, ranges)):
        dynamic = ir.ShapedType.is_dynamic_size(extent)
        if known is not None and not dynamic and 0 <= known[0] and known[1] < extent:
            clamped.append(index)
            continue
        if dynamic:
            size = tensor.DimOp(source, arith.ConstantOp(idx, dim).result).result
            last = arith.SubIOp(size, arith.ConstantOp(idx, 1).result).result
        else:
            last = arith.ConstantOp(idx, extent - 1).result
        index = arith.MaxSIOp(index, arith.ConstantOp(idx, 0).result).result
        clamped.append(arith.MinSIOp(index, last).result)
    return tensor.ExtractOp(source, clamped).result
