"""Tile statements -> element statements (the spec's flash-attention form, by rewriting).

A *tile* is a block of values of rank 1 or 2: a slice of an input (`K[b, h, j:j+64]`, the
dimensions after the last index are whole), `zeros(64, d)`, `A @ B`, `transpose(A)`,
`row_max(A)` / `row_min(A)` / `row_sum(A)` (over the last dimension), and elementwise
arithmetic and math builtins of tiles and scalars. A rank-1 tile next to a rank-2 one
holds one value per row: it is broadcast along the columns.

A loop whose body writes a tile of `out` (`out[b, h, q:q+64] = o / l`) is a *tile region*.
The region is rewritten into the element form the rest of the compiler already handles:
loops over the points of the written tile wrap the region's statements, and every tile
statement computes its value at that point.

* A tile `var` holds one element per point; so does a tile `let` read only at the point
  (`m_new = max(m, row_max(S))`), computed once there.
* Any other tile `let`, one read across the tile (`K_block`, `S`, read by `@` and
  `row_max`), is substituted where it is read, at the indices it is read at.
* `A @ B` and `row_max(A)` at a point are reduction loops over the contracted dimension.
* A slice `a:b` covers a .. min(b, extent): the last tile of a dimension may be partial,
  and reductions run over its real extent (what masking does in a tile language).
* When the region's loop steps from 0 by the written slice's length
  (`for q in 0..n step 64: out[q:q+64] = ...`), it and the point loop over the tile's rows
  become one loop over all n rows.

The flash attention then carries one m, l and o per point through the sequential loop
over key blocks: O(n) memory, as the spec asks.

The pieces: tile_types.py (shapes, indices, helpers on the syntax), tile_shapes.py (names
and the shape of each tile expression), this file (statements, values at a point, the
region's loops).
"""
from __future__ import annotations

import math
from typing import Optional

from . import ast
from .tile_shapes import TileShapes
from .tile_types import (ROW_REDUCTIONS, SCALAR, Dim, ExtentCheck, Ix, Local, Shape, SizeUse,
                         TileInput, assigns, first_tile_node, is_zero, leftmost_loc,
                         names, slice_length, tile_error, tile_write_in)
from ..errors import ZynMLError


def uses_tiles(body: list[ast.Stmt]) -> bool:
    """Does the body use any tile syntax (the fast path for every other kernel)?"""
    return first_tile_node(body) is not None


def rewrite_tiles(body: list[ast.Stmt], inputs: dict[str, TileInput]
                  ) -> tuple[list[ast.Stmt], list[SizeUse], list[ExtentCheck]]:
    """The body with every tile region in element form, the input extents the new loops
    use, and the extents to compare once sizes are known. `inputs` maps each tensor
    input's name in the body to what is known of it. The body itself is not changed (it
    is checked again per input signature)."""
    rewriter = _Rewriter(inputs)
    write = tile_write_in(body)
    if write is not None:  # the kernel's own body writes the tile: it is the region
        loc = body[0].loc
        new_body = rewriter.region_loop(ast.For(loc, [], body), write)
    else:
        new_body = rewriter.block(body, in_region=False)
    return new_body, rewriter.size_uses, rewriter.checks


