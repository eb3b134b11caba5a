"""Integer values the checker can know before a program runs, checked against what it can
run: no integer division or remainder by a constant zero (LLVM folds one to an
unspecified value, IREE refuses one in a loop bound); positive loop steps; result
extents that fit in 64 bits (a loop `0..-3` runs no iteration, so a negative extent is
0); no argmin/argmax of no values (numpy raises too).

A value is known when it is built from integer literals, program constants (`let k =
0`) and sizes, whose values are known once the inputs' shapes are (checker.py's
specialization); anything read at run time is not.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional

from . import ast
from .lexer import MAX_INT
from .symbols import Kernel, Size
from .types import ScalarType
from ..errors import ZynMLError

__all__ = ["constant_value", "check_divisors", "check_steps", "check_extent_divisors",
           "result_extent", "check_result_size", "check_arg_reduction", "fits_64_bits",
           "check_local_arrays",
           "walk"]


def fits_64_bits(value: int) -> bool:
    return -MAX_INT - 1 <= value <= MAX_INT


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


def check_steps(kernel: Kernel, sizes: dict[str, Size], constants: dict[str, Any]) -> None:
    """A loop's step, once known, is positive (`step 0` would never end)."""
    for node in walk(kernel.body):
        if isinstance(node, ast.Range) and node.step is not None:
            step = constant_value(node.step, sizes, constants)
            if step is not None and step <= 0:
                raise ZynMLError(f"a loop's step must be positive, got {step}",
                                 ast.leftmost(node.step).loc)


def check_local_arrays(kernel: Kernel, sizes: dict[str, Size],
                       constants: dict[str, Any]) -> None:
    """A local array (`shared var up[n * n]`), once its extents are known, has a number of
    elements a 64-bit size holds (the lowering builds its type from them)."""
    for node in walk(kernel.body):
        if not isinstance(node, ast.SharedVar):
            continue
        extents = [constant_value(d, sizes, constants) for d in node.dims]
        for extent, dim in zip(extents, node.dims):
            if extent is not None and not fits_64_bits(extent):
                raise ZynMLError(f"local array '{node.name}' would have {extent} elements "
                                 "along this dimension, more than a 64-bit extent holds",
                                 ast.leftmost(dim).loc)
        if None not in extents and math.prod(max(0, e) for e in extents) > MAX_INT:
            raise ZynMLError(f"local array '{node.name}' would have "
                             f"{math.prod(extents)} elements, more than a 64-bit size "
                             "holds", node.loc)


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


def result_extent(value: Optional[int], extent: ast.Expr, dim: int) -> Optional[int]:
    """A result dimension's extent once known: at least 0 (a loop that runs no iteration
    writes nothing), and one a tensor type can hold."""
    if value is None:
        return None
    if value > MAX_INT:
        raise ZynMLError(f"dimension {dim} of the result would have {value} elements, more "
                         "than a 64-bit extent holds", ast.leftmost(extent).loc)
    return max(0, value)


def check_result_size(dims: tuple, dtype: ScalarType, where: ast.Node) -> None:
    """A result whose byte size does not fit in 64 bits cannot be allocated (IREE: "shape
    element count overflows device size")."""
    if None in dims:
        return
    elements = math.prod(dims)
    size = elements * max(1, dtype.bits // 8)
    if size > MAX_INT:
        raise ZynMLError(f"the result would have {elements} elements ({size} bytes), more "
                         "than a 64-bit size holds", where.loc)


def check_arg_reduction(kernel: Kernel, sizes: dict[str, Size],
                        constants: dict[str, Any]) -> None:
    """argmin/argmax over no values has no answer (numpy raises): a reduced loop that runs
    no iteration, known once the sizes are, is an error at that loop."""
    if kernel.reduce_op not in ("argmin", "argmax"):
        return
    loops = _loops_around_yield(kernel.body, [])
    reduced = loops if kernel.axis is None else loops[kernel.axis:kernel.axis + 1]
    for rng in reduced:
        lo, hi = (constant_value(e, sizes, constants) for e in (rng.lo, rng.hi))
        step = 1 if rng.step is None else constant_value(rng.step, sizes, constants)
        if lo is not None and hi is not None and step is not None and step > 0 and hi <= lo:
            raise ZynMLError(f"{kernel.reduce_op} of no values: the loop over '{rng.var}' "
                             f"runs no iteration ({lo}..{hi})", rng.loc)


def _loops_around_yield(stmts: list, loops: list) -> list:
    for stmt in stmts:
        if isinstance(stmt, ast.Yield):
            return loops
        inner = None
        if isinstance(stmt, ast.For):
            inner = _loops_around_yield(stmt.body, loops + stmt.ranges)
        elif isinstance(stmt, ast.If):
            inner = _loops_around_yield(stmt.then_body, loops) or \
                _loops_around_yield(stmt.else_body, loops)
        if inner:
            return inner
    return []
