"""`Device.elementwise`'s closures, traced into one ZynML kernel.

The closure is called once with one symbolic `Expr` per input; Python's operators and
the math functions below (`zynml.exp`, `zynml.where`, ...) record a graph instead of
computing. The graph becomes the body of one elementwise `compute` block, a `let` per
node (shared subexpressions are computed once):

    lambda x, b: zynml.exp(x) * b + 1.0     over x [rows, d] and b [d]

    let result = compute(x0, x1) {
        @kernel elementwise
        for i0 in 0..n0, i1 in 0..n1:
            let v0 = x0[i0, i1]
            let v1 = x1[i1]
            let t0 = exp(v0)
            ...
            out[i0, i1] = t2
    }

Inputs broadcast as numpy's do (trailing axes aligned; an axis of extent 1 is read at
0); a 0-d input is a scalar of the block. The text is the cache key of the compile.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..errors import ZynMLError

__all__ = ["Expr", "BUILTINS", "trace", "elementwise_source"]


class Expr:
    """A symbolic value of a traced closure: an input, a constant or an operation."""

    __slots__ = ("op", "args", "text")
    __array_ufunc__ = None  # numpy numbers on the left defer to Expr's operators

    def __init__(self, op: str, args: tuple = (), text: str = ""):
        self.op, self.args, self.text = op, args, text

    # arithmetic -------------------------------------------------------------
    def __add__(self, o): return _binary("+", self, o)
    def __radd__(self, o): return _binary("+", o, self)
    def __sub__(self, o): return _binary("-", self, o)
    def __rsub__(self, o): return _binary("-", o, self)
    def __mul__(self, o): return _binary("*", self, o)
    def __rmul__(self, o): return _binary("*", o, self)
    def __truediv__(self, o): return _binary("/", self, o)
    def __rtruediv__(self, o): return _binary("/", o, self)
    def __mod__(self, o): return _binary("%", self, o)
    def __rmod__(self, o): return _binary("%", o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __neg__(self): return Expr("neg", (self,))
    def __pos__(self): return self
    def __abs__(self): return Expr("call", (self,), "abs")

    # comparisons and logic (bool values) -------------------------------------
    def __lt__(self, o): return _binary("<", self, o)
    def __le__(self, o): return _binary("<=", self, o)
    def __gt__(self, o): return _binary(">", self, o)
    def __ge__(self, o): return _binary(">=", self, o)
    def __eq__(self, o): return _binary("==", self, o)  # type: ignore[override]
    def __ne__(self, o): return _binary("!=", self, o)  # type: ignore[override]
    def __and__(self, o): return _binary("and", self, o)
    def __rand__(self, o): return _binary("and", o, self)
    def __or__(self, o): return _binary("or", self, o)
    def __ror__(self, o): return _binary("or", o, self)
    def __invert__(self): return Expr("not", (self,))
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("a traced value has no truth value while tracing: use "
                        "zynml.where(cond, a, b) for a choice, & | ~ for and, or, not, "
                        "and zynml.max / zynml.min instead of Python's max / min")


def constant(value: Any) -> Expr:
    """A Python (or numpy) number as a literal of the language."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)):
        return Expr("const", (), "true" if value else "false")
    if isinstance(value, (int, np.integer)):
        text = str(int(value))
        return Expr("const", (), f"({text})" if int(value) < 0 else text)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            raise ZynMLError("elementwise: a NaN constant cannot be written in a kernel")
        text = ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
        return Expr("const", (), f"({text})" if value < 0 else text)
    raise ZynMLError(f"elementwise: a closure may combine its inputs with numbers, not "
                     f"{type(value).__name__}")


def _binary(op: str, left: Any, right: Any) -> Expr:
    return Expr("bin", (constant(left), constant(right)), op)


def power(base: Any, exponent: Any) -> Expr:
    """`x ** 3` multiplies (the language's `^`); other exponents use `pow`."""
    if isinstance(exponent, (int, np.integer)) and not isinstance(exponent, bool) \
            and 0 <= int(exponent) <= 64:
        return Expr("bin", (constant(base), constant(exponent)), "^")
    return _call("pow", base, exponent)


def _call(name: str, *args: Any) -> Expr:
    return Expr("call", tuple(constant(a) for a in args), name)


# ------------------------------------------------------------------ math builtins

# builtin -> its float64 numpy meaning, used when no argument is traced (zynml.exp(1.0))
def _sigmoid(x): return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.ndim(x) else math.erf(x)


_NUMERIC: dict[str, Callable] = {
    "relu": lambda x: np.maximum(x, 0.0), "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "abs": np.abs, "floor": np.floor,
    "ceil": np.ceil, "erf": _erf, "log1p": np.log1p, "expm1": np.expm1,
    "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "min": np.minimum,
    "max": np.maximum, "pow": np.power, "clamp": lambda x, lo, hi: np.minimum(
        np.maximum(x, lo), hi)}
UNARY = ("relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "tan", "sinh",
         "cosh", "abs", "floor", "ceil", "erf", "log1p", "expm1", "sigmoid", "silu")