class _Rewriter(TileShapes):
    """Rewrites one kernel body (see the module's docstring)."""

    # ------------------------------------------------------------------ statements

    def block(self, stmts: list[ast.Stmt], in_region: bool) -> list[ast.Stmt]:
        out: list[ast.Stmt] = []
        self.scopes.append({})
        try:
            for stmt in stmts:
                out.extend(self.stmt(stmt, in_region))
        finally:
            self.scopes.pop()
        return out

    def stmt(self, s: ast.Stmt, in_region: bool) -> list[ast.Stmt]:
        if isinstance(s, ast.For):
            write = tile_write_in(s.body)
            if write is not None and not in_region:
                return self.region_loop(s, write)
            return [self.plain_for(s, in_region)]
        if not in_region:
            return self.outside_region(s)
        return self.region_stmt(s)

    def plain_for(self, s: ast.For, in_region: bool) -> ast.For:
        for rng in s.ranges:
            for bound in (rng.lo, rng.hi, rng.step):
                if bound is not None and self.is_tile(bound):
                    raise tile_error("a loop bound must be a number, not a tile", bound)
        self.scopes.append({rng.var: Local("loop", decl=rng) for rng in s.ranges})
        self.loops.append(s)
        try:
            body = self.block(s.body, in_region)
        finally:
            self.scopes.pop()
            self.loops.pop()
        return ast.For(s.loc, s.ranges, body)

    def outside_region(self, s: ast.Stmt) -> list[ast.Stmt]:
        """Statements outside any tile region stay as they are (tile syntax there is an
        error); `if`s are searched for regions inside them."""
        if isinstance(s, ast.If):
            return [ast.If(s.loc, s.cond, self.block(s.then_body, False),
                           self.block(s.else_body, False))]
        tile = first_tile_node(s)
        if tile is not None:
            raise tile_error("tiles (slices, '@', zeros, transpose, row_max, row_sum) are used "
                             "in a loop whose body writes a tile of 'out' (out[i:i+n] = ...); "
                             "this one writes none", tile)
        if isinstance(s, (ast.Let, ast.Var)):
            names = s.targets if isinstance(s, ast.Let) else [s.name]
            for name in names:
                self.declare(name, Local("var" if isinstance(s, ast.Var) else "let"))
        return [s]

    # ------------------------------------------------------------------ regions

    def region_loop(self, loop: ast.For, write: ast.Assign) -> list[ast.Stmt]:
        """The loop whose body writes a tile of `out`: the body in element form, inside
        loops over the points of the written tile."""
        region = _Region(loop, write)
        self.region = region
        region.scope_depth = len(self.scopes)
        loop_scope = {rng.var: Local("loop", decl=rng) for rng in loop.ranges}
        self.scopes.append(loop_scope)
        try:
            self._learn_var_shapes(loop.body)
            region.setup(self, loop_scope)
            self.analysis = True
            self.analysed.clear()
            try:
                self.block(loop.body, True)
            except ZynMLError:
                pass  # reported by the real pass
            finally:
                self.analysis = False
            self.var_version.clear()
            body = self.block(loop.body, True)
        finally:
            self.scopes.pop()
            self.region = None
        return region.wrap(body)

    def _learn_var_shapes(self, body: list[ast.Stmt]) -> None:
        """Dry passes over the region: a var's shape is the largest of the values assigned
        to it (`var m = -inf` later holds `m_new`, one value per row), and the written
        value's shape gives the points."""
        self.dry = True
        try:
            for _ in range(4):
                before = {k: s.rank for k, s in self.var_shapes.items()}
                error = None
                try:
                    self.block(body, True)
                except ZynMLError as err:
                    error = err
                if {k: s.rank for k, s in self.var_shapes.items()} == before:
                    if error is not None:
                        raise error
                    return
        finally:
            self.dry = False

    def region_stmt(self, s: ast.Stmt) -> list[ast.Stmt]:
        method = getattr(self, "_region_" + type(s).__name__, None)
        if method is None:
            tile = first_tile_node(s)
            if tile is not None:
                raise tile_error(f"a tile cannot be used in a '{type(s).__name__.lower()}' "
                                 "statement", tile)
            return [s]
        return method(s)

    def _region_If(self, s: ast.If) -> list[ast.Stmt]:
        prelude, cond = self.at_point(s.cond)
        return prelude + [ast.If(s.loc, cond, self.block(s.then_body, True),
                                 self.block(s.else_body, True))]

    def _region_Let(self, s: ast.Let) -> list[ast.Stmt]:
        if len(s.targets) != 1 or not self.is_tile(s.value):
            for name in s.targets:
                self.declare(name, Local("let", decl=s))
            return [s]
        name = s.targets[0]
        shape = self.shape(s.value)
        var_reads = self.var_reads(s.value)
        if not self.analysis and s not in self.read_across:
            # only read at the point: computed once, there (substituting it at each read
            # would copy it, and a chain of such lets would grow exponentially)
            prelude, value = self.at_point(s.value)
            self.declare(name, Local("point", shape, decl=s))
            return prelude + [ast.Let(s.loc, [name], value, s.target_locs)]
        reads = {n: self.lookup(n) for n in names(s.value)}
        self.declare(name, Local("tile-let", shape, value=s.value, decl=s, reads=reads,
                                  var_versions={v: self.var_version.get(v, 0)
                                                for v in var_reads},
                                  loop_depth=len(self.loops)))
        return []

    def _region_Var(self, s: ast.Var) -> list[ast.Stmt]:
        shape = self.shape(s.value) if self.is_tile(s.value) else SCALAR
        if shape.rank > self.var_shapes.get(s, SCALAR).rank:
            self.var_shapes[s] = shape
        self.check_fits_point(self.var_shapes.get(s, SCALAR).rank, s.value)
        prelude, value = self.at_point(s.value)
        self.declare(s.name, Local("var", decl=s))
        return prelude + [ast.Var(s.loc, s.name, value, s.declared)]

    def _region_Assign(self, s: ast.Assign) -> list[ast.Stmt]:
        target = s.target
        if s is self.region.write:
            if self.dry:
                self.region.value_shape = self.shape(s.value) if self.is_tile(s.value) \
                    else SCALAR
                return []
            prelude, value = self.at_point(s.value)
            return prelude + [ast.Assign(s.loc, self.region.store_target(), s.op, value)]
        if isinstance(target, ast.Index):
            what = "'out' is written both as a tile and by element in one loop; write it " \
                "one way" if isinstance(target.base, ast.Name) and target.base.id == "out" \
                else "a loop that writes a tile of 'out' runs once per element of the tile: " \
                "it cannot write other arrays"
            raise tile_error(what, target)
        if not isinstance(target, ast.Name):
            return self._assign_var(s, None)
        local = self.lookup(target.id)
        if local is not None and local.kind == "var" and \
                not self._declared_in_region(target.id):
            raise tile_error(f"'{target.id}' is declared outside the loop that writes a tile of "
                             "'out', which runs once per element of the tile: declare it inside",
                             target)
        try:  # the var's version changes once its new value has been read
            return self._assign_var(s, local)
        finally:
            if local is not None and local.kind == "var":
                self.var_version[local.decl] = self.var_version.get(local.decl, 0) + 1

    def _assign_var(self, s: ast.Assign, local: Optional[Local]) -> list[ast.Stmt]:
        target = s.target
        if not self.is_tile(s.value):
            return [s]
        if not isinstance(target, ast.Name) or local is None or local.kind != "var":
            raise tile_error("a tile can only be assigned to a 'var' declared in the loop, or "
                             "written to a tile of 'out'", target)
        shape = self.shape(s.value)
        if shape.rank > self.var_shapes.get(local.decl, SCALAR).rank:
            if not self.dry:
                raise AssertionError("tile var shapes are settled by the dry passes")
            self.var_shapes[local.decl] = shape
        self.check_fits_point(shape.rank, s.value)
        prelude, value = self.at_point(s.value)
        return prelude + [ast.Assign(s.loc, ast.Name(target.loc, target.id), s.op, value)]

    def _region_For(self, s: ast.For) -> list[ast.Stmt]:
        return [self.plain_for(s, True)]

    def _region_Yield(self, s: ast.Yield) -> list[ast.Stmt]:
        tile = first_tile_node(s)
        if tile is not None:
            raise tile_error("a reduction cannot yield a tile", tile)
        return [s]

    def _declared_in_region(self, name: str) -> bool:
        """Declared in the region loop's scope or in a block inside it?"""
        depth = self.region.scope_depth
        return any(name in scope for scope in self.scopes[depth:])

    def check_fits_point(self, rank: int, node: ast.Node) -> None:
        if self.region.rank is not None and rank > self.region.rank:
            raise tile_error(f"a tile of rank {rank} does not fit the written tile of 'out', of "
                             f"rank {self.region.rank}", node)

    # ------------------------------------------------------------------ values at a point

    def at_point(self, e: ast.Expr) -> tuple[list[ast.Stmt], ast.Expr]:
        """`e` at the current point: statements to run first, and a scalar expression."""
        if self.dry or not self.is_tile(e):
            return [], e
        outer, self.memo = self.memo, self.memo if self.memo is not None else {}
        try:
            rank = self.shape(e).rank
            self.check_fits_point(rank, e)
            return self.at(e, self.region.points[:rank])
        finally:
            self.memo = outer

    def at(self, e: ast.Expr, idx: list[Ix]) -> tuple[list[ast.Stmt], ast.Expr]:
        """Element `idx` of tile expression `e` (len(idx) == its rank)."""
        if not self.is_tile(e):
            return [], e
        if isinstance(e, ast.Name):
            return self.name_at(e, idx)
        if isinstance(e, ast.Index):
            return [], self.slice_at(e, idx)
        if isinstance(e, ast.Unary):
            prelude, v = self.at(e.operand, idx)
            return prelude, ast.Unary(e.loc, e.op, v)
        if isinstance(e, ast.Binary):
            if e.op == "@":
                return self.matmul_at(e, idx)
            (pa, a), (pb, b) = (self.operand_at(x, idx) for x in (e.left, e.right))
            return pa + pb, ast.Binary(e.loc, e.op, a, b)
        name = e.func.id
        if name == "zeros":
            return [], ast.FloatLit(e.loc, 0.0)
        if name == "transpose":
            return self.at(e.args[0], idx[::-1])
        if name in ROW_REDUCTIONS:
            return self.row_reduction_at(e, idx)
        prelude, args = [], []
        for a in e.args:
            p, v = self.operand_at(a, idx)
            prelude += p
            args.append(v)
        return prelude, ast.Call(e.loc, e.func, args, e.kwargs)

    def operand_at(self, e: ast.Expr, idx: list[Ix]):
        """An elementwise operand: a lower-rank tile is indexed by the leading indices."""
        return self.at(e, idx[:self.shape(e).rank])

    def name_at(self, e: ast.Name, idx: list[Ix]):
        local = self.lookup(e.id)
        if local is None:  # a whole input
            return [], self.slice_at(ast.Index(e.loc, e, []), idx)
        if local.kind == "tile-let":
            self.check_substitution(e, local)
            if any(ix.point != k for k, ix in enumerate(idx)):
                self.read_across.add(local.decl)
            if self.analysis:  # what the analysis learns depends on the points only
                key = (local.decl, tuple(ix.point for ix in idx))
                if key in self.analysed:
                    return [], ast.Name(e.loc, e.id)
                self.analysed.add(key)
            return self.at(local.value, idx)
        if any(ix.point != k for k, ix in enumerate(idx)):
            what = "a 'var'" if local.kind == "var" else "a tile computed from a 'var'"
            raise tile_error(f"'{e.id}' is {what}: it holds one element per element of the written "
                             "tile, and can only be read there (not across rows or columns, as "
                             "'@', transpose and row reductions read)", e)
        return [], ast.Name(e.loc, e.id)

    def check_substitution(self, e: ast.Name, local: Local) -> None:
        """A tile let is substituted where it is read: that must give the value it had
        where it was written."""
        where = f"{local.decl.loc.line}:{local.decl.loc.col}"
        for name, seen in local.reads.items():
            if self.lookup(name) is not seen:
                raise tile_error(f"'{name}' is declared again after the tile '{e.id}' (at {where}) "
                                 "that reads it; rename one of them", e)
        for decl, version in local.var_versions.items():
            if self.analysis:  # the analysis substitutes every let; the real pass checks
                break
            var = decl.name
            changed = self.var_version.get(decl, 0) != version or any(
                assigns(loop.body, var) for loop in self.loops[local.loop_depth:])
            if changed:
                raise tile_error(f"the tile '{e.id}' (at {where}) reads the var '{var}', which "
                                 f"changes before this use, and '{e.id}' is read across its rows "
                                 "or columns, so it is not kept per element: compute what needs "
                                 "the old value before assigning the var", e)

    def slice_at(self, e: ast.Index, idx: list[Ix]) -> ast.Expr:
        indices, k = [], 0
        for item in e.indices:
            if not isinstance(item, ast.Slice):
                indices.append(item)
                continue
            ix = idx[k]
            k += 1
            lo = item.lo
            if ix.fused_start is not None and isinstance(lo, ast.Name) and \
                    lo.id == ix.fused_start and self.lookup(lo.id) is self.region.fused_local:
                indices.append(ix.absolute)
            elif lo is None or is_zero(lo):
                indices.append(ix.rel)
            else:
                indices.append(ast.Binary(item.loc, "+", lo, ix.rel))
        indices += [ix.rel for ix in idx[k:]]  # the whole trailing dimensions
        return ast.Index(e.loc, e.base, indices)

    def matmul_at(self, e: ast.Binary, idx: list[Ix]):
        a, b = self.shape(e.left).widened(2), self.shape(e.right).widened(2)
        k = self.fresh("k")
        kx = Ix(ast.Name(e.loc, k))
        pa, va = self.at(e.left, [idx[0], kx])
        pb, vb = self.at(e.right, [kx, idx[1]])
        return self.reduction_loop("+", k, a.dims[1], pa + pb,
                                   ast.Binary(e.loc, "*", va, vb), e.loc, b.dims[0].guards)

    def row_reduction_at(self, e: ast.Call, idx: list[Ix]):
        arg = e.args[0]
        s = self.shape(arg).widened(2)
        c = self.fresh("c")
        prelude, v = self.at(arg, idx + [Ix(ast.Name(e.loc, c))])
        return self.reduction_loop(ROW_REDUCTIONS[e.func.id], c, s.dims[-1], prelude, v,
                                   e.loc)

    def reduction_loop(self, op: str, var: str, dim: Dim, body: list[ast.Stmt],
                       value: ast.Expr, loc, more_guards=()) -> tuple[list[ast.Stmt], ast.Expr]:
        """var acc = identity; for var in 0..extent: [if inside:] acc = acc op value.
        Reductions of tiles accumulate in the kernel's float type."""
        acc = self.fresh("acc")
        identity = {"+": ast.FloatLit(loc, 0.0), "max": ast.Unary(loc, "-", ast.FloatLit(
            loc, math.inf)), "min": ast.FloatLit(loc, math.inf)}[op]
        if op == "+":
            update = ast.Assign(loc, ast.Name(loc, acc), "+", value)
        else:
            update = ast.Assign(loc, ast.Name(loc, acc), None, ast.Call(
                loc, ast.Name(loc, op), [ast.Name(loc, acc), value]))
        body = body + [update]
        conditions = [g(ast.Name(loc, var)) for g in dim.guards + tuple(more_guards)]
        if conditions:
            cond = conditions[0]
            for c in conditions[1:]:
                cond = ast.Binary(loc, "and", cond, c)
            body = [ast.If(loc, cond, body)]
        loop = ast.For(loc, [ast.Range(loc, var, ast.IntLit(loc, 0), dim.nominal)], body)
        return [ast.Var(loc, acc, identity), loop], ast.Name(loc, acc)


