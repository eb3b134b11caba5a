"""Name resolution and typing inside one compute block's body.

Resolves every name of the body to a Symbol, types every expression (types.py has the
promotion rules), collects the sizes the body uses and how input dimensions bind them,
and works out the kernel's result type. Program-level concerns (which names are inputs,
checking sizes against run-time shapes) live in checker.py.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from . import ast
from .random_calls import RANDOM_BUILTINS, check_random_call
from .ranges import fits_64_bits, walk
from .symbols import Kernel, Size, SizeBinding, Symbol, is_tensor
from .tiles import TileInput, rewrite_tiles, uses_tiles
from .types import (ANY, BOOL, FLOAT_LITERAL, F32, I64, INDEX, INT_LITERAL, ScalarType, TensorType,
                    concrete, promote)
from ..errors import ZynMLError

# Scalar math builtins: name -> (min args, max args).
MATH_BUILTINS = {
    "relu": (1, 1), "exp": (1, 1), "log": (1, 1), "sqrt": (1, 1), "rsqrt": (1, 1),
    "tanh": (1, 1), "sin": (1, 1), "cos": (1, 1), "tan": (1, 1), "sinh": (1, 1),
    "cosh": (1, 1), "abs": (1, 1), "floor": (1, 1), "ceil": (1, 1), "min": (2, 2),
    "max": (2, 2), "pow": (2, 2), "clamp": (3, 3),
    "erf": (1, 1), "log1p": (1, 1), "expm1": (1, 1), "sigmoid": (1, 1), "silu": (1, 1),
}
# Builtins whose result is float even for integer arguments.
FLOAT_ONLY = {"exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh",
              "floor", "ceil", "pow", "erf", "log1p", "expm1", "sigmoid", "silu"}
REDUCE_OPS = ("+", "*", "min", "max", "and", "or", "argmin", "argmax")
KNOWN_ANNOTATIONS = {"workgroup", "shared", "broadcast", "tile", "device", "async", "parallel"}


def _err(message: str, node: ast.Node, notes=None) -> ZynMLError:
    return ZynMLError(message, ast.leftmost(node).loc, notes=notes)


class BodyChecker:
    """Checks one `compute()` block. `resolve_outer(name)` answers for program-level names."""

    def __init__(self, node: ast.Compute, name: str, args: list[tuple[str, Any]],
                 resolve_outer: Callable[[str, Any], Optional[Symbol]],
                 sizes: dict[str, Size], outer_tensors: frozenset = frozenset()):
        self.node = node
        self.outer_tensors = outer_tensors  # program tensors, for a helpful error
        self.name = name
        self.args = args  # (program value name, type) per compute input, in order
        self.resolve_outer = resolve_outer
        self.sizes = sizes  # program-wide size table (shared so bindings accumulate)
        self.scopes: list[dict[str, Symbol]] = []
        self.captures: dict[str, Symbol] = {}
        self.used_sizes: dict[str, Symbol] = {}
        self.stores: list[ast.Assign] = []
        self.whole_out: Optional[ast.Assign] = None
        self.yields: list[ast.Yield] = []
        self.out_sym = Symbol("out", "out", None, node.loc)
        floats = [t.dtype for _, t in args if is_tensor(t) and t.dtype.is_float]
        floats += [t for _, t in args if isinstance(t, ScalarType) and t.is_float]
        self.default_float = F32 if not floats else functools.reduce(promote, floats)
        self.bound_names = self._names_in_bounds(node.body)
        self.tile_checks: list = []  # tiles.ExtentCheck, for the call

    # ------------------------------------------------------------------ entry point

    def check(self) -> Kernel:
        node = self.node
        if node.elided:
            raise _err("compute body is elided ('...'); write the body out", node)
        if node.kernel is None:
            raise _err("compute block has no '@kernel' line", node)
        kind, reduce_op, axis = self._kernel_spec(node.kernel)
        self.kind, self.reduce_op = kind, reduce_op
        scope = {}
        self.arg_syms = []
        for (arg_name, ty), expr in zip(self.args, node.inputs):
            local = self._arg_local_name(expr)
            if local in scope:
                raise _err(f"'{local}' is passed to compute(...) twice", expr)
            scope[local] = Symbol("arg", arg_name, ty, expr.loc)
            self.arg_syms.append(scope[local])
        scope["out"] = self.out_sym
        self.scopes.append(scope)
        annotations = self._annotations(node)
        self.body = self._element_body(node.body, scope)
        self._block(self.body)
        result, out_dims = self._result(kind, reduce_op, axis)
        if "broadcast" in annotations:
            self._check_broadcast(annotations["broadcast"])
        return Kernel(
            name=self.name, node=node, kind=kind, reduce_op=reduce_op, axis=axis,
            arg_syms=self.arg_syms, capture_syms=list(self.captures.values()),
            size_syms=list(self.used_sizes.values()), result=result, out_dims=out_dims,
            default_float=self.default_float, annotations=annotations, out_sym=self.out_sym,
            body=self.body, tile_checks=self.tile_checks)

    def _element_body(self, body: list[ast.Stmt], scope: dict[str, Symbol]) -> list[ast.Stmt]:
        """The body with its tile statements (slices, '@', row_max, ...) rewritten into
        element form (tiles.py); the extents those use bind like sizes."""
        if not uses_tiles(body):
            return body
        inputs = {local: TileInput(sym.name, sym.ty.rank) for local, sym in scope.items()
                  if sym.kind == "arg" and is_tensor(sym.ty)}
        body, uses, self.tile_checks = rewrite_tiles(body, inputs)
        for use in uses:
            tensor = scope[use.local].name
            size = self.sizes.setdefault(use.name, Size(use.name, use.loc))
            if not any(b.tensor == tensor and b.dim == use.dim for b in size.bindings):
                size.bindings.append(SizeBinding(tensor, use.dim, use.loc))
            self.bound_names.add(use.name)
        self.bound_names |= self._names_in_bounds(body)
        return body

    @staticmethod
    def _arg_local_name(expr: ast.Expr) -> str:
        """How the body refers to a compute input: `x` for `x`, `weights.qkv_proj` for a path."""
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.name)
            expr = expr.base
        if not isinstance(expr, ast.Name):
            raise _err("a compute input must be a name or a field path", expr)
        return ".".join([expr.id] + parts[::-1])

    # ------------------------------------------------------------------ kernel line and annotations

    def _kernel_spec(self, spec: ast.KernelSpec) -> tuple[str, Optional[str], Optional[int]]:
        if spec.kind != "reduce":
            if spec.args or spec.kwargs:
                raise _err(f"kernel '{spec.kind}' takes no parameters", spec)
            return spec.kind, None, None
        if len(spec.args) != 1:
            raise _err("'reduce' takes one operator: reduce(op) or reduce(op, axis=n)", spec)
        op = spec.args[0]
        op_name = op.op if isinstance(op, ast.ReduceOpName) else getattr(op, "id", None)
        if op_name not in REDUCE_OPS:
            raise _err(f"unknown reduction operator '{op_name or '?'}'; expected one of "
                       + ", ".join(REDUCE_OPS), op)
        axis = None
        for kw in spec.kwargs:
            if kw.name != "axis":
                raise _err(f"unknown parameter '{kw.name}' of 'reduce'; expected 'axis'", kw)
            if not isinstance(kw.value, ast.IntLit):
                raise _err("'axis' must be an integer literal", kw.value)
            axis = kw.value.value
        return "reduce", op_name, axis

    def _annotations(self, node: ast.Compute) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ann in node.outer + node.inner:
            if ann.name not in KNOWN_ANNOTATIONS:
                raise _err(f"unknown annotation '@{ann.name}'; expected one of "
                           + ", ".join(f"@{a}" for a in sorted(KNOWN_ANNOTATIONS)), ann)
            if ann.name == "broadcast":
                out.setdefault("broadcast", []).append(ann)
            elif ann.name in ("workgroup",):
                vals = [self._const_int(a) for a in ann.args]
                if not 1 <= len(vals) <= 3 or ann.kwargs:
                    raise _err("@workgroup takes 1 to 3 integer sizes", ann)
                out["workgroup"] = vals
            elif ann.name == "shared":
                if len(ann.args) != 1:
                    raise _err("@shared takes one size in bytes", ann)
                out["shared"] = self._const_int(ann.args[0], allow_sizes=True)
            else:
                out[ann.name] = ann
        return out

    def _const_int(self, expr: ast.Expr, allow_sizes: bool = False) -> Optional[int]:
        """Evaluate a constant integer expression (annotation arguments), which must fit
        in 64 bits (it becomes an i64 attribute)."""
        if isinstance(expr, ast.IntLit):
            return expr.value
        if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
            a = self._const_int(expr.left, allow_sizes)
            b = self._const_int(expr.right, allow_sizes)
            if a is None or b is None:
                return None
            value = {"+": a + b, "-": a - b, "*": a * b}[expr.op]
            if not fits_64_bits(value):
                raise _err(f"this constant is {value}, which does not fit in 64 bits", expr)
            return value
        if allow_sizes and isinstance(expr, ast.Name):
            return None  # depends on sizes: known only at specialization
        raise _err("expected a constant integer", expr)

    def _check_broadcast(self, anns: list[ast.Annotation]) -> None:
        for ann in anns:
            if len(ann.args) != 1 or not isinstance(ann.args[0], ast.Name):
                raise _err("@broadcast takes an input name and axis=n", ann)
            target = ann.args[0].id
            if target not in self.scopes[0] or self.scopes[0][target].kind != "arg":
                raise _err(f"@broadcast names '{target}', which is not an input of this compute",
                           ann.args[0])
            for kw in ann.kwargs:
                if kw.name != "axis" or not isinstance(kw.value, ast.IntLit):
                    raise _err("@broadcast takes axis=<integer>", kw)

    # ------------------------------------------------------------------ statements

    def _lookup(self, name: str) -> Optional[Symbol]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _block(self, stmts: list[ast.Stmt]) -> None:
        for stmt in stmts:
            self._stmt(stmt)

    def _stmt(self, stmt: ast.Stmt) -> None:
        method = getattr(self, "_stmt_" + type(stmt).__name__, None)
        if method is None:
            raise _err(f"'{type(stmt).__name__.lower().rstrip('_')}' is not supported in a "
                       "compute body yet", stmt)
        method(stmt)

    def _stmt_For(self, stmt: ast.For) -> None:
        scope: dict[str, Symbol] = {}
        self.scopes.append(scope)
        for rng in stmt.ranges:
            for bound in (rng.lo, rng.hi) + ((rng.step,) if rng.step else ()):
                t = self._expr(bound)
                if not t.may_be_int():
                    raise _err(f"loop bounds must be integers, got {t}", bound)
            scope[rng.var] = rng.sym = Symbol("loop", rng.var, INDEX, rng.loc, range=rng)
        self.scopes.append({})
        self._block(stmt.body)
        self.scopes.pop()
        self.scopes.pop()

    def _stmt_If(self, stmt: ast.If) -> None:
        t = self._expr(stmt.cond)
        if not t.may_be_bool():
            raise _err(f"condition must be a bool, got {t}", stmt.cond)
        for body in (stmt.then_body, stmt.else_body):
            self.scopes.append({})
            self._block(body)
            self.scopes.pop()

    def _stmt_Let(self, stmt: ast.Let) -> None:
        if len(stmt.targets) != 1:
            raise _err("tuple 'let' is not supported in a compute body", stmt)
        t = self._value(stmt.value)
        if is_tensor(t):  # a whole-tensor statement: a tensor local to this iteration
            stmt.sym = Symbol("tensor", stmt.targets[0], t, stmt.loc)
            stmt.sym.ref = self.ref_sym(stmt.value)
        else:
            stmt.sym = Symbol("let", stmt.targets[0], concrete_in(t, self), stmt.loc)
        self.scopes[-1][stmt.targets[0]] = stmt.sym

    def _stmt_SharedVar(self, stmt: ast.SharedVar) -> None:
        for dim in stmt.dims:
            t = self._expr(dim)
            if not t.may_be_int():
                raise _err(f"an extent must be an integer, got {t}", dim)
        stmt.sym = Symbol("shared", stmt.name,
                          TensorType(self.default_float, (None,) * len(stmt.dims)), stmt.loc)
        self.scopes[-1][stmt.name] = stmt.sym

    def _stmt_Var(self, stmt: ast.Var) -> None:
        t = self._expr(stmt.value)
        if is_tensor(t):
            raise _err("a local must be a scalar", stmt.value)
        stmt.sym = Symbol("var", stmt.name, concrete_in(t, self), stmt.loc)
        self.scopes[-1][stmt.name] = stmt.sym

    def _stmt_Assign(self, stmt: ast.Assign) -> None:
        target = stmt.target
        whole_out = isinstance(target, ast.Name) and target.id == "out" and \
            self._lookup("out") is self.out_sym
        value_t = self._value(stmt.value) if whole_out else self._expr(stmt.value)
        if isinstance(target, ast.Name):
            sym = self._lookup(target.id)
            if sym is None:
                raise _err(f"unknown name '{target.id}'", target)
            target.sym = sym
            if sym.kind == "out":
                self._whole_out(stmt)
                return
            if sym.kind != "var":
                what = {"arg": "an input", "let": "a 'let' (use 'var' for a mutable local)",
                        "loop": "a loop variable", "size": "a size",
                        "capture": "a program constant",
                        "tensor": "a whole-tensor 'let' (compute a new one instead)",
                        "shared": "a shared array (write one element: name[i] = ...)"}[sym.kind]
                raise _err(f"cannot assign to '{target.id}': it is {what}", target)
            target.sym, target.ty = sym, sym.ty
            self._check_assignable(sym.ty, value_t, stmt.value)
            return
        if isinstance(target, ast.Index) and isinstance(target.base, ast.Name):
            sym = self._lookup(target.base.id)
            if sym is None:
                raise _err(f"unknown name '{target.base.id}'", target.base)
            if sym.kind == "arg":
                raise _err(f"cannot write to input '{target.base.id}'", target.base)
            if sym.kind == "shared":
                target.base.sym = sym
                self._check_rank(sym, target, len(target.indices))
                for idx in target.indices:
                    self._index_expr(idx)
                if stmt.op is not None:
                    raise _err("compound assignment to a shared array is not supported; "
                               "compute the value in a var", target)
                target.ty = value_t
                return
            if sym.kind != "out":
                raise _err(f"cannot write to '{target.base.id}': only 'out' and shared "
                           "arrays are written by index", target.base)
            target.base.sym = sym
            for idx in target.indices:
                self._index_expr(idx)
            if stmt.op is not None and not self.stores:
                raise _err("'out' is read before it is written", target)
            self.stores.append(stmt)
            target.ty = value_t
            return
        raise _err("cannot assign to this expression", target)

    def _check_assignable(self, dest: ScalarType, value: ScalarType, node: ast.Node) -> None:
        if dest.is_any or value.is_any:
            return
        if dest.is_int and not dest.is_bool and value.is_float and not value.is_literal:
            raise _err(f"cannot assign a {value} value to an integer variable", node)
        if dest.is_bool != value.is_bool:
            raise _err(f"cannot assign a {value} value to a {dest} variable", node)

    def _stmt_Yield(self, stmt: ast.Yield) -> None:
        if self.kind != "reduce":
            raise _err("'yield' outside a reduction (the kernel is "
                       f"'{self.kind}', not 'reduce(...)')", stmt)
        value = stmt.value
        pair = self.reduce_op in ("argmin", "argmax")
        if pair:
            if not (isinstance(value, ast.TupleExpr) and len(value.elts) == 2):
                raise _err(f"'{self.reduce_op}' yields a pair: yield (value, index)", stmt)
            t = self._expr(value.elts[0])
            it = self._expr(value.elts[1])
            if not it.may_be_int():
                raise _err(f"the index of a yielded pair must be an integer, got {it}",
                           value.elts[1])
        else:
            if isinstance(value, ast.TupleExpr):
                raise _err(f"'reduce({self.reduce_op})' yields one value, not a pair", stmt)
            t = self._expr(value)
        if self.reduce_op in ("and", "or") and not t.may_be_bool():
            raise _err(f"'reduce({self.reduce_op})' needs bool values, got {t}", stmt.value)
        self.yields.append(stmt)

    def _stmt_ExprStmt(self, stmt: ast.ExprStmt) -> None:
        value = stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == "barrier":
            if value.args or value.kwargs:
                raise _err("'barrier()' takes no arguments", value)
            return
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == "print":
            self._print(value)
            return
        raise _err("an expression statement has no effect here", stmt)

    def _print(self, call: ast.Call) -> None:
        """`print(v, ...)`: scalar values and string literals (device="interpreter")."""
        if call.kwargs:
            raise _err("'print' takes no keyword arguments", call.kwargs[0].value)
        for arg in call.args:
            if not isinstance(arg, ast.StringLit):
                self._expr(arg)

    # ------------------------------------------------------------------ expressions

    def _index_expr(self, idx: Any) -> None:
        if isinstance(idx, ast.Slice):
            raise _err("slices are not supported in this kernel yet", idx)
        t = self._expr(idx)
        if not t.may_be_int():
            notes = None
            if isinstance(idx, ast.Name) and idx.sym is not None and idx.sym.kind in ("let", "var"):
                notes = [(f"'{idx.id}' is bound to a {t} value here (it shadows any loop "
                          f"variable of that name)", idx.sym.loc)]
            raise _err(f"index must be an integer, got {t}", idx, notes=notes)

    def _expr(self, e: ast.Expr) -> ScalarType:
        method = getattr(self, "_expr_" + type(e).__name__, None)
        if method is None:
            raise _err("this expression is not supported in a compute body", e)
        t = method(e)
        e.ty = t
        return t

    def _expr_IntLit(self, e: ast.IntLit) -> ScalarType:
        return INT_LITERAL

    def _expr_FloatLit(self, e: ast.FloatLit) -> ScalarType:
        return FLOAT_LITERAL

    def _expr_BoolLit(self, e: ast.BoolLit) -> ScalarType:
        return BOOL

    def _expr_Name(self, e: ast.Name) -> ScalarType:
        sym = self._lookup(e.id)
        if sym is None:
            sym = self._resolve_free(e)
        if sym.kind == "arg" and is_tensor(sym.ty) and sym.ty.rank is None:
            e.sym = sym  # an input of unknown rank used as a scalar: it may be one
            return ANY
        if sym.kind == "out" or (sym.kind in ("arg", "tensor", "shared") and is_tensor(sym.ty)):
            raise _err(f"'{e.id}' is a tensor; index it (e.g. {e.id}[i])", e)
        e.sym = sym
        return sym.ty

    def _resolve_free(self, e: ast.Name) -> Symbol:
        """A name not bound in the body: a size, or a program-level scalar."""
        if e.id in self.used_sizes:
            return self.used_sizes[e.id]
        if e.id in self.captures:
            return self.captures[e.id]
        outer = self.resolve_outer(e.id, e.loc) if e.id not in self.bound_names else None
        if outer is not None:
            if is_tensor(outer.ty):
                raise _err(f"'{e.id}' is a tensor that is not an input of this compute; "
                           f"add it to compute(...)", e)
            self.captures[e.id] = outer
            return outer
        if e.id in self.bound_names or e.id in self.sizes:
            size = self.sizes.setdefault(e.id, Size(e.id, e.loc))
            sym = Symbol("size", e.id, INDEX, size.loc)
            self.used_sizes[e.id] = sym
            return sym
        raise _err(f"unknown name '{e.id}'", e)

    def _expr_Unary(self, e: ast.Unary) -> ScalarType:
        t = self._expr(e.operand)
        if e.op == "not":
            if not t.may_be_bool():
                raise _err(f"'not' needs a bool, got {t}", e)
            return BOOL
        if t.is_bool:
            raise _err("cannot negate a bool", e)
        return t

    def _expr_Binary(self, e: ast.Binary) -> ScalarType:
        lt, rt = self._expr(e.left), self._expr(e.right)
        if e.op in ("and", "or"):
            if not (lt.may_be_bool() and rt.may_be_bool()):
                raise _err(f"'{e.op}' needs bool operands, got {lt} and {rt}", e)
            return BOOL
        common = promote(lt, rt)
        if common is None:
            raise _err(f"operator '{e.op}' cannot combine {lt} and {rt}", e)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            return BOOL
        if common.is_bool:  # arithmetic on bools, whatever the unknown side turns out to be
            raise _err(f"operator '{e.op}' cannot combine {lt} and {rt}", e)
        if e.op == "@":
            raise _err("'@' (matrix product) is not supported in this kernel yet", e)
        if e.op == "^":
            return common if common.is_float else (FLOAT_LITERAL if common.is_literal else common)
        return common

    def _expr_Index(self, e: ast.Index) -> ScalarType:
        if not isinstance(e.base, (ast.Name, ast.Attribute)):
            raise _err("only inputs and 'out' can be indexed", e)
        local = self._arg_local_name(e.base) if isinstance(e.base, ast.Attribute) else e.base.id
        sym = self._lookup(local)
        if sym is None:
            if local in self.outer_tensors:
                raise _err(f"'{local}' is not an input of this compute; add it to compute(...)",
                           e.base)
            raise _err(f"unknown name '{local}'", e.base)
        if sym.kind == "out":
            if not self.stores:
                raise _err("'out' is read before it is written", e)
            e.base.sym = sym
            for idx in e.indices:
                self._index_expr(idx)
            return self._store_type()
        if sym.kind == "shared":
            e.base.sym = sym
            self._check_rank(sym, e, len(e.indices))
            for idx in e.indices:
                self._index_expr(idx)
            return sym.ty.dtype
        if sym.kind not in ("arg", "tensor") or not is_tensor(sym.ty):
            raise _err(f"'{local}' is not a tensor and cannot be indexed", e.base)
        e.base.sym = sym
        ty: TensorType = sym.ty
        if ty.rank is not None and ty.rank != len(e.indices):
            raise _err(f"rank mismatch: '{local}' has rank {ty.rank} but is indexed with "
                       f"{len(e.indices)} {'index' if len(e.indices) == 1 else 'indices'}", e)
        for dim, idx in enumerate(e.indices):
            self._index_expr(idx)
            self._bind_size(sym.name, dim, idx)
        return ty.dtype

    def _store_type(self) -> ScalarType:
        """The element type of `out`: the first written value's (an index as i64)."""
        t = concrete_in(self.stores[0].target.ty, self)
        return I64 if t == INDEX else t

    def _bind_size(self, tensor: str, dim: int, idx: ast.Expr) -> None:
        """`x[i]` with `for i in 0..len` binds `len` to x's extent in that dimension."""
        if not isinstance(idx, ast.Name) or idx.sym is None or idx.sym.kind != "loop":
            return
        rng = idx.sym.range
        if not _is_zero(rng.lo) or not _is_unit_step(rng.step):
            return
        if isinstance(rng.hi, ast.Name) and rng.hi.sym is not None and rng.hi.sym.kind == "size":
            size = self.sizes[rng.hi.id]
            if not any(b.tensor == tensor and b.dim == dim for b in size.bindings):
                size.bindings.append(SizeBinding(tensor, dim, idx.loc))

    def _expr_Call(self, e: ast.Call) -> ScalarType:
        if not isinstance(e.func, ast.Name):
            raise _err("only builtin functions can be called in a compute body", e.func)
        name = e.func.id
        if name == "dot":
            return self._dot(e)
        if name in RANDOM_BUILTINS:
            return check_random_call(e, self._expr)
        if name not in MATH_BUILTINS:
            raise _err(f"unknown function '{name}'; builtins are "
                       + ", ".join(sorted([*MATH_BUILTINS, *RANDOM_BUILTINS])), e.func)
        lo, hi = MATH_BUILTINS[name]
        if e.kwargs:
            raise _err(f"'{name}' takes no keyword arguments", e.kwargs[0])
        if not lo <= len(e.args) <= hi:
            raise _err(f"'{name}' takes {lo} argument{'s' if lo > 1 else ''}, "
                       f"got {len(e.args)}", e)
        types = [self._expr(a) for a in e.args]
        common = types[0]
        for a, t in zip(e.args[1:], types[1:]):
            common = promote(common, t)
            if common is None:
                raise _err(f"'{name}' cannot combine these argument types", a)
        if common.is_bool:
            raise _err(f"'{name}' needs numbers, got bool", e)
        if name in FLOAT_ONLY and not common.is_float:
            return self.default_float
        return common

    def _check_rank(self, sym: Symbol, node: ast.Node, n: int) -> None:
        if sym.ty.rank is not None and sym.ty.rank != n:
            raise _err(f"rank mismatch: '{sym.name}' has rank {sym.ty.rank} but is indexed "
                       f"with {n} {'index' if n == 1 else 'indices'}", node)

    # ------------------------------------------------------------------ whole-tensor values

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
                raise _err(f"operands of '{e.op}' have ranks {tensors[0].rank} and "
                           f"{tensors[1].rank}", e)
            dtype = promote(lt.dtype if is_tensor(lt) else lt, rt.dtype if is_tensor(rt) else rt)
            if dtype is None or dtype.is_bool:
                raise _err(f"operator '{e.op}' cannot combine these operands", e)
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
        raise _err("this whole-tensor expression is not supported; index the tensor "
                   "inside a loop instead", e)

    def _reduce_call(self, e: ast.Call) -> ScalarType:
        """`reduce(op, tensor)`: a full reduction of a whole tensor."""
        if len(e.args) != 2 or e.kwargs:
            raise _err("'reduce' takes an operator and a tensor: reduce(max, logits)", e)
        op = e.args[0]
        name = op.op if isinstance(op, ast.ReduceOpName) else getattr(op, "id", None)
        if name not in ("+", "*", "min", "max"):
            raise _err(f"unknown reduction operator '{name}' for reduce(); expected one of "
                       "+, *, min, max", op)
        t = self._value(e.args[1])
        if not is_tensor(t):
            raise _err("the second argument of 'reduce' must be a tensor", e.args[1])
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
            raise _err("compound assignment to the whole 'out' is not supported", stmt)
        if not is_tensor(t):
            raise _err("'out = value' needs a tensor value; write out[indices] = value for "
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
            found = BodyChecker.ref_sym(child)
            if found is not None:
                return found
        return None

    def _dot(self, e: ast.Call) -> ScalarType:
        """`dot(Q[b, h, i], K[b, h, j])`: the inner product of two rows (each argument
        indexes all but the last dimension)."""
        if len(e.args) != 2 or e.kwargs:
            raise _err("'dot' takes two rows, e.g. dot(Q[b, h, i], K[b, h, j])", e)
        types = [self._row(a) for a in e.args]
        lengths = [a.base.sym.ty.shape[-1] if a.base.sym.ty.shape else None for a in e.args]
        if None not in lengths and lengths[0] != lengths[1]:
            raise _err(f"'dot' of rows of different lengths: {lengths[0]} and {lengths[1]}", e)
        common = promote(types[0], types[1])
        if common is None or common.is_bool:
            raise _err(f"'dot' cannot combine rows of {types[0]} and {types[1]}", e)
        return common

    def _row(self, e: ast.Expr) -> ScalarType:
        if not isinstance(e, ast.Index) or not isinstance(e.base, ast.Name):
            raise _err("an argument of 'dot' must be a row of an input, e.g. Q[b, h, i]", e)
        sym = self._lookup(e.base.id)
        if sym is None or sym.kind != "arg" or not is_tensor(sym.ty):
            raise _err(f"'{e.base.id}' is not a tensor input of this compute", e.base)
        e.base.sym = sym
        if sym.ty.rank is not None and sym.ty.rank != len(e.indices) + 1:
            raise _err(f"'{e.base.id}' has rank {sym.ty.rank}: a row of it takes "
                       f"{sym.ty.rank - 1} indices, not {len(e.indices)}", e)
        for dim, idx in enumerate(e.indices):
            self._index_expr(idx)
            self._bind_size(sym.name, dim, idx)
        e.ty = sym.ty.dtype
        return sym.ty.dtype

    def _expr_TupleExpr(self, e: ast.TupleExpr) -> ScalarType:
        raise _err("a tuple is only allowed in 'yield (value, index)'", e)

    # ------------------------------------------------------------------ result

    def _result(self, kind: str, reduce_op: Optional[str], axis: Optional[int]):
        if kind == "reduce":
            return self._reduce_result(reduce_op, axis)
        if not self.stores:
            raise _err(f"kernel '{kind}' never writes 'out'", self.node)
        if self.whole_out is not None:
            return self._whole_out_result()
        rank = len(self.stores[0].target.indices)
        extents: list[list[ast.Expr]] = [[] for _ in range(rank)]
        for store in self.stores:
            if len(store.target.indices) != rank:
                first = self.stores[0].target
                raise _err(f"rank mismatch: 'out' was written with {rank} indices "
                           f"at {first.loc.line}:{first.loc.col}", store.target)
            for dim, idx in enumerate(store.target.indices):
                extent = _extent_of_index(idx)
                if extent is None:
                    notes = None
                    if isinstance(idx, ast.Name) and idx.sym is not None and \
                            idx.sym.kind in ("let", "var"):
                        notes = [(f"'{idx.id}' is bound by '{idx.sym.kind}' here, so it is no "
                                  "longer the loop variable of that name", idx.sym.loc)]
                    raise _err("cannot infer the output shape: index 'out' with a*i + c, "
                               "i a loop variable running from 0 in steps of 1", idx, notes)
                _check_extent_is_known(extent, idx)
                if not any(ast.same_extent(extent, e) for e in extents[dim]):
                    extents[dim].append(extent)
        dims = [e[0] if len(e) == 1 else
                ast.Call(e[0].loc, ast.Name(e[0].loc, "max"), e) for e in extents]
        return TensorType(self._store_type(), (None,) * rank), dims

    def _whole_out_result(self):
        """`out = expr`: out has the shape of the input the expression is shaped like; its
        extents are sizes bound to that input's dimensions."""
        if len(self.stores) != 1:
            raise _err("'out = value' must be the only write of 'out'", self.stores[1])
        stmt = self.whole_out
        ref = self.ref_sym(stmt.value)
        if ref.ty.rank is None:  # known at the call
            return TensorType(self._store_type(), None), []
        dims = []
        for d in range(ref.ty.rank):
            name = f"{ref.name}.shape[{d}]"
            size = self.sizes.setdefault(name, Size(name, stmt.loc))
            if not any(b.tensor == ref.name and b.dim == d for b in size.bindings):
                size.bindings.append(SizeBinding(ref.name, d, stmt.loc))
            dims.append(ast.Name(stmt.loc, name))
        return TensorType(self._store_type(), (None,) * len(dims)), dims

    def _reduce_result(self, reduce_op: str, axis: Optional[int]):
        if len(self.yields) != 1:
            raise _err(f"a reduction body must yield exactly once (found {len(self.yields)})",
                       self.yields[1] if self.yields else self.node)
        loops = self._enclosing_loops(self.yields[0])
        value = self.yields[0].value
        if reduce_op in ("argmin", "argmax"):
            elem = I64
        else:
            elem = concrete_in(value.ty, self)
            elem = I64 if elem == INDEX else elem
        if axis is None:
            return elem, []
        if not 0 <= axis < len(loops):
            raise _err(f"axis {axis} is out of range: the reduction has {len(loops)} loop "
                       f"dimension{'s' if len(loops) != 1 else ''}", self.node.kernel)
        dims = []
        for d, rng in enumerate(loops):
            if d == axis:
                continue
            if not _is_zero(rng.lo) or not _is_unit_step(rng.step):
                raise _err("cannot infer the output shape: kept loops must run from 0 in "
                           "steps of 1", rng)
            _check_extent_is_known(rng.hi, rng)
            dims.append(rng.hi)
        return TensorType(elem, (None,) * len(dims)), dims

    def _enclosing_loops(self, target: ast.Stmt) -> list[ast.Range]:
        def walk(stmts, loops):
            for s in stmts:
                if s is target:
                    return loops
                if isinstance(s, ast.For):
                    found = walk(s.body, loops + s.ranges)
                    if found is not None:
                        return found
                if isinstance(s, ast.If):
                    found = walk(s.then_body, loops) or walk(s.else_body, loops)
                    if found is not None:
                        return found
            return None
        return walk(self.body, []) or []

    @staticmethod
    def _names_in_bounds(stmts: list[ast.Stmt]) -> set[str]:
        """Names used in loop bounds: free ones among them are sizes."""
        names: set[str] = set()

        def collect(e):
            if isinstance(e, ast.Name):
                names.add(e.id)
            elif isinstance(e, ast.Binary):
                collect(e.left)
                collect(e.right)
            elif isinstance(e, ast.Unary):
                collect(e.operand)

        def walk(ss):
            for s in ss:
                if isinstance(s, ast.For):
                    for r in s.ranges:
                        collect(r.lo)
                        collect(r.hi)
                        if r.step is not None:
                            collect(r.step)
                    walk(s.body)
                elif isinstance(s, ast.If):
                    walk(s.then_body)
                    walk(s.else_body)
        walk(stmts)
        return names


def concrete_in(t: ScalarType, checker: BodyChecker) -> ScalarType:
    """A literal type made concrete in a kernel: float literals take the kernel's float
    type, integer literals i64 (index is for loop variables and sizes)."""
    if t == FLOAT_LITERAL:
        return checker.default_float
    if t == INT_LITERAL:
        return I64
    if t.is_any:  # stays unknown until the call gives the inputs' dtypes
        return t
    return concrete(t)


def _extent_of_index(idx: ast.Expr) -> Optional[ast.Expr]:
    """For `a*i + c` with `for i in 0..n`: the extent it needs, a*(n - 1) + c + 1."""
    a, c, var = 1, 0, idx
    if isinstance(var, ast.Binary) and var.op in "+-" and isinstance(var.right, ast.IntLit):
        c = var.right.value if var.op == "+" else -var.right.value
        var = var.left
    if isinstance(var, ast.Binary) and var.op == "*":
        if isinstance(var.right, ast.IntLit):
            a, var = var.right.value, var.left
        elif isinstance(var.left, ast.IntLit):
            a, var = var.left.value, var.right
    if not (isinstance(var, ast.Name) and var.sym is not None and var.sym.kind == "loop"):
        return None
    rng = var.sym.range
    if not _is_zero(rng.lo) or not _is_unit_step(rng.step) or a <= 0 or c < 0:
        return None
    if a == 1 and c == 0:
        return rng.hi
    loc = ast.leftmost(idx).loc  # where the index starts, for errors about the extent
    last = ast.Binary(loc, "-", rng.hi, ast.IntLit(loc, 1))
    return ast.Binary(loc, "+", ast.Binary(loc, "*", ast.IntLit(loc, a), last),
                      ast.IntLit(loc, c + 1))


def _check_extent_is_known(extent: ast.Expr, where: ast.Node) -> None:
    """An extent of the result is known before the loops run: a loop whose end is a
    variable (`for i in 0..b`, a triangular loop) gives 'out' no shape."""
    for node in walk(extent):
        if isinstance(node, ast.Name) and node.sym is not None and \
                node.sym.kind in ("loop", "let", "var"):
            raise _err(f"cannot infer the output shape: the loop that gives this dimension "
                       f"of the result runs to '{node.id}', a {node.sym.kind} variable; its "
                       "extent must be known before the loops run (a size or a constant)",
                       where, [(f"'{node.id}' is the end of that loop", node.loc)])


def _is_zero(e: ast.Expr) -> bool:
    return isinstance(e, ast.IntLit) and e.value == 0


def _is_unit_step(e: Optional[ast.Expr]) -> bool:
    return e is None or isinstance(e, ast.IntLit) and e.value == 1


def eval_extent(e: ast.Expr, sizes: dict[str, Size], constants: dict[str, Any]) -> Optional[int]:
    """The value of an extent expression (`len`, `3*hidden`, `head_dim/2`), if known."""
    if isinstance(e, ast.IntLit):
        return e.value
    if isinstance(e, ast.Name):
        if e.id in sizes:
            return sizes[e.id].value
        value = constants.get(e.id)
        return value if isinstance(value, int) else None
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "max":
        values = [eval_extent(a, sizes, constants) for a in e.args]
        return None if None in values else max(values)
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = eval_extent(e.left, sizes, constants), eval_extent(e.right, sizes, constants)
        if a is None or b is None or (e.op in "/%" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0,
                "%": a % b if b else 0}[e.op]
    return None

