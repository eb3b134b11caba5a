"""Expression depth: how many operations nest in one expression.

The checker, cirgen and the lowering walk expressions recursively, and are given room
for MAX_EXPRESSION_DEPTH levels (zynml/limits.py). The parser builds a flat sum in a loop,
so a sum of n terms is n deep whatever the parser's own nesting limit; a deeper
expression is refused here, at the operation past the limit.
"""
from __future__ import annotations

from typing import Optional

from . import ast
from ..errors import ZynMLError
from ..limits import MAX_EXPRESSION_DEPTH

__all__ = ["check_expression_depth"]


def check_expression_depth(program: ast.Program) -> None:
    too_deep = _too_deep(program)
    if too_deep is not None:
        raise ZynMLError(f"expression too deep: more than {MAX_EXPRESSION_DEPTH} operations "
                         "nested in one expression; split it with 'let'", too_deep.loc)


def _too_deep(program: ast.Program) -> Optional[ast.Expr]:
    """The first expression, in post-order, nested deeper than the limit. Iterative: the
    depth is what is being checked."""
    depth: dict[int, int] = {}
    stack: list = [(program, None)]
    while stack:
        node, children = stack.pop()
        if children is None:
            children = [c for v in vars(node).values()
                        for c in (v if isinstance(v, list) else [v]) if isinstance(c, ast.Node)]
            stack.append((node, children))
            stack.extend((c, None) for c in reversed(children))
            continue
        if not isinstance(node, ast.Expr):  # a statement starts its expressions afresh
            depth[id(node)] = 0
            continue
        d = 1 + max((depth[id(c)] for c in children), default=0)
        if d > MAX_EXPRESSION_DEPTH:
            return node
        depth[id(node)] = d
    return None
