"""Typing of the counter-based random builtins (docs/language.md, "Random numbers").

    rand(seed, counter)                     -> f32, uniform in [0, 1)
    randn(seed, counter)                    -> f32, standard normal
    philox(seed, counter, counter_hi, word) -> u32, one raw Philox-4x32-10 output word

Seed and counters are integers of any width (read as 64 bits); `word` is a literal 0..3.
zynml/cirgen/philox.py emits them.
"""
from __future__ import annotations

from typing import Callable

from . import ast
from .types import F32, SCALARS, ScalarType
from ..errors import ZynMLError

__all__ = ["RANDOM_BUILTINS", "check_random_call"]

U32 = SCALARS["u32"]
# name -> (parameter names, result type)
RANDOM_BUILTINS = {
    "rand": (("seed", "counter"), F32),
    "randn": (("seed", "counter"), F32),
    "philox": (("seed", "counter", "counter_hi", "word"), U32),
}


def check_random_call(e: ast.Call, type_of: Callable[[ast.Expr], ScalarType]) -> ScalarType:
    """The result type of a random builtin's call; `type_of` types an argument."""
    name = e.func.id
    params, result = RANDOM_BUILTINS[name]
    if e.kwargs:
        raise ZynMLError(f"'{name}' takes no keyword arguments", e.kwargs[0].loc)
    if len(e.args) != len(params):
        raise ZynMLError(f"'{name}' takes {len(params)} arguments "
                         f"({name}({', '.join(params)})), got {len(e.args)}",
                         ast.leftmost(e).loc)
    for param, arg in zip(params, e.args):
        t = type_of(arg)
        if not t.may_be_int() or t.is_float:
            raise ZynMLError(f"the {param} of '{name}' must be an integer, got {t}",
                             ast.leftmost(arg).loc)
    if name == "philox":
        word = e.args[3]
        if not isinstance(word, ast.IntLit) or not 0 <= word.value <= 3:
            raise ZynMLError("the word of 'philox' must be a literal 0, 1, 2 or 3",
                             ast.leftmost(word).loc)
    return result
