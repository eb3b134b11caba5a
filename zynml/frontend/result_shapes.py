"""The result of a compute block: its type and the extent of each dimension, from the
writes of `out` (`a*i + c` indices), a whole-tensor `out = ...`, or a reduction's
`yield` and kept loops; and the value of an extent expression once sizes are known.
A mixin of the BodyChecker, and the helpers about extents it shares.
"""
from __future__ import annotations

from typing import Any, Optional

from . import ast
from .body_rules import concrete_in, error_at
from .ranges import walk
from .symbols import Size, SizeBinding, Symbol
from .types import I64, INDEX, TensorType

__all__ = ["KernelResult", "eval_extent", "is_zero", "is_unit_step"]


class KernelResult:
    """Mixin: needs the BodyChecker's stores, whole_out, yields, node, body, sizes,
    ref_sym and _store_type."""

    def _result(self, kind: str, reduce_op: Optional[str], axis: Optional[int]):
        if kind == "reduce":
            return self._reduce_result(reduce_op, axis)
        if not self.stores:
            raise error_at(f"kernel '{kind}' never writes 'out'", self.node)
        if self.whole_out is not None:
            return self._whole_out_result()
        rank = len(self.stores[0].target.indices)
        extents: list[list[ast.Expr]] = [[] for _ in range(rank)]
        for store in self.stores:
            if len(store.target.indices) != rank:
                first = self.stores[0].target
                raise error_at(f"rank mismatch: 'out' was written with {rank} indices "
                               f"at {first.loc.line}:{first.loc.col}", store.target)
            for dim, idx in enumerate(store.target.indices):
                extent = extent_of_index(idx)
                if extent is None:
                    notes = None
                    if isinstance(idx, ast.Name) and idx.sym is not None and \
                            idx.sym.kind in ("let", "var"):
                        notes = [(f"'{idx.id}' is bound by '{idx.sym.kind}' here, so it is no "
                                  "longer the loop variable of that name", idx.sym.loc)]
                    raise error_at("cannot infer the output shape: index 'out' with a*i + c, "
                                   "i a loop variable running from 0 in steps of 1 and c "
                                   "a constant or sizes", idx, notes)
                check_extent_is_known(extent, idx)
                if not any(ast.same_extent(extent, e) for e in extents[dim]):
                    extents[dim].append(extent)
        dims = [e[0] if len(e) == 1 else
                ast.Call(e[0].loc, ast.Name(e[0].loc, "max"), e) for e in extents]
        return TensorType(self._store_type(), (None,) * rank), dims

    def _whole_out_result(self):
        """`out = expr`: out has the shape of the input the expression is shaped like; its
        extents are sizes bound to that input's dimensions."""
        if len(self.stores) != 1:
            raise error_at("'out = value' must be the only write of 'out'", self.stores[1])
        stmt = self.whole_out
        ref = self.ref_sym(stmt.value)
        if ref.ty.rank is None:  # known at the call
            return TensorType(self._store_type(), None), []
        dims = self.shape_sizes(ref, stmt.loc)
        return TensorType(self._store_type(), (None,) * len(dims)), dims

    def shape_sizes(self, ref: Symbol, loc) -> list[ast.Name]:
        """A size per dimension of the input `ref` (`x.shape[0]`, ...), bound to it."""
        dims = []
        for d in range(ref.ty.rank):
            name = f"{ref.name}.shape[{d}]"
            size = self.sizes.setdefault(name, Size(name, loc))
            if not any(b.tensor == ref.name and b.dim == d for b in size.bindings):
                size.bindings.append(SizeBinding(ref.name, d, loc))
            dims.append(ast.Name(loc, name))
        return dims

    def _reduce_result(self, reduce_op: str, axis: Optional[int]):
        if len(self.yields) != 1:
            raise error_at(f"a reduction body must yield exactly once (found {len(self.yields)})",
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
            raise error_at(f"axis {axis} is out of range: the reduction has {len(loops)} loop "
                           f"dimension{'s' if len(loops) != 1 else ''}", self.node.kernel)
        dims = []
        for d, rng in enumerate(loops):
            if d == axis:
                continue
            if not is_zero(rng.lo) or not is_unit_step(rng.step):
                raise error_at("cannot infer the output shape: kept loops must run from 0 in "
                               "steps of 1", rng)
            check_extent_is_known(rng.hi, rng)
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


def extent_of_index(idx: ast.Expr) -> Optional[ast.Expr]:
    """For `a*i + c` with `for i in 0..n`: the extent it needs, a*(n - 1) + c + 1; `c` a
    constant, or an expression of sizes (`out[.., p + half]`, the second half of a row)."""
    a, c, var = 1, 0, idx
    offset = None  # c when it is an expression of sizes
    if isinstance(var, ast.Binary) and var.op in "+-" and isinstance(var.right, ast.IntLit):
        c = var.right.value if var.op == "+" else -var.right.value
        var = var.left
    elif isinstance(var, ast.Binary) and var.op == "+" and _of_sizes(var.right):
        offset, var = var.right, var.left
    if isinstance(var, ast.Binary) and var.op == "*":
        if isinstance(var.right, ast.IntLit):
            a, var = var.right.value, var.left
        elif isinstance(var.left, ast.IntLit):
            a, var = var.left.value, var.right
    if not (isinstance(var, ast.Name) and var.sym is not None and var.sym.kind == "loop"):
        return None
    rng = var.sym.range
    if not is_zero(rng.lo) or not is_unit_step(rng.step) or a <= 0 or c < 0:
        return None
    loc = ast.leftmost(idx).loc  # where the index starts, for errors about the extent
    if a == 1 and c == 0:
        return rng.hi if offset is None else ast.Binary(loc, "+", rng.hi, offset)
    last = ast.Binary(loc, "-", rng.hi, ast.IntLit(loc, 1))
    return ast.Binary(loc, "+", ast.Binary(loc, "*", ast.IntLit(loc, a), last),
                      ast.IntLit(loc, c + 1) if offset is None else
                      ast.Binary(loc, "+", offset, ast.IntLit(loc, 1)))


def _of_sizes(e: ast.Expr) -> bool:
    """Whether `e` names no loop or local variable: sizes, constants and their arithmetic
    (an offset whose value is known before the loops run)."""
    return not isinstance(e, ast.IntLit) and all(
        isinstance(node, (ast.IntLit, ast.Binary)) or
        isinstance(node, ast.Name) and not (node.sym is not None and
                                            node.sym.kind in ("loop", "let", "var"))
        for node in walk(e))


def check_extent_is_known(extent: ast.Expr, where: ast.Node) -> None:
    """An extent of the result is known before the loops run: a loop whose end is a
    variable (`for i in 0..b`, a triangular loop) gives 'out' no shape."""
    for node in walk(extent):
        if isinstance(node, ast.Name) and node.sym is not None and \
                node.sym.kind in ("loop", "let", "var"):
            raise error_at(f"cannot infer the output shape: the loop that gives this dimension "
                           f"of the result runs to '{node.id}', a {node.sym.kind} variable; its "
                           "extent must be known before the loops run (a size or a constant)",
                           where, [(f"'{node.id}' is the end of that loop", node.loc)])


def is_zero(e: ast.Expr) -> bool:
    return isinstance(e, ast.IntLit) and e.value == 0


def is_unit_step(e: Optional[ast.Expr]) -> bool:
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
