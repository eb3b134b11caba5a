"""Loop nests of a cir body -> linalg on tensors (the engine of cir-to-linalg).

The model: every value of a body lives in a *context*, the loops around its definition.
A linalg op computes a value at every point of a context at once:

* a store `out[f(i, j)] = v` in context (i, j) is one `linalg.generic` over (i, j)
  computing v, then `tensor.insert_slice` into `out` (offsets and strides from f; when the
  store covers `out` exactly, the generic's result is `out` itself);
* a reduction loop (an `scf.for` threading accumulators `acc = acc op g`, possibly through
  nested loops and `if`s) is one generic over its context plus its loops, one result per
  accumulator, tensors over the context; a guarded contribution (`if c: acc += g`)
  becomes `select(c, g, identity)`;
* a `yield` of a `reduce` kernel is the contribution of an implicit accumulator;
* pure scalar ops are recomputed where used; a value of an enclosing context that is a
  loop's result is read from its tensor through a projection map;
* a loop whose carried values are updated otherwise (the online softmax) runs in order:
  an `scf.for` in main carrying one tensor per value over its context;
* a local array (`cir.alloc`: `shared var`, whole-tensor statements) is the tensor its
  stores write, over the loops around its declaration plus its own dimensions;
* loads whose indices are affine in the context's loops become indexing maps (inputs are
  sliced to the loops' extents, since linalg takes loop extents from operand shapes);
  other loads become `tensor.extract` gathers, and loads inside an `if` are gathers too
  (the `if` may exist to keep them in bounds). A gather's indices are clamped into the
  tensor's bounds: a data-dependent index (`x[idx[i]]`) may be anything, and the program
  must never read outside its tensors (docs/language.md §3 says what such a read gives).

Reductions, loops run in order and yields are reduction_lowering.py's (a mixin).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .bounds import check_read
from .cir_ops import constant_int, defining_op, ops_in, parent_op, string_array
from .generic_region import Derived, LoweringError, Plan
from .linalg_emit import PARALLEL, Lowering, covers, identity_map, iterator_attr
from .reduction_lowering import ReductionLowering

__all__ = ["NestLowering", "LoweringError", "MAX_PLACEHOLDER", "StoreLayout", "linear",
           "loop_of"]

# The largest tensor a generic gets only for the extents of loops no input is read along.
MAX_PLACEHOLDER = 2 ** 31


def loop_of(iv: ir.Value) -> ir.Operation:
    """The scf.for whose induction variable is `iv`."""
    return iv.owner.owner.operation


class NestLowering(ReductionLowering):
    """Lowers the body of one cir.compute; results are built right before the compute."""

    def __init__(self, compute: ir.Operation, body: ir.Operation, named_ops: bool = True):
        self.L = Lowering(compute, body)
        self.compute = compute
        self.body = body
        self.named_ops = named_ops
        self.named_used = False  # a matmul/batch_matmul named op was emitted
        self.skipped_empty = False  # a generic over a loop of no iteration was left out
        self._reductions: dict[ir.Value, list[ir.Value]] = {}  # loop iv -> result tensors
        self._locals: dict[ir.Value, ir.Value] = {}  # cir.alloc result -> its tensor
        self._ranges: dict[ir.Value, Optional[tuple[int, int]]] = {}  # see index_range
        self._constants: dict = {}  # constant_int's memo
        # carried value of a loop emitted in main -> (its tensor there, its context)
        self.state: dict[ir.Value, tuple[ir.Value, list[ir.Value]]] = {}

    # ------------------------------------------------------------------ contexts

    def context(self, op: ir.Operation) -> list[ir.Value]:
        """Induction variables of the loops around `op`, outermost first (without the
        loops being emitted as scf.for in main: their variables are fixed values)."""
        ivs = []
        parent = parent_op(op)
        while parent is not None and parent.name != "func.func":
            if parent.name == "scf.for":
                iv = parent.regions[0].blocks[0].arguments[0]
                if iv not in self.L.fixed:
                    ivs.append(iv)
            parent = parent_op(parent)
        return ivs[::-1]

    def guarded(self, op: ir.Operation) -> bool:
        """Is `op` inside an `if`?"""
        parent = parent_op(op)
        while parent is not None and parent.name != "func.func":
            if parent.name == "scf.if":
                return True
            parent = parent_op(parent)
        return False

    def start_step(self, iv: ir.Value) -> tuple[int, int]:
        loop = loop_of(iv)
        lb, step = constant_int(loop.operands[0]), constant_int(loop.operands[2])
        if lb is None or step is None or step <= 0:
            raise LoweringError("a loop's start and step must be constants (step > 0)",
                                loop.location)
        return lb, step

    def bound(self, iv: ir.Value):
        """The trip count of `iv`'s loop: an int when it is constant (0 for `0..-3`, which
        runs no iteration), else its end Value when it runs from 0 in steps of 1."""
        loop = loop_of(iv)
        lb, step = self.start_step(iv)
        if lb == 0 and step == 1:
            end = loop.operands[1]
            static = constant_int(end, self._constants)
            if static is not None:
                return max(0, static)
            if self.mask(iv) is None:
                return end
            known = self.index_range(end)  # a triangular loop: runs to its largest end
            if known is None:
                raise LoweringError(
                    "the end of this loop depends on the loops around it in a way that is not "
                    "lowered yet: loop over the whole range and skip the rest with 'if'",
                    loop.location)
            return max(0, known[1])
        ub = constant_int(loop.operands[1])
        if ub is None:
            raise LoweringError("a loop with a start or a step needs a constant end",
                                loop.location)
        return max(0, -(-(ub - lb) // step))

    def mask(self, iv: ir.Value) -> Optional["Derived"]:
        """`iv < end` when the end of iv's loop depends on the loops around it (a
        triangular loop, `for i in 0..b`): linalg's loops are rectangular, so that loop
        runs to its largest end and the iterations past its own end are masked. None for
        any other loop."""
        loop = loop_of(iv)
        end = loop.operands[1]
        if not self.unit(iv) or constant_int(end, self._constants) is not None:
            return None
        try:
            self.L.outer(end)  # computable before the loops, where linalg needs it
            return None
        except ValueError:
            return Derived([iv, end], lambda v: arith.CmpIOp(arith.CmpIPredicate.slt,
                                                             v[0], v[1]).result)

    def unmasked(self, dims: list[ir.Value], location: ir.Location) -> None:
        """Stores and loops run in order cover their whole loops: no triangular one."""
        if any(self.mask(iv) is not None for iv in dims):
            raise LoweringError("a triangular loop (one whose end depends on a loop around "
                                "it) is lowered only where it reduces (acc += ...); here, "
                                "loop over the whole range and skip the rest with 'if'",
                                location)

    def index_range(self, value: ir.Value) -> Optional[tuple[int, int]]:
        """The least and greatest value an index can have, when it is a constant or a
        loop variable with constant bounds (plus or times a constant); else None."""
        if value in self._ranges:
            return self._ranges[value]
        self._ranges[value] = found = self._index_range(value)
        return found

    def _index_range(self, value: ir.Value) -> Optional[tuple[int, int]]:
        c = constant_int(value, self._constants)
        if c is not None:
            return c, c
        op = defining_op(value)
        if op is not None and op.name in ("arith.addi", "arith.subi", "arith.muli"):
            a, b = (self.index_range(v) for v in op.operands)
            if a is None or b is None:
                return None
            if op.name == "arith.subi":
                b = (-b[1], -b[0])
            if op.name == "arith.muli":
                corners = [x * y for x in a for y in b]
                return min(corners), max(corners)
            return a[0] + b[0], a[1] + b[1]
        parent = value.owner.owner if isinstance(value, ir.BlockArgument) else None
        if parent is None or parent.operation.name != "scf.for" or value.arg_number != 0:
            return None
        loop = loop_of(value)
        lb, ub, step = (constant_int(v) for v in loop.operands[:3])
        if lb is None or ub is None or step is None or step <= 0 or ub <= lb:
            return None
        return lb, lb + (ub - lb - 1) // step * step

    def static_bound(self, iv: ir.Value) -> Optional[int]:
        b = self.bound(iv)
        return b if isinstance(b, int) else constant_int(b)

    def unit(self, iv: ir.Value) -> bool:
        return self.start_step(iv) == (0, 1)

    def loop_expr(self, iv: ir.Value, position: int) -> ir.AffineExpr:
        """The loop variable as a function of its dimension: start + step * d."""
        lb, step = self.start_step(iv)
        return ir.AffineDimExpr.get(position) * step + lb

    def input_for(self, load: ir.Operation, affine_map: ir.AffineMap,
                  dims: list[ir.Value]) -> tuple[ir.Value, ir.AffineMap]:
        """The tensor a load reads through `affine_map`, and the map to read it with:
        sliced to the loop extents of the dimensions it indexes directly (linalg takes
        loop extents from operand shapes), and, where an index sums loop variables and a
        positive constant (`x[.., ow + kw + 2]`, a loop `kw in 2..`), from the constant on:
        upstream's convolution analysis, which iree-compile runs on every dispatch,
        crashes on such a convolution-like index's constant term."""
        source = self.L.outer(load.operands[0])
        shape = list(ir.RankedTensorType(source.type).shape)
        self._check_bounds(load, affine_map, dims, shape)
        zero = ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(0)] * affine_map.n_dims)
        exprs, offsets, sizes = [], [], []
        for k, expr in enumerate(affine_map.results):
            offset = _constant_term(expr, zero)
            if offset <= 0 or ir.ShapedType.is_dynamic_size(shape[k]) or \
                    offset >= shape[k] or _dims_in(expr) < 2:
                offset = 0  # (out of range: the verifier says so, at the compute)
            expr = expr - offset
            exprs.append(expr)
            offsets.append(offset)
            try:
                d = ir.AffineDimExpr(expr).position
            except ValueError:
                sizes.append(shape[k] - offset if offset else None)
                continue
            extent = self.bound(dims[d])
            static = extent if isinstance(extent, int) else constant_int(extent)
            if static is not None:
                sizes.append(static)
            else:
                sizes.append(extent if isinstance(extent, int) else self.L.outer(extent))
        return (self.L.sliced(source, sizes, offsets),
                ir.AffineMap.get(affine_map.n_dims, 0, exprs))

    def _check_bounds(self, load: ir.Operation, affine_map: ir.AffineMap,
                      dims: list[ir.Value], shape: list[int]) -> None:
        check_read(affine_map, [self.static_bound(iv) for iv in dims], shape,
                   self._input_name(load.operands[0]), load.location)

    def _input_name(self, arg: ir.Value) -> str:
        """The program's name of a body argument (the compute's `names`), else 'input #N'."""
        names = string_array(self.compute, "names")
        number = ir.BlockArgument(arg).arg_number if isinstance(arg, ir.BlockArgument) \
            else None
        if names is not None and number is not None and number < len(names):
            return names[number]
        return f"input #{number}"

    # ------------------------------------------------------------------ generics

    def empty_domain(self, dims: list[ir.Value]) -> bool:
        """Does a loop of `dims` run no iteration? Then a generic over them leaves its
        outputs as they are (IREE crashes on some generics with an empty loop)."""
        return any(self.static_bound(iv) == 0 for iv in dims)

    def generic(self, dims: list[ir.Value], iterators: list[str], roots: list,
                outs: list[tuple[ir.Value, ir.AffineMap]], region) -> list[ir.Value]:
        """A linalg.generic over `dims`. Each root is a body value or a Derived value;
        `region(values, outs)` returns what the region yields."""
        if self.empty_domain(dims):
            self.skipped_empty = True
            return [v for v, _ in outs]
        plan = Plan(self, dims)
        for root in roots:
            plan.visit(root)
        self._cover_all_dims(plan, dims, outs)
        maps = [m for _, m in plan.inputs] + [m for _, m in outs]
        L = self.L
        with L.ip, self.compute.location:
            op = linalg.GenericOp(
                [v.type for v, _ in outs], [v for v, _ in plan.inputs], [v for v, _ in outs],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                ir.ArrayAttr.get([iterator_attr(k) for k in iterators]))
            elements = [ir.RankedTensorType(v.type).element_type
                        for v, _ in plan.inputs + list(outs)]
            block = op.regions[0].blocks.append(*elements)
        with ir.InsertionPoint(block), self.compute.location:
            plan.begin_emit(list(block.arguments))
            values = [plan.visit(r) for r in roots]
            linalg.YieldOp(region(values, list(block.arguments)[len(plan.inputs):]))
        return list(op.results)

    def _cover_all_dims(self, plan: "Plan", dims, outs) -> None:
        """linalg infers loop extents from operand shapes: the loops that no indexing map
        names (they are only gathered from) get an empty i8 tensor of their extents as an
        input, which IREE allocates. One over all of them; when that would be larger than
        MAX_PLACEHOLDER bytes, one per loop (bytes: the sum of the extents, not their
        product); a single loop longer than that is refused at the loop."""
        covered = set()
        for _, m in plan.inputs + list(outs):
            for expr in m.results:
                try:
                    covered.add(ir.AffineDimExpr(expr).position)
                except ValueError:
                    pass
        missing = [d for d in range(len(dims)) if d not in covered]
        if not missing:
            return
        extents = [self.bound(dims[d]) for d in missing]
        static = [e if isinstance(e, int) else constant_int(e) for e in extents]
        groups = [missing]
        if None in static or math.prod(static) > MAX_PLACEHOLDER:
            groups = [[d] for d in missing]
            for d, extent in zip(missing, static):
                if extent is not None and extent > MAX_PLACEHOLDER:
                    raise LoweringError(
                        f"this loop runs {extent} times and no input is read along it: "
                        f"linalg would take its extent from a tensor of {extent} bytes "
                        f"(at most {MAX_PLACEHOLDER} are lowered)", loop_of(dims[d]).location)
        for group in groups:
            placeholder = self.L.empty([self.bound(dims[d]) for d in group],
                                       ir.IntegerType.get_signless(8))
            plan.inputs.append((placeholder, ir.AffineMap.get(
                len(dims), 0, [ir.AffineDimExpr.get(d) for d in group])))

    def tensor_over(self, dims: list[ir.Value], value, element: ir.Type) -> ir.Value:
        """`value` computed at every point of `dims`, as a tensor over them."""
        n = len(dims)
        self.unmasked(dims, self.compute.location if not dims else loop_of(dims[-1]).location)
        init = self.L.empty([self.bound(iv) for iv in dims], element)
        return self.generic(dims, [PARALLEL] * n, [value], [(init, identity_map(n))],
                            lambda vals, outs: vals)[0]

    # ------------------------------------------------------------------ stores

    def lower_stores(self, result_type: ir.Type, out: Optional[ir.Value] = None,
                     init: Optional[ir.Value] = None) -> ir.Value:
        """The tensor the body's writes of `out` (the first output by default) make; what
        they do not write is 0, or `init`'s (the input of a `mut x`, in main)."""
        out = out if out is not None else self.L.out_arg
        stores = [op for op in ops_in(self.body) if op.name == "cir.store"
                  and op.operands[1] == out]
        if not stores:
            raise LoweringError("the body never writes 'out'", self.compute.location)
        tensor_type = ir.RankedTensorType(result_type)
        written = self._written(stores, [], list(tensor_type.shape), tensor_type.element_type,
                                init)
        return self._cast(written, result_type)

    def _cast(self, value: ir.Value, result_type: ir.Type) -> ir.Value:
        """`value` with the compute's result type (static where the loops were not)."""
        if value.type == result_type:
            return value
        with self.L.ip, self.compute.location:
            return tensor.CastOp(result_type, value).result

    def local(self, alloc: ir.Operation) -> ir.Value:
        """The tensor a `cir.alloc` holds once written: over the alloc's context loops,
        then its own dimensions."""
        key = alloc.results[0]
        if key not in self._locals:
            prefix = self.context(alloc)
            stores = [op for op in ops_in(self.body) if op.name == "cir.store"
                      and op.operands[1] == key]
            if not stores:
                raise LoweringError("a local array is read but never written", alloc.location)
            shape = [self.static_bound(iv) for iv in prefix] + \
                [None if c is None else max(0, c) for c in map(constant_int, alloc.operands)]
            shape = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
            element = ir.RankedTensorType(key.type).element_type
            self._locals[key] = self._written(stores, prefix, shape, element)
        return self._locals[key]

    def _written(self, stores, prefix: list[ir.Value], shape: list[int],
                 element: ir.Type, init: Optional[ir.Value] = None) -> ir.Value:
        """The tensor that `stores` (each at `prefix` ivs + its indices) write."""
        current = None
        for store in stores:
            if self.guarded(store):
                raise LoweringError("a write inside an 'if' is not lowered yet", store.location)
            ctx = self.context(store)
            if ctx[:len(prefix)] != prefix:
                raise LoweringError("a local array is written outside the loops it is "
                                    "declared in", store.location)
            for iv in ctx:
                if len(loop_of(iv).results):
                    raise LoweringError("a write inside a loop that carries values; write "
                                        "after the loop", store.location)
            layout = self._store_layout(store, ctx, prefix)
            tile = self.tensor_over(layout.dims, store.operands[0], element)
            tile_shape = list(ir.RankedTensorType(tile.type).shape)
            full = len(stores) == 1 and layout.plain and covers(tile_shape, shape)
            if full:  # one write of everything
                return tile
            if current is None and init is not None:  # `mut x`: the rest keeps x's values
                current = init
            if current is None:  # partial writes: what no store covers reads as 0
                if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
                    raise LoweringError("strided or offset writes need static shapes",
                                        store.location)
                current = self.L.filled(shape, element, self.L.constant(element, 0))
            current = self._insert(tile, current, layout)
        return current

    def _store_layout(self, store: ir.Operation, ctx: list[ir.Value],
                      prefix=()) -> "StoreLayout":
        """For out[a*iv + c, ...]: the ivs in index order, offsets c and strides a. The
        offset may add a value no loop changes (`cache[b, pos + t, e]`, a KV cache's
        position); an index without a loop variable (a constant, or such a value) is a
        dimension of one element at that offset, which the tile of values leaves out."""
        positions = {iv: d for d, iv in enumerate(ctx)}
        dims, offsets, strides = list(prefix), [0] * len(prefix), [1] * len(prefix)
        units = []
        for k, index in enumerate(list(store.operands[2:])):
            form = self._index_form(index, positions)
            if form is not None and not form[0]:
                units.append(len(prefix) + k)
                offsets.append(self._offset(form[1], form[2]))
                strides.append(1)
                continue
            terms, constant, runtime = form if form is not None else ({}, 0, None)
            # one loop variable, a positive coefficient, a start inside out (known where
            # the offset has no run-time part)
            if len(terms) != 1 or min(terms.values()) <= 0 or runtime is None and constant < 0:
                raise LoweringError("'out' must be indexed by a*i + c with one loop variable "
                                    "i per dimension (c may add a value no loop changes), "
                                    "or by a value no loop changes", store.location)
            (d, a), = terms.items()
            lb, step = self.start_step(ctx[d])  # iv = lb + step * t
            dims.append(ctx[d])
            offsets.append(self._offset(a * lb + constant, runtime))
            strides.append(a * step)
        if sorted(positions[iv] for iv in dims) != list(range(len(ctx))):
            raise LoweringError("every enclosing loop variable must index 'out' exactly once",
                                store.location)
        return StoreLayout(dims, offsets, strides, frozenset(units))

    def _index_form(self, index: ir.Value, positions: dict):
        """`index` as (coefficients of loop dimensions, constant, run-time part): the
        run-time part a Value in main that no loop changes, or None. None where the index
        is none of these (a product of a loop variable and a run-time value, a gather)."""
        form = linear(index, positions)
        if form is not None:
            return form[0], form[1], None
        try:
            return {}, 0, self.L.outer(index)
        except ValueError:
            pass
        op = defining_op(index)
        if op is not None and op.name == "arith.index_cast":
            return self._index_form(op.operands[0], positions)
        if op is None or op.name not in ("arith.addi", "arith.subi"):
            return None
        a, b = (self._index_form(v, positions) for v in op.operands)
        if a is None or b is None:
            return None
        sign = 1 if op.name == "arith.addi" else -1
        terms = dict(a[0])
        for d, x in b[0].items():
            terms[d] = terms.get(d, 0) + sign * x
        runtime = a[2]
        if b[2] is not None:
            with self.L.ip, op.location:
                if runtime is None:
                    runtime = arith.SubIOp(arith.ConstantOp(b[2].type, 0).result,
                                           b[2]).result if sign < 0 else b[2]
                else:
                    runtime = (arith.AddIOp if sign > 0 else arith.SubIOp)(runtime,
                                                                          b[2]).result
        return {d: x for d, x in terms.items() if x}, a[1] + sign * b[1], runtime

    def _offset(self, constant: int, runtime):
        """constant + runtime (a Value in main) as a Value; `constant` without one."""
        if runtime is None:
            return constant
        if not constant:
            return runtime
        with self.L.ip, self.compute.location:
            return arith.AddIOp(runtime, arith.ConstantOp(runtime.type, constant).result).result

    def _clamped(self, offset: ir.Value, into: ir.Value, dim: int, size, stride: int
                 ) -> ir.Value:
        """A run-time `offset` (an integer Value in main) as an index clamped so that
        `size` (an int or an index Value) elements `stride` apart from it lie in
        dimension `dim` of `into`."""
        shape = list(ir.RankedTensorType(into.type).shape)
        index = ir.IndexType.get()
        with self.L.ip, self.compute.location:
            def constant(n: int) -> ir.Value:
                return arith.ConstantOp(index, n).result
            if offset.type != index:
                offset = arith.IndexCastOp(index, offset).result
            if ir.ShapedType.is_dynamic_size(shape[dim]):
                extent = tensor.DimOp(into, constant(dim)).result
            else:
                extent = constant(shape[dim])
            if isinstance(size, int):  # from the first element to the last, inclusive
                span = constant((size - 1) * stride + 1)
            else:
                span = arith.AddIOp(arith.MulIOp(arith.SubIOp(size, constant(1)).result,
                                                 constant(stride)).result, constant(1)).result
            last = arith.SubIOp(extent, span).result
            return arith.MinSIOp(arith.MaxSIOp(offset, constant(0)).result, last).result

    def _insert(self, tile: ir.Value, into: ir.Value, layout: "StoreLayout") -> ir.Value:
        """`tile` written into `into` at `layout`'s offsets and strides; a one-element
        dimension of the layout is not in the tile. A run-time offset is clamped into
        `into`, as a scatter's index is: a write never lands outside its tensor."""
        tile_shape = list(ir.RankedTensorType(tile.type).shape)
        sizes, k_tile = [], 0  # ints, or index Values where the tile's extent is dynamic
        for k in range(len(layout.offsets)):
            if k in layout.units:
                sizes.append(1)
                continue
            size = tile_shape[k_tile]
            if ir.ShapedType.is_dynamic_size(size):
                with self.L.ip, self.compute.location:
                    size = tensor.DimOp(tile, arith.ConstantOp(ir.IndexType.get(),
                                                               k_tile).result).result
            sizes.append(size)
            k_tile += 1
        offsets = [self._clamped(o, into, k, sizes[k], layout.strides[k])
                   if isinstance(o, ir.Value) else o for k, o in enumerate(layout.offsets)]
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        with self.L.ip, self.compute.location:
            return tensor.InsertSliceOp(
                tile, into, [o for o in offsets if isinstance(o, ir.Value)],
                [s for s in sizes if isinstance(s, ir.Value)], [],
                [dynamic if isinstance(o, ir.Value) else o for o in offsets],
                [ir.ShapedType.get_dynamic_size() if isinstance(s, ir.Value) else s
                 for s in sizes], layout.strides).result