def _builtin(name: str, arity: int) -> Callable:
    def builtin(*args):
        if len(args) != arity:
            raise TypeError(f"zynml.{name} takes {arity} argument{'s' * (arity > 1)}, "
                            f"got {len(args)}")
        if not any(isinstance(a, Expr) for a in args):
            result = _NUMERIC[name](*(np.float64(a) for a in args))
            return float(result) if np.ndim(result) == 0 else result
        return _call(name, *args)
    builtin.__name__ = builtin.__qualname__ = name
    builtin.__doc__ = f"The language's `{name}`, traced inside Device.elementwise."
    return builtin


BUILTINS: dict[str, Callable] = {name: _builtin(name, 1) for name in UNARY}
BUILTINS.update(min=_builtin("min", 2), max=_builtin("max", 2), pow=_builtin("pow", 2),
                clamp=_builtin("clamp", 3))


def gelu(x: Any) -> Any:
    """GELU, exact form: x * (1 + erf(x / sqrt(2))) / 2 (no builtin of its own)."""
    return 0.5 * x * (1.0 + BUILTINS["erf"](x * 0.7071067811865476))


def where(condition: Any, if_true: Any, if_false: Any) -> Any:
    """if_true where condition holds, else if_false (both of one type)."""
    if not any(isinstance(a, Expr) for a in (condition, if_true, if_false)):
        return np.where(condition, if_true, if_false)[()]
    return Expr("where", (constant(condition), constant(if_true), constant(if_false)))


BUILTINS.update(gelu=gelu, where=where)


# ------------------------------------------------------------------ source generation

def trace(f: Callable, count: int) -> Expr:
    """The expression `f` builds from `count` symbolic inputs."""
    inputs = [Expr("input", (), str(k)) for k in range(count)]
    try:
        result = f(*inputs)
    except ZynMLError:
        raise
    except TypeError as err:
        raise ZynMLError(f"elementwise: tracing the closure failed: {err}") from None
    if not isinstance(result, Expr):
        raise ZynMLError("elementwise: the closure must return a value computed from its "
                         f"inputs, not {type(result).__name__}")
    return result


def elementwise_source(result: Expr, shapes: list[tuple[int, ...]]) -> tuple[str, tuple]:
    """(ZynML source of one elementwise block computing `result` over inputs of
    `shapes`, the output shape). Broadcasts as numpy; raises on shapes that do not."""
    try:
        out_shape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ZynMLError("elementwise: the inputs' shapes "
                         f"{', '.join(str(tuple(s)) for s in shapes)} do not broadcast "
                         "together") from None
    if not out_shape:
        raise ZynMLError("elementwise: at least one input must have an axis (all are 0-d)")
    rank = len(out_shape)
    loops = ", ".join(f"i{d} in 0..n{d}" for d in range(rank))
    tensors = [k for k, s in enumerate(shapes) if len(s)]
    lines = []
    for k in tensors:
        shape = shapes[k]
        first = rank - len(shape)
        index = ", ".join("0" if shape[d] == 1 and out_shape[first + d] != 1
                          else f"i{first + d}" for d in range(len(shape)))
        lines.append(f"let v{k} = x{k}[{index}]")
    names: dict[int, str] = {}
    result_name = _emit(result, names, lines, set(tensors))
    body = "\n".join("        " + line for line in lines)
    out_index = ", ".join(f"i{d}" for d in range(rank))
    source = (f"let result = compute({', '.join(f'x{k}' for k in tensors)}) {{\n"
              f"    @kernel elementwise\n"
              f"    for {loops}:\n{body}\n"
              f"        out[{out_index}] = {result_name}\n}}\n")
    return source, out_shape


def _emit(node: Expr, names: dict[int, str], lines: list[str], tensors: set[int]) -> str:
    """The name (or literal) of `node`'s value, emitting `let`s for it as needed; an
    explicit stack, so deep expressions do not exhaust Python's recursion."""
    stack = [node]
    while stack:
        top = stack[-1]
        if id(top) in names:
            stack.pop()
            continue
        if top.op == "const":
            names[id(top)] = top.text
            stack.pop()
            continue
        if top.op == "input":
            k = int(top.text)
            names[id(top)] = f"v{k}" if k in tensors else f"x{k}"
            stack.pop()
            continue
        pending = [a for a in top.args if id(a) not in names]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        args = [names[id(a)] for a in top.args]
        name = f"t{len(names)}"
        if top.op == "where":
            lines += [f"var {name} = {args[2]}", f"if {args[0]}:", f"    {name} = {args[1]}"]
        else:
            lines.append(f"let {name} = {_expression(top, args)}")
        names[id(top)] = name
    return names[id(node)]


def _expression(node: Expr, args: list[str]) -> str:
    if node.op == "bin":
        return f"{args[0]} {node.text} {args[1]}"
    if node.op == "neg":
        return f"-{args[0]}"
    if node.op == "not":
        return f"not {args[0]}"
    return f"{node.text}({', '.join(args)})"
