"""sink-loops-into-generics: a loop run in order whose iterations are per-element work
becomes one linalg.generic with the loop inside its region.

cir-to-linalg lowers a loop run in order (`for k in 0..8: acc = acc * a + b` inside an
elementwise body) to an `scf.for` in the host function, carrying one tensor per `var`
over the loops around it, with generics computing each iteration at every point: what
IREE wants, and on the native CUDA backend one kernel launch per iteration. When every
iteration is per-element (generics over the carried tensors' points, each point reading
only its own carried values), the loop is the same at every point, so it can run inside
one generic, and so inside one kernel:

    %r = scf.for %k = %c0 to %n step %c1 iter_args(%t = %x) -> (tensor<37xf32>) {
      %g = linalg.generic {maps = [id, id], parallel} ins(%t) outs(%e) {
      ^bb0(%in: f32, %out: f32):
        %m = arith.mulf %in, %a : f32
        %s = arith.addf %m, %b : f32
        linalg.yield %s : f32
      }
      scf.yield %g : tensor<37xf32>
    }
  becomes
    %r = linalg.generic {maps = [id, id], parallel} ins(%x) outs(%empty) {
    ^bb0(%in: f32, %out: f32):
      %v = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %in) -> (f32) {
        %m = arith.mulf %acc, %a : f32
        %s = arith.addf %m, %b : f32
        scf.yield %s : f32
      }
      linalg.yield %v : f32
    }

A carried value that starts from a `linalg.fill` starts from the fill's scalar; other
starts are inputs read at the point. Loop-invariant inputs of the iteration's generics
read along the points become inputs of the new one (with their maps), scalar ops of the
loop body (index arithmetic on the loop variable) move into the region, gathers
(`tensor.extract` of tensors from outside the loop) stay gathers. A generic of the
iteration that reduces at each point (its loops the points, then reduction loops: a row
sum, a `dot`) becomes `scf.for`s over its reduction loops, from its output's value at the
point, reading its other inputs' elements along them. Inner loops are sunk first, so
nested loops run in order become nested `scf.for`s. The one generic after the loop that
reads its results at their points (`out[i] = e + m`) joins the new one.

A loop is left on the host when an iteration is more than a value per point: a generic
over more loops than the points that is not a reduction (a local array), a read of a
carried tensor at another point, a slice or any other op. Each thread then does the work
of its point alone: a long reduction over few points is serial where the host loop's
kernels would spread it over threads, and many points with short loops gain most.
The pass belongs to the native CUDA pipeline (zynml/backend/cuda/compile.py); the CPU
(IREE) path keeps the host loop.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from ..backend.cuda.strategies.kernel_builder import apply_map, index_const
from ..lowering.cir_ops import clone_op, defining_op, ops_in

NAME = "sink-loops-into-generics"

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"
# Region-free ops of a loop body that move into the new generic's region: scalar index
# and float arithmetic on the loop variable (the loop bounds of an inner loop, say).
_SCALAR_DIALECTS = ("arith.", "math.", "index.")


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    # Innermost loops first (post-order): an outer loop's body then holds the generic
    # an inner loop became.
    loops = [op for op in ops_in(module, "scf.for",
                                 descend=lambda op: op.name != "linalg.generic")]
    for loop in reversed(loops):
        if _host_loop(loop):
            _Sinker(loop).sink()


def _host_loop(loop: ir.Operation) -> bool:
    """A loop of a host function carrying tensors (not one inside a generic's region)."""
    parent = loop.parent
    while parent is not None:
        if parent.name == "linalg.generic":
            return False
        if parent.name == "func.func":
            break
        parent = parent.parent
    return len(loop.results) > 0 and all(
        isinstance(r.type, ir.RankedTensorType) for r in loop.results)


class _Decline(Exception):
    """The loop's body is not per-element work: it stays on the host."""


class _Sinker:
    def __init__(self, loop: ir.Operation):
        self.loop = loop
        self.block = loop.regions[0].blocks[0]
        self.iv = self.block.arguments[0]
        self.carried = list(self.block.arguments)[1:]
        self.shape = list(ir.RankedTensorType(loop.results[0].type).shape)
        self.rank = len(self.shape)
        self.inside: set = set(self.block.arguments)  # values defined in the loop body
        for op in self.block.operations:
            for result in op.operation.results:
                self.inside.add(result)
        self.point: dict = {}  # tensor of the body (carried, a generic's result) -> scalar
        self.inputs: list[tuple[ir.Value, ir.AffineMap]] = []  # the new generic's

    def sink(self) -> None:
        try:
            body = self._check()
        except _Decline:
            return
        self._build(body)

    # ------------------------------------------------------------------ checks

    def _check(self) -> list[ir.Operation]:
        """The body's ops if every iteration is per-element work; else _Decline."""
        if any(list(ir.RankedTensorType(r.type).shape) != self.shape
               for r in self.loop.results):
            raise _Decline()
        point_tensors = set(self.carried)
        ops = [op.operation for op in self.block.operations]
        for op in ops[:-1]:
            if op.name == "tensor.empty":
                continue
            if op.name == "linalg.fill":  # an accumulator's start: a scalar per point
                if isinstance(op.operands[0].type, ir.ShapedType):
                    raise _Decline()
                point_tensors.update(op.results)
            elif op.name == "linalg.generic":
                self._check_generic(op, point_tensors)
                point_tensors.update(op.results)
            elif self._scalar(op):
                if any(v in point_tensors for v in op.operands):
                    raise _Decline()
            else:
                raise _Decline()
        if any(v not in point_tensors for v in ops[-1].operands):
            raise _Decline()  # a loop-invariant tensor yielded: not worth the bother
        for op in ops[:-1]:  # tensors of the body live only as points of the iteration
            if op.name == "tensor.empty" and any(
                    _user(u).name not in ("linalg.generic", "linalg.fill")
                    for u in op.results[0].uses):
                raise _Decline()
        return ops[:-1]

    @staticmethod
    def _scalar(op: ir.Operation) -> bool:
        return (op.name.startswith(_SCALAR_DIALECTS) and not len(op.regions) and
                not any(isinstance(r.type, ir.ShapedType) for r in op.results))

    def _check_generic(self, generic: ir.Operation, point_tensors: set,
                       parallel_only: bool = False) -> None:
        """A generic over the points, possibly with reduction loops after them (each
        point reduces on its own), reading tensors of the body only at its point."""
        iterators = [str(k) for k in ir.ArrayAttr(generic.attributes["iterator_types"])]
        reductions = iterators[self.rank:]
        if iterators[:self.rank] != [_PARALLEL] * self.rank or \
                any(k != _REDUCTION for k in reductions) or parallel_only and reductions:
            raise _Decline()  # a generic over other loops
        at_point = _projection(len(iterators), self.rank)
        n_in = _input_count(generic)
        maps = _maps(generic)
        args = list(generic.regions[0].blocks[0].arguments)
        for value, amap in zip(list(generic.operands)[:n_in], maps):
            if value in point_tensors and amap != at_point:
                raise _Decline()  # a carried value at another point
            if value in self.inside and value not in point_tensors:
                raise _Decline()
        for value, amap, arg in zip(list(generic.operands)[n_in:], maps[n_in:], args[n_in:]):
            if amap != at_point or list(ir.RankedTensorType(value.type).shape) != self.shape:
                raise _Decline()
            used = any(True for _ in arg.uses)
            if reductions and not used or used and value in self.inside and \
                    value not in point_tensors:
                raise _Decline()  # an accumulator that starts from nothing known
        if any(_extent_of(generic, d) is None for d in range(self.rank, len(iterators))):
            raise _Decline()
        for value in _captured(generic):
            if value in point_tensors or isinstance(value.type, ir.ShapedType) and \
                    value in self.inside:
                raise _Decline()  # a gather from a carried tensor: other points

    # ------------------------------------------------------------------ rewrite

    def _build(self, body: list[ir.Operation]) -> None:
        loop = self.loop
        identity = ir.AffineMap.get_identity(self.rank)
        consumer = self._consumer()
        point_tensors = set(self.carried)
        for value in loop.operands[3:]:
            self._note_at_point(value, point_tensors)
        for op in body + ([consumer] if consumer else []):
            if op.name == "linalg.generic":  # the loop-invariant tensors it reads
                self._note_inputs(op, point_tensors | set(loop.results))
            if op.name in ("linalg.generic", "linalg.fill"):
                point_tensors.update(op.results)
        anchor = consumer or loop
        with ir.InsertionPoint(anchor), loop.location:
            outs = list(consumer.operands)[_input_count(consumer):] if consumer else \
                [self._empty(r.type) for r in loop.results]
            maps = [m for _, m in self.inputs] + [identity] * len(outs)
            generic = linalg.GenericOp(
                [r.type for r in anchor.results], [v for v, _ in self.inputs], outs,
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                ir.ArrayAttr.get([ir.Attribute.parse(_PARALLEL)] * self.rank))
        elements = [ir.ShapedType(v.type).element_type for v in
                    [v for v, _ in self.inputs] + outs]
        region = generic.regions[0].blocks.append(*elements)
        self.args = list(region.arguments)
        with ir.InsertionPoint(region), loop.location:
            indices = [linalg.IndexOp(d).result for d in range(self.rank)]
            initial = [self._at_point(v) for v in loop.operands[3:]]
            memo: dict = {}
            bounds = [self._read_in_kernel(v, memo) for v in loop.operands[:3]]
            inner = scf.ForOp(*bounds, initial)
            mapping = {self.iv: inner.induction_variable}
            self.point.update(zip(self.carried, inner.inner_iter_args))
            with ir.InsertionPoint(inner.body):
                for op in body:
                    self._sink_op(op, mapping, indices)
                scf.YieldOp([self.point[v] for v in
                             list(self.block.operations)[-1].operation.operands])
            self.point.update(zip(loop.results, inner.results))
            if consumer is not None:
                self._sink_op(consumer, {}, indices)
                linalg.YieldOp([self.point[r] for r in consumer.results])
            else:
                linalg.YieldOp(list(inner.results))
        for index in indices:  # made for the generics' linalg.index; the rest go
            if not any(True for _ in index.uses):
                index.owner.erase()
        for old, new in zip(anchor.results, generic.results):
            old.replace_all_uses_with(new)
        if consumer is not None:
            consumer.erase()
        fills = []  # the fills only the loop started from (other dead ops: canonicalize)
        for value in loop.operands[3:]:
            op = defining_op(value)
            if op is not None and op.name == "linalg.fill" and op not in fills:
                fills.append(op)
        loop.erase()
        for fill in fills:
            if not any(True for _ in fill.results[0].uses):
                fill.erase()

    def _consumer(self) -> Optional[ir.Operation]:
        """The one all-parallel generic over the same points that reads every use of the
        loop's results at its own point (`out[i] = e + m` after the loop): it joins the
        new generic, so that it is one kernel (elementwise fusion takes a producer only
        when it has one use)."""
        users = [_user(u) for r in self.loop.results for u in r.uses]
        if not users or any(u != users[0] for u in users):
            return None
        generic = users[0]
        if generic.name != "linalg.generic" or generic.block != self.loop.block:
            return None
        try:
            self._check_generic(generic, set(self.loop.results), parallel_only=True)
        except _Decline:
            return None
        n_in = _input_count(generic)
        if any(u.operand_number >= n_in for r in self.loop.results for u in r.uses):
            return None  # a result is the consumer's output, not an input
        return generic

    def _note_inputs(self, generic: ir.Operation, point_tensors: set) -> None:
        """Note what the new generic reads for `generic`: the loop-invariant inputs read
        along the points only (through the map on them), and its outputs' old values."""
        n_in = _input_count(generic)
        args = list(generic.regions[0].blocks[0].arguments)
        for value, amap in zip(list(generic.operands)[:n_in], _maps(generic)):
            if value not in point_tensors and _on_points(amap, self.rank):
                self._note(value, _on_points(amap, self.rank))
        for value, arg in zip(list(generic.operands)[n_in:], args[n_in:]):
            if any(True for _ in arg.uses):
                self._note_at_point(value, point_tensors)

    def _note_at_point(self, value: ir.Value, point_tensors: set) -> None:
        if value not in point_tensors and self._filled(value) is None:
            self._note(value, ir.AffineMap.get_identity(self.rank))

    def _note(self, value: ir.Value, amap: ir.AffineMap) -> None:
        if (value, amap) not in self.inputs:
            self.inputs.append((value, amap))

    def _arg(self, value: ir.Value, amap: ir.AffineMap) -> ir.Value:
        """The new generic's block argument reading `value` through `amap`."""
        return self.args[self.inputs.index((value, amap))]

    def _at_point(self, value: ir.Value) -> ir.Value:
        """A tensor over the points, at the new generic's point: the scalar of the body
        (carried, computed), a fill's scalar, or an input's element."""
        if value in self.point:
            return self.point[value]
        filled = self._filled(value)
        return filled if filled is not None else \
            self._arg(value, ir.AffineMap.get_identity(self.rank))

    @staticmethod
    def _filled(value: ir.Value) -> Optional[ir.Value]:
        """The scalar that a `linalg.fill` fills `value` with; None for other tensors."""
        op = defining_op(value)
        return op.operands[0] if op is not None and op.name == "linalg.fill" else None

    def _read_in_kernel(self, value: ir.Value, memo: dict) -> ir.Value:
        """A loop bound computed on the host from a 0-d tensor's element (an integer
        input of a shape-less compile: `index_cast(extract %m[])`) is computed in the
        region instead, where the kernel reads it: the host would have to read device
        memory for it."""
        if value in memo:
            return memo[value]
        op = defining_op(value)
        result = value
        if op is not None and not len(op.regions) and len(op.results) == 1 and \
                not isinstance(value.type, ir.ShapedType):
            if op.name == "tensor.extract" and len(op.operands) == 1:
                result = clone_op(op, list(op.operands)).results[0]
            elif op.name.startswith(("arith.", "math.")) and op.name != "arith.constant":
                operands = [self._read_in_kernel(v, memo) for v in op.operands]
                if any(a != b for a, b in zip(operands, op.operands)):
                    result = clone_op(op, operands).results[0]
        memo[value] = result
        return result

    def _empty(self, type_: ir.Type) -> ir.Value:
        """tensor.empty of `type_`, its run-time sizes those of the loop's first start
        (the tensor a fill fills: the fill itself may go)."""
        tensor_type = ir.RankedTensorType(type_)
        source = self.loop.operands[3]
        fill = defining_op(source)
        if fill is not None and fill.name == "linalg.fill":
            source = fill.operands[1]
        made = defining_op(source)
        if made is not None and made.name == "tensor.empty" and source.type == type_:
            return source
        sizes = [tensor.DimOp(source, arith.ConstantOp(
            ir.IndexType.get(), d).result).result if ir.ShapedType.is_dynamic_size(n) else n
            for d, n in enumerate(tensor_type.shape)]
        return tensor.EmptyOp(sizes, tensor_type.element_type).result

    def _sink_op(self, op: ir.Operation, mapping: dict, indices: list) -> None:
        if op.name == "tensor.empty":
            return
        if op.name == "linalg.fill":
            self.point[op.results[0]] = mapping.get(op.operands[0], op.operands[0])
            return
        if op.name != "linalg.generic":
            clone = clone_op(op, [mapping.get(v, v) for v in op.operands])
            mapping.update(zip(op.results, clone.results))
            return
        n_in = _input_count(op)
        block = op.regions[0].blocks[0]
        args = list(block.arguments)
        n_dims = _maps(op)[0].n_dims
        starts = [self._at_point(v) if any(True for _ in arg.uses) else None
                  for v, arg in zip(list(op.operands)[n_in:], args[n_in:])]

        def point_body(reduction_ivs: list, carried: list) -> list:
            """The region at the point and `reduction_ivs`: its yielded values."""
            local = dict(mapping)
            for value, amap, arg in zip(list(op.operands)[:n_in], _maps(op), args):
                if value in self.point:
                    local[arg] = self.point[value]
                elif _on_points(amap, self.rank):
                    local[arg] = self._arg(value, _on_points(amap, self.rank))
                else:  # read along a reduction loop: an element of the input
                    local[arg] = tensor.ExtractOp(
                        value, apply_map(amap, indices + reduction_ivs)).result
            local.update((arg, v) for arg, v in zip(args[n_in:], carried) if v is not None)
            for inner in list(block.operations)[:-1]:
                _clone(inner.operation, local, indices + reduction_ivs)
            return [local.get(v, v) for v in list(block.operations)[-1].operands]

        def reduce(dims: list, ivs: list, carried: list) -> list:
            """Loops over the reduction dims `dims`, in order, carrying the outputs."""
            if not dims:
                return point_body(ivs, carried)
            loop = scf.ForOp(index_const(0), _extent(op, dims[0]), index_const(1), carried)
            with ir.InsertionPoint(loop.body):
                scf.YieldOp(reduce(dims[1:], ivs + [loop.induction_variable],
                                   list(loop.inner_iter_args)))
            return list(loop.results)

        results = reduce(list(range(self.rank, n_dims)), [], starts)
        self.point.update(zip(op.results, results))


def _clone(op: ir.Operation, local: dict, indices: list) -> None:
    """Clone `op` (and its regions) at the insertion point on `local`'s values; a
    `linalg.index d` of the old generic is `indices[d]`: the new generic's index for a
    point's loop, the scf.for's variable for a reduction loop."""
    if op.name == "linalg.index":
        local[op.results[0]] = indices[ir.IntegerAttr(op.attributes["dim"]).value]
        return
    operands = [local.get(v, v) for v in op.operands]
    if not len(op.regions):
        clone = clone_op(op, operands)
    else:
        clone = ir.Operation.create(
            op.name, results=[r.type for r in op.results], operands=operands,
            attributes={k: op.attributes[k] for k in op.attributes},
            regions=len(op.regions), loc=op.location)
        for region, into in zip(op.regions, clone.regions):
            for block in region.blocks:
                new_block = into.blocks.append(*[a.type for a in block.arguments])
                local.update(zip(block.arguments, new_block.arguments))
                with ir.InsertionPoint(new_block):
                    for inner in block.operations:
                        _clone(inner.operation, local, indices)
    local.update(zip(op.results, clone.results))


def _projection(n_dims: int, rank: int) -> ir.AffineMap:
    """(d0, .., d{n_dims-1}) -> (d0, .., d{rank-1}): a generic's map of its points."""
    return ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in range(rank)])


