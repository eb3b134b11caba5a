"""Building linalg on tensors from a structured cir body (used by cir-to-linalg).

A `Lowering` sits at one `cir.compute`: body arguments stand for the compute's operands,
and new ops go right before the compute in main. `generic(...)` turns scalar dataflow of
the body (pure ops and `cir.load`s over loop variables) into one `linalg.generic`:

* a load whose indices are affine in the loop variables becomes an input with that
  indexing map (`x[i, k]` -> `(d0, d1, d2) -> (d0, d2)`);
* a load with non-affine indices becomes a gather: `tensor.extract` inside the region on
  indices computed from `linalg.index`;
* pure scalar ops are cloned into the region.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .body_analysis import is_pure
from .cir_ops import constant_int, defining_op

PARALLEL, REDUCTION = "parallel", "reduction"


def iterator_attr(kind: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#linalg.iterator_type<{kind}>")


class Lowering:
    def __init__(self, compute: ir.Operation, body: ir.Operation):
        self.compute = compute
        block = body.regions[0].blocks[0]
        self.args = {arg: operand for arg, operand in zip(block.arguments, compute.operands)}
        self.out_arg = block.arguments[len(block.arguments) - 1]
        self.ip = ir.InsertionPoint(compute)
        self._outer_memo: dict[ir.Value, ir.Value] = {}

    # ------------------------------------------------------------------ values in main

    def outer(self, value: ir.Value) -> ir.Value:
        """A body value that does not depend on loop variables, rebuilt in main."""
        if value in self.args:
            return self.args[value]
        if value in self._outer_memo:
            return self._outer_memo[value]
        op = defining_op(value)
        if op is None or not is_pure(op) or op.name == "cir.load":
            raise ValueError("value depends on the loops")
        operands = [self.outer(v) for v in op.operands]
        with self.ip, op.location:
            clone = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                        operands=operands,
                                        attributes={k: op.attributes[k] for k in op.attributes})
        self._outer_memo[value] = clone.results[0]
        return clone.results[0]

    def empty(self, bounds: Sequence[ir.Value], element: ir.Type) -> ir.Value:
        sizes = []
        for bound in bounds:
            static = constant_int(bound)
            sizes.append(static if static is not None else self.outer(bound))
        with self.ip, self.compute.location:
            return tensor.EmptyOp(sizes, element).result

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
        if value in dims:
            return ir.AffineDimExpr.get(dims[value])
        c = constant_int(value)
        if c is not None:
            return ir.AffineConstantExpr.get(c)
        op = defining_op(value)
        if op is None:
            return None
        if op.name == "arith.index_cast":
            return Lowering.affine(op.operands[0], dims)
        if op.name in ("arith.addi", "arith.subi", "arith.muli"):
            a, b = (Lowering.affine(v, dims) for v in op.operands)
            if a is None or b is None:
                return None
            if op.name == "arith.addi":
                return a + b
            if op.name == "arith.subi":
                return a - b
            ca, cb = constant_int(op.operands[0]), constant_int(op.operands[1])
            if ca is not None:
                return b * ca
            if cb is not None:
                return a * cb
        return None

    def load_map(self, load: ir.Operation, dims: dict, n_dims: int) -> Optional[ir.AffineMap]:
        exprs = [self.affine(i, dims) for i in load.operands[1:]]
        if any(e is None for e in exprs):
            return None
        return ir.AffineMap.get(n_dims, 0, exprs)

    # ------------------------------------------------------------------ generic builder

    def generic(self, ivs: Sequence[ir.Value], iterators: Sequence[str],
                roots: Sequence[ir.Value], outs: Sequence[tuple[ir.Value, ir.AffineMap]],
                region: Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]],
                substitutions: Sequence[tuple[ir.Value, ir.Value, ir.AffineMap]] = ()
                ) -> list[ir.Value]:
        """One linalg.generic over loops `ivs` computing `roots` per point.

        `region(root_values, out_args)` returns what the region yields. Each substitution
        `(body value, tensor, map)` reads the body value from a main-level tensor (e.g. the
        result of an earlier reduction) instead of computing it.
        """
        dims = {iv: d for d, iv in enumerate(ivs)}
        inputs = [(t, m) for _, t, m in substitutions]
        slots: dict[ir.Value, int] = {v: i for i, (v, _, _) in enumerate(substitutions)}
        self._collect_inputs(roots, dims, len(ivs), inputs, slots)
        maps = [m for _, m in inputs] + [m for _, m in outs]
        result_types = [v.type for v, _ in outs]
        with self.ip, self.compute.location:
            op = linalg.GenericOp(
                result_types, [v for v, _ in inputs], [v for v, _ in outs],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                ir.ArrayAttr.get([iterator_attr(k) for k in iterators]))
            elements = [ir.RankedTensorType(v.type).element_type for v, _ in inputs + list(outs)]
            block = op.regions[0].blocks.append(*elements)
        with ir.InsertionPoint(block), self.compute.location:
            memo: dict[ir.Value, ir.Value] = {}
            args = list(block.arguments)
            values = [self._materialize(r, dims, slots, args, memo) for r in roots]
            linalg.YieldOp(region(values, args[len(inputs):]))
        return list(op.results)

    def _collect_inputs(self, roots, dims, n_dims, inputs, slots) -> None:
        seen: set = set()
        stack = list(reversed(roots))  # depth first, operands in order: inputs by first use
        while stack:
            value = stack.pop()
            if value in seen or value in dims or value in self.args or value in slots:
                continue
            seen.add(value)
            op = defining_op(value)
            if op is None:
                continue
            if op.name == "cir.load":
                if op.operands[0] == self.out_arg:
                    raise ValueError("reads of 'out' are not structured")
                affine_map = self.load_map(op, dims, n_dims)
                if affine_map is not None:
                    source = self.outer(op.operands[0])
                    for i, (v, m) in enumerate(inputs):
                        if v == source and m == affine_map:
                            slots[value] = i
                            break
                    else:
                        slots[value] = len(inputs)
                        inputs.append((source, affine_map))
                    continue
            stack.extend(reversed(list(op.operands)))

    def _materialize(self, value, dims, slots, args, memo) -> ir.Value:
        if value in memo:
            return memo[value]
        if value in slots:
            result = args[slots[value]]
        elif value in dims:
            result = linalg.IndexOp(dims[value]).result
        elif value in self.args:
            result = self.args[value]
        else:
            op = defining_op(value)
            assert op is not None, "block arguments other than loop variables are handled"
            if op.name == "cir.load":
                indices = [self._materialize(i, dims, slots, args, memo)
                           for i in op.operands[1:]]
                result = tensor.ExtractOp(self.outer(op.operands[0]), indices).result
            else:
                operands = [self._materialize(v, dims, slots, args, memo) for v in op.operands]
                result = ir.Operation.create(
                    op.name, results=[r.type for r in op.results], operands=operands,
                    attributes={k: op.attributes[k] for k in op.attributes}).results[0]
        memo[value] = result
        return result


def identity_map(n: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(n)


def projection(n: int, keep: Sequence[int]) -> ir.AffineMap:
    return ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(d) for d in keep])
