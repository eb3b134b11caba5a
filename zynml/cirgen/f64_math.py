"""erf, log1p and expm1 of f64 written with exp, log and arithmetic.

IREE's CPU backend has no f64 math.erf (the vectorized op fails to legalize) and its f64
math.log1p and math.expm1 are only good to about 1e-9; its f64 exp and log are
accurate, and so are these forms (a few ulps; tests/test_math_builtins.py). Every
backend gets the same expansion, so f64 results agree across them.

    log1p(x) = x                       where u = 1 + x rounds to 1
               log(u) * (x / (u - 1))  elsewhere (Goldberg: the rounding of u cancels)
    expm1(x) = x                       where u = exp(x) rounds to 1
               (u - 1) * (x / log(u))  elsewhere (Kahan), -1 and inf at the ends
    erf(x)   = 2/sqrt(pi) e^(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1))   |x| < 2.5
               (positive terms: no cancellation; 36 terms reach f64 precision there)
             = sign(x) (1 - erfc(|x|)), erfc by its continued fraction
               e^(-x^2) / (sqrt(pi) (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))))
               to depth 28                                                   |x| >= 2.5
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mmath

__all__ = ["EXPANDED", "expand"]

SERIES_TERMS = 36
FRACTION_DEPTH = 28
SWITCH = 2.5  # |x| where erf turns from the series to the continued fraction


def _c(v: float) -> ir.Value:
    f64 = ir.F64Type.get()
    return arith.ConstantOp(f64, ir.FloatAttr.get(f64, v)).result


def _add(a, b):
    return arith.AddFOp(a, b).result


def _sub(a, b):
    return arith.SubFOp(a, b).result


def _mul(a, b):
    return arith.MulFOp(a, b).result


def _div(a, b):
    return arith.DivFOp(a, b).result


def _cmp(pred: str, a, b):
    return arith.CmpFOp(getattr(arith.CmpFPredicate, pred), a, b).result


def _select(c, a, b):
    return arith.SelectOp(c, a, b).result


def log1p(x: ir.Value) -> ir.Value:
    u = _add(_c(1.0), x)
    d = _sub(u, _c(1.0))
    r = _mul(mmath.LogOp(u).result, _div(x, d))  # x / d near 1: no overflow
    r = _select(_cmp("OEQ", u, _c(math.inf)), u, r)
    return _select(_cmp("OEQ", d, _c(0.0)), x, r)


def expm1(x: ir.Value) -> ir.Value:
    u = mmath.ExpOp(x).result
    d = _sub(u, _c(1.0))
    r = _mul(d, _div(x, mmath.LogOp(u).result))
    r = _select(_cmp("OEQ", d, _c(-1.0)), d, r)
    r = _select(_cmp("OEQ", u, _c(math.inf)), u, r)
    return _select(_cmp("OEQ", d, _c(0.0)), x, r)


def erf(x: ir.Value) -> ir.Value:
    x2 = _mul(x, x)
    gauss = mmath.ExpOp(arith.NegFOp(x2).result).result  # e^(-x^2)
    acc = _c(1.0)
    two_x2 = _mul(_c(2.0), x2)
    for n in range(SERIES_TERMS, 0, -1):  # Horner: 1 + (2x^2/3)(1 + (2x^2/5)(1 + ...))
        acc = _add(_c(1.0), _div(_mul(acc, two_x2), _c(2 * n + 1)))
    series = _mul(_mul(_c(2 / math.sqrt(math.pi)), gauss), _mul(x, acc))
    a = mmath.AbsFOp(x).result
    f = a
    for n in range(FRACTION_DEPTH, 0, -1):
        f = _add(a, _div(_c(n / 2), f))
    erfc = _div(gauss, _mul(_c(math.sqrt(math.pi)), f))
    tail = _select(_cmp("OLT", x, _c(0.0)), _sub(erfc, _c(1.0)), _sub(_c(1.0), erfc))
    return _select(_cmp("OLT", a, _c(SWITCH)), series, tail)  # NaN: the tail's NaN


EXPANDED = {"erf": erf, "log1p": log1p, "expm1": expm1}


def expand(name: str, x: ir.Value) -> ir.Value:
    return EXPANDED[name](x)
