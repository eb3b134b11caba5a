"""Whole-tensor values in a compute body (`out = exp(x - reduce(max, x))`, the fused
kernels' form) and `dot` of two rows: a mixin of the BodyChecker.
"""
from __future__ import annotations

from typing import Optional

from . import ast
from .body_rules import FLOAT_ONLY, MATH_BUILTINS, concrete_in, error_at
from .symbols import Size, SizeBinding, Symbol, is_tensor
from .types import ScalarType, TensorType, promote

__all__ = ["WholeTensorValues"]


class WholeTensorValues:
    """Mixin: needs the BodyChecker's _expr, _lookup, _index_expr, _bind_size, stores,
    default_float."""

    def _value(self, e: ast.Expr):
        """Type an expression that may denote a whole tensor (`logits - max_val`,
        `exp(shifted)`, `reduce(+, exp_vals)`): the fused kernels' whole-tensor form.
        Scalars are typed by _expr."""
        if not self._mentions_tensor(e):
            return self._expr(e)
        if isinstance(e, ast.Name):
            sym = self._lookup(e.id)
            e.sym, e.ty = sym, sym.ty
            return sym.ty
        if isinstance(e, ast.Unary) and e.op == "-":
            t = self._value(e.operand)
            e.ty = t
            return t
        if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "^"):
            lt, rt = self._value(e.left), self._value(e.right)
            tensors = [t for t in (lt, rt) if is_tensor(t)]
            if len(tensors) == 2 and None not in (tensors[0].rank, tensors[1].rank) and \
                    tensors[0].rank != tensors[1].rank:
                raise error_at(f"operands of '{e.op}' have ranks {tensors[0].rank} and "
                               f"{tensors[1].rank}", e)
            dtype = promote(lt.dtype if is_tensor(lt) else lt, rt.dtype if is_tensor(rt) else rt)
            if dtype is None or dtype.is_bool:
                raise error_at(f"operator '{e.op}' cannot combine these operands", e)
            if not tensors:  # whole-tensor reductions on both sides: a scalar
                e.ty = concrete_in(dtype, self)
                return e.ty
            e.ty = TensorType(concrete_in(dtype, self), tensors[0].shape)
            return e.ty
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            name = e.func.id
            if name == "reduce":
                return self._reduce_call(e)
            if name in MATH_BUILTINS and len(e.args) == 1 and not e.kwargs:
                t = self._value(e.args[0])
                dtype = t.dtype if t.dtype.is_float or name not in FLOAT_ONLY \
                    else self.default_float
                e.ty = TensorType(dtype, t.shape)
                return e.ty
        raise error_at("this whole-tensor expression is not supported; index the tensor "
                       "inside a loop instead", e)

    def _reduce_call(self, e: ast.Call) -> ScalarType:
        """`reduce(op, tensor)`: a full reduction of a whole tensor."""
        if len(e.args) != 2 or e.kwargs:
            raise error_at("'reduce' takes an operator and a tensor: reduce(max, logits)", e)
        op = e.args[0]
        name = op.op if isinstance(op, ast.ReduceOpName) else getattr(op, "id", None)
        if name not in ("+", "*", "min", "max"):
            raise error_at(f"unknown reduction operator '{name}' for reduce(); expected one of "
                           "+, *, min, max", op)
        t = self._value(e.args[1])
        if not is_tensor(t):
            raise error_at("the second argument of 'reduce' must be a tensor", e.args[1])
        e.ty = concrete_in(t.dtype, self)
        return e.ty

    def _mentions_tensor(self, e: ast.Expr) -> bool:
        """Does `e` use a tensor without indexing it (or call reduce)?"""
        if isinstance(e, ast.Name):
            sym = self._lookup(e.id)
            return sym is not None and sym.kind in ("arg", "tensor") and is_tensor(sym.ty)
        if isinstance(e, ast.Call):
            if isinstance(e.func, ast.Name) and e.func.id == "reduce":
                return True
            return any(self._mentions_tensor(a) for a in e.args)
        if isinstance(e, ast.Binary):
            return self._mentions_tensor(e.left) or self._mentions_tensor(e.right)
        if isinstance(e, ast.Unary):
            return self._mentions_tensor(e.operand)
        return False

    def _whole_out(self, stmt: ast.Assign) -> None:
        """`out = tensor expression` (fused kernels' whole-tensor form)."""
        t = stmt.value.ty
        if stmt.op is not None:
            raise error_at("compound assignment to the whole 'out' is not supported", stmt)
        if not is_tensor(t):
            raise error_at("'out = value' needs a tensor value; write out[indices] = value for "
                           "elements", stmt.value)
        stmt.target.ty = t.dtype
        self.whole_out = stmt
        self.stores.append(stmt)

    @staticmethod
    def ref_sym(e: ast.Expr) -> Optional[Symbol]:
        """The compute input whose shape a whole-tensor expression has."""
        if isinstance(e, ast.Name) and e.sym is not None:
            if e.sym.kind == "arg" and is_tensor(e.sym.ty):
                return e.sym
            return getattr(e.sym, "ref", None)
        children = {ast.Binary: lambda n: [n.left, n.right], ast.Unary: lambda n: [n.operand],
                    ast.Call: lambda n: n.args}.get(type(e), lambda n: [])(e)
        for child in children:
            found = WholeTensorValues.ref_sym(child)
            if found is not None:
                return found
        return None

    def _dot(self, e: ast.Call) -> ScalarType:
        """`dot(Q[b, h, i], K[b, h, j])`: the inner product of two rows (each argument
        indexes all but the last dimension)."""
        if len(e.args) != 2 or e.kwargs:
            raise error_at("'dot' takes two rows, e.g. dot(Q[b, h, i], K[b, h, j])", e)
        types = [self._row(a) for a in e.args]
        lengths = [a.base.sym.ty.shape[-1] if a.base.sym.ty.shape else None for a in e.args]
        if None not in lengths and lengths[0] != lengths[1]:
            raise error_at(f"'dot' of rows of different lengths: {lengths[0]} and {lengths[1]}", e)
        self._bind_equal_lengths(e)
        common = promote(types[0], types[1])
        if common is None or common.is_bool:
            raise error_at(f"'dot' cannot combine rows of {types[0]} and {types[1]}", e)
        return common

    def _bind_equal_lengths(self, e: ast.Call) -> None:
        """The two rows of a `dot` have one length: where it is a run-time size, the call
        checks it like any size bound twice (a size already bound to either takes the
        other; else one named like the first, `Q.shape[3]`)."""
        dims = [(a.base.sym.name, len(a.indices)) for a in e.args]  # each row's last axis
        if dims[0] == dims[1]:
            return
        size = next((s for s in self.sizes.values()
                     if any((b.tensor, b.dim) in dims for b in s.bindings)), None)
        if size is None:
            name = f"{dims[0][0]}.shape[{dims[0][1]}]"
            size = self.sizes.setdefault(name, Size(name, e.loc))
        for tensor, dim in dims:
            if not any(b.tensor == tensor and b.dim == dim for b in size.bindings):
                size.bindings.append(SizeBinding(tensor, dim, e.loc))

    def _row(self, e: ast.Expr) -> ScalarType:
        if not isinstance(e, ast.Index) or not isinstance(e.base, ast.Name):
            raise error_at("an argument of 'dot' must be a row of an input, e.g. Q[b, h, i]", e)
        sym = self._lookup(e.base.id)
        if sym is None or sym.kind != "arg" or not is_tensor(sym.ty):
            raise error_at(f"'{e.base.id}' is not a tensor input of this compute", e.base)
        e.base.sym = sym
        if sym.ty.rank is not None and sym.ty.rank != len(e.indices) + 1:
            raise error_at(f"'{e.base.id}' has rank {sym.ty.rank}: a row of it takes "
                           f"{sym.ty.rank - 1} indices, not {len(e.indices)}", e)
        for dim, idx in enumerate(e.indices):
            self._index_expr(idx)
            self._bind_size(sym.name, dim, idx)
        e.ty = sym.ty.dtype
        return sym.ty.dtype

    def _expr_TupleExpr(self, e: ast.TupleExpr) -> ScalarType:
        raise error_at("a tuple is only allowed in 'yield (value, index)'", e)
