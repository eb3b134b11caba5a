"""The ZynML abstract syntax tree: what the parser builds and the checker annotates.

Every node carries `loc` (a SourceLocation) so any later stage can report a located error.
The checker (checker.py) fills the `ty` slot of expressions; that annotated tree is the
"typed AST" that irgen.py lowers to `cir`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ..errors import SourceLocation


@dataclass(eq=False)
class Node:
    loc: SourceLocation


# ----------------------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr(Node):
    # Filled by the checker: a zynml.frontend.types type, and for names and indexed
    # bases the Symbol they resolve to (zynml.frontend.symbols).
    ty: Any = field(default=None, init=False, repr=False)
    sym: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class IntLit(Expr):
    value: int


@dataclass(eq=False)
class FloatLit(Expr):
    value: float  # `inf` parses as FloatLit(inf); `-inf` is Unary('-', FloatLit(inf))


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class StringLit(Expr):
    value: str


@dataclass(eq=False)
class UnitLit(Expr):
    """A number with a unit: `1000ms`, `1GB`. `value` is the number as written."""

    value: float
    unit: str  # "ms", "s", "us", "B", "KB", "MB", "GB"


@dataclass(eq=False)
class Name(Expr):
    id: str


@dataclass(eq=False)
class Unary(Expr):
    op: str  # "-", "not"
    operand: Expr


@dataclass(eq=False)
class Binary(Expr):
    # "+", "-", "*", "/", "%", "^" (power), "@" (matrix product),
    # "==", "!=", "<", "<=", ">", ">=", "and", "or"
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Slice(Node):
    """`lo:hi` inside an index; either bound may be None (`:`, `a:`, `:b`)."""

    lo: Optional[Expr]
    hi: Optional[Expr]


@dataclass(eq=False)
class Index(Expr):
    """`base[i, j, a:b]`: each index is an Expr or a Slice."""

    base: Expr
    indices: list  # list[Expr | Slice]


@dataclass(eq=False)
class Attribute(Expr):
    """`base.name` (record fields such as `weights.qkv_proj`)."""

    base: Expr
    name: str


@dataclass(eq=False)
class Keyword(Node):
    name: str
    value: Expr


@dataclass(eq=False)
class Call(Expr):
    """`func(args, name=value)`; `func` is a Name or an Attribute (method call)."""

    func: Expr
    args: list[Expr]
    kwargs: list[Keyword] = field(default_factory=list)
    # `cast(value, T)`: the checker moves T (a type or input name) here, so that
    # args holds only values (cast_calls.py)
    cast_to: Optional["Name"] = None


@dataclass(eq=False)
class TupleExpr(Expr):
    elts: list[Expr]


@dataclass(eq=False)
class ListExpr(Expr):
    elts: list[Expr]


@dataclass(eq=False)
class Pipe(Expr):
    """`value |> func(args)`: calls func with value prepended to args."""

    value: Expr
    call: Call


@dataclass(eq=False)
class Await(Expr):
    """`await value [timeout T else default]`."""

    value: Expr
    timeout: Optional[Expr] = None
    default: Optional[Expr] = None


@dataclass(eq=False)
class Annotation(Node):
    """`@name` or `@name(args, key=value)`: @device, @async, @parallel, @workgroup, @shared,
    @broadcast, @tile, ... (the @kernel line is parsed into KernelSpec instead)."""

    name: str
    args: list[Expr] = field(default_factory=list)
    kwargs: list[Keyword] = field(default_factory=list)


@dataclass(eq=False)
class KernelSpec(Node):
    """`@kernel KIND` or `@kernel KIND(params)`.

    For `reduce(+, axis=1)`: kind="reduce", args=[ReduceOpName("+")], kwargs=[axis=1].
    Reduction operators are written bare (`+`, `*`, `min`, `max`, `and`, `or`, `argmin`,
    `argmax`); they parse as ReduceOpName so the checker can name an unknown one.
    """

    kind: str
    args: list = field(default_factory=list)  # list[Expr | ReduceOpName]
    kwargs: list[Keyword] = field(default_factory=list)


@dataclass(eq=False)
class ReduceOpName(Expr):
    """A reduction operator written bare: `+`, `*`, `max`, `argmax`, ... (also as the first
    argument of the builtin `reduce(max, logits)`)."""

    op: str


@dataclass(eq=False)
class Compute(Expr):
    """`compute(inputs) [@device(..)] [@async] [@parallel(..)] { @kernel ...; annotations; body }`.

    `inputs` are expressions (names or attribute paths such as `weights.qkv_proj`);
    `mutable[k]` says input k was written `mut x` (the body may write it in place).
    `outer` holds the annotations written between `)` and `{`; `inner` those inside the
    braces after @kernel. `kernel` is None when the block has none (an error the checker
    reports). `elided` is True for a body written as `...`.
    """

    inputs: list[Expr]
    outer: list[Annotation]
    kernel: Optional[KernelSpec]
    inner: list[Annotation]
    body: list["Stmt"]
    elided: bool = False
    mutable: list = field(default_factory=list)  # per input: marked `mut` (may be written)


# ----------------------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt(Node):
    # Filled by the checker for `let`/`var`: the Symbol the statement defines.
    sym: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Range(Node):
    """`var in lo..hi [step s]`."""

    var: str
    lo: Expr
    hi: Expr
    step: Optional[Expr] = None
    sym: Any = field(default=None, init=False, repr=False)  # the loop variable's Symbol


@dataclass(eq=False)
class For(Stmt):
    """`for a in 0..n, b in 0..m:` — ranges nest left to right."""

    ranges: list[Range]
    body: list[Stmt]


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then_body: list[Stmt]
    else_body: list[Stmt] = field(default_factory=list)  # `else if` nests an If here


@dataclass(eq=False)
class Let(Stmt):
    """`let name = value` or `let (a, b, c) = value` (targets has one entry per name)."""

    targets: list[str]
    value: Expr
    target_locs: list[SourceLocation] = field(default_factory=list)


@dataclass(eq=False)
class Var(Stmt):
    """`var name = value` or `var name: f32 = value` (mutable local; `declared`: the
    scalar type written, else the value's)."""

    name: str
    value: Expr
    declared: Optional["TypeExpr"] = None


@dataclass(eq=False)
class SharedVar(Stmt):
    """`shared var name[size, ...]` (workgroup-shared scratch)."""

    name: str
    dims: list[Expr]


@dataclass(eq=False)
class Assign(Stmt):
    """`target = value` or compound `target op= value` (op in + - * /; None for plain)."""

    target: Expr  # Name or Index
    op: Optional[str]
    value: Expr


@dataclass(eq=False)
class Yield(Stmt):
    """`yield value` or `yield (value, index)` (value is a TupleExpr then)."""

    value: Expr


@dataclass(eq=False)
class Return(Stmt):
    value: Optional[Expr]


@dataclass(eq=False)
class ExprStmt(Stmt):
    """An expression used as a statement: `barrier()`, a call."""

    value: Expr


@dataclass(eq=False)
class Ellipsis_(Stmt):
    """`...`: an elided body in the spec's prose; the checker rejects it."""


# ----------------------------------------------------------------------------- program level


@dataclass(eq=False)
class TypeExpr(Node):
    """`tensor[batch, seq, hidden]`, `int`, `float`, `f32`, a record type name, ...
    `dims` is None for non-tensor types; `dynamic` holds the dims written `?seq`."""

    name: str  # "tensor", "int", "float", "f32", ..., or a user/record name
    dims: Optional[list[Expr]] = None
    dynamic: list["Name"] = field(default_factory=list)


@dataclass(eq=False)
class Param(Node):
    name: str
    type: Optional[TypeExpr]


@dataclass(eq=False)
class Pipeline(Node):
    """`pipeline name(params) -> type:` followed by an indented body."""

    name: str
    params: list[Param]
    result: Optional[TypeExpr]
    body: list[Stmt]


@dataclass(eq=False)
class ConfigEntry(Node):
    key: str
    value: Expr


@dataclass(eq=False)
class Config(Node):
    """`config { key: value ... }`."""

    entries: list[ConfigEntry]


@dataclass(eq=False)
class Use(Node):
    """`use kernels.swiglu`: the dotted path of a library source (zynml/kernels/src)."""

    path: list[str]


@dataclass(eq=False)
class Program(Node):
    """A whole source file: top-level statements (Let, ExprStmt, ...), pipelines, config,
    and the library sources it uses."""

    body: list[Stmt]
    pipelines: list[Pipeline]
    configs: list[Config]
    uses: list[Use] = field(default_factory=list)


def same_extent(a: Expr, b: Expr) -> bool:
    """Do two extent expressions (names, integers, arithmetic of them) read the same?"""
    if type(a) is not type(b):
        return False
    if isinstance(a, Name):
        return a.id == b.id
    if isinstance(a, IntLit):
        return a.value == b.value
    if isinstance(a, Binary):
        return a.op == b.op and same_extent(a.left, b.left) and same_extent(a.right, b.right)
    return False


def extent_text(e: Expr) -> str:
    """An extent expression as the program would write it (`3 * hidden`, `max(a, b)`)."""
    if isinstance(e, Name):
        return e.id
    if isinstance(e, IntLit):
        return str(e.value)
    if isinstance(e, Binary):
        return f"{extent_text(e.left)} {e.op} {extent_text(e.right)}"
    if isinstance(e, Call) and isinstance(e.func, Name):
        return f"{e.func.id}({', '.join(extent_text(a) for a in e.args)})"
    return "?"


def leftmost(node: Node) -> Node:
    """The node where an expression's text starts (`x` of `x[i]`, `a` of `a + b`): errors
    about a whole expression point there."""
    while True:
        if isinstance(node, Index):
            node = node.base
        elif isinstance(node, Attribute):
            node = node.base
        elif isinstance(node, Binary):
            node = node.left
        elif isinstance(node, Call) and isinstance(node.func, (Name, Attribute)):
            node = node.func
        elif isinstance(node, Pipe):
            node = node.value
        else:
            return node


def nested_statements(stmts: list[Stmt]) -> Iterator[Stmt]:
    """Every statement of `stmts` and of the bodies of its `for`s and `if`s, in order."""
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from nested_statements(s.body)
        elif isinstance(s, If):
            yield from nested_statements(s.then_body)
            yield from nested_statements(s.else_body)
