"""Random ZynML expressions that are valid and well-conditioned by construction.

Every expression carries an interval that holds all its values. The forms use it to stay
in their domains (`log` and `sqrt` of positive values, `/` by values away from zero,
`exp` of small ones) and to keep magnitudes below LIMIT, so that a difference between two
backends is a bug, not an overflow or a NaN one of them happened to produce.

    d = RandomDraw(random.Random(1))
    e = float_expr(d, [Expr("x[i]", -2, 2)], depth=3)
    e.text  -> "(tanh(x[i]) * (x[i] + 0.5))"     e.lo, e.hi -> (-2.5, 2.5)

A Draw makes every choice: RandomDraw from a seed (the campaign, corpora for CUDA),
hypothesis's `draw` in tests (strategies.py), so that failures shrink.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, TypeVar

__all__ = ["Draw", "RandomDraw", "Expr", "float_expr", "int_expr", "bool_expr", "LIMIT"]

T = TypeVar("T")
LIMIT = 1e4  # the largest magnitude an expression may reach


class Draw(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`; the first is the simplest (hypothesis shrinks towards it)."""


class RandomDraw:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]


def chance(d: Draw, percent: int) -> bool:
    return d.integer(0, 99) < percent


@dataclass(frozen=True)
class Expr:
    text: str
    lo: float
    hi: float

    @property
    def bound(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def positive(self) -> bool:
        return self.lo > 0


def _hull(*values: float) -> tuple[float, float]:
    return min(values), max(values)


def _literal(value: float) -> Expr:
    text = repr(float(value))
    return Expr(text if value >= 0 else f"({text})", value, value)


FLOAT_LITERALS = (0.5, 1.0, 2.0, -1.5, 0.25, 3.0, -0.75, 1.25)


# ---------------------------------------------------------------------- floats

def _tame(e: Expr) -> Expr:
    """`e` squashed into [-1, 1] when it grew past LIMIT."""
    if e.bound <= LIMIT:
        return e
    return _tanh_of(e)


def _positive(d: Draw, e: Expr) -> Expr:
    """A value >= 0.5 made from `e`."""
    if e.lo >= 0.5:
        return e
    form = d.choice(("abs", "square"))
    if form == "abs":
        return Expr(f"(abs({e.text}) + 0.5)", 0.5, e.bound + 0.5)
    return Expr(f"({e.text} * {e.text} + 1.0)", 1.0, e.bound ** 2 + 1.0)


def _tanh_of(e: Expr) -> Expr:
    """tanh(e), its argument scaled by a power of two (exact) into [-4, 4]: beyond,
    tanh rounds to +-1 in f32 where one backend's approximation may give 1 - ulp, and a
    floor, a comparison or an argmax of it turns that ulp into a different result."""
    if e.bound <= 4.0:
        return Expr(f"tanh({e.text})", math.tanh(e.lo), math.tanh(e.hi))
    scale = 2.0 ** -math.ceil(math.log2(e.bound / 4.0))
    lo, hi = e.lo * scale, e.hi * scale
    return Expr(f"tanh({e.text} * {scale!r})", math.tanh(lo), math.tanh(hi))


def _small(e: Expr, limit: float) -> Expr:
    """`e` if its values stay within +-limit, else a tanh of it scaled to limit."""
    if e.bound <= limit:
        return e
    t = _tanh_of(e)
    return Expr(f"({limit!r} * {t.text})", limit * t.lo, limit * t.hi)


def _unary_float(d: Draw, a: Expr) -> Expr:
    name = d.choice(("relu", "abs", "tanh", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
                     "neg", "floor", "ceil", "tan", "sinh", "cosh", "pow2", "pow3"))
    t = a.text
    if name == "relu":
        return Expr(f"relu({t})", max(0.0, a.lo), max(0.0, a.hi))
    if name == "abs":
        return Expr(f"abs({t})", 0.0, a.bound)
    if name == "tanh":
        return _tanh_of(a)
    if name == "exp":
        s = _small(a, 6.0)
        return Expr(f"exp({s.text})", math.exp(s.lo), math.exp(s.hi))
    if name == "log":
        p = _positive(d, a)
        return Expr(f"log({p.text})", math.log(p.lo), math.log(p.hi))
    if name == "sqrt":
        p = _positive(d, a)
        return Expr(f"sqrt({p.text})", math.sqrt(p.lo), math.sqrt(p.hi))
    if name == "rsqrt":
        p = _positive(d, a)
        return Expr(f"rsqrt({p.text})", 1 / math.sqrt(p.hi), 1 / math.sqrt(p.lo))
    if name in ("sin", "cos"):
        s = _small(a, 20.0)
        return Expr(f"{name}({s.text})", -1.0, 1.0)
    if name == "neg":
        return Expr(f"(-{t})", -a.hi, -a.lo)
    if name in ("floor", "ceil"):
        if "(" in t:  # only of exact values: an ulp of an inexact one may cross an integer
            return Expr(f"relu({t})", max(0.0, a.lo), max(0.0, a.hi))
        return Expr(f"{name}({t})", math.floor(a.lo), math.ceil(a.hi))
    if name == "tan":
        s = _small(a, 1.2)
        return Expr(f"tan({s.text})", math.tan(s.lo), math.tan(s.hi))
    if name in ("sinh", "cosh"):
        s = _small(a, 4.0)
        lo, hi = (math.sinh(s.lo), math.sinh(s.hi)) if name == "sinh" else \
            (1.0, math.cosh(s.bound))
        return Expr(f"{name}({s.text})", lo, hi)
    s = _small(a, 20.0)
    if name == "pow3":
        return Expr(f"({s.text} ^ 3)", s.lo ** 3, s.hi ** 3)
    lo = 0.0 if s.lo < 0 < s.hi else min(s.lo ** 2, s.hi ** 2)
    return Expr(f"({s.text} ^ 2)", lo, max(s.lo ** 2, s.hi ** 2))


def _binary_float(d: Draw, a: Expr, b: Expr, whole: bool = False) -> Expr:
    op = d.choice(("+", "-", "*", "/") if whole else
                  ("+", "-", "*", "/", "min", "max", "clamp", "pow"))
    if op == "+":
        return _tame(Expr(f"({a.text} + {b.text})", a.lo + b.lo, a.hi + b.hi))
    if op == "-":
        return _tame(Expr(f"({a.text} - {b.text})", a.lo - b.hi, a.hi - b.lo))
    if op == "*":
        products = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
        return _tame(Expr(f"({a.text} * {b.text})", *_hull(*products)))
    if op == "/":
        den = _positive(d, b) if chance(d, 70) else _literal(d.choice((2.0, 4.0, -0.5, 3.0)))
        quotients = (a.lo / den.lo, a.lo / den.hi, a.hi / den.lo, a.hi / den.hi)
        return _tame(Expr(f"({a.text} / {den.text})", *_hull(*quotients)))
    if op in ("min", "max"):
        f = min if op == "min" else max
        return Expr(f"{op}({a.text}, {b.text})", f(a.lo, b.lo), f(a.hi, b.hi))
    if op == "clamp":
        lo = d.choice((-1.0, -0.5, 0.0))
        hi = d.choice((0.5, 1.0, 2.0))
        return Expr(f"clamp({a.text}, {_literal(lo).text}, {hi!r})",
                    max(lo, min(a.lo, hi)), min(hi, max(a.hi, lo)))
    base = _positive(d, a)
    exponent = _small(b, 2.0)
    candidates = [base.lo ** exponent.lo, base.lo ** exponent.hi, base.hi ** exponent.lo,
                  base.hi ** exponent.hi]
    return _tame(Expr(f"pow({base.text}, {exponent.text})", *_hull(*candidates)))


def float_expr(d: Draw, leaves: Sequence[Expr], depth: int, whole: bool = False) -> Expr:
    """A float expression over `leaves` (tensor elements, scalars, loop variables). With
    `whole`, only what whole-tensor expressions take: + - * / ^, unary - and one-argument
    builtins."""
    if depth <= 0 or chance(d, 25):
        if chance(d, 12):
            return _literal(d.choice(FLOAT_LITERALS))
        return d.choice(leaves)
    if chance(d, 40):
        return _unary_float(d, float_expr(d, leaves, depth - 1, whole))
    return _binary_float(d, float_expr(d, leaves, depth - 1, whole),
                         float_expr(d, leaves, depth - 1, whole), whole)


# ---------------------------------------------------------------------- integers

def int_expr(d: Draw, leaves: Sequence[Expr], depth: int) -> Expr:
    """An integer expression: no division by zero, no overflow of i32."""
    if depth <= 0 or chance(d, 30):
        if chance(d, 15):
            value = d.choice((1, 2, 3, -4, 7))
            return Expr(str(value) if value >= 0 else f"({value})", value, value)
        return d.choice(leaves)
    a = int_expr(d, leaves, depth - 1)
    op = d.choice(("+", "-", "*", "/", "%", "min", "max", "abs", "neg", "clamp"))
    if op in ("abs", "neg"):
        return Expr(f"abs({a.text})", 0, a.bound) if op == "abs" else \
            Expr(f"(-{a.text})", -a.hi, -a.lo)
    if op == "clamp":
        return Expr(f"clamp({a.text}, (-3), 5)", max(-3, min(a.lo, 5)), min(5, max(a.hi, -3)))
    b = int_expr(d, leaves, depth - 1)
    if op in ("/", "%"):
        den = d.choice((2, 3, 5, "abs")) if b.bound < 1000 else d.choice((2, 3, 5))
        if den == "abs":
            text, hi = f"(abs({b.text}) + 1)", b.bound + 1
        else:
            text, hi = str(den), den
        if op == "/":
            return Expr(f"({a.text} / {text})", -a.bound, a.bound)
        return Expr(f"({a.text} % {text})", 0, hi)
    if op in ("min", "max"):
        f = min if op == "min" else max
        return Expr(f"{op}({a.text}, {b.text})", f(a.lo, b.lo), f(a.hi, b.hi))
    if op == "*":
        lo, hi = _hull(a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    elif op == "+":
        lo, hi = a.lo + b.lo, a.hi + b.hi
    else:
        lo, hi = a.lo - b.hi, a.hi - b.lo
    if max(abs(lo), abs(hi)) > 1e6:
        return a
    return Expr(f"({a.text} {op} {b.text})", lo, hi)


# ---------------------------------------------------------------------- bools

def bool_expr(d: Draw, compare: Callable[[], tuple[Expr, Expr]], bools: Sequence[Expr],
              depth: int) -> Expr:
    """A condition: comparisons of pairs `compare()` gives, bool leaves, and/or/not."""
    if depth <= 0 or chance(d, 50):
        if bools and chance(d, 20):
            return d.choice(bools)
        a, b = compare()
        op = d.choice(("<", ">", "<=", ">=", "!=", "=="))
        return Expr(f"({a.text} {op} {b.text})", 0, 1)
    op = d.choice(("and", "or", "not"))
    a = bool_expr(d, compare, bools, depth - 1)
    if op == "not":
        return Expr(f"(not {a.text})", 0, 1)
    b = bool_expr(d, compare, bools, depth - 1)
    return Expr(f"({a.text} {op} {b.text})", 0, 1)
