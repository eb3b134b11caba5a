"""Scalar building blocks shared by the body and program emitters: MLIR types, constants,
conversions, arithmetic, comparisons and the math builtins, all on upstream arith/math."""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mmath

from . import f64_math
from ..frontend.types import INDEX, ScalarType, TensorType, concrete


def mlir_type(t: ScalarType) -> ir.Type:
    t = concrete(t)
    if t.is_float:
        return {"f16": ir.F16Type.get, "bf16": ir.BF16Type.get, "f32": ir.F32Type.get,
                "f64": ir.F64Type.get}[t.name]()
    if t == INDEX:
        return ir.IndexType.get()
    if t.is_bool:
        return ir.IntegerType.get_signless(1)
    return ir.IntegerType.get_signless(t.bits)


def tensor_type(t: TensorType, dynamic_dims: bool = False) -> ir.Type:
    dyn = ir.ShapedType.get_dynamic_size()
    shape = [dyn if (d is None or dynamic_dims) else d for d in t.shape]
    return ir.RankedTensorType.get(shape, mlir_type(t.dtype))


def constant(t: ScalarType, value) -> ir.Value:
    ty = mlir_type(t)
    if t.is_float:
        return arith.ConstantOp(ty, ir.FloatAttr.get(ty, float(value))).result
    if t.is_bool:
        return arith.ConstantOp(ty, ir.IntegerAttr.get(ty, int(bool(value)))).result
    return arith.ConstantOp(ty, ir.IntegerAttr.get(ty, int(value))).result


def index(value: int) -> ir.Value:
    return constant(INDEX, value)


def convert(v: ir.Value, src: ScalarType, dst: ScalarType) -> ir.Value:
    """Convert between scalar types following the promotion rules of types.py."""
    src, dst = concrete(src), concrete(dst)  # untyped literals and unknown dtypes
    if src == dst or mlir_type(src) == mlir_type(dst) and src.is_float == dst.is_float:
        return v
    dst_ty = mlir_type(dst)
    if src == INDEX and dst != INDEX:
        if dst.is_float:
            v = arith.IndexCastOp(ir.IntegerType.get_signless(64), v).result
            return arith.SIToFPOp(dst_ty, v).result
        return arith.IndexCastOp(dst_ty, v).result
    if dst == INDEX:
        if src.is_float:  # only for inputs of unknown type (checking without a signature)
            v = arith.FPToSIOp(ir.IntegerType.get_signless(64), v).result
        elif _unsigned(src):  # a u8 index of 200 is 200, not -56
            return arith.IndexCastUIOp(dst_ty, v).result
        return arith.IndexCastOp(dst_ty, v).result
    if src.is_float and dst.is_float:
        if dst.bits == src.bits:  # f16 <-> bf16: through f32, which holds both exactly
            v = arith.ExtFOp(ir.F32Type.get(), v).result
            return arith.TruncFOp(dst_ty, v).result
        return (arith.ExtFOp if dst.bits > src.bits else arith.TruncFOp)(dst_ty, v).result
    if dst.is_float:
        if src.is_bool or src.name.startswith("u"):
            return arith.UIToFPOp(dst_ty, v).result
        return arith.SIToFPOp(dst_ty, v).result
    if src.is_float:
        return (arith.FPToUIOp if dst.name.startswith("u") else arith.FPToSIOp)(dst_ty, v).result
    if dst.bits > src.bits:
        return (arith.ExtUIOp if src.name.startswith("u") or src.is_bool
                else arith.ExtSIOp)(dst_ty, v).result
    return arith.TruncIOp(dst_ty, v).result


def _unsigned(t: ScalarType) -> bool:
    return t.name.startswith("u") or t.is_bool


def binary(op: str, a: ir.Value, b: ir.Value, t: ScalarType) -> ir.Value:
    """`a op b` for operands already converted to `t`."""
    if t.is_float:
        ops = {"+": arith.AddFOp, "-": arith.SubFOp, "*": arith.MulFOp, "/": arith.DivFOp,
               "%": arith.RemFOp}
        if op == "^":
            return mmath.PowFOp(a, b).result
        return ops[op](a, b).result
    unsigned = _unsigned(t)
    if op == "%" and not unsigned:
        return _floor_mod(a, b, t)
    ops = {"+": arith.AddIOp, "-": arith.SubIOp, "*": arith.MulIOp,
           "/": arith.DivUIOp if unsigned else arith.FloorDivSIOp,
           "%": arith.RemUIOp}
    return ops[op](a, b).result


def _floor_mod(a: ir.Value, b: ir.Value, t: ScalarType) -> ir.Value:
    """a % b with the sign of b, so that a == (a / b) * b + a % b with floor division."""
    r = arith.RemSIOp(a, b).result
    zero = constant(t, 0)
    nonzero = arith.CmpIOp(arith.CmpIPredicate.ne, r, zero).result
    signs_differ = arith.XOrIOp(arith.CmpIOp(arith.CmpIPredicate.slt, r, zero).result,
                                arith.CmpIOp(arith.CmpIPredicate.slt, b, zero).result).result
    adjust = arith.AndIOp(nonzero, signs_differ).result
    return arith.SelectOp(adjust, arith.AddIOp(r, b).result, r).result


