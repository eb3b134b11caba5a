"""Tile statements' data (frontend/tiles.py): dimensions, shapes, indices into a tile,
what the checker is told, and helpers on the syntax."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from . import ast
from ..errors import ZynMLError

TILE_FUNCTIONS = {"zeros", "transpose", "row_max", "row_min", "row_sum"}
ROW_REDUCTIONS = {"row_max": "max", "row_min": "min", "row_sum": "+"}
ELEMENTWISE_OPS = {"+", "-", "*", "/", "^", "%"}


def tile_error(message: str, node: ast.Node) -> ZynMLError:
    return ZynMLError(message, leftmost_loc(node))


def leftmost_loc(node: ast.Node):
    return ast.leftmost(node).loc


# ---------------------------------------------------------------------------- shapes


@dataclass
class Dim:
    """One dimension of a tile: its length as written (`64`, `head_dim`: the loops over
    it, static checks), and for a slice that may run past its input's end, guards: each
    maps an index into the tile to the condition that it is inside the input. Loops keep
    the written length (static extents, which the GPU strategies need); guarded
    contributions are skipped."""

    nominal: ast.Expr
    guards: tuple = ()


@dataclass(frozen=True, eq=False)
class Inside:
    """The guard of a slice `lo:hi` of an input of `extent` along that dimension: index
    `rel` into the tile is inside the input when lo + rel < extent."""

    lo: ast.Expr
    extent: ast.Expr
    loc: object

    def __call__(self, rel: ast.Expr) -> ast.Expr:
        index = rel if is_zero(self.lo) else ast.Binary(self.loc, "+", self.lo, rel)
        return ast.Binary(self.loc, "<", index, self.extent)

    def same(self, other) -> bool:
        """The same condition (two reads of one slice, `K[j:j+4] + K[j:j+4]`)."""
        return other is self or (isinstance(other, Inside) and
                                 ast.same_extent(self.lo, other.lo) and
                                 ast.same_extent(self.extent, other.extent))


@dataclass
class Shape:
    dims: list[Dim]
    # A slice of an input whose rank is known only at the call: its whole trailing
    # dimensions, made on demand (the check at the call sees the real rank).
    trailing: Optional[Callable[[int], Dim]] = None

    @property
    def rank(self) -> int:
        return len(self.dims)

    def widened(self, rank: int) -> "Shape":
        if self.trailing is None or self.rank >= rank:
            return self
        extra = [self.trailing(k) for k in range(rank - self.rank)]
        return Shape(self.dims + extra, None)


SCALAR = Shape([])


@dataclass(frozen=True)
class Ix:
    """An index into a tile dimension: `rel` counts from the tile's start. `point` is k
    when this is the k-th coordinate of the point being computed; `absolute` is the index
    into the input when the dimension is the fused loop's (`q`, for a slice `q:q+64`)."""

    rel: ast.Expr
    point: Optional[int] = None
    fused_start: Optional[str] = None
    absolute: Optional[ast.Expr] = None


@dataclass
class Local:
    """A name declared in the kernel body, as the rewriting sees it."""

    kind: str  # "var", "let", "loop", "tile-let" (substituted), "point" (one per point)
    shape: Shape = field(default_factory=lambda: SCALAR)
    value: Optional[ast.Expr] = None  # a substituted tile let's expression
    decl: Optional[ast.Node] = None
    reads: dict = field(default_factory=dict)  # substituted let: name -> Local at definition
    var_versions: dict = field(default_factory=dict)  # the Var statements it reads -> version
    loop_depth: int = 0  # source loops around its definition


@dataclass
class TileInput:
    program_name: str  # the name sizes are keyed by (`K.shape[2]`)
    rank: Optional[int]


@dataclass
class SizeUse:
    """`K.shape[2]` used as a tile extent: the checker binds it to that input dimension."""

    name: str
    local: str
    dim: int
    loc: object


@dataclass
class ExtentCheck:
    """Checked once sizes are known (at the call): two extents that must be equal, or an
    index that must be inside an extent (`index < extent`)."""

    left: ast.Expr
    right: ast.Expr
    loc: object
    what: str
    inside: bool = False  # left < right, instead of left == right


# ---------------------------------------------------------------------------- helpers


def tile_write_in(stmts: list[ast.Stmt]) -> Optional[ast.Assign]:
    """The tile write of `out` directly in `stmts` (or in their ifs), if any; a second
    one is an error."""
    found: list[ast.Assign] = []

    def walk(ss):
        for s in ss:
            if isinstance(s, ast.Assign) and is_out_tile_write(s):
                found.append(s)
            elif isinstance(s, ast.If):
                walk(s.then_body)
                walk(s.else_body)
    walk(stmts)
    if len(found) > 1:
        raise tile_error("a loop writes two tiles of 'out'; write one tile per loop", found[1])
    return found[0] if found else None


def is_out_tile_write(s: ast.Assign) -> bool:
    t = s.target
    return isinstance(t, ast.Index) and isinstance(t.base, ast.Name) and t.base.id == "out" \
        and any(isinstance(i, ast.Slice) for i in t.indices)


def first_tile_node(x) -> Optional[ast.Node]:
    if isinstance(x, ast.Slice) or (isinstance(x, ast.Binary) and x.op == "@") or (
            isinstance(x, ast.Call) and isinstance(x.func, ast.Name)
            and x.func.id in TILE_FUNCTIONS):
        return x
    children = x if isinstance(x, list) else (
        [v for v in vars(x).values() if isinstance(v, (ast.Node, list))]
        if isinstance(x, ast.Node) else [])
    for child in children:
        found = first_tile_node(child)
        if found is not None:
            return found
    return None


def names(e) -> list[str]:
    found = []

    def visit(x):
        if isinstance(x, ast.Name):
            found.append(x.id)
        elif isinstance(x, list):
            for item in x:
                visit(item)
        elif isinstance(x, ast.Call):
            visit(x.args)
        elif isinstance(x, ast.Node):
            for value in vars(x).values():
                if isinstance(value, (ast.Node, list)):
                    visit(value)
    visit(e)
    return found


def assigns(stmts: list[ast.Stmt], name: str) -> bool:
    """Is `name` assigned anywhere in `stmts`?"""
    for s in stmts:
        if isinstance(s, ast.Assign) and isinstance(s.target, ast.Name) and s.target.id == name:
            return True
        for body in (getattr(s, "body", None), getattr(s, "then_body", None),
                     getattr(s, "else_body", None)):
            if body and assigns(body, name):
                return True
    return False


def is_zero(e: ast.Expr) -> bool:
    return isinstance(e, ast.IntLit) and e.value == 0


def minus(a: ast.Expr, b: ast.Expr) -> ast.Expr:
    return a if is_zero(b) else ast.Binary(a.loc, "-", a, b)


def slice_length(lo: ast.Expr, hi: ast.Expr) -> ast.Expr:
    """hi - lo, folded for `a:a+L` and for constants."""
    if isinstance(lo, ast.IntLit) and isinstance(hi, ast.IntLit):
        return ast.IntLit(hi.loc, hi.value - lo.value)
    if isinstance(hi, ast.Binary) and hi.op == "+" and ast.same_extent(hi.left, lo):
        return hi.right
    return minus(hi, lo)


def check_same(a: Dim, b: Dim, node: ast.Node, what: str) -> None:
    x, y = a.nominal, b.nominal
    if isinstance(x, ast.IntLit) and isinstance(y, ast.IntLit) and x.value != y.value:
        raise tile_error(f"{what} differ: {x.value} and {y.value}", node)
