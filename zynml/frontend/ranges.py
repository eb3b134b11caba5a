"""Integer values the checker can know before a program runs, checked against what it can
run: no integer division or remainder by a constant zero (LLVM folds one to an
unspecified value, IREE refuses one in a loop bound).

A value is known when it is built from integer literals, program constants (`let k =
0`) and sizes, whose values are known once the inputs' shapes are (checker.py's
specialization); anything read at run time is not.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from . import ast
from .symbols import Kernel, Size
from .types import ScalarType
from ..errors import ZynMLError

__all__ = ["constant_value", "check_divisors", "check_extent_divisors", "walk"]


def walk(root: Any) -> Iterator[ast.Node]:
    """Every node under `root` (a node or a list of them), in source order. Iterative: an
    expression may be thousands of operators deep."""
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, ast.Node):
            yield item
            stack.extend(reversed([v for v in vars(item).values()
                                   if isinstance(v, (ast.Node, list))]))


def constant_value(e: ast.Expr, sizes: dict[str, Size],
                   constants: dict[str, Any]) -> Optional[int]:
    """The integer `e` always has (a checked expression: names carry their symbols), or
    None when it is not known before running."""
    if isinstance(e, ast.IntLit):
        return e.value
    if isinstance(e, ast.Name) and e.sym is not None:
        if e.sym.kind == "size" and e.id in sizes:
            return sizes[e.id].value
        if e.sym.kind == "capture":
            value = constants.get(e.id)
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None
    if isinstance(e, ast.Unary) and e.op == "-":
        value = constant_value(e.operand, sizes, constants)
        return None if value is None else -value
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "%"):
        a = constant_value(e.left, sizes, constants)
        b = constant_value(e.right, sizes, constants)
        if a is None or b is None or (e.op in "/%" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0,
                "%": a % b if b else 0}[e.op]
    return None


def check_divisors(kernel: Kernel, sizes: dict[str, Size], constants: dict[str, Any]) -> None:
    """Integer `/` and `%` whose divisor is known to be 0 (`i % 0`, `0..n/m` with m = 0)."""
    for node in walk(kernel.body):
        if isinstance(node, ast.Binary) and node.op in ("/", "%") and _integer(node.ty) \
                and constant_value(node.right, sizes, constants) == 0:
            what = "division" if node.op == "/" else "remainder"
            shown = f"'{node.right.id}'" if isinstance(node.right, ast.Name) else "the divisor"
            raise ZynMLError(f"integer {what} by zero: {shown} is 0",
                             ast.leftmost(node.right).loc)


def check_extent_divisors(extents: list[ast.Expr], evaluate) -> None:
    """The same for extents written at the program level (`reshape(t, [n / 2])`), which
    are integers: `evaluate(e)` is their value or None."""
    for node in walk(extents):
        if isinstance(node, ast.Binary) and node.op in ("/", "%") and \
                evaluate(node.right) == 0:
            what = "division" if node.op == "/" else "remainder"
            raise ZynMLError(f"integer {what} by zero: the divisor is 0",
                             ast.leftmost(node.right).loc)


def _integer(t: Any) -> bool:
    return isinstance(t, ScalarType) and t.is_int and not t.is_bool