_FLOAT_PRED = {"==": arith.CmpFPredicate.OEQ, "!=": arith.CmpFPredicate.UNE,
               "<": arith.CmpFPredicate.OLT, "<=": arith.CmpFPredicate.OLE,
               ">": arith.CmpFPredicate.OGT, ">=": arith.CmpFPredicate.OGE}
_INT_PRED = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def compare(op: str, a: ir.Value, b: ir.Value, t: ScalarType) -> ir.Value:
    if t.is_float:
        return arith.CmpFOp(_FLOAT_PRED[op], a, b).result
    name = _INT_PRED[op]
    if name not in ("eq", "ne"):
        name = ("u" if _unsigned(t) else "s") + name
    return arith.CmpIOp(getattr(arith.CmpIPredicate, name), a, b).result


def negate(v: ir.Value, t: ScalarType) -> ir.Value:
    if t.is_float:
        return arith.NegFOp(v).result
    return arith.SubIOp(constant(t, 0), v).result


def logical_not(v: ir.Value) -> ir.Value:
    return arith.XOrIOp(v, constant(ScalarType("bool"), 1)).result


def minimum(a, b, t: ScalarType) -> ir.Value:
    if t.is_float:
        return arith.MinimumFOp(a, b).result
    return (arith.MinUIOp if _unsigned(t) else arith.MinSIOp)(a, b).result


def maximum(a, b, t: ScalarType) -> ir.Value:
    if t.is_float:
        return arith.MaximumFOp(a, b).result
    return (arith.MaxUIOp if _unsigned(t) else arith.MaxSIOp)(a, b).result


_UNARY_FLOAT = {"exp": mmath.ExpOp, "log": mmath.LogOp, "sqrt": mmath.SqrtOp,
                "rsqrt": mmath.RsqrtOp, "tanh": mmath.TanhOp, "sin": mmath.SinOp,
                "cos": mmath.CosOp, "tan": mmath.TanOp, "sinh": mmath.SinhOp,
                "cosh": mmath.CoshOp, "floor": mmath.FloorOp, "ceil": mmath.CeilOp,
                "erf": mmath.ErfOp, "log1p": mmath.Log1pOp, "expm1": mmath.ExpM1Op}


def builtin(name: str, args: list[ir.Value], t: ScalarType) -> ir.Value:
    """A math builtin on arguments already converted to `t`."""
    if name in f64_math.EXPANDED and concrete(t).name == "f64":
        return f64_math.expand(name, args[0])
    if name in _UNARY_FLOAT:
        return _UNARY_FLOAT[name](args[0]).result
    if name == "relu":
        return maximum(args[0], constant(t, 0), t)
    if name == "abs":
        if t.is_float:
            return mmath.AbsFOp(args[0]).result
        if _unsigned(t):  # math.absi would read 250 as -6
            return args[0]
        # max(x, -x), not math.absi: the native CUDA path cannot lower absi on i64 or
        # index (tests/programs/differential/abs_of_wide_integers)
        return maximum(args[0], negate(args[0], t), t)
    if name == "min":
        return minimum(args[0], args[1], t)
    if name == "max":
        return maximum(args[0], args[1], t)
    if name == "pow":
        return mmath.PowFOp(args[0], args[1]).result
    if name == "clamp":
        return minimum(maximum(args[0], args[1], t), args[2], t)
    if name == "sigmoid":
        return sigmoid(args[0], t)
    if name == "silu":
        return arith.MulFOp(args[0], sigmoid(args[0], t)).result
    raise AssertionError(f"unknown builtin {name}")


def sigmoid(x: ir.Value, t: ScalarType) -> ir.Value:
    """1 / (1 + exp(-x)) without overflow: with e = exp(-|x|) <= 1, 1 / (1 + e) for
    x >= 0 and e / (1 + e) below, so no exp(-x) reaches inf and a large negative x keeps
    its tiny result (sigmoid(-100) = exp(-100), not 1 / inf = 0)."""
    e = mmath.ExpOp(negate(mmath.AbsFOp(x).result, t)).result
    r = arith.DivFOp(constant(t, 1), arith.AddFOp(constant(t, 1), e).result).result
    nonnegative = compare(">=", x, constant(t, 0), t)
    return arith.SelectOp(nonnegative, r, arith.MulFOp(e, r).result).result


def integer_power(base: ir.Value, exponent: int, t: ScalarType) -> ir.Value:
    """x^n for an integer literal n: exact for negative x (powf is exp(y*log x) on some
    targets, NaN for x < 0)."""
    return mmath.FPowIOp(base, constant(ScalarType("i32"), exponent)).result


INF = math.inf
