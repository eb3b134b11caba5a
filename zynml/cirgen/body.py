"""Typed compute body -> the statements of a `cir` body function.

Loops become `scf.for`, conditionals `scf.if`; mutable locals (`var`) are SSA values
threaded through loops and conditionals as iter_args / results (the assignments of a
statement are found up front, as in mem2reg). Element reads are `cir.load`, writes of
`out` are `cir.store`, reduction contributions `cir.yield`.
"""
from __future__ import annotations

import math

from typing import Any

from mlir import ir
from mlir.dialects import arith, scf, tensor

from . import scalar as S
from .philox import random_builtin
from ..dialects.cir import MAX_PRINT_VALUES
from ..errors import ZynMLError
from ..frontend import ast
from ..frontend.outputs import reads_data, scatter_form
from ..frontend.random_calls import RANDOM_BUILTINS
from ..frontend.symbols import Kernel, Symbol
from ..frontend.types import (BOOL, FLOAT_LITERAL, I64, INDEX, INT_LITERAL, ScalarType,
                              TensorType, concrete, promote)


class BodyEmitter:
    """Emits one kernel's statements at the current insertion point.

    `env` maps each Symbol (not name: bodies may shadow names) to its current SSA value.
    """

    def __init__(self, kernel: Kernel, env: dict[Symbol, ir.Value], out: ir.Value):
        self.kernel = kernel
        self.env = env
        self.out = out

    # ------------------------------------------------------------------ types

    def _out_dtype(self, sym: Symbol) -> ScalarType:
        """The element type of the output `sym` (`out`, or `out.NAME` of several)."""
        return next(o.result.dtype for o in self.kernel.outputs if o.sym is sym)

    def _concrete(self, t: ScalarType) -> ScalarType:
        if t == FLOAT_LITERAL:
            return self.kernel.default_float
        return concrete(t)

    # ------------------------------------------------------------------ statements

    def block(self, stmts: list[ast.Stmt]) -> None:
        for stmt in stmts:  # ops carry their statement's location, for later diagnostics
            loc = stmt.loc
            with ir.Location.file(loc.file.name, loc.line, loc.col):
                getattr(self, "_" + type(stmt).__name__)(stmt)

    def _Let(self, stmt: ast.Let) -> None:
        if stmt.sym.kind == "tensor":
            self.env[stmt.sym] = self._tensor_local(stmt.sym, stmt.value)
            return
        self.env[stmt.sym] = self.expr(stmt.value, stmt.sym.ty)

    def _SharedVar(self, stmt: ast.SharedVar) -> None:
        extents = [self.expr(d, INDEX) for d in stmt.dims]
        self.env[stmt.sym] = self._alloc(extents, stmt.sym.ty.dtype, stmt.sym.name)

    def _ExprStmt(self, stmt: ast.ExprStmt) -> None:  # barrier() or print(...)
        if stmt.value.func.id == "print":
            self._print(stmt.value)
            return
        ir.Operation.create("cir.barrier", results=[], operands=[])

    def _print(self, call: ast.Call) -> None:
        """print(a, "text", b) -> cir.print with format "{} text {}" (Python's spacing)."""
        parts, values = [], []
        for arg in call.args:
            if isinstance(arg, ast.StringLit):
                parts.append(arg.value.replace("{", "{{").replace("}", "}}"))
                continue
            t = self._concrete(arg.ty)
            values.append(self.expr(arg, t))
            parts.append("{u}" if t.name.startswith("u") else "{}")
        if len(values) > MAX_PRINT_VALUES:
            raise ZynMLError(f"'print' shows at most {MAX_PRINT_VALUES} values; this one "
                             f"shows {len(values)}", call.loc)
        ir.Operation.create("cir.print", results=[], operands=values, attributes={
            "format": ir.StringAttr.get(" ".join(parts)),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get(
                [1] * len(values) + [0] * (MAX_PRINT_VALUES - len(values)))})

    def _Var(self, stmt: ast.Var) -> None:
        self.env[stmt.sym] = self.expr(stmt.value, stmt.sym.ty)

    def _Assign(self, stmt: ast.Assign) -> None:
        target = stmt.target
        if isinstance(target, ast.Name) and target.sym.kind == "out":
            self._store_whole(self.env[target.sym], stmt.value, self._out_dtype(target.sym))
            return
        if isinstance(target, ast.Name):
            sym = target.sym
            value = self._combined(stmt, lambda: self.env[sym], sym.ty)
            self.env[sym] = value
            return
        indices = [self.expr(i, INDEX) for i in target.indices]
        if target.base.sym.kind == "shared":
            dest, dest_t = self.env[target.base.sym], target.base.sym.ty.dtype
        else:
            sym = target.base.sym
            dest, dest_t = self.env[sym], self._out_dtype(sym)
        if target.base.sym.init is not None and any(reads_data(i) for i in target.indices):
            # a scatter, `x[ids[i], d] += v` (or = min/max(x[...], v)): each contribution
            # combines with the element
            combine, contribution = scatter_form(stmt)
            if combine != "+" and dest_t.name.startswith("u"):
                combine = "u" + combine  # unsigned min/max
            value = self.expr(contribution, dest_t)
            ir.Operation.create("cir.store", results=[], operands=[value, dest, *indices],
                                attributes={"combine": ir.StringAttr.get(combine)})
            return
        # `x[i] += v` of a `mut x` reads x's value before the block, as every read of x does
        source = self.env[target.base.sym.init] if target.base.sym.init is not None else dest
        value = self._combined(
            stmt, lambda: ir.Operation.create(
                "cir.load", results=[S.mlir_type(dest_t)], operands=[source, *indices]).result,
            dest_t)
        ir.Operation.create("cir.store", results=[], operands=[value, dest, *indices])

    def _combined(self, stmt: ast.Assign, current, t: ScalarType) -> ir.Value:
        """The value an assignment stores: `value`, or `current op value` for `op=`."""
        if stmt.op is None:
            return self.expr(stmt.value, t)
        common = self._concrete(promote(t, stmt.value.ty))
        lhs = S.convert(current(), t, common)
        rhs = self.expr(stmt.value, common)
        return S.convert(S.binary(stmt.op, lhs, rhs, common), common, t)

    def _Yield(self, stmt: ast.Yield) -> None:
        value = stmt.value
        if isinstance(value, ast.TupleExpr):
            v = self.expr(value.elts[0], self._yielded(value.elts[0]))
            i = self.expr(value.elts[1], INDEX)
            ir.Operation.create("cir.yield", results=[], operands=[v, i])
        else:
            ir.Operation.create("cir.yield", results=[],
                                operands=[self.expr(value, self._yielded(value))])

    def _yielded(self, value: ast.Expr) -> ScalarType:
        """The type a value is reduced in: its own, but i64 for an index (a loop variable,
        a size), as a reduction's result, like out, holds i64 where the body has index."""
        t = self._concrete(value.ty)
        return I64 if t == INDEX else t

    def _For(self, stmt: ast.For) -> None:
        self._loops(stmt.ranges, stmt.body, _assigned_vars(stmt.body, self.env))

    def _loops(self, ranges: list[ast.Range], body: list[ast.Stmt], carried: list[Symbol]):
        rng, rest = ranges[0], ranges[1:]
        lo, hi = self.expr(rng.lo, INDEX), self.expr(rng.hi, INDEX)
        step = self.expr(rng.step, INDEX) if rng.step is not None else S.index(1)
        loop = scf.ForOp(lo, hi, step, [self.env[s] for s in carried])
        with ir.InsertionPoint(loop.body):
            self.env[rng.sym] = loop.induction_variable
            for sym, arg in zip(carried, loop.inner_iter_args):
                self.env[sym] = arg
            if rest:
                self._loops(rest, body, carried)
            else:
                self.block(body)
            scf.YieldOp([self.env[s] for s in carried])
        for sym, result in zip(carried, loop.results):
            self.env[sym] = result

    def _If(self, stmt: ast.If) -> None:
        carried = _assigned_vars(stmt.then_body + stmt.else_body, self.env)
        cond = self.expr(stmt.cond, BOOL)
        types = [S.mlir_type(s.ty) for s in carried]
        op = scf.IfOp(cond, types, has_else=bool(carried or stmt.else_body))
        before = {s: self.env[s] for s in carried}
        with ir.InsertionPoint(op.then_block):
            self.block(stmt.then_body)
            scf.YieldOp([self.env[s] for s in carried])
        if carried or stmt.else_body:
            self.env.update(before)
            with ir.InsertionPoint(op.else_block):
                self.block(stmt.else_body)
                scf.YieldOp([self.env[s] for s in carried])
        for sym, result in zip(carried, op.results):
            self.env[sym] = result

    # ------------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr, want: ScalarType) -> ir.Value:
        """Emit `e` converted to `want`."""
        have = self._concrete(e.ty) if not _is_literal(e) else want
        value = self._expr(e, have)
        return S.convert(value, have, want)

    def _expr(self, e: ast.Expr, t: ScalarType) -> ir.Value:
        if isinstance(e, (ast.IntLit, ast.FloatLit, ast.BoolLit)):
            return S.constant(t, e.value)
        if isinstance(e, ast.Name):
            return self._name(e)
        if isinstance(e, ast.Unary):
            if e.op == "not":
                return S.logical_not(self.expr(e.operand, BOOL))
            return S.negate(self.expr(e.operand, t), t)
        if isinstance(e, ast.Binary):
            return self._binary(e, t)
        if isinstance(e, ast.Index):
            indices = [self.expr(i, INDEX) for i in e.indices]
            source = self.env[e.base.sym]
            with _loc(e):  # a read is located at its expression (interpreter's errors)
                return ir.Operation.create("cir.load", results=[S.mlir_type(t)],
                                           operands=[source, *indices]).result
        if isinstance(e, ast.Call):
            if e.func.id == "dot":
                return self._dot(e, t)
            if e.func.id == "reduce":
                return self._reduce_whole(e, t)
            if e.func.id in RANDOM_BUILTINS:  # integer arguments, read as 64 bits
                words = [self.expr(a, I64) for a in e.args[:3]]
                word = e.args[3].value if e.func.id == "philox" else None
                return random_builtin(e.func.id, words, word)
            if e.func.id == "cast":  # the checker typed the call as its target type
                return self.expr(e.args[0], t)
            args = [self.expr(a, t) for a in e.args]
            return S.builtin(e.func.id, args, t)
        raise AssertionError(f"unexpected expression {type(e).__name__}")

    # ------------------------------------------------------------------ whole tensors
    # Whole-tensor statements (`let shifted = logits - m`, `out = e / s`, `reduce(+, e)`)
    # become loop nests over the shape of the input they are shaped like: the same IR as
    # the per-element form, so cir-to-linalg needs nothing new.

    def _alloc(self, extents: list[ir.Value], dtype: ScalarType, name: str) -> ir.Value:
        dyn = ir.ShapedType.get_dynamic_size()
        t = ir.RankedTensorType.get([dyn] * len(extents), S.mlir_type(dtype))
        return ir.Operation.create("cir.alloc", results=[t], operands=extents, attributes={
            "name": ir.StringAttr.get(name)}).result  # the source's name, for diagnostics

    def _extents(self, value: ast.Expr) -> list[ir.Value]:
        from ..frontend.body_checker import BodyChecker
        ref = BodyChecker.ref_sym(value)
        source = self.env[ref]
        return [tensor.DimOp(source, S.index(d)).result for d in range(ref.ty.rank)]

    def _tensor_local(self, sym, value: ast.Expr) -> ir.Value:
        local = self._alloc(self._extents(value), sym.ty.dtype, sym.name)
        self._store_whole(local, value, sym.ty.dtype)
        return local

    def _store_whole(self, dest: ir.Value, value: ast.Expr, dtype: ScalarType) -> None:
        scalars = self._hoist_scalars(value)
        extents = self._extents(value)

        def nest(depth: int, ivs: list[ir.Value]):
            if depth == len(extents):
                v = S.convert(self._element(value, ivs, scalars), value.ty.dtype, dtype)
                ir.Operation.create("cir.store", results=[], operands=[v, dest, *ivs])
                return
            loop = scf.ForOp(S.index(0), extents[depth], S.index(1), [])
            with ir.InsertionPoint(loop.body):
                nest(depth + 1, ivs + [loop.induction_variable])
                scf.YieldOp([])
        nest(0, [])

    def _hoist_scalars(self, e: ast.Expr) -> dict[int, ir.Value]:
        """Scalar parts of a whole-tensor expression, emitted once before its loops."""
        found: dict[int, ir.Value] = {}

        def walk(node):
            if not isinstance(node.ty, TensorType):
                if not isinstance(node, (ast.IntLit, ast.FloatLit, ast.ReduceOpName)):
                    found[id(node)] = self.expr(node, self._concrete(node.ty))
                return
            for child in _children(node):
                walk(child)
        walk(e)
        return found

    def _element(self, e: ast.Expr, ivs: list[ir.Value], scalars) -> ir.Value:
        """Element `ivs` of a whole-tensor expression, of type e.ty.dtype."""
        t = e.ty.dtype if isinstance(e.ty, TensorType) else self._concrete(e.ty)
        if id(e) in scalars:
            return scalars[id(e)]
        if isinstance(e, (ast.IntLit, ast.FloatLit)):
            return S.constant(t, e.value)
        if isinstance(e, ast.Name):
            return ir.Operation.create("cir.load", results=[S.mlir_type(t)],
                                       operands=[self.env[e.sym], *ivs]).result

        def operand(x):
            xt = x.ty.dtype if isinstance(x.ty, TensorType) else self._concrete(x.ty)
            return S.convert(self._element(x, ivs, scalars), xt, t) if not _is_literal(x) \
                else S.constant(t, x.value)
        if isinstance(e, ast.Unary):
            return S.negate(operand(e.operand), t)
        if isinstance(e, ast.Binary):
            if e.op == "^" and isinstance(e.right, ast.IntLit):
                return S.integer_power(operand(e.left), e.right.value, t)
            return S.binary(e.op, operand(e.left), operand(e.right), t)
        if isinstance(e, ast.Call):
            return S.builtin(e.func.id, [operand(a) for a in e.args], t)
        raise AssertionError(f"unexpected whole-tensor expression {type(e).__name__}")

    def _reduce_whole(self, e: ast.Call, t: ScalarType) -> ir.Value:
        """reduce(op, tensor): an accumulator loop nest over the tensor."""
        op, value = e.args[0], e.args[1]
        name = op.op if isinstance(op, ast.ReduceOpName) else op.id
        identity = {"+": 0, "*": 1, "max": -math.inf if t.is_float else -(2 ** (t.bits - 1)),
                    "min": math.inf if t.is_float else 2 ** (t.bits - 1) - 1}[name]
        scalars = self._hoist_scalars(value)
        extents = self._extents(value)
        dtype = value.ty.dtype

        def combine(acc, v):
            if name in ("+", "*"):
                return S.binary(name, acc, v, t)
            return (S.maximum if name == "max" else S.minimum)(acc, v, t)

        def nest(depth: int, ivs: list[ir.Value], acc: ir.Value) -> ir.Value:
            if depth == len(extents):
                return combine(acc, S.convert(self._element(value, ivs, scalars), dtype, t))
            loop = scf.ForOp(S.index(0), extents[depth], S.index(1), [acc])
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([nest(depth + 1, ivs + [loop.induction_variable],
                                  loop.inner_iter_args[0])])
            return loop.results[0]
        return nest(0, [], S.constant(t, identity))

    def _dot(self, e: ast.Call, t: ScalarType) -> ir.Value:
        """dot(a[..], b[..]) as a loop over the rows' last dimension (a reduction loop
        that cir-to-linalg lowers like any other)."""
        rows = e.args
        source = self.env[rows[0].base.sym]
        last = len(rows[0].indices)
        length = tensor.DimOp(source, S.index(last)).result
        prefixes = [[self.expr(i, INDEX) for i in row.indices] for row in rows]
        loop = scf.ForOp(S.index(0), length, S.index(1), [S.constant(t, 0)])
        with ir.InsertionPoint(loop.body):
            k = loop.induction_variable
            product = None
            for row, prefix in zip(rows, prefixes):
                element = self._concrete(row.ty)
                with _loc(row):
                    value = ir.Operation.create(
                        "cir.load", results=[S.mlir_type(element)],
                        operands=[self.env[row.base.sym], *prefix, k]).result
                value = S.convert(value, element, t)
                product = value if product is None else S.binary("*", product, value, t)
            acc = loop.inner_iter_args[0]
            scf.YieldOp([S.binary("+", acc, product, t)])
        return loop.results[0]

    def _name(self, e: ast.Name) -> ir.Value:
        return self.env[e.sym]

    def _binary(self, e: ast.Binary, t: ScalarType) -> ir.Value:
        if e.op in ("and", "or"):
            a, b = self.expr(e.left, BOOL), self.expr(e.right, BOOL)
            return (arith.AndIOp if e.op == "and" else arith.OrIOp)(a, b).result
        if e.op == "^" and isinstance(e.right, ast.IntLit) and t.is_float:
            return S.integer_power(self.expr(e.left, t), e.right.value, t)
        operand_t = self._concrete(promote(e.left.ty, e.right.ty))
        if e.op == "^" and not operand_t.is_float:
            operand_t = self.kernel.default_float
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            a, b = self.expr(e.left, operand_t), self.expr(e.right, operand_t)
            return S.compare(e.op, a, b, operand_t)
        a, b = self.expr(e.left, operand_t), self.expr(e.right, operand_t)
        if e.op in ("/", "%"):  # a division by zero at run time points at its operator
            with ir.Location.file(e.loc.file.name, e.loc.line, e.loc.col):
                return S.convert(S.binary(e.op, a, b, operand_t), operand_t, t)
        return S.convert(S.binary(e.op, a, b, operand_t), operand_t, t)


def _loc(node: ast.Node) -> ir.Location:
    loc = ast.leftmost(node).loc  # `x[i]` starts at `x`
    return ir.Location.file(loc.file.name, loc.line, loc.col)


def _children(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary):
        return [e.left, e.right]
    if isinstance(e, ast.Unary):
        return [e.operand]
    if isinstance(e, ast.Call):
        return list(e.args)
    return []


def _is_literal(e: ast.Expr) -> bool:
    return e.ty in (FLOAT_LITERAL, INT_LITERAL) and isinstance(e, (ast.IntLit, ast.FloatLit))


def _assigned_vars(stmts: list[ast.Stmt], env: dict[Symbol, Any]) -> list[Symbol]:
    """Mutable locals defined outside `stmts` and assigned inside (loop-carried values)."""
    found: list[Symbol] = []
    for s in ast.nested_statements(stmts):
        if isinstance(s, ast.Assign) and isinstance(s.target, ast.Name):
            sym = s.target.sym
            if sym in env and sym not in found:
                found.append(sym)
    return found