def _on_points(amap: ir.AffineMap, rank: int) -> Optional[ir.AffineMap]:
    """`amap` on the first `rank` dims only (the points), when it reads no other."""
    if any(not all(d < rank for d in _dims_of(e)) for e in amap.results):
        return None
    return ir.AffineMap.get(rank, 0, list(amap.results))


def _dims_of(expr: ir.AffineExpr) -> list[int]:
    return [int(d) for d in re.findall(r"\bd(\d+)\b", str(expr))]


def _extent_of(generic: ir.Operation, dim: int) -> Optional[tuple[ir.Value, int]]:
    """(operand, its dimension) indexed by loop `dim` of `generic` alone: the loop's
    trip count is that size (how linalg reads it); None when no operand gives it."""
    for value, amap in zip(list(generic.operands), _maps(generic)):
        for k, expr in enumerate(amap.results):
            if str(expr) == f"d{dim}":
                return value, k
    return None


def _extent(generic: ir.Operation, dim: int) -> ir.Value:
    """The trip count of loop `dim`, as an index value at the insertion point."""
    value, k = _extent_of(generic, dim)
    extent = ir.RankedTensorType(value.type).shape[k]
    if ir.ShapedType.is_dynamic_size(extent):
        return tensor.DimOp(value, index_const(k)).result
    return index_const(extent)


def _input_count(generic: ir.Operation) -> int:
    sizes = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])
    return sizes[0]


def _maps(generic: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]


def _captured(generic: ir.Operation) -> list[ir.Value]:
    """Values the generic's region uses but does not define."""
    inside, used = set(), []
    for op in ops_in(generic):
        for region in op.regions:
            for block in region.blocks:
                inside.update(block.arguments)
        inside.update(op.results)
    inside.update(generic.regions[0].blocks[0].arguments)
    for op in ops_in(generic):
        used.extend(v for v in op.operands if v not in inside)
    return used


def _user(use) -> ir.Operation:
    owner = use.owner
    return owner.operation if hasattr(owner, "operation") else owner
