"""Name resolution and typing inside one compute block's body.

Resolves every name of the body to a Symbol, types every expression (types.py has the
promotion rules), collects the sizes the body uses and how input dimensions bind them,
and works out the kernel's result type. Program-level concerns (which names are inputs,
checking sizes against run-time shapes) live in checker.py. Mixins hold whole-tensor
values (body_values.py) and the result's type and shape (result_shapes.py); body_rules.py
the builtins and helpers they share.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from . import ast
from .body_rules import (FLOAT_ONLY, KNOWN_ANNOTATIONS, MATH_BUILTINS, REDUCE_OPS, concrete_in,
                         error_at)
from .body_values import WholeTensorValues
from .cast_calls import check_cast_call
from .random_calls import RANDOM_BUILTINS, check_random_call
from .ranges import fits_64_bits
from .outputs import (OUTPUTS_NAMESPACE, kernel_outputs, mutable_outputs, mutable_write,
                      out_label, output_target, reads_data, unknown_output, written_sym)
from .result_shapes import KernelResult, is_unit_step, is_zero
from .symbols import Kernel, Size, SizeBinding, Symbol, is_tensor
from .tiles import TileInput, rewrite_tiles, uses_tiles
from .types import (ANY, BOOL, FLOAT_LITERAL, F32, I64, INDEX, INT_LITERAL, SCALARS, ScalarType,
                    TensorType, promote)


class BodyChecker(WholeTensorValues, KernelResult):
    """Checks one `compute()` block. `resolve_outer(name)` answers for program-level names."""

    def __init__(self, node: ast.Compute, name: str, args: list[tuple[str, Any]],
                 resolve_outer: Callable[[str, Any], Optional[Symbol]],
                 sizes: dict[str, Size], outer_tensors: frozenset = frozenset(),
                 outputs: Optional[list[tuple[str, Any]]] = None):
        self.node = node
        # `let (a, b) = compute(...)`: the body writes out.a and out.b; None: it writes out.
        # outputs: (name, location in the let) of each
        self.output_names = None if outputs is None else [name for name, _ in outputs]
        self.outer_tensors = outer_tensors  # program tensors, for a helpful error
        self.name = name
        self.args = args  # (program value name, type) per compute input, in order
        self.resolve_outer = resolve_outer
        self.sizes = sizes  # program-wide size table (shared so bindings accumulate)
        self.scopes: list[dict[str, Symbol]] = []
        self.captures: dict[str, Symbol] = {}
        self.used_sizes: dict[str, Symbol] = {}
        self.stores: list[ast.Assign] = []
        self.all_stores = self.stores  # every write of an output (stores: one output's)
        self.scatters: list = []  # locations of writes at indices read from data
        self.whole_out: Optional[ast.Assign] = None
        self.yields: list[ast.Yield] = []
        self.out_sym = Symbol("out", "out", None, node.loc)
        self.out_syms = [self.out_sym] if outputs is None else \
            [Symbol("out", name, None, loc) for name, loc in outputs]
        floats = [t.dtype for _, t in args if is_tensor(t) and t.dtype.is_float]
        floats += [t for _, t in args if isinstance(t, ScalarType) and t.is_float]
        self.default_float = F32 if not floats else functools.reduce(promote, floats)
        self.bound_names = self._names_in_bounds(node.body)
        self.tile_checks: list = []  # tiles.ExtentCheck, for the call

    # ------------------------------------------------------------------ entry point

    def check(self) -> Kernel:
        node = self.node
        if node.elided:
            raise error_at("compute body is elided ('...'); write the body out", node)
        if node.kernel is None:
            raise error_at("compute block has no '@kernel' line", node)
        kind, reduce_op, axis = self._kernel_spec(node.kernel)
        self.kind, self.reduce_op = kind, reduce_op
        scope = {}
        self.arg_syms = []
        for (arg_name, ty), expr in zip(self.args, node.inputs):
            local = self._arg_local_name(expr)
            if local in scope:
                raise error_at(f"'{local}' is passed to compute(...) twice", expr)
            scope[local] = Symbol("arg", arg_name, ty, expr.loc)
            self.arg_syms.append(scope[local])
        self.mutables = mutable_outputs(self, node)  # arg symbol -> its output symbol
        self.out_syms += list(self.mutables.values())
        if self.output_names is None:
            scope["out"] = self.out_sym
        else:
            scope["out"] = Symbol(OUTPUTS_NAMESPACE, "out", None, node.loc)
            scope.update({f"out.{sym.name}": sym for sym in self.out_syms})
        self.scopes.append(scope)
        annotations = self._annotations(node)
        self.body = self._element_body(node.body, scope)
        self._block(self.body)
        outputs = kernel_outputs(self, kind, reduce_op, axis)
        if "broadcast" in annotations:
            self._check_broadcast(annotations["broadcast"])
        return Kernel(
            name=self.name, node=node, kind=kind, reduce_op=reduce_op, axis=axis,
            arg_syms=self.arg_syms, capture_syms=list(self.captures.values()),
            size_syms=list(self.used_sizes.values()), outputs=outputs, scatters=self.scatters,
            default_float=self.default_float, annotations=annotations,
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
            raise error_at("a compute input must be a name or a field path", expr)
        return ".".join([expr.id] + parts[::-1])

    # ------------------------------------------------------------------ kernel line and annotations

    def _kernel_spec(self, spec: ast.KernelSpec) -> tuple[str, Optional[str], Optional[int]]:
        if spec.kind != "reduce":
            if spec.args or spec.kwargs:
                raise error_at(f"kernel '{spec.kind}' takes no parameters", spec)
            return spec.kind, None, None
        if len(spec.args) != 1:
            raise error_at("'reduce' takes one operator: reduce(op) or reduce(op, axis=n)", spec)
        op = spec.args[0]
        op_name = op.op if isinstance(op, ast.ReduceOpName) else getattr(op, "id", None)
        if op_name not in REDUCE_OPS:
            raise error_at(f"unknown reduction operator '{op_name or '?'}'; expected one of "
                           + ", ".join(REDUCE_OPS), op)
        axis = None
        for kw in spec.kwargs:
            if kw.name != "axis":
                raise error_at(f"unknown parameter '{kw.name}' of 'reduce'; expected 'axis'", kw)
            if not isinstance(kw.value, ast.IntLit):
                raise error_at("'axis' must be an integer literal", kw.value)
            axis = kw.value.value
        return "reduce", op_name, axis

    def _annotations(self, node: ast.Compute) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ann in node.outer + node.inner:
            if ann.name not in KNOWN_ANNOTATIONS:
                raise error_at(f"unknown annotation '@{ann.name}'; expected one of "
                               + ", ".join(f"@{a}" for a in sorted(KNOWN_ANNOTATIONS)), ann)
            if ann.name == "broadcast":
                out.setdefault("broadcast", []).append(ann)
            elif ann.name in ("workgroup",):
                vals = [self._const_int(a) for a in ann.args]
                if not 1 <= len(vals) <= 3 or ann.kwargs:
                    raise error_at("@workgroup takes 1 to 3 integer sizes", ann)
                out["workgroup"] = vals
            elif ann.name == "shared":
                if len(ann.args) != 1:
                    raise error_at("@shared takes one size in bytes", ann)
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
                raise error_at(f"this constant is {value}, which does not fit in 64 bits", expr)
            return value
        if allow_sizes and isinstance(expr, ast.Name):
            return None  # depends on sizes: known only at specialization
        raise error_at("expected a constant integer", expr)

    def _check_broadcast(self, anns: list[ast.Annotation]) -> None:
        for ann in anns:
            if len(ann.args) != 1 or not isinstance(ann.args[0], ast.Name):
                raise error_at("@broadcast takes an input name and axis=n", ann)
            target = ann.args[0].id
            if target not in self.scopes[0] or self.scopes[0][target].kind != "arg":
                raise error_at(f"@broadcast names '{target}', which is not an input of this "
                               "compute", ann.args[0])
            for kw in ann.kwargs:
                if kw.name != "axis" or not isinstance(kw.value, ast.IntLit):
                    raise error_at("@broadcast takes axis=<integer>", kw)

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
            raise error_at(f"'{type(stmt).__name__.lower().rstrip('_')}' is not supported in a "
                           "compute body yet", stmt)
        method(stmt)

    def _stmt_For(self, stmt: ast.For) -> None:
        scope: dict[str, Symbol] = {}
        self.scopes.append(scope)
        for rng in stmt.ranges:
            for bound in (rng.lo, rng.hi) + ((rng.step,) if rng.step else ()):
                t = self._expr(bound)
                if not t.may_be_int():
                    raise error_at(f"loop bounds must be integers, got {t}", bound)
            scope[rng.var] = rng.sym = Symbol("loop", rng.var, INDEX, rng.loc, range=rng)
        self.scopes.append({})
        self._block(stmt.body)
        self.scopes.pop()
        self.scopes.pop()

    def _stmt_If(self, stmt: ast.If) -> None:
        t = self._expr(stmt.cond)
        if not t.may_be_bool():
            raise error_at(f"condition must be a bool, got {t}", stmt.cond)
        for body in (stmt.then_body, stmt.else_body):
            self.scopes.append({})
            self._block(body)
            self.scopes.pop()

    def _stmt_Let(self, stmt: ast.Let) -> None:
        if len(stmt.targets) != 1:
            raise error_at("tuple 'let' is not supported in a compute body", stmt)
        t = self._value(stmt.value)
        if is_tensor(t) and t.rank is None and reads_data(stmt.value):
            t = self._expr(stmt.value)  # `x[r, c] * s`, s of unknown rank: as `var` takes it
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
                raise error_at(f"an extent must be an integer, got {t}", dim)
        stmt.sym = Symbol("shared", stmt.name,
                          TensorType(self.default_float, (None,) * len(stmt.dims)), stmt.loc)
        self.scopes[-1][stmt.name] = stmt.sym

    def _stmt_Var(self, stmt: ast.Var) -> None:
        t = self._expr(stmt.value)
        if is_tensor(t):
            raise error_at("a local must be a scalar", stmt.value)
        declared = stmt.declared
        if declared is not None:  # `var acc: f32 = 0.0`: e.g. an f32 sum of bf16 values
            if declared.name not in SCALARS:
                raise error_at(f"'{declared.name}' is not a scalar type: a var takes one of "
                               f"{', '.join(SCALARS)}", declared)
            self._check_assignable(SCALARS[declared.name], t, stmt.value)
            t = SCALARS[declared.name]
        stmt.sym = Symbol("var", stmt.name, concrete_in(t, self), stmt.loc)
        self.scopes[-1][stmt.name] = stmt.sym

    def _stmt_Assign(self, stmt: ast.Assign) -> None:
        target = stmt.target
        target = output_target(self, target)  # out.NAME[...] of several outputs
        whole_out = isinstance(target, ast.Name) and target.id == "out" and \
            self._lookup("out") is self.out_sym
        value_t = self._value(stmt.value) if whole_out else self._expr(stmt.value)
        if isinstance(target, ast.Name):
            sym = self._lookup(target.id)
            if sym is None:
                raise error_at(f"unknown name '{target.id}'", target)
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
                raise error_at(f"cannot assign to '{target.id}': it is {what}", target)
            target.sym, target.ty = sym, sym.ty
            self._check_assignable(sym.ty, value_t, stmt.value)
            return
        if isinstance(target, ast.Index) and isinstance(target.base, ast.Name):
            sym = self._lookup(target.base.id)
            if sym is None:
                raise error_at(f"unknown name '{target.base.id}'", target.base)
            if sym.kind == "arg" and sym in self.mutables:  # `mut x`: a write of x's output
                mutable_write(self, stmt, self.mutables[sym], value_t)
                return
            if sym.kind == "arg":
                raise error_at(f"cannot write to input '{target.base.id}'"
                               + (" (mark it 'mut' in compute(...) to update it in place)"
                                  if is_tensor(sym.ty) else ""), target.base)
            if sym.kind == "shared":
                target.base.sym = sym
                self._check_rank(sym, target, len(target.indices))
                for idx in target.indices:
                    self._index_expr(idx)
                if stmt.op is not None:
                    raise error_at("compound assignment to a shared array is not supported; "
                                   "compute the value in a var", target)
                target.ty = value_t
                return
            if sym.kind != "out":
                raise error_at(f"cannot write to '{target.base.id}': only 'out' and shared "
                               "arrays are written by index", target.base)
            target.base.sym = sym
            for idx in target.indices:
                self._index_expr(idx)
            if stmt.op is not None and not self._stores_of(sym):
                raise error_at(f"'{out_label(sym)}' is read before it is written", target)
            self.stores.append(stmt)
            target.ty = value_t
            return
        raise error_at("cannot assign to this expression", target)

    def _check_assignable(self, dest: ScalarType, value: ScalarType, node: ast.Node) -> None:
        if dest.is_any or value.is_any:
            return
        if dest.is_int and not dest.is_bool and value.is_float and not value.is_literal:
            raise error_at(f"cannot assign a {value} value to an integer variable", node)
        if dest.is_bool != value.is_bool:
            raise error_at(f"cannot assign a {value} value to a {dest} variable", node)

    def _stmt_Yield(self, stmt: ast.Yield) -> None:
        if self.kind != "reduce":
            raise error_at("'yield' outside a reduction (the kernel is "
                           f"'{self.kind}', not 'reduce(...)')", stmt)
        value = stmt.value
        pair = self.reduce_op in ("argmin", "argmax")
        if pair:
            if not (isinstance(value, ast.TupleExpr) and len(value.elts) == 2):
                raise error_at(f"'{self.reduce_op}' yields a pair: yield (value, index)", stmt)
            t = self._expr(value.elts[0])
            it = self._expr(value.elts[1])
            if not it.may_be_int():
                raise error_at(f"the index of a yielded pair must be an integer, got {it}",
                               value.elts[1])
        else:
            if isinstance(value, ast.TupleExpr):
                raise error_at(f"'reduce({self.reduce_op})' yields one value, not a pair", stmt)
            t = self._expr(value)
        if self.reduce_op in ("and", "or") and not t.may_be_bool():
            raise error_at(f"'reduce({self.reduce_op})' needs bool values, got {t}", stmt.value)
        self.yields.append(stmt)

    def _stmt_ExprStmt(self, stmt: ast.ExprStmt) -> None:
        value = stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == "barrier":
            if value.args or value.kwargs:
                raise error_at("'barrier()' takes no arguments", value)
            return
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == "print":
            self._print(value)
            return
        raise error_at("an expression statement has no effect here", stmt)

    def _print(self, call: ast.Call) -> None:
        """`print(v, ...)`: scalar values and string literals (device="interpreter")."""
        if call.kwargs:
            raise error_at("'print' takes no keyword arguments", call.kwargs[0].value)
        for arg in call.args:
            if not isinstance(arg, ast.StringLit):
                self._expr(arg)

    # ------------------------------------------------------------------ expressions

    def _index_expr(self, idx: Any) -> None:
        if isinstance(idx, ast.Slice):
            raise error_at("slices are not supported in this kernel yet", idx)
        t = self._expr(idx)
        if not t.may_be_int():
            notes = None
            if isinstance(idx, ast.Name) and idx.sym is not None and idx.sym.kind in ("let", "var"):
                notes = [(f"'{idx.id}' is bound to a {t} value here (it shadows any loop "
                          f"variable of that name)", idx.sym.loc)]
            raise error_at(f"index must be an integer, got {t}", idx, notes=notes)

    def _expr(self, e: ast.Expr) -> ScalarType:
        method = getattr(self, "_expr_" + type(e).__name__, None)
        if method is None:
            raise error_at("this expression is not supported in a compute body", e)
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
            raise error_at(f"'{e.id}' is a tensor; index it (e.g. {e.id}[i])", e)
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
                raise error_at(f"'{e.id}' is a tensor that is not an input of this compute; "
                               f"add it to compute(...)", e)
            self.captures[e.id] = outer
            return outer
        if e.id in self.bound_names or e.id in self.sizes:
            size = self.sizes.setdefault(e.id, Size(e.id, e.loc))
            sym = Symbol("size", e.id, INDEX, size.loc)
            self.used_sizes[e.id] = sym
            return sym
        raise error_at(f"unknown name '{e.id}'", e)

    def _expr_Unary(self, e: ast.Unary) -> ScalarType:
        t = self._expr(e.operand)
        if e.op == "not":
            if not t.may_be_bool():
                raise error_at(f"'not' needs a bool, got {t}", e)
            return BOOL
        if t.is_bool:
            raise error_at("cannot negate a bool", e)
        return t

    def _expr_Binary(self, e: ast.Binary) -> ScalarType:
        lt, rt = self._expr(e.left), self._expr(e.right)
        if e.op in ("and", "or"):
            if not (lt.may_be_bool() and rt.may_be_bool()):
                raise error_at(f"'{e.op}' needs bool operands, got {lt} and {rt}", e)
            return BOOL
        common = promote(lt, rt)
        if common is None:
            raise error_at(f"operator '{e.op}' cannot combine {lt} and {rt}", e)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            return BOOL
        if common.is_bool:  # arithmetic on bools, whatever the unknown side turns out to be
            raise error_at(f"operator '{e.op}' cannot combine {lt} and {rt}", e)
        if e.op == "@":
            raise error_at("'@' (matrix product) is not supported in this kernel yet", e)
        if e.op == "^":
            return common if common.is_float else (FLOAT_LITERAL if common.is_literal else common)
        return common

    def _expr_Index(self, e: ast.Index) -> ScalarType:
        if not isinstance(e.base, (ast.Name, ast.Attribute)):
            raise error_at("only inputs and 'out' can be indexed", e)
        local = self._arg_local_name(e.base) if isinstance(e.base, ast.Attribute) else e.base.id
        sym = self._lookup(local)
        if sym is None and local.startswith("out."):
            raise unknown_output(self, e.base)
        if sym is None:
            if local in self.outer_tensors:
                raise error_at(f"'{local}' is not an input of this compute; add it to "
                               "compute(...)", e.base)
            raise error_at(f"unknown name '{local}'", e.base)
        if sym.kind == OUTPUTS_NAMESPACE:
            raise unknown_output(self, e.base)
        if sym.kind == "out":
            if not self._stores_of(sym):
                raise error_at(f"'{out_label(sym)}' is read before it is written", e)
            e.base.sym = sym
            for idx in e.indices:
                self._index_expr(idx)
            return self._store_type(self._stores_of(sym))
        if sym.kind == "shared":
            e.base.sym = sym
            self._check_rank(sym, e, len(e.indices))
            for idx in e.indices:
                self._index_expr(idx)
            return sym.ty.dtype
        if sym.kind not in ("arg", "tensor") or not is_tensor(sym.ty):
            raise error_at(f"'{local}' is not a tensor and cannot be indexed", e.base)
        e.base.sym = sym
        ty: TensorType = sym.ty
        if ty.rank is not None and ty.rank != len(e.indices):
            raise error_at(f"rank mismatch: '{local}' has rank {ty.rank} but is indexed with "
                           f"{len(e.indices)} {'index' if len(e.indices) == 1 else 'indices'}", e)
        for dim, idx in enumerate(e.indices):
            self._index_expr(idx)
            self._bind_size(sym.name, dim, idx)
        return ty.dtype

    def _stores_of(self, sym: Symbol) -> list[ast.Assign]:
        return [s for s in self.stores if written_sym(s) is sym]

    def _store_type(self, stores=None) -> ScalarType:
        """The element type of `out`: the first written value's (an index as i64)."""
        t = concrete_in((stores or self.stores)[0].target.ty, self)
        return I64 if t == INDEX else t

    def _bind_size(self, tensor: str, dim: int, idx: ast.Expr) -> None:
        """`x[i]` with `for i in 0..len` binds `len` to x's extent in that dimension."""
        if not isinstance(idx, ast.Name) or idx.sym is None or idx.sym.kind != "loop":
            return
        rng = idx.sym.range
        if not is_zero(rng.lo) or not is_unit_step(rng.step):
            return
        if isinstance(rng.hi, ast.Name) and rng.hi.sym is not None and rng.hi.sym.kind == "size":
            size = self.sizes[rng.hi.id]
            if not any(b.tensor == tensor and b.dim == dim for b in size.bindings):
                size.bindings.append(SizeBinding(tensor, dim, idx.loc))

    def _expr_Call(self, e: ast.Call) -> ScalarType:
        if not isinstance(e.func, ast.Name):
            raise error_at("only builtin functions can be called in a compute body", e.func)
        name = e.func.id
        if name == "dot":
            return self._dot(e)
        if name in RANDOM_BUILTINS:
            return check_random_call(e, self._expr)
        if name == "cast":
            return check_cast_call(e, self._expr, self._lookup, self.default_float)
        if name not in MATH_BUILTINS:
            raise error_at(f"unknown function '{name}'; builtins are "
                           + ", ".join(sorted([*MATH_BUILTINS, *RANDOM_BUILTINS, "cast"])),
                           e.func)
        lo, hi = MATH_BUILTINS[name]
        if e.kwargs:
            raise error_at(f"'{name}' takes no keyword arguments", e.kwargs[0])
        if not lo <= len(e.args) <= hi:
            raise error_at(f"'{name}' takes {lo} argument{'s' if lo > 1 else ''}, "
                           f"got {len(e.args)}", e)
        types = [self._expr(a) for a in e.args]
        common = types[0]
        for a, t in zip(e.args[1:], types[1:]):
            common = promote(common, t)
            if common is None:
                raise error_at(f"'{name}' cannot combine these argument types", a)
        if common.is_bool:
            raise error_at(f"'{name}' needs numbers, got bool", e)
        if name in FLOAT_ONLY and not common.is_float:
            return self.default_float
        return common

    def _check_rank(self, sym: Symbol, node: ast.Node, n: int) -> None:
        if sym.ty.rank is not None and sym.ty.rank != n:
            raise error_at(f"rank mismatch: '{sym.name}' has rank {sym.ty.rank} but is indexed "
                           f"with {n} {'index' if n == 1 else 'indices'}", node)

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

        for s in ast.nested_statements(stmts):
            if isinstance(s, ast.For):
                for r in s.ranges:
                    collect(r.lo)
                    collect(r.hi)
                    if r.step is not None:
                        collect(r.step)
        return names