@dataclass(frozen=True)
class StoreLayout:
    """Where a store's tile goes: its loop variables (the tile's dimensions, in order),
    and per dimension of the tensor written an offset (int, or an index Value in main),
    a stride, and whether it is a dimension of one element that the tile leaves out."""
    dims: list
    offsets: list
    strides: list
    units: frozenset

    @property
    def plain(self) -> bool:
        """Does the tile start at 0 in every dimension, unstrided, with all of them?"""
        return not self.units and all(isinstance(o, int) and o == 0 for o in self.offsets) \
            and all(s == 1 for s in self.strides)


# ---------------------------------------------------------------------------- helpers


def _dims_in(expr: ir.AffineExpr) -> int:
    """How many distinct loop dimensions `expr` reads (`d3 + d5 + 2`: 2)."""
    return len(set(re.findall(r"\bd(\d+)\b", str(expr))))


def _constant_term(expr: ir.AffineExpr, zero: ir.AffineMap) -> int:
    """c of `expr` = f(dims) + c, f(0) = 0 (`zero` maps every dimension to 0)."""
    try:
        return ir.AffineConstantExpr(expr.compose(zero)).value
    except ValueError:
        return 0


def linear(value: ir.Value, dims: dict) -> Optional[tuple[dict, int]]:
    """`value` as sum(coef[d] * dim_d) + const over loop variables, or None. Each value
    is looked at once (index arithmetic may share operands)."""
    memo: dict = {}
    constants: dict = {}

    def walk(v: ir.Value) -> Optional[tuple[dict, int]]:
        if v not in memo:
            memo[v] = step(v)
        return memo[v]

    def step(v: ir.Value) -> Optional[tuple[dict, int]]:
        if v in dims:
            return {dims[v]: 1}, 0
        c = constant_int(v, constants)
        if c is not None:
            return {}, c
        op = defining_op(v)
        if op is None:
            return None
        if op.name == "arith.index_cast":
            return walk(op.operands[0])
        if op.name not in ("arith.addi", "arith.subi", "arith.muli"):
            return None
        a, b = (walk(x) for x in op.operands)
        if a is None or b is None:
            return None
        if op.name == "arith.muli":
            if a[0] and b[0]:
                return None
            (terms, k), scale = (a, b[1]) if not b[0] else (b, a[1])
            return {d: x * scale for d, x in terms.items()}, k * scale
        sign = 1 if op.name == "arith.addi" else -1
        terms = dict(a[0])
        for d, x in b[0].items():
            terms[d] = terms.get(d, 0) + sign * x
        return {d: x for d, x in terms.items() if x}, a[1] + sign * b[1]
    return walk(value)
