"""The shapes of tile expressions, and the names a tile region sees (frontend/tiles.py).

`TileShapes` keeps the scopes of the kernel body being rewritten and answers, for an
expression, whether it is a tile and what its shape is: slices of inputs (their
extents bind like sizes), zeros, '@', transpose, row reductions and elementwise
arithmetic, where a rank-1 tile next to a rank-2 one holds one value per row."""
from __future__ import annotations

import itertools
from typing import Optional

from . import ast
from .tile_types import (ELEMENTWISE_OPS, ROW_REDUCTIONS, SCALAR, TILE_FUNCTIONS, Dim,
                         ExtentCheck, Inside, Local, Shape, SizeUse, TileInput, check_same,
                         is_zero, leftmost_loc, minus, names, slice_length, tile_error)


class TileShapes:
    """The scopes of the body being rewritten, and the shapes of tile expressions in them."""

    def __init__(self, inputs: dict[str, TileInput]):
        self.inputs = inputs
        self.size_uses: list[SizeUse] = []
        self.scopes: list[dict[str, Local]] = [{}]
        self.counter = itertools.count()
        self.region = None  # the tiles._Region being rewritten
        self.dry = False  # a pass that only learns the shapes of tile vars
        self.var_shapes: dict[ast.Var, Shape] = {}  # a var's declaration -> its shape
        self.analysis = False  # a pass that learns which lets are read across the tile
        self.read_across: set[ast.Let] = set()  # tile lets read off the point
        # (let, which point each index is) already followed by the analysis: a let read
        # twice the same way is not followed again (a chain of lets each reading the
        # previous one twice would take 2^n steps)
        self.analysed: set = set()
        self.var_version: dict[ast.Var, int] = {}  # a var's declaration -> assignments so far
        self.loops: list[ast.For] = []  # source loops around the statement, outermost first
        self.checks: list[ExtentCheck] = []
        self.memo: Optional[dict] = None  # see _memoized

    def same(self, a: Dim, b: Dim, node: ast.Node, what: str) -> None:
        """Equal lengths: now when both are numbers, else once sizes are known."""
        check_same(a, b, node, what)
        if not self.dry and not self.analysis and not ast.same_extent(a.nominal, b.nominal):
            self.checks.append(ExtentCheck(a.nominal, b.nominal, leftmost_loc(node), what))

    # ------------------------------------------------------------------ names

    def fresh(self, stem: str) -> str:
        return f"__{stem}{next(self.counter)}"  # not a ZynML identifier: never clashes

    def lookup(self, name: str) -> Optional[Local]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, name: str, local: Local) -> None:
        self.scopes[-1][name] = local

    def extent_name(self, local: str, dim: int, loc) -> ast.Name:
        name = f"{self.inputs[local].program_name}.shape[{dim}]"
        self.use_size(name, local, dim, loc)
        return ast.Name(loc, name)

    def use_size(self, name: str, local: str, dim: int, loc) -> None:
        """Size `name` is the extent of input `local` in dimension `dim` (once each)."""
        if not any(u.name == name and u.local == local and u.dim == dim
                   for u in self.size_uses):
            self.size_uses.append(SizeUse(name, local, dim, loc))

    # ------------------------------------------------------------------ what an expression is

    def is_tile(self, e: ast.Expr) -> bool:
        return self._memoized("tile", e, self._is_tile)

    def _memoized(self, what: str, e: ast.Expr, compute):
        """While one expression is rewritten at a point (tiles.py's at_point), names mean
        one thing and var shapes hold: is_tile and shape of a subexpression are computed
        once (the rewrite asks again at every level of a deep expression)."""
        if self.memo is None:
            return compute(e)
        key = (what, id(e))
        if key not in self.memo:
            self.memo[key] = (e, compute(e))  # e kept alive: its id stays its own
        return self.memo[key][1]

    def _is_tile(self, e: ast.Expr) -> bool:
        if isinstance(e, ast.Name):
            local = self.lookup(e.id)
            if local is not None:
                return local.kind in ("tile-let", "point") or (
                    local.kind == "var" and self.var_shapes.get(local.decl, SCALAR).rank > 0)
            return e.id in self.inputs and self.region is not None
        if isinstance(e, ast.Index):
            return any(isinstance(i, ast.Slice) for i in e.indices)
        if isinstance(e, ast.Binary):
            return e.op == "@" or self.is_tile(e.left) or self.is_tile(e.right)
        if isinstance(e, ast.Unary):
            return self.is_tile(e.operand)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            return e.func.id in TILE_FUNCTIONS or any(self.is_tile(a) for a in e.args)
        return False

    def var_reads(self, e: ast.Expr) -> set[ast.Var]:
        """The vars (their declarations) `e` reads, directly or through the tile lets it
        substitutes: its value depends on when it is computed."""
        found: set[ast.Var] = set()
        for name in names(e):
            local = self.lookup(name)
            if local is None:
                continue
            if local.kind == "var":
                found.add(local.decl)
            elif local.kind == "tile-let":
                found |= set(local.var_versions)
        return found

    def shape(self, e: ast.Expr) -> Shape:
        return self._memoized("shape", e, self._shape)

    def _shape(self, e: ast.Expr) -> Shape:
        if isinstance(e, ast.Name):
            local = self.lookup(e.id)
            if local is not None:
                if local.kind == "var":
                    return self.var_shapes.get(local.decl, SCALAR)
                return local.shape
            if e.id in self.inputs and self.region is not None:
                return self.whole_input_shape(e)
            return SCALAR
        if isinstance(e, ast.Index):
            if any(isinstance(i, ast.Slice) for i in e.indices):
                return self.slice_shape(e)
            for i in e.indices:
                if self.is_tile(i):
                    raise tile_error("an index must be a number, not a tile", i)
            if isinstance(e.base, ast.Name) and self.lookup(e.base.id) is not None and \
                    self.is_tile(e.base):
                raise tile_error("a tile cannot be indexed; use a slice of the input, or "
                                 "row_max / row_sum", e)
            return SCALAR
        if isinstance(e, ast.Unary):
            return self.shape(e.operand)
        if isinstance(e, ast.Binary):
            if e.op == "@":
                a, b = self.shape(e.left).widened(2), self.shape(e.right).widened(2)
                for side, s, operand in (("left", a, e.left), ("right", b, e.right)):
                    if s.rank != 2:
                        raise tile_error(f"the {side} operand of '@' must be a tile of rank 2, "
                                         f"got rank {s.rank}", operand)
                self.same(a.dims[1], b.dims[0], e, "the inner dimensions of '@'")
                return Shape([a.dims[0], b.dims[1]])
            return self.broadcast([e.left, e.right], e)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            return self.call_shape(e)
        return SCALAR

    def call_shape(self, e: ast.Call) -> Shape:
        name = e.func.id
        if name == "zeros":
            if not 1 <= len(e.args) <= 2 or e.kwargs:
                raise tile_error("'zeros' takes one or two extents: zeros(rows) or "
                                 "zeros(rows, cols)", e)
            for a in e.args:
                if self.is_tile(a):
                    raise tile_error("an extent must be a number, not a tile", a)
            return Shape([Dim(a) for a in e.args])
        if name == "transpose":
            (arg,) = self._args(e, 1)
            s = self.shape(arg).widened(2)
            if s.rank != 2:
                raise tile_error(f"'transpose' needs a tile of rank 2, got rank {s.rank}", arg)
            return Shape(s.dims[::-1])
        if name in ROW_REDUCTIONS:
            (arg,) = self._args(e, 1)
            s = self.shape(arg).widened(2)
            if s.rank == 0:
                raise tile_error(f"'{name}' needs a tile, got a scalar", arg)
            return Shape(s.dims[:-1])
        return self.broadcast(e.args, e)

    def _args(self, e: ast.Call, n: int) -> list[ast.Expr]:
        if len(e.args) != n or e.kwargs:
            raise tile_error(f"'{e.func.id}' takes {n} argument{'s' if n > 1 else ''}", e)
        return e.args

    def broadcast(self, operands: list[ast.Expr], node: ast.Expr) -> Shape:
        """Elementwise: the shape of the highest-rank operand; a rank-1 tile next to a
        rank-2 one is one value per row."""
        shapes = [self.shape(o) for o in operands]
        result = max(shapes, key=lambda s: s.rank, default=SCALAR)
        dims = list(result.dims)
        for o, s in zip(operands, shapes):
            for k, dim in enumerate(s.dims):
                self.same(result.dims[k], dim, node, f"dimension {k} of the operands")
                # each guard once: a sum of n reads of one slice has one condition, not n
                extra = tuple(g for g in dim.guards
                              if not any(_same_guard(g, h) for h in dims[k].guards))
                if extra:
                    dims[k] = Dim(dims[k].nominal, dims[k].guards + extra)
        result = Shape(dims, result.trailing)
        if isinstance(node, ast.Binary) and result.rank and node.op not in ELEMENTWISE_OPS:
            raise tile_error(f"operator '{node.op}' is not supported on tiles", node)
        return result

    def slice_shape(self, e: ast.Index) -> Shape:
        local = self.input_of(e)
        info = self.inputs[local]
        if info.rank is not None and len(e.indices) > info.rank:
            raise tile_error(f"rank mismatch: '{local}' has rank {info.rank} but is indexed with "
                             f"{len(e.indices)} indices", e)
        dims = []
        for d, item in enumerate(e.indices):
            if isinstance(item, ast.Slice):
                dims.append(self.slice_dim(local, d, item))
            elif self.is_tile(item):
                raise tile_error("an index must be a number, not a tile", item)

        def whole(k: int, start=len(e.indices)) -> Dim:
            extent = self.extent_name(local, start + k, e.loc)
            return Dim(extent)
        if info.rank is None:
            return Shape(dims, whole)
        return Shape(dims + [whole(k) for k in range(info.rank - len(e.indices))])

    def whole_input_shape(self, e: ast.Name) -> Shape:
        info = self.inputs[e.id]

        def whole(k: int) -> Dim:
            extent = self.extent_name(e.id, k, e.loc)
            return Dim(extent)
        if info.rank is None:
            return Shape([], whole)
        return Shape([whole(k) for k in range(info.rank)])

    def bind_loop_bound(self, start: ast.Expr, local: str, d: int) -> None:
        """`for j in 0..m step 4: ... k[j:j+4]`: the loop runs over k's dimension d, so m
        is its extent (as `for i in 0..n: x[i]` binds n)."""
        loop = self.lookup(start.id) if isinstance(start, ast.Name) else None
        if loop is None or loop.kind != "loop" or loop.decl is None:
            return
        rng = loop.decl
        if is_zero(rng.lo) and isinstance(rng.hi, ast.Name):
            self.use_size(rng.hi.id, local, d, start.loc)

    def input_of(self, e: ast.Index) -> str:
        if not isinstance(e.base, ast.Name) or e.base.id not in self.inputs or \
                self.lookup(e.base.id) is not None:
            what = e.base.id if isinstance(e.base, ast.Name) else "this"
            raise tile_error(f"only a tensor input can be sliced; '{what}' is not one", e.base)
        return e.base.id

    def slice_dim(self, local: str, d: int, item: ast.Slice) -> Dim:
        for bound in (item.lo, item.hi):
            if bound is not None and self.is_tile(bound):
                raise tile_error("a slice bound must be a number, not a tile", bound)
        lo = item.lo if item.lo is not None else ast.IntLit(item.loc, 0)
        extent = self.extent_name(local, d, item.loc)
        self.bind_loop_bound(lo, local, d)
        if item.hi is None:
            nominal = minus(extent, lo) if not is_zero(lo) else extent
            return Dim(nominal)
        nominal = slice_length(lo, item.hi)
        if isinstance(nominal, ast.IntLit) and nominal.value <= 0:
            raise tile_error(f"an empty slice: its length is {nominal.value}", item)

        return Dim(nominal, (Inside(lo, extent, item.loc),))


def _same_guard(a, b) -> bool:
    return a is b or (isinstance(a, Inside) and a.same(b))
