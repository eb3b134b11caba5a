"""Sizes of a program (`n` in `for i in 0..n`): giving each a value from every place that
binds it, checking those agree, and making a size nothing binds an integer input (a mixin
of the program checker).
"""
from __future__ import annotations

from typing import Optional

from . import ast
from .result_shapes import eval_extent
from .symbols import Size, is_tensor
from .types import I64
from ..errors import ZynMLError

__all__ = ["SizeResolution", "names_in"]


class SizeResolution:
    """Mixin: needs self.sizes, self.constants, self.scalar_values, self.inputs,
    self.input_locs, self.values, self.signature, self.results_at_first_use."""

    def _check_tile_extents(self, kernel) -> None:
        """Extents of tiles that the rewriting could only compare by name (frontend/tiles.py)."""
        for check in kernel.tile_checks:
            for name in names_in(check.left) + names_in(check.right):
                if name.id in self.sizes:
                    self._resolve_size(name.id)
            left, right = (eval_extent(e, self.sizes, self.constants)
                           for e in (check.left, check.right))
            shown = [_shown(e, v) for e, v in ((check.left, left), (check.right, right))]
            if check.inside:
                if left is None or right is None:
                    raise ZynMLError(f"{check.what}: cannot tell before running whether "
                                     f"index {shown[0]} < {shown[1]}", check.loc)
                if not left < right:
                    raise ZynMLError(f"{check.what}: index {shown[0]} is not below "
                                     f"{shown[1]}", check.loc)
            elif left is not None and right is not None and left != right:
                raise ZynMLError(f"{check.what} differ: {shown[0]} and {shown[1]}", check.loc)

    def _resolve_sizes(self, kernel) -> None:
        """Give every size this kernel uses a value, checking all its bindings agree."""
        for name in kernel.sizes:
            self._resolve_size(name)

    def _resolve_size(self, name: str) -> None:
        size = self.sizes[name]
        sources = []  # (value, description, loc)
        if name in self.constants and isinstance(self.constants[name], int):
            sources.append((self.constants[name], f"'let {name}'", None))
        if name in self.scalar_values:
            sources.append((int(self.scalar_values[name]), f"input '{name}'", None))
        for b in size.bindings:
            ty = self.inputs.get(b.tensor, self.values.get(b.tensor))
            if is_tensor(ty) and ty.shape[b.dim] is not None:
                sources.append((ty.shape[b.dim],
                                f"dimension {b.dim} of '{b.tensor}'", b.loc))
        for value, what, loc in sources[1:]:
            first_value, first_what, first_loc = sources[0]
            if value != first_value:
                where = f" at {first_loc.line}:{first_loc.col}" if first_loc else ""
                raise ZynMLError(
                    f"size '{name}' is bound two ways: {value} from {what} here, but "
                    f"{first_value} from {first_what}{where}",
                    loc or size.loc, notes=[(f"'{name}' is first bound here", first_loc)]
                    if first_loc else None)
        if sources:
            size.value = sources[0][0]

    def _early_bindings(self, size: Size) -> list:
        """The bindings of `size` known when its first block runs: to inputs and to results
        of earlier blocks (`for i in 0..n` before the block whose result `y[i]` binds n:
        y's extent is n itself, so n is an input)."""
        before = self.results_at_first_use.get(size.name)
        return [b for b in size.bindings if before is None or b.tensor in self.inputs or
                b.tensor not in self.values or b.tensor in before]

    def _unbound_sizes_are_inputs(self) -> None:
        """A size no input dimension, earlier result or constant binds is an integer input
        of the program."""
        for size in self.sizes.values():
            if self._early_bindings(size) or size.name in self.constants or \
                    size.name in self.inputs:
                continue
            if self.signature is not None and size.name not in self.scalar_values:
                raise ZynMLError(
                    f"cannot infer size '{size.name}': no input dimension is indexed by a loop "
                    f"over 0..{size.name}; pass '{size.name}' as an input", size.loc)
            self.inputs[size.name] = I64
            self.input_locs[size.name] = size.loc


def names_in(e: ast.Expr) -> list[ast.Name]:
    if isinstance(e, ast.Name):
        return [e]
    if isinstance(e, ast.Binary):
        return names_in(e.left) + names_in(e.right)
    return []


def _shown(e: ast.Expr, value: Optional[int]) -> str:
    """`x.shape[0] = 3`, or just `3` for an extent written as a number."""
    if eval_extent(e, {}, {}) is not None or value is None:
        return str(eval_extent(e, {}, {})) if value is not None else _text(e)
    return f"{_text(e)} = {value}"


_text = ast.extent_text

