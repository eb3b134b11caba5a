"""The values a pipeline returns: `return y` (one value) or `return (a, b)` (several).

A pipeline's returned names are its outputs, in order. A call binds them with as many
names, `let y = f(x)` for one and `let (da, db) = f_backward(x, dy)` for several; from
Python a pipeline of several values returns a tuple.
"""
from __future__ import annotations

from typing import Any

from ..errors import ZynMLError
from . import ast


def returned_values(stmt: ast.Return, values: dict[str, Any]) -> list[str]:
    """The names `stmt` returns, each a value computed in the pipeline, none twice."""
    value = stmt.value
    items = value.elts if isinstance(value, ast.TupleExpr) else [value]
    if value is None or not items:
        raise ZynMLError("'return' takes the name of a value computed in the pipeline, or "
                         "several in parentheses: return (a, b)", (value or stmt).loc)
    names: list[str] = []
    for item in items:
        if not isinstance(item, ast.Name) or item.id not in values:
            raise ZynMLError("'return' takes the name of a value computed in the pipeline"
                             + (", or several in parentheses: return (a, b)"
                                if len(items) == 1 else ""), item.loc)
        if item.id in names:
            raise ZynMLError(f"'{item.id}' is returned twice", item.loc)
        names.append(item.id)
    return names


def returned_names(pipeline: ast.Pipeline) -> list[str]:
    """The names a pipeline's (last) `return` gives, as written (unchecked)."""
    names: list[str] = []
    for stmt in pipeline.body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            items = stmt.value.elts if isinstance(stmt.value, ast.TupleExpr) else [stmt.value]
            names = [item.id for item in items if isinstance(item, ast.Name)]
    return names


def check_call_targets(callee: str, returned: list[str], stmt: ast.Let) -> None:
    """A call binds exactly as many names as its pipeline returns."""
    got, want = len(stmt.targets), len(returned)
    for k, name in enumerate(stmt.targets):
        if name in stmt.targets[:k]:
            loc = stmt.target_locs[k] if len(stmt.target_locs) > k else stmt.loc
            raise ZynMLError(f"'{name}' is bound twice", loc)
    if got == want:
        return
    if want == 1:
        raise ZynMLError(f"pipeline '{callee}' returns one value, bound to {got} names",
                         stmt.loc)
    shown = ", ".join("abcdefgh"[:want]) if want <= 8 else "..."
    raise ZynMLError(f"pipeline '{callee}' returns {want} values, bound to {got} "
                     f"name{'s' if got != 1 else ''}: write let ({shown}) = {callee}(...)",
                     stmt.loc)
