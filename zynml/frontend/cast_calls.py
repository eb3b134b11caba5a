"""Typing of `cast(value, T)` (docs/language.md, "Types"): `value` converted to T, a
scalar type name (`f32`, `bf16`, `i32`, ...), `float` (the kernel's float type, what
`var s = 0.0` gets), or the name of a tensor input, whose element type it then takes.
The last two keep a kernel generic over dtypes while it computes in another type: a
LayerNorm taking an f32 `eps` input computes in f32 for bf16 rows (f64 for f64), widens
each bf16 value with `cast(x[r, c], float)` where a product of two would stay bf16, and
writes `out[r, c] = cast(y, x)`, bf16 for bf16 rows.

The checker moves T out of the call's arguments into `Call.cast_to`, so that every later
walk over the body sees only values; cirgen converts with the promotion rules' conversion
(cirgen/scalar.py's `convert`).
"""
from __future__ import annotations

from typing import Callable, Optional

from . import ast
from .symbols import Symbol, is_tensor
from .types import SCALARS, ScalarType
from ..errors import ZynMLError

__all__ = ["check_cast_call"]


def check_cast_call(e: ast.Call, type_of: Callable[[ast.Expr], ScalarType],
                    lookup: Callable[[str], Optional[Symbol]],
                    kernel_float: ScalarType) -> ScalarType:
    """The type `e`, a call of `cast`, converts to; `type_of` types its value, `lookup`
    resolves a name of the body, `kernel_float` is what `float` names."""
    if e.kwargs:
        raise ZynMLError("'cast' takes no keyword arguments", e.kwargs[0].loc)
    if e.cast_to is None:  # a second check of the same body finds it moved already
        if len(e.args) != 2:
            raise ZynMLError(f"'cast' takes 2 arguments (cast(value, type)), got "
                             f"{len(e.args)}", ast.leftmost(e).loc)
        e.args, e.cast_to = [e.args[0]], e.args[1]
    target = _target_type(e.cast_to, lookup, kernel_float)
    value = type_of(e.args[0])
    if is_tensor(value):
        raise ZynMLError("'cast' converts a scalar value; index the tensor",
                         ast.leftmost(e.args[0]).loc)
    if target.is_bool and not value.is_bool and not value.is_any:
        raise ZynMLError(f"'cast' cannot make a bool of a {value} value: compare it "
                         "instead (value != 0)", ast.leftmost(e.args[0]).loc)
    return target


def _target_type(target: ast.Expr, lookup: Callable[[str], Optional[Symbol]],
                 kernel_float: ScalarType) -> ScalarType:
    if isinstance(target, ast.Name):
        if target.id == "float" and lookup("float") is None:
            return kernel_float
        sym = lookup(target.id)
        if sym is not None and sym.kind == "arg" and is_tensor(sym.ty):
            return sym.ty.dtype
        if sym is None and target.id in SCALARS:
            return SCALARS[target.id]
    raise ZynMLError("the second argument of 'cast' is a scalar type ("
                     f"{', '.join(SCALARS)}), float (the kernel's float type) or a tensor "
                     "input of this compute, whose element type the value takes",
                     ast.leftmost(target).loc)
