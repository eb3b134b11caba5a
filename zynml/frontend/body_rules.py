"""What every part of the compute-body checker shares: the scalar builtins a body may
call, the reductions and annotations it knows, errors located at a node, and how a
literal's type becomes concrete in a kernel.
"""
from __future__ import annotations

from typing import Any

from . import ast
from .types import FLOAT_LITERAL, I64, INT_LITERAL, ScalarType, concrete
from ..errors import ZynMLError

__all__ = ["MATH_BUILTINS", "FLOAT_ONLY", "REDUCE_OPS", "KNOWN_ANNOTATIONS", "error_at",
           "concrete_in"]

# Scalar math builtins: name -> (min args, max args).
MATH_BUILTINS = {
    "relu": (1, 1), "exp": (1, 1), "log": (1, 1), "sqrt": (1, 1), "rsqrt": (1, 1),
    "tanh": (1, 1), "sin": (1, 1), "cos": (1, 1), "tan": (1, 1), "sinh": (1, 1),
    "cosh": (1, 1), "abs": (1, 1), "floor": (1, 1), "ceil": (1, 1), "min": (2, 2),
    "max": (2, 2), "pow": (2, 2), "clamp": (3, 3),
    "erf": (1, 1), "log1p": (1, 1), "expm1": (1, 1), "sigmoid": (1, 1), "silu": (1, 1),
}
# Builtins whose result is float even for integer arguments.
FLOAT_ONLY = {"exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh",
              "floor", "ceil", "pow", "erf", "log1p", "expm1", "sigmoid", "silu"}
REDUCE_OPS = ("+", "*", "min", "max", "and", "or", "argmin", "argmax")
KNOWN_ANNOTATIONS = {"workgroup", "shared", "broadcast", "tile", "device", "async", "parallel"}

def error_at(message: str, node: ast.Node, notes=None) -> ZynMLError:
    """An error at the start of `node` (its leftmost token)."""
    return ZynMLError(message, ast.leftmost(node).loc, notes=notes)


def concrete_in(t: ScalarType, checker: Any) -> ScalarType:
    """A literal type made concrete in a kernel: float literals take the kernel's float
    type, integer literals i64 (index is for loop variables and sizes)."""
    if t == FLOAT_LITERAL:
        return checker.default_float
    if t == INT_LITERAL:
        return I64
    if t.is_any:  # stays unknown until the call gives the inputs' dtypes
        return t
    return concrete(t)
