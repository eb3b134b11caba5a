"""Reductions of a loop nest -> linalg (a mixin of NestLowering, nest_lowering.py).

* a reduction loop (an `scf.for` threading accumulators `acc = acc op g`, possibly through
  nested loops and `if`s) is one generic over its context plus its loops, one result per
  accumulator; a guarded contribution (`if c: acc += g`) becomes `select(c, g, identity)`;
  `C += A * B` of matching maps is `linalg.matmul` / `batch_matmul` (or one weight shared
  by a batch) when named ops are asked for;
* a loop whose carried values are updated otherwise (the online softmax) runs in order:
  an `scf.for` in main carrying one tensor per value over its context;
* the `yield` of a `reduce` kernel is the contribution of an implicit accumulator over the
  reduced loops (`linalg.reduce` for a plain load).
"""
from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from .cir_ops import defining_op, ops_in, parent_op
from .combiners import (IDENTITY, REDUCE_COMBINER, arg_identity, arg_select, combine,
                        constant_like, identity_of)
from .generic_region import Derived, LoweringError
from .linalg_emit import PARALLEL, REDUCTION, identity_map
from .shared_weight_matmul import shared_weight_maps, shared_weight_matmul

__all__ = ["ReductionLowering"]


class ReductionLowering:
    """Mixin: needs NestLowering's L, compute, body, named_ops, context, bound, mask,
    generic, tensor_over, input_for, unit, guarded, unmasked, empty_domain and _cast."""

    def reduction(self, loop: ir.Operation) -> list[ir.Value]:
        """Result tensors (over the loop's context) of a reduction loop, one per
        accumulator."""
        iv = loop.regions[0].blocks[0].arguments[0]
        if iv in self._reductions:
            return self._reductions[iv]
        ctx = self.context(loop)
        inits = list(loop.operands[3:])
        try:
            chain, accs, yields = self._chain(loop)
            contributions = [self._contribution(yields[k], accs[-1][k], accs, loop.location)
                             for k in range(len(accs[0]))]
        except LoweringError:  # not acc = acc op g: run the loop in order
            self._reductions[iv] = self.sequential(loop)
            return self._reductions[iv]
        n = len(ctx)
        dims = ctx + [c.regions[0].blocks[0].arguments[0] for c in chain]
        masks = [(m, True) for m in map(self.mask, dims[n:]) if m is not None]
        contributions = [(c, g, guards + masks) for c, g, guards in contributions]
        out_map = ir.AffineMap.get(len(dims), 0, [ir.AffineDimExpr.get(d) for d in range(n)])
        init_tensors = [self._init(ctx, v) for v in inits]
        named = self._named_contraction(ctx, dims, contributions, init_tensors) \
            if self.named_ops else None
        if named is not None:
            results = [named]
        else:
            roots = []
            for combiner, g, guards in contributions:
                roots.append(self._guarded_root(combiner, g, guards))
            results = self.generic(
                dims, [PARALLEL] * n + [REDUCTION] * len(chain), roots,
                [(t, out_map) for t in init_tensors],
                lambda vals, outs: [combine(c[0], o, v)
                                    for c, o, v in zip(contributions, outs, vals)])
        self._reductions[iv] = results
        return results

    def sequential(self, loop: ir.Operation) -> list[ir.Value]:
        """A loop whose carried values are updated in order (online softmax: m, l, o):
        an scf.for in main carrying one tensor per value over the loop's context; each
        iteration computes the new values at every point of the context at once, with the
        loop variable a fixed value. Memory: the context, not the loop's extent."""
        ctx = self.context(loop)
        block = loop.regions[0].blocks[0]
        carried = list(block.arguments)[1:]
        yielded = list(list(block.operations)[-1].operands)
        inits = [self._init(ctx, v) for v in loop.operands[3:]]
        L = self.L
        try:
            lo, hi, step = (L.outer(v) for v in loop.operands[:3])
        except ValueError:
            raise LoweringError("a loop run in order (its values are not only reduced) must "
                                "have bounds that do not depend on the loops around it",
                                loop.location) from None
        with L.ip, loop.location:
            main_loop = scf.ForOp(lo, hi, step, inits)
        saved = (L.ip, dict(self._reductions), dict(self._locals), dict(L._outer_memo),
                 dict(self.state))
        L.ip = ir.InsertionPoint(main_loop.body)
        L.fixed[block.arguments[0]] = main_loop.induction_variable
        for arg, tensor_value in zip(carried, main_loop.inner_iter_args):
            self.state[arg] = (tensor_value, ctx)
        try:
            new_values = [self.tensor_over(ctx, v, v.type) for v in yielded]
            with L.ip, loop.location:
                scf.YieldOp(new_values)
        finally:
            L.ip, self._reductions, self._locals, L._outer_memo, self.state = saved
            del L.fixed[block.arguments[0]]
        return list(main_loop.results)

    def _chain(self, loop: ir.Operation):
        """Loops threading the accumulators straight through, their accumulator block
        arguments, and the innermost yielded values."""
        chain, accs = [], []
        current = loop
        n_acc = len(loop.results)
        while True:
            if len(current.results) != n_acc:
                raise LoweringError("nested reduction loops must carry the same values",
                                    current.location)
            block = current.regions[0].blocks[0]
            chain.append(current)
            acc = list(block.arguments)[1:]
            accs.append(acc)
            ops = [o.operation for o in block.operations]
            yielded = list(ops[-1].operands)
            inner = [o for o in ops[:-1] if o.name == "scf.for" and len(o.results)
                     and any(r in yielded for r in o.results)]
            if inner:
                nested = inner[0]
                if list(nested.operands[3:]) != acc or list(nested.results) != yielded:
                    raise LoweringError("nested loops of a reduction must thread all "
                                        "accumulators straight through", nested.location)
                current = nested
                continue
            return chain, accs, yielded

    def _contribution(self, yielded: ir.Value, acc: ir.Value, accs, location):
        """`acc op g` (maybe under ifs) -> (combiner, g, guards [(cond, taken_when)])."""
        guards = []
        value = yielded
        while True:
            op = defining_op(value)
            if op is None:
                raise LoweringError("an accumulator must be updated as acc = acc op value",
                                    location)
            if op.name == "scf.if":
                k = list(op.results).index(value)
                then_y = list(op.regions[0].blocks[0].operations)[-1].operands[k]
                else_y = (list(op.regions[1].blocks[0].operations)[-1].operands[k]
                          if len(op.regions[1].blocks) else acc)
                if else_y == acc:
                    guards.append((op.operands[0], True))
                    value = then_y
                elif then_y == acc:
                    guards.append((op.operands[0], False))
                    value = else_y
                else:
                    raise LoweringError("both branches of an 'if' change the accumulator; "
                                        "only guarded updates (if c: acc op= g) are lowered",
                                        op.location)
                continue
            if op.name not in IDENTITY:
                raise LoweringError("an accumulator must be updated as acc = acc op value "
                                    "(op: + * min max and or)", op.location)
            a, b = op.operands
            g = b if a == acc else a if b == acc else None
            if g is None:
                raise LoweringError("an accumulator must be updated as acc = acc op value",
                                    op.location)
            for use in acc.uses:
                owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
                if owner != op and owner.name not in ("scf.yield",):
                    raise LoweringError("an accumulator is read other than in acc = acc op "
                                        "value", owner.location)
            return op.name, g, guards

    def _guarded_root(self, combiner: str, g: ir.Value, guards):
        if not guards:
            return g

        def build(values):
            value, conds = values[0], values[1:]
            identity = constant_like(value.type, identity_of(combiner, value.type))
            for c, (_, taken) in reversed(list(zip(conds, guards))):
                value = arith.SelectOp(c, value, identity).result if taken else \
                    arith.SelectOp(c, identity, value).result
            return value
        return Derived([g] + [cond for cond, _ in guards], build)

    def _init(self, ctx: list[ir.Value], value: ir.Value) -> ir.Value:
        """The initial accumulator as a tensor over the loop's context."""
        bounds = [self.bound(iv) for iv in ctx]
        try:
            return self.L.filled(bounds, value.type, self.L.outer(value))
        except ValueError:
            return self.tensor_over(ctx, value, value.type)

    def _named_contraction(self, ctx, dims, contributions, inits) -> Optional[ir.Value]:
        """C[i, j] += A[i, k] * B[k, j] (or batched) with no guard -> linalg named op.
        A and B of one dtype, C's or narrower and each widened to it first (`acc +=
        cast(a[i, k], f32) * b[k, j]` of bf16 a and b: the named op's own widening)."""
        if len(contributions) != 1 or len(dims) != len(ctx) + 1:
            return None
        combiner, g, guards = contributions[0]
        product = defining_op(g)
        if guards or combiner not in ("arith.addf", "arith.addi") or product is None \
                or product.name not in ("arith.mulf", "arith.muli"):
            return None
        loads = [_unwidened(defining_op(v)) for v in product.operands]
        if any(op is None or op.name != "cir.load" or self.guarded(op) for op in loads):
            return None
        if not all(self.unit(iv) for iv in dims):
            return None
        positions = {iv: d for d, iv in enumerate(dims)}
        maps = [self.L.load_map(op, positions, len(dims)) for op in loads]
        n = len(ctx)
        if n < 2 or any(m is None for m in maps):
            return None
        d = [ir.AffineDimExpr.get(i) for i in range(n + 1)]
        named = None
        if n == 2:
            a_exprs, b_exprs, named = [d[0], d[2]], [d[2], d[1]], linalg.matmul
        elif n == 3:
            a_exprs, b_exprs, named = [d[0], d[1], d[3]], [d[0], d[3], d[2]], linalg.batch_matmul
        pairs = None
        if named is not None:
            pairs = _as_a_and_b(list(zip(loads, maps)), *(
                ir.AffineMap.get(n + 1, 0, e) for e in (a_exprs, b_exprs)))
        if pairs is None and named is not None:  # B K-major: w[j, k], as a layer keeps it
            b_exprs = b_exprs[:-2] + [d[n - 1], d[n]]
            pairs = _as_a_and_b(list(zip(loads, maps)), *(
                ir.AffineMap.get(n + 1, 0, e) for e in (a_exprs, b_exprs)))
            named = _with_maps(named, [a_exprs, b_exprs, [d[i] for i in range(n)]])
        if pairs is None and n >= 3:  # C[.., i, j] = A[.., i, k] * W[k, j]: one weight
            pairs = _as_a_and_b(list(zip(loads, maps)), *shared_weight_maps(n))
            named = _shared_weight
        if pairs is None:
            return None
        if any(op.operands[0] not in self.L.args for op, _ in pairs):
            return None
        sources = [self.input_for(op, m, dims)[0] for op, m in pairs]
        element = ir.RankedTensorType(inits[0].type).element_type
        widened = [op.result.type != element for op, _ in pairs]
        if any(widened) and not (all(widened) and pairs[0][0].result.type ==
                                 pairs[1][0].result.type):
            return None  # mixed operands: the body says how, linalg's named op cannot
        self.named_used = True
        if self.empty_domain(dims):  # a loop of no iteration (K = 0): C is its init
            return inits[0]
        with self.L.ip, self.compute.location:
            return named(*sources, outs=[inits[0]])

    # ------------------------------------------------------------------ yields

    def lower_yield(self, op_name: str, axis: Optional[int],
                    unsigned: bool = False) -> ir.Value:
        yields = [op for op in ops_in(self.body) if op.name == "cir.yield"]
        if len(yields) != 1:
            raise LoweringError(f"a reduction body yields once; this one has {len(yields)}",
                                self.compute.location)
        y = yields[0]
        ctx = self.context(y)
        n = len(ctx)
        reduced = list(range(n)) if axis is None else [axis]
        if axis is not None and not 0 <= axis < n:
            raise LoweringError(f"axis {axis} is out of range", self.compute.location)
        kept = [d for d in range(n) if d not in reduced]
        bounds = [self.bound(ctx[d]) for d in kept]
        iterators = [REDUCTION if d in reduced else PARALLEL for d in range(n)]
        out_map = ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(d) for d in kept])
        self.unmasked([ctx[d] for d in kept], y.location)
        guards = self._yield_guards(y) + [(m, True) for m in map(self.mask, ctx)
                                          if m is not None]
        value = y.operands[0]
        element = value.type
        L = self.L
        if op_name in ("argmin", "argmax"):
            i64 = ir.IntegerType.get_signless(64)
            values = L.filled(bounds, element, L.constant(element, arg_identity(op_name,
                                                                              element)))
            indices = L.filled(bounds, i64, L.constant(i64, 0))
            roots = [value, y.operands[1]] + ([self._all(guards)] if guards else [])
            result = self.generic(ctx, iterators, roots, [(values, out_map), (indices, out_map)],
                                  lambda vals, outs: arg_select(op_name, vals, outs))[1]
        else:
            combiner = REDUCE_COMBINER[op_name][0 if isinstance(element, ir.FloatType) else 1]
            if unsigned:
                combiner = {"arith.maxsi": "arith.maxui",
                            "arith.minsi": "arith.minui"}.get(combiner, combiner)
            init = L.filled(bounds, element, L.constant(element, identity_of(combiner, element)))
            result = self._named_reduce(y, ctx, init, combiner, reduced) \
                if self.named_ops and not guards and not self.empty_domain(ctx) else None
            if result is None:
                root = self._guarded_root(combiner, value, guards)
                result = self.generic(ctx, iterators, [root], [(init, out_map)],
                                      lambda vals, outs: [combine(combiner, outs[0], vals[0])])[0]
        if axis is None:
            with L.ip, self.compute.location:
                return tensor.ExtractOp(result, []).result
        return self._cast(result, self.compute.results[0].type)

    def _yield_guards(self, y: ir.Operation):
        guards = []
        op = y
        parent = parent_op(op)
        while parent is not None and parent.name != "func.func":
            if parent.name == "scf.if":
                in_then = _region_contains(parent.regions[0], op)
                guards.append((parent.operands[0], in_then))
            op = parent
            parent = parent_op(parent)
        return guards

    @staticmethod
    def _all(guards):
        """The conjunction of a yield's guards, as a region value."""
        def build(conds):
            value = None
            for c, (_, taken) in zip(conds, guards):
                if not taken:
                    c = arith.XOrIOp(c, constant_like(c.type, 1)).result
                value = c if value is None else arith.AndIOp(value, c).result
            return value
        return Derived([cond for cond, _ in guards], build)

    def _named_reduce(self, y, ctx, init, combiner, reduced) -> Optional[ir.Value]:
        load = defining_op(y.operands[0])
        if load is None or load.name != "cir.load" or load.operands[0] not in self.L.args:
            return None
        positions = {iv: d for d, iv in enumerate(ctx)}
        if not all(self.unit(iv) for iv in ctx):
            return None
        load_map = self.L.load_map(load, positions, len(ctx))  # None: a gather
        if load_map is None or load_map != identity_map(len(ctx)):
            return None
        source, _ = self.input_for(load, identity_map(len(ctx)), ctx)
        element = y.operands[0].type
        with self.L.ip, self.compute.location:
            op = linalg.ReduceOp([init.type], [source], [init], ir.DenseI64ArrayAttr.get(reduced))
            block = op.regions[0].blocks.append(element, element)
            with ir.InsertionPoint(block):
                linalg.YieldOp([combine(combiner, block.arguments[1], block.arguments[0])])
        return op.results[0]


def _unwidened(op: Optional[ir.Operation]) -> Optional[ir.Operation]:
    """The load an extf widens, or `op` itself."""
    if op is not None and op.name == "arith.extf":
        return defining_op(op.operands[0])
    return op


def _as_a_and_b(pairs: list, a_map: ir.AffineMap, b_map: ir.AffineMap) -> Optional[list]:
    """The (load, map) pairs of a product ordered as (A, B), or None if the maps are not
    A's and B's."""
    for ordered in (pairs, pairs[::-1]):
        if ordered[0][1] == a_map and ordered[1][1] == b_map:
            return ordered
    return None


def _with_maps(named, exprs: list):
    """The named product `named` with explicit indexing maps (a transposed operand)."""
    maps = [ir.AffineMap.get(len(exprs[0]) + 1, 0, e) for e in exprs]
    return lambda *sources, outs: named(*sources, outs=outs, indexing_maps=maps)


def _shared_weight(a: ir.Value, w: ir.Value, outs: list[ir.Value]) -> ir.Value:
    return shared_weight_matmul(a, w, outs[0])


def _region_contains(region: ir.Region, op: ir.Operation) -> bool:
    return any(child.operation == op for block in region.blocks for child in block.operations)
