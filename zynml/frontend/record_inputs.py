"""Record inputs of a program: `model.layers[layer].qkv_proj`, through `let` aliases
(`let weights = model.layers[layer]`), become flat inputs named by their path; with the
record objects known at the call, each gets the type of the array it reaches (a mixin of
the program checker).
"""
from __future__ import annotations

from typing import Any, Optional

from . import ast
from .body_checker import BodyChecker
from .symbols import is_tensor
from .types import ANY, I64, TensorType, from_numpy
from ..errors import ZynMLError

__all__ = ["RecordInputs", "is_path", "path_root", "first_index_rank"]


class RecordInputs:
    """Mixin: needs self.inputs, self.input_locs, self.records, self.record_roots,
    self.record_values, self.aliases, self.constants, self.index_names,
    self.scalar_values, self.signature."""

    def _record_input(self, expr: ast.Expr, node: ast.Compute) -> tuple[str, Any]:
        """`weights.qkv_proj` with `let weights = model.layers[layer]` -> the input
        `model.layers[0].qkv_proj` (the index's value is known at the call)."""
        root, segments = self._expand(expr)
        self.record_roots.add(root.id)
        flat = root.id + "".join(f".{s}" if isinstance(s, str) else f"[{s}]"
                                 for s in (self._segment(x) for x in segments))
        if flat in self.inputs:
            return flat, self.inputs[flat]
        local = BodyChecker._arg_local_name(expr)
        if self.records is None:
            rank = first_index_rank(node, local)
            ty = TensorType(ANY, (None,) * rank if rank is not None else None)
        else:
            if root.id not in self.records:
                raise ZynMLError(f"missing input '{root.id}' (a record)", root.loc)
            value = _resolve_record(self.records[root.id], root, segments, self._segment)
            dtype = from_numpy(value.dtype)
            if dtype is None:
                raise ZynMLError(f"'{flat}' has dtype {value.dtype}, which ZynML does not "
                                 "support", expr.loc)
            ty = TensorType(dtype, tuple(int(d) for d in value.shape))
            self.record_values[flat] = value
        self.inputs[flat] = ty
        self.input_locs[flat] = expr.loc
        return flat, ty

    def _expand(self, expr: ast.Expr):
        """(root Name, [field name | index Expr]) of a path, through `let` aliases."""
        segments = []
        while isinstance(expr, (ast.Attribute, ast.Index)):
            if isinstance(expr, ast.Attribute):
                segments.append(expr.name)
            else:
                if len(expr.indices) != 1 or isinstance(expr.indices[0], ast.Slice):
                    raise ZynMLError("a record member takes one index", expr.loc)
                segments.append(expr.indices[0])
            expr = expr.base
        segments.reverse()
        if expr.id in self.aliases:
            root, head = self._expand(self.aliases[expr.id])
            return root, head + segments
        return expr, segments

    def _segment(self, segment):
        if isinstance(segment, str):
            return segment
        if isinstance(segment, ast.IntLit):
            return segment.value
        if isinstance(segment, ast.Name):
            if segment.id in self.constants:
                return self.constants[segment.id]
            self.index_names.add(segment.id)
            if segment.id in self.scalar_values:
                return int(self.scalar_values[segment.id])
            if self.signature is None:
                self.inputs.setdefault(segment.id, I64)
                self.input_locs.setdefault(segment.id, segment.loc)
                return segment.id
            if segment.id in self.inputs and not is_tensor(self.inputs[segment.id]):
                raise ZynMLError(f"the index '{segment.id}' must be an integer input",
                                 segment.loc)
            raise ZynMLError(f"missing input '{segment.id}'", segment.loc)
        raise ZynMLError("a record index must be a name or an integer", segment.loc)


def is_path(e: ast.Expr) -> bool:
    while isinstance(e, (ast.Attribute, ast.Index)):
        e = e.base
    return isinstance(e, ast.Name)


def path_root(e: ast.Expr) -> ast.Name:
    while isinstance(e, (ast.Attribute, ast.Index)):
        e = e.base
    return e


def _resolve_record(obj: Any, root: ast.Name, segments: list, segment_value) -> Any:
    """Follow fields (dict keys or attributes) and indices from a record object."""
    import numpy as np
    path = root.id
    for seg in segments:
        key = segment_value(seg)
        try:
            if isinstance(key, int):
                obj = obj[key]
            elif isinstance(obj, dict):
                obj = obj[key]
            else:
                obj = getattr(obj, key)
        except (KeyError, IndexError, AttributeError, TypeError):
            loc = seg.loc if isinstance(seg, ast.Node) else root.loc
            what = f"[{key}]" if isinstance(key, int) else f".{key}"
            raise ZynMLError(f"'{path}' has no member {what}", loc) from None
        path += f"[{key}]" if isinstance(key, int) else f".{key}"
    try:
        return np.asarray(obj)
    except Exception:
        raise ZynMLError(f"'{path}' is not an array", root.loc) from None

def first_index_rank(node: ast.Compute, name: str) -> Optional[int]:
    """Rank of input `name` from its first indexing in the body (None if never indexed)."""
    found: list[int] = []

    def visit(x, row: bool = False):
        if found:
            return
        if isinstance(x, ast.Index) and is_path(x.base) and \
                BodyChecker._arg_local_name(x.base) == name and \
                not any(isinstance(i, ast.Slice) for i in x.indices):  # a slice keeps whole
            # trailing dimensions: its index count is not the rank
            found.append(len(x.indices) + row)  # a row (dot's argument) drops one index
            return
        if isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "dot":
            for arg in x.args:
                visit(arg, row=True)
            return
        if isinstance(x, list):
            for item in x:
                visit(item)
        elif isinstance(x, ast.Node):
            for value in vars(x).values():
                if isinstance(value, (ast.Node, list)):
                    visit(value)
    visit(node.body)
    return found[0] if found else None