# ---------------------------------------------------------------------------- the region


class _Region:
    """A loop that writes a tile of `out`, and the points of that tile."""

    def __init__(self, loop: ast.For, write: ast.Assign):
        self.loop, self.write = loop, write
        self.scope_depth = 0  # where the region loop's scope sits in the rewriter's stack
        self.value_shape: Optional[Shape] = None  # learnt by the dry passes
        self.rank: Optional[int] = None  # known after setup()
        self.dims: list[Dim] = []
        self.points: list[Ix] = []
        self.ranges: list[ast.Range] = []
        self.store: list[ast.Expr] = list(write.target.indices)
        self.fused: Optional[ast.Range] = None
        self.fused_local: Optional[Local] = None

    def setup(self, rw: _Rewriter, loop_scope: dict[str, Local]) -> None:
        """One point loop per dimension of the written tile: its slices, then the
        dimensions of the written value beyond them (out's trailing dimensions)."""
        value = self.value_shape or SCALAR
        items = self.write.target.indices
        slices = [(d, item) for d, item in enumerate(items) if isinstance(item, ast.Slice)]
        last = self.loop.ranges[-1] if self.loop.ranges else None
        for k, (d, item) in enumerate(slices):
            self._slice_point(rw, k, d, item, last)
        if self.fused is not None:
            self.fused_local = loop_scope[self.fused.var]
        for k in range(len(slices), value.rank):
            dim = value.dims[k]
            loc = self.write.loc
            name = rw.fresh("p")
            self.ranges.append(ast.Range(loc, name, ast.IntLit(loc, 0), dim.nominal))
            self.points.append(Ix(ast.Name(loc, name), point=k))
            self.store.append(ast.Name(loc, name))
            self.dims.append(dim)
        self.rank = len(self.points)
        for k, dim in enumerate(value.dims[:self.rank]):
            rw.same(self.dims[k], dim, self.write.value,
                    f"the written value and the tile of 'out' (dimension {k})")
            if self.points[k].fused_start is None:  # its reads are not guarded: in bounds?
                last = ast.Binary(dim.nominal.loc, "-", dim.nominal,
                                  ast.IntLit(dim.nominal.loc, 1))
                for guard in dim.guards:
                    cond = guard(last)
                    rw.checks.append(ExtentCheck(
                        cond.left, cond.right, leftmost_loc(self.write.value),
                        f"the written tile (dimension {k}) reads past the end of an input",
                        inside=True))

    def _slice_point(self, rw: _Rewriter, k: int, d: int, item: ast.Slice,
                     last: Optional[ast.Range]) -> None:
        loc = item.loc
        lo = item.lo if item.lo is not None else ast.IntLit(loc, 0)
        if item.hi is None:
            raise tile_error("a tile write of 'out' needs both bounds (out[a:b]): they give "
                             "out's extent", item)
        length = slice_length(lo, item.hi)
        name = rw.fresh("p")
        fuse = (last is not None and isinstance(lo, ast.Name) and lo.id == last.var
                and self.fused is None and isinstance(last.step, ast.IntLit)
                and isinstance(length, ast.IntLit))
        if fuse:
            if last.step.value != length.value:
                raise tile_error(f"the loop over '{last.var}' steps by {last.step.value} but "
                                 f"the tile of 'out' it writes has {length.value} rows: make "
                                 "them equal", item)
            self.fused = last
            self.ranges.append(ast.Range(loc, name, last.lo, last.hi))
            rel = ast.Binary(loc, "-", ast.Name(loc, name), ast.Name(loc, last.var))
            self.points.append(Ix(rel, point=k, fused_start=last.var,
                                  absolute=ast.Name(loc, name)))
            self.store[d] = ast.Name(loc, name)
        elif isinstance(lo, ast.IntLit) and lo.value >= 0:
            if not isinstance(length, ast.IntLit) and not isinstance(length, ast.Name):
                raise tile_error("a tile write of 'out' at a constant start needs a constant "
                                 "length or a size (out[0:n])", item)
            self.ranges.append(ast.Range(loc, name, ast.IntLit(loc, 0), length))
            self.points.append(Ix(ast.Name(loc, name), point=k))
            self.store[d] = ast.Name(loc, name) if lo.value == 0 else \
                ast.Binary(loc, "+", ast.Name(loc, name), lo)
        else:
            var = last.var if last is not None else "i"
            raise tile_error(
                      "a tile write of 'out' starts at a constant, or at the variable of the loop "
                      f"around it stepping by the tile's length (for {var} in 0..n step L: "
                      f"out[{var}:{var}+L] = ...)", item)
        self.dims.append(Dim(length))

    def store_target(self) -> ast.Index:
        target: ast.Index = self.write.target
        return ast.Index(target.loc, target.base, list(self.store))

    def wrap(self, body: list[ast.Stmt]) -> list[ast.Stmt]:
        loop, loc = self.loop, self.loop.loc
        outer = list(loop.ranges)
        if self.fused is not None:
            outer = outer[:-1]
            f = self.fused
            point = next(ix.absolute.id for ix in self.points if ix.fused_start == f.var)
            # the loop variable, for any other use: the start of this point's tile
            start = ast.Binary(loc, "-", ast.Name(loc, point), ast.Binary(
                loc, "%", ast.Binary(loc, "-", ast.Name(loc, point), f.lo), f.step))
            body = [ast.Let(loc, [f.var], start, [loc])] + body
        inner = ast.For(loc, self.ranges, body) if self.ranges else None
        inner_body = [inner] if inner is not None else body
        return [ast.For(loc, outer, inner_body)] if outer else inner_body
