"""Reads out of bounds: an affine read whose index leaves the input's static shape.

The checker binds sizes by name and cannot see that `x[7]` or `x[i + 1]` leaves `x`;
linalg's verifier can, but says it in its own terms, at the compute ("'linalg.generic' op
inferred input/output operand #1 has shape's dimension #0 to be greater than or equal to
8, but found 4"). cir-to-linalg checks each affine read first, over the whole range of
its loops, and reports the program's mistake at the read:

    out[i] = x[i] + x[7]     // error: 'x' is read out of bounds: index 7 of dimension 0,
                             //        but that dimension of 'x' has size 4
"""
from __future__ import annotations

from typing import Optional

from mlir import ir

__all__ = ["OutOfBounds", "check_read", "affine_form"]


class OutOfBounds(Exception):
    """A read at an index outside its input's shape; `location` is the read's. Neither a
    LoweringError nor a ValueError: no fallback lowering that catches those may swallow
    it, it is the program's mistake."""

    def __init__(self, message: str, location: ir.Location):
        super().__init__(message)
        self.location = location


def check_read(affine_map: ir.AffineMap, extents: list[Optional[int]], shape: list[int],
               name: str, location: ir.Location) -> None:
    """Raise OutOfBounds when a result of `affine_map`, over loop dimensions of trip counts
    `extents` (None: not static), can leave the static `shape` of the input `name`."""
    if 0 in extents:
        return  # a loop that never runs reads nothing
    for k, expr in enumerate(affine_map.results):
        if ir.ShapedType.is_dynamic_size(shape[k]):
            continue
        form = affine_form(expr)
        if form is None or any(extents[d] is None for d in form[0]):
            continue
        terms, constant = form
        lo = constant + sum(min(0, c * (extents[d] - 1)) for d, c in terms.items())
        hi = constant + sum(max(0, c * (extents[d] - 1)) for d, c in terms.items())
        if 0 <= lo and hi < shape[k]:
            continue
        what = f"index {constant} of dimension {k}" if not terms else \
            f"the index of dimension {k} runs from {lo} to {hi}"
        raise OutOfBounds(f"'{name}' is read out of bounds: {what}, but that dimension of "
                          f"'{name}' has size {shape[k]}", location)


def affine_form(expr: ir.AffineExpr) -> Optional[tuple[dict[int, int], int]]:
    """({dimension: coefficient}, constant) of a linear affine expression; None for
    anything else (floordiv, mod, a product of dimensions)."""
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}, 0
    if isinstance(expr, ir.AffineAddExpr):
        a, b = affine_form(expr.lhs), affine_form(expr.rhs)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for d, c in b[0].items():
            terms[d] = terms.get(d, 0) + c
        return {d: c for d, c in terms.items() if c}, a[1] + b[1]
    if isinstance(expr, ir.AffineMulExpr):
        a, b = affine_form(expr.lhs), affine_form(expr.rhs)
        if a is None or b is None or (a[0] and b[0]):
            return None
        (terms, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return {d: v * k for d, v in terms.items() if v * k}, c * k
    return None
