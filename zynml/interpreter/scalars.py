"""Scalar values of the interpreter and the semantics of the arith/math ops on them.

A value of MLIR type `index` is a Python int; `i1` a Python or numpy bool; every other
integer a numpy signed integer of its width (MLIR integers are signless: an unsigned
ZynML value is held as the signed integer with the same bits, and the ops that care,
`divui` `maxui` `cmpi ult` `uitofp` ..., read it as unsigned); a float is a numpy float of
its width (`ml_dtypes.bfloat16` for bf16). numpy computes each operation in the type of
its operands and rounds once, as the IR says; integers wrap.

    dtype_of(ir.F32Type.get())       -> dtype('float32')
    maximumf(np.float32(-0.0), np.float32(0.0)) -> np.float32(0.0)
    remsi(np.int32(-7), np.int32(2)) -> np.int32(-1)    (C's %; ZynML's % is floordiv's)
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from mlir import ir

__all__ = ["dtype_of", "is_index", "scalar_constant", "CMPF", "CMPI"]

_FLOATS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
           "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
_INTS = {1: np.dtype(np.bool_), 8: np.dtype(np.int8), 16: np.dtype(np.int16),
         32: np.dtype(np.int32), 64: np.dtype(np.int64)}
_UNSIGNED = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
             np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}


def is_index(t: ir.Type) -> bool:
    return isinstance(t, ir.IndexType)


def dtype_of(t: ir.Type) -> np.dtype:
    """The numpy dtype holding values of MLIR scalar type `t` (index: int64)."""
    if isinstance(t, ir.IndexType):
        return np.dtype(np.int64)
    if isinstance(t, ir.IntegerType):
        width = ir.IntegerType(t).width
        if width not in _INTS:
            raise NotImplementedError(f"integers of {width} bits")
        return _INTS[width]
    name = str(t)
    if name in _FLOATS:
        return _FLOATS[name]
    raise NotImplementedError(f"values of type {t}")


def scalar_constant(attr: ir.Attribute, t: ir.Type):
    """The value of an `arith.constant` of scalar type `t`."""
    if isinstance(t, ir.IndexType):
        return int(ir.IntegerAttr(attr).value)
    dtype = dtype_of(t)
    if dtype == np.bool_:
        return bool(ir.IntegerAttr(attr).value)
    if dtype.kind == "i":
        return wrap(int(ir.IntegerAttr(attr).value), dtype)
    return dtype.type(ir.FloatAttr(attr).value)


def wrap(value: int, dtype: np.dtype):
    """A Python int as a numpy integer of `dtype`, wrapped to its width."""
    bits = dtype.itemsize * 8
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return dtype.type(value)


# ---------------------------------------------------------------------- unsigned views

def unsigned(v):
    """The unsigned reading of a signless integer (index: as 64 bits)."""
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, int):
        return v & 0xFFFF_FFFF_FFFF_FFFF
    return int(v.view(_UNSIGNED[v.dtype]))


def from_unsigned(value: int, like):
    """An unsigned result back to the signless representation of `like`'s type."""
    if isinstance(like, int) and not isinstance(like, (bool, np.bool_)):
        return value - (1 << 64) if value >= 1 << 63 else value
    return wrap(value, like.dtype)


# ---------------------------------------------------------------------- floats

def maximumf(a, b):
    """arith.maximumf: NaN if either is NaN; +0.0 is larger than -0.0."""
    if a > b:
        return a
    if b > a:
        return b
    if a == b:
        return b if math.copysign(1.0, float(a)) < 0 else a
    return a if a != a else b


def minimumf(a, b):
    """arith.minimumf: NaN if either is NaN; -0.0 is smaller than +0.0."""
    if a < b:
        return a
    if b < a:
        return b
    if a == b:
        return a if math.copysign(1.0, float(a)) < 0 else b
    return a if a != a else b


def maxnumf(a, b):
    return b if a != a else a if b != b else maximumf(a, b)


def minnumf(a, b):
    return b if a != a else a if b != b else minimumf(a, b)


def rsqrt(a):
    return a.dtype.type(1) / np.sqrt(a)


def erf(a):
    """math.erf: numpy has none; math.erf in f64, rounded once to a's type."""
    return a.dtype.type(math.erf(float(a)))


def fpowi(a, n):
    """math.fpowi: a float to an integer power."""
    return a ** int(n)


# arith.cmpf predicates, by number: an expression template over {a} and {b}.
CMPF = {0: "False", 1: "({a} == {b})", 2: "({a} > {b})", 3: "({a} >= {b})",
        4: "({a} < {b})", 5: "({a} <= {b})", 6: "({a} < {b} or {a} > {b})",
        7: "({a} == {a} and {b} == {b})", 8: "(not ({a} < {b} or {a} > {b}))",
        9: "(not ({a} <= {b}))", 10: "(not ({a} < {b}))", 11: "(not ({a} >= {b}))",
        12: "(not ({a} > {b}))", 13: "({a} != {b})", 14: "({a} != {a} or {b} != {b})",
        15: "True"}
# arith.cmpi predicates, by number: (operator, unsigned?)
CMPI = {0: ("==", False), 1: ("!=", False), 2: ("<", False), 3: ("<=", False),
        4: (">", False), 5: (">=", False), 6: ("<", True), 7: ("<=", True),
        8: (">", True), 9: (">=", True)}


# ---------------------------------------------------------------------- integers
# (the translation checks divisors for zero before it calls these)

def divsi(a, b):
    q = abs(int(a)) // abs(int(b))
    return _like(q if (a < 0) == (b < 0) else -q, a)


def ceildivsi(a, b):
    return _like(-(-int(a) // int(b)), a)


def remsi(a, b):
    """Remainder with the sign of the dividend (C's %)."""
    r = abs(int(a)) % abs(int(b))
    return _like(-r if a < 0 else r, a)


def divui(a, b):
    return from_unsigned(unsigned(a) // unsigned(b), a)


def remui(a, b):
    return from_unsigned(unsigned(a) % unsigned(b), a)


def _like(value: int, a):
    return value if isinstance(a, int) else wrap(value, a.dtype)


def maxui(a, b):
    return a if unsigned(a) >= unsigned(b) else b


def minui(a, b):
    return a if unsigned(a) <= unsigned(b) else b


def trunci(v, dtype: np.dtype):
    if dtype == np.bool_:
        return bool(int(v) & 1)
    return wrap(int(v), dtype)


def extui(v, dtype: np.dtype):
    return wrap(unsigned(v), dtype) if dtype.kind == "i" else int(unsigned(v))


def shrui(a, b):
    """arith.shrui: a logical shift right (zeros come in); by the width or more (poison
    in MLIR) 0."""
    bits = 64 if isinstance(a, int) else a.dtype.itemsize * 8
    return from_unsigned(unsigned(a) >> int(b), a) if 0 <= int(b) < bits else _like(0, a)


def uitofp(v, dtype: np.dtype):
    return dtype.type(unsigned(v))


def fptosi(v, dtype: np.dtype):
    f = float(v)
    return wrap(int(f), dtype) if math.isfinite(f) else dtype.type(0)


def fptoui(v, dtype: np.dtype):
    f = float(v)
    return wrap(int(f), dtype) if math.isfinite(f) and f >= 0 else dtype.type(0)


def format_value(v, is_unsigned: bool = False) -> str:
    """How `print` shows a value: ints and floats as numpy prints them, bools as ZynML's
    `true`/`false`."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if is_unsigned:
        return str(unsigned(v))
    return str(v)
