"""A scatter, `x[ids[i], d] += g[i, d]` (or `x[ids[i], d] = min(x[ids[i], d], g[i, d])`,
or max) of a `mut x`: the writes of one output whose leading indices are read from data
(cir.store with `combine = "+"`, `"min"`, `"max"`, `"umin"` or `"umax"`).

linalg has no scatter (a generic's outputs are indexed by affine maps), so each such
store becomes, before the compute:

* `updates`, the value at every point of the loops around the store (a generic), as a
  tensor over the loops that give no trailing index (the batch, collapsed into one
  dimension) then those of the trailing indices (the slice, x's last dimensions);
* `indices`, the data-dependent indices as i64, [batch, depth];
* a call of `@__zynml_scatter_<kind>_d<depth>_<n>(updates, indices, x)` (kind: add, min,
  max, umin, umax), a private declaration that the IREE backend turns into
  `iree_linalg_ext.scatter` (IREE's scatter, which combines contributions at repeated
  indices: zynml/backend/iree/scatter.py) and the CUDA backend into atomics or sorted
  segments (zynml/backend/cuda/scatter.py).

    "cir.store"(%g, %out, %id, %d) {combine = "+"}     (loops i, d; %id from ids[i])
  becomes
    %u = linalg.generic ... -> tensor<13x5xf32>         (g at every (i, d))
    %k = linalg.generic ... -> tensor<13xi64>           (ids[i] at every i), expanded 13x1
    %r = call @__zynml_scatter_add_d1_0(%u, %k, %x) : (...) -> tensor<7x5xf32>
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, tensor

from . import SCATTER_KINDS, SCATTER_PREFIX
from .generic_region import Derived, LoweringError

__all__ = ["lower_scatter"]


def lower_scatter(nest, stores: list[ir.Operation], result_type: ir.Type,
                  init) -> ir.Value:
    """The value of a `mut x` output written by scatter stores (`combine = ...`)."""
    if init is None or any("combine" not in s.attributes for s in stores):
        raise LoweringError("an input updated by a scatter (x[ids[i]] += v) is written only "
                            "that way in its block", stores[0].location)
    current = init
    for store in stores:
        current = _scatter(nest, store, current)
    return nest._cast(current, result_type)


def _scatter(nest, store: ir.Operation, original: ir.Value) -> ir.Value:
    from .nest_lowering import loop_of
    ctx = nest.context(store)
    if nest.guarded(store) or any(len(loop_of(iv).results) for iv in ctx):
        raise LoweringError("a scatter inside an 'if', or in a loop that carries values, "
                            "is not lowered yet", store.location)
    indices = list(store.operands[2:])
    depth = len(indices)
    while depth and indices[depth - 1] in ctx and nest.unit(indices[depth - 1]) and \
            indices[depth - 1] not in indices[:depth - 1]:
        depth -= 1  # trailing indices that are loop variables: the slice
    trailing = indices[depth:]
    batch = [iv for iv in ctx if iv not in trailing]
    if not depth or not batch:
        raise LoweringError("a scatter writes x[ids[i], ..., d, ...]: indices read from data "
                            "first, inside a loop, then loop variables over x's last "
                            "dimensions", store.location)
    x_type = ir.RankedTensorType(original.type)
    element = x_type.element_type
    updates = nest.tensor_over(batch + trailing, store.operands[0], element)
    i64 = ir.IntegerType.get_signless(64)
    columns = []
    for k, index in enumerate(indices[:depth]):
        as_i64 = Derived([index], lambda v, size=x_type.shape[k]: _in_range(v[0], size))
        columns.append(nest.tensor_over(batch, as_i64, i64))
    with nest.L.ip, store.location:
        if len(batch) > 1:  # one batch dimension
            updates = _collapse(updates, len(batch))
            columns = [_collapse(c, len(batch)) for c in columns]
        columns = [_with_unit_dim(c) for c in columns]
        rows = ir.RankedTensorType(columns[0].type).shape[0]
        ids = columns[0] if depth == 1 else tensor.ConcatOp(
            ir.RankedTensorType.get([rows, depth], i64), 1, columns).result
        kind = SCATTER_KINDS[ir.StringAttr(store.attributes["combine"]).value]
        callee = _declare(nest.compute, f"{kind}_d{depth}",
                          [updates.type, ids.type, original.type], original.type)
        return func.CallOp([original.type], ir.FlatSymbolRefAttr.get(callee),
                           [updates, ids, original]).result


def _in_range(index: ir.Value, size: int) -> ir.Value:
    """An index read from data, as i64, clamped into 0..size-1 when x's dimension is
    static: an index outside x is undefined behaviour (docs/language.md) but must not
    write outside x (IREE's CPU scatter crashed the process on -1; CUDA's atomics would
    write another buffer); checked mode reports it."""
    i64 = ir.IntegerType.get_signless(64)
    value = arith.IndexCastOp(i64, index).result
    if ir.ShapedType.is_dynamic_size(size):
        return value
    low = arith.ConstantOp(i64, 0).result
    high = arith.ConstantOp(i64, size - 1).result
    return arith.MaxSIOp(arith.MinSIOp(value, high).result, low).result


def _collapse(value: ir.Value, leading: int) -> ir.Value:
    """[b1, .., bn, t...] -> [b1*..*bn, t...]."""
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    first = shape[:leading]
    size = ir.ShapedType.get_dynamic_size() if any(
        ir.ShapedType.is_dynamic_size(s) for s in first) else _product(first)
    result = ir.RankedTensorType.get([size] + shape[leading:], t.element_type)
    groups = [list(range(leading))] + [[k] for k in range(leading, len(shape))]
    return tensor.CollapseShapeOp(result, value, groups).result


def _with_unit_dim(value: ir.Value) -> ir.Value:
    """[b] -> [b, 1]."""
    t = ir.RankedTensorType(value.type)
    b = t.shape[0]
    result = ir.RankedTensorType.get([b, 1], t.element_type)
    dynamic = [tensor.DimOp(value, arith.ConstantOp(ir.IndexType.get(), 0).result).result] \
        if ir.ShapedType.is_dynamic_size(b) else []
    return tensor.ExpandShapeOp(result, value, [[0, 1]], dynamic, [b, 1]).result


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _declare(compute: ir.Operation, stem: str, inputs: list[ir.Type],
             result: ir.Type) -> str:
    """A private declaration of the scatter's callee, in the module of `compute`."""
    module = compute
    while module.name != "builtin.module":
        module = module.parent
    body = module.regions[0].blocks[0]
    taken = {ir.StringAttr(op.attributes["sym_name"]).value for op in body.operations
             if "sym_name" in op.operation.attributes}
    n = 0
    while f"{SCATTER_PREFIX}{stem}_{n}" in taken:
        n += 1
    name = f"{SCATTER_PREFIX}{stem}_{n}"
    with ir.InsertionPoint(body), ir.Location.unknown():
        fn = func.FuncOp(name, (inputs, [result]), visibility="private")
    fn.attributes["zynml.scatter"] = ir.UnitAttr.get()
    return name
