"""Top-level steps on whole values: `split`, `reshape`, and the bookkeeping of a step's
value (a mixin of the program checker).
"""
from __future__ import annotations

import math
from typing import Any

from . import ast
from .lexer import MAX_INT
from .ranges import check_extent_divisors
from .result_shapes import eval_extent
from .size_resolution import names_in
from .symbols import Size, Step, is_tensor
from .types import ANY, I64, TensorType
from ..errors import ZynMLError

__all__ = ["WholeValueSteps", "literal_number"]


class WholeValueSteps:
    """Mixin: needs self.values, self.steps, self.outputs, self.inputs, self.input_locs,
    self.sizes, self.constants, self.signature, self.pipeline, self._resolve_size."""

    def _add_step(self, step: Step) -> None:
        self.values[step.target] = step.ty
        self.steps.append(step)
        if self.pipeline is None and step.target not in self.outputs:
            self.outputs.append(step.target)

    def _value_type(self, expr: ast.Expr, what: str) -> tuple[str, Any]:
        if not isinstance(expr, ast.Name):
            raise ZynMLError(f"{what} takes a value's name", expr.loc)
        if expr.id in self.values:
            return expr.id, self.values[expr.id]
        if expr.id in self.inputs:
            return expr.id, self.inputs[expr.id]
        if self.pipeline is None:  # script mode: a free name is an input of the program
            if self.signature is None:
                ty = TensorType(ANY, None)
            elif expr.id in self.signature:
                ty = self.signature[expr.id]
            else:
                raise ZynMLError(f"missing input '{expr.id}'", expr.loc)
            self.inputs[expr.id] = ty
            self.input_locs[expr.id] = expr.loc
            return expr.id, ty
        raise ZynMLError(f"unknown name '{expr.id}'", expr.loc)

    def _split(self, stmt: ast.Let) -> list[Step]:
        """`let (q, k, v) = split(t, 3, axis=-1)`: equal parts along an axis."""
        call = stmt.value
        if len(call.args) != 2 or not isinstance(call.args[1], ast.IntLit):
            raise ZynMLError("split takes a tensor and a number of parts: "
                             "split(t, 3, axis=-1)", call.loc)
        name, ty = self._value_type(call.args[0], "split")
        parts = call.args[1].value
        axis = -1
        for kw in call.kwargs:
            axis_value = literal_number(kw.value)
            if kw.name != "axis" or not isinstance(axis_value, int):
                raise ZynMLError("split takes axis=<integer>", kw.loc)
            axis = axis_value
        if not is_tensor(ty) or ty.rank is None:
            raise ZynMLError(f"'{name}' must be a tensor of known rank to split it",
                             call.args[0].loc)
        if not -ty.rank <= axis < ty.rank:
            raise ZynMLError(f"axis {axis} is out of range for rank {ty.rank}", call.loc)
        axis %= ty.rank
        if len(stmt.targets) != parts:
            raise ZynMLError(f"split into {parts} parts is bound to {len(stmt.targets)} "
                             "names", stmt.loc)
        extent = ty.shape[axis]
        if extent is not None and extent % parts:
            raise ZynMLError(f"cannot split dimension {axis} of '{name}' ({extent}) into "
                             f"{parts} equal parts", call.loc)
        shape = list(ty.shape)
        shape[axis] = None if extent is None else extent // parts
        return [Step(target, stmt.loc, ty=TensorType(ty.dtype, tuple(shape)), op="slice",
                     operands=[name], params={"axis": axis, "index": k, "parts": parts})
                for k, target in enumerate(stmt.targets)]

    def _reshape(self, target: str, call: ast.Call, stmt: ast.Let) -> Step:
        if len(call.args) != 2 or not isinstance(call.args[1], ast.ListExpr):
            raise ZynMLError("reshape takes a tensor and a list of extents: "
                             "reshape(t, [a, b])", call.loc)
        name, ty = self._value_type(call.args[0], "reshape")
        dims = call.args[1].elts
        for d in dims:
            for n in names_in(d):
                if n.id in self.constants:
                    continue
                size = self.sizes.setdefault(n.id, Size(n.id, n.loc))
                if not size.bindings:  # nothing binds it yet: an integer input
                    self.inputs.setdefault(n.id, I64)
                    self.input_locs.setdefault(n.id, n.loc)
        if self.signature is not None:
            for d in dims:
                for n in names_in(d):
                    if n.id in self.sizes:
                        self._resolve_size(n.id)
        check_extent_divisors(dims, lambda e: eval_extent(e, self.sizes, self.constants))
        shape = tuple(eval_extent(d, self.sizes, self.constants) for d in dims)
        for d, extent in zip(dims, shape):
            if extent is not None and not 0 <= extent <= MAX_INT:
                raise ZynMLError(f"a reshape extent must be from 0 to {MAX_INT}, got {extent}",
                                 ast.leftmost(d).loc)
        if is_tensor(ty) and ty.shape is not None and None not in ty.shape and None not in shape:
            if math.prod(ty.shape) != math.prod(shape):
                raise ZynMLError(f"cannot reshape '{name}' of shape {list(ty.shape)} to "
                                 f"{list(shape)}: the sizes differ", call.loc)
        return Step(target, stmt.loc, ty=TensorType(ty.dtype, shape), op="reshape",
                    operands=[name], params={"dims": dims})


def literal_number(e: ast.Expr):
    if isinstance(e, (ast.IntLit, ast.FloatLit)):
        return e.value
    if isinstance(e, ast.Unary) and e.op == "-":
        inner = literal_number(e.operand)
        return -inner if inner is not None else None
    return None
