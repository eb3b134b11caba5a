"""The scalar ops the interpreter runs: each upstream arith/math op as a Python expression.

An entry maps an op name to a template over its operands `{0}`, `{1}`, ... and `{T}`, the
numpy type of its result; or to a function `(op, operands, w) -> expression` for the ops
that read attributes or types (`w` is the FunctionWriter, which names constants and
types). Integer divisions get a zero check from the writer (DIVISIONS) before they run.

    arith.addf %a, %b : f32         ->  a + b               (numpy float32: rounds as f32)
    arith.cmpi slt, %i, %n : index  ->  (i < n)
    arith.sitofp %k : i64 to f32    ->  _f32(k)
"""
from __future__ import annotations

from typing import Callable, Union

from mlir import ir

from .scalars import CMPF, CMPI, dtype_of, is_index

__all__ = ["SCALAR_OPS", "DIVISIONS"]


def _cmpi(op: ir.Operation, a: list[str], w) -> str:
    symbol, unsigned = CMPI[ir.IntegerAttr(op.attributes["predicate"]).value]
    if unsigned:
        return f"(_s.unsigned({a[0]}) {symbol} _s.unsigned({a[1]}))"
    return f"({a[0]} {symbol} {a[1]})"


def _cmpf(op: ir.Operation, a: list[str], w) -> str:
    return CMPF[ir.IntegerAttr(op.attributes["predicate"]).value].format(a=a[0], b=a[1])


def _result_dtype(op: ir.Operation):
    t = op.results[0].type
    return None if is_index(t) else dtype_of(t)


def _index_cast(op: ir.Operation, a: list[str], w) -> str:
    dtype = _result_dtype(op)
    if dtype is None:
        return f"int({a[0]})"
    if dtype.itemsize == 8:  # index values are 64-bit: no wrapping needed
        return f"{w.type_name(dtype)}({a[0]})"
    return f"_s.wrap(int({a[0]}), {w.dtype_name(dtype)})"


def _index_castui(op: ir.Operation, a: list[str], w) -> str:
    dtype = _result_dtype(op)
    if dtype is None:
        return f"_s.unsigned({a[0]})"
    return f"_s.wrap(_s.unsigned({a[0]}), {w.dtype_name(dtype)})"


def _is_i1(value: ir.Value) -> bool:
    return isinstance(value.type, ir.IntegerType) and ir.IntegerType(value.type).width == 1


def _convert(helper: str) -> Callable:
    """A conversion through scalars.<helper>(value, dtype)."""
    def emit(op: ir.Operation, a: list[str], w) -> str:
        return f"_s.{helper}({a[0]}, {w.dtype_name(_result_dtype(op))})"
    return emit


def _sitofp(op: ir.Operation, a: list[str], w) -> str:
    t = w.type_name(_result_dtype(op))
    if _is_i1(op.operands[0]):  # i1 is signed: true is -1
        return f"{t}(-1 if {a[0]} else 0)"
    return f"{t}({a[0]})"


def _extsi(op: ir.Operation, a: list[str], w) -> str:
    if _is_i1(op.operands[0]):
        return f"{w.type_name(_result_dtype(op))}(-1 if {a[0]} else 0)"
    return f"{w.type_name(_result_dtype(op))}({a[0]})"


def _same_width_float(op: ir.Operation, a: list[str], w) -> str:
    """extf / truncf: numpy rounds to nearest even, as the IR's default rounding."""
    return f"{w.type_name(_result_dtype(op))}({a[0]})"


Emitter = Union[str, Callable[[ir.Operation, list, object], str]]

SCALAR_OPS: dict[str, Emitter] = {
    # floats
    "arith.addf": "{0} + {1}", "arith.subf": "{0} - {1}", "arith.mulf": "{0} * {1}",
    "arith.divf": "{0} / {1}", "arith.remf": "np.fmod({0}, {1})", "arith.negf": "-{0}",
    "arith.maximumf": "_s.maximumf({0}, {1})", "arith.minimumf": "_s.minimumf({0}, {1})",
    "arith.maxnumf": "_s.maxnumf({0}, {1})", "arith.minnumf": "_s.minnumf({0}, {1})",
    "arith.cmpf": _cmpf,
    # integers (index: Python ints; others: numpy integers, which wrap)
    "arith.addi": "{0} + {1}", "arith.subi": "{0} - {1}", "arith.muli": "{0} * {1}",
    "arith.floordivsi": "{0} // {1}", "arith.divsi": "_s.divsi({0}, {1})",
    "arith.ceildivsi": "_s.ceildivsi({0}, {1})", "arith.remsi": "_s.remsi({0}, {1})",
    "arith.divui": "_s.divui({0}, {1})", "arith.remui": "_s.remui({0}, {1})",
    "arith.andi": "{0} & {1}", "arith.ori": "{0} | {1}", "arith.xori": "{0} ^ {1}",
    "arith.maxsi": "({0} if {0} >= {1} else {1})", "arith.minsi": "({0} if {0} <= {1} else {1})",
    "arith.maxui": "_s.maxui({0}, {1})", "arith.minui": "_s.minui({0}, {1})",
    "arith.shrui": "_s.shrui({0}, {1})",
    "arith.cmpi": _cmpi,
    "arith.select": "({1} if {0} else {2})",
    # conversions
    "arith.index_cast": _index_cast, "arith.index_castui": _index_castui,
    "arith.sitofp": _sitofp, "arith.uitofp": _convert("uitofp"),
    "arith.fptosi": _convert("fptosi"), "arith.fptoui": _convert("fptoui"),
    "arith.extf": _same_width_float, "arith.truncf": _same_width_float,
    "arith.extsi": _extsi, "arith.extui": _convert("extui"), "arith.trunci": _convert("trunci"),
    # math
    "math.exp": "np.exp({0})", "math.log": "np.log({0})", "math.sqrt": "np.sqrt({0})",
    "math.rsqrt": "_s.rsqrt({0})", "math.tanh": "np.tanh({0})", "math.sin": "np.sin({0})",
    "math.cos": "np.cos({0})", "math.tan": "np.tan({0})", "math.sinh": "np.sinh({0})",
    "math.cosh": "np.cosh({0})", "math.floor": "np.floor({0})", "math.ceil": "np.ceil({0})",
    "math.absf": "abs({0})", "math.absi": "abs({0})", "math.powf": "np.power({0}, {1})",
    "math.fpowi": "_s.fpowi({0}, {1})", "math.exp2": "np.exp2({0})",
    "math.log2": "np.log2({0})", "math.log10": "np.log10({0})",
    "math.erf": "_s.erf({0})", "math.log1p": "np.log1p({0})", "math.expm1": "np.expm1({0})",
}

# Integer divisions and remainders: the writer checks the divisor first.
DIVISIONS = {"arith.floordivsi", "arith.divsi", "arith.ceildivsi", "arith.remsi",
             "arith.divui", "arith.remui"}
