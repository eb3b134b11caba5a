"""How the values of a reduction combine: each combiner's identity, the combiners of
`reduce(op)`, and argmin/argmax's two-result select with its NaN rule (used by
nest_lowering.py)."""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith

__all__ = ["IDENTITY", "REDUCE_COMBINER", "identity_of", "arg_identity", "combine",
           "arg_select", "constant_like"]

# combiner op -> identity element; "min", "max", "umax": that integer extreme of the type
IDENTITY = {
    "arith.addf": 0.0, "arith.addi": 0, "arith.mulf": 1.0, "arith.muli": 1,
    "arith.maximumf": -math.inf, "arith.maxnumf": -math.inf, "arith.minimumf": math.inf,
    "arith.minnumf": math.inf, "arith.maxsi": "min", "arith.minsi": "max",
    "arith.maxui": 0, "arith.minui": "umax", "arith.andi": 1, "arith.ori": 0,
}

# `reduce(op)` -> its combiner on floats, on integers
REDUCE_COMBINER = {"+": ("arith.addf", "arith.addi"), "*": ("arith.mulf", "arith.muli"),
                   "min": ("arith.minimumf", "arith.minsi"),
                   "max": ("arith.maximumf", "arith.maxsi"),
                   "and": (None, "arith.andi"), "or": (None, "arith.ori")}


def constant_like(t: ir.Type, value) -> ir.Value:
    if isinstance(t, ir.FloatType):
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(value))).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(value))).result


def identity_of(combiner: str, t: ir.Type):
    """The identity element of `combiner` on type `t` (IDENTITY names integer extremes)."""
    value = IDENTITY[combiner]
    if isinstance(value, str):
        width = ir.IntegerType(t).width
        value = {"min": -2 ** (width - 1), "max": 2 ** (width - 1) - 1, "umax": -1}[value]
    return value


def arg_identity(op: str, element: ir.Type):
    if isinstance(element, ir.FloatType):
        return math.inf if op == "argmin" else -math.inf
    width = ir.IntegerType(element).width
    return 2 ** (width - 1) - 1 if op == "argmin" else -2 ** (width - 1)


def combine(name: str, acc: ir.Value, value: ir.Value) -> ir.Value:
    return ir.Operation.create(name, results=[acc.type], operands=[acc, value]).results[0]


def arg_select(op: str, vals, outs) -> list[ir.Value]:
    """Keep (value, index) when it beats the best so far; ties keep the lower index, so
    the result is the first extreme index whatever order the reduction runs in. A NaN
    beats every number and, between NaNs, the lower index wins: the result is the index
    of the first NaN when there is one (numpy's rule; min and max propagate NaN too). A
    third value, when present, is the guard of a conditional yield."""
    value, index = vals[0], vals[1]
    best, best_index = outs
    i64 = ir.IntegerType.get_signless(64)
    index = arith.IndexCastOp(i64, index).result if isinstance(index.type, ir.IndexType) \
        else index
    earlier = arith.CmpIOp(arith.CmpIPredicate.slt, index, best_index).result
    if isinstance(value.type, ir.FloatType):
        better = arith.CmpFOp(arith.CmpFPredicate.OGT if op == "argmax"
                              else arith.CmpFPredicate.OLT, value, best).result
        equal = arith.CmpFOp(arith.CmpFPredicate.OEQ, value, best).result
        take = arith.OrIOp(better, arith.AndIOp(equal, earlier).result).result
        value_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
        best_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, best, best).result
        # best is NaN: only an earlier NaN replaces it; else a NaN or a better number does
        take = arith.SelectOp(best_nan, arith.AndIOp(value_nan, earlier).result,
                              arith.OrIOp(value_nan, take).result).result
    else:
        better = arith.CmpIOp(arith.CmpIPredicate.sgt if op == "argmax"
                              else arith.CmpIPredicate.slt, value, best).result
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, value, best).result
        take = arith.OrIOp(better, arith.AndIOp(equal, earlier).result).result
    if len(vals) > 2:
        take = arith.AndIOp(take, vals[2]).result
    return [arith.SelectOp(take, value, best).result,
            arith.SelectOp(take, index, best_index).result]
