"""widen-half-arithmetic: f16 and bf16 arithmetic inside GPU kernels done in f32, rounded
where a value leaves the arithmetic (a store, a loop's carried value, an mma operand), as
Triton and Inductor compute half-precision elementwise code.

The chip has no f16 / bf16 form of most operations (exp, division, square roots), so
NVPTX widens each such operation's operands to f32 and rounds its result back: a chain
of them converts twice per operation and rounds every intermediate value. A kernel with
such an operation gets all its half arithmetic in f32; one of only additions,
multiplications, fmas, minima, maxima and comparisons keeps the chip's half
instructions (one rounding each, as many as the f32 form would need). The library's
bf16 SwiGLU took 6 conversions an element and ran at 81% of the copy rate (0.80x
torch.compile, docs/performance.md, Session 35). Here each operation takes f32 operands
(arith.extf of its f16 / bf16 ones) and gives an f32 result, rounded (arith.truncf) for
its users:

    %y = arith.negf %x : bf16             %w = arith.extf %x : bf16 to f32
    %z = math.exp %y : bf16        ->     %n = arith.negf %w : f32
                                          %l = arith.mulf %n, %log2e : f32
                                          %e = math.exp2 %l : f32
                                          %z = arith.truncf %e : f32 to bf16

and a widened result that is rounded and widened again is the f32 value itself: the
rounding between two operations is skipped, never added (docs/language.md, types). A
rounding the kernel had before (a `cast`, an accumulator's value rounded for the output)
is kept, and what a loop carries keeps its type, so a bf16 accumulator still rounds at
each step, as the language says.

A widened result is rounded to 8 (bf16) or 11 (f16) significant bits, so its exp and
division take the chip's approximate f32 instructions, as Triton's do: exp(x) as
ex2.approx(x log2 e) (relative error below 1e-5 over f32's range, against libdevice's
expf, about ten instructions) and a / b as div.approx (2 ulp of f32 for |b| < 2^126: every
f16 value, and every bf16 one below 8.5e37; rcp.approx for 1 / b). Runs on gpu.modules
of kernels, before their lowering to NVVM.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith

from ..lowering.cir_ops import ops_in

NAME = "widen-half-arithmetic"

# operations whose float operands and results may be f32 instead of f16 / bf16: the
# result is the same value or a more exact one (one rounding instead of two)
_WIDENED = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.negf",
    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.cmpf",
    "arith.select",
    "math.absf", "math.exp", "math.exp2", "math.expm1", "math.log", "math.log1p",
    "math.log2", "math.log10", "math.sqrt", "math.rsqrt", "math.cbrt", "math.tanh",
    "math.tan", "math.sin", "math.cos", "math.sinh", "math.cosh", "math.asin", "math.acos",
    "math.atan", "math.atan2", "math.erf", "math.floor", "math.ceil", "math.round",
    "math.roundeven", "math.trunc", "math.fma", "math.powf", "math.copysign",
})


# the chip has half forms of these (sm_90: add, mul, fma, min, max, abs, neg, compare): a
# kernel of them alone keeps them (`fma.rn.bf16`, one rounding either way)
_NATIVE = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.negf", "arith.maximumf",
    "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.cmpf", "arith.select",
    "math.absf", "math.fma",
})


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for func in ops_in(module, "gpu.func", descend=lambda op: op.name != "gpu.func"):
        _widen(func)


def _half(t: ir.Type) -> bool:
    element = t.element_type if isinstance(t, ir.ShapedType) else t
    return isinstance(element, (ir.F16Type, ir.BF16Type))


def _as_f32(t: ir.Type) -> ir.Type:
    """`t` (f16, bf16 or a vector of them) with f32 elements."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType.get(t.shape, ir.F32Type.get())
    return ir.F32Type.get()


def _widen(func: ir.Operation) -> None:
    """Every half operation of `func` in f32, where one of them has no half form."""
    half_ops = [op for op in ops_in(func) if op.name in _WIDENED and
                any(_half(v.type) for v in list(op.operands) + list(op.results))]
    if all(op.name in _NATIVE for op in half_ops):
        return
    rounded = {}  # widened result, rounded (truncf) -> the f32 value
    for op in half_ops:
        with ir.InsertionPoint(op), op.location:
            operands = [_widened(v, rounded) if _half(v.type) else v for v in op.operands]
            name = op.name
            attributes = {key: op.attributes[key] for key in op.attributes}
            if name == "math.exp":  # exp(x) = 2^(x log2 e)
                name, operands = "math.exp2", [arith.MulFOp(
                    operands[0], _splat(operands[0].type, math.log2(math.e))).result]
            elif name == "arith.divf":
                attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<afn>")
            wide = ir.Operation.create(
                name, results=[_as_f32(r.type) if _half(r.type) else r.type
                               for r in op.results],
                operands=operands, attributes=attributes)
            for old, new in zip(op.results, wide.results):
                if _half(old.type):
                    narrow = arith.TruncFOp(old.type, new).result
                    rounded[narrow], new = new, narrow
                old.replace_all_uses_with(new)
        op.erase()
    for narrow in rounded:  # erased where nothing reads it
        if not list(narrow.uses):
            narrow.owner.erase()


def _splat(t: ir.Type, number: float) -> ir.Value:
    """The f32 constant `number`, or a vector of `t`'s shape of it."""
    f32 = ir.F32Type.get()
    if isinstance(t, ir.VectorType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(
            t, ir.FloatAttr.get(f32, number))).result
    return arith.ConstantOp(f32, ir.FloatAttr.get(f32, number)).result


def _widened(value: ir.Value, rounded: dict) -> ir.Value:
    """`value` in f32: the f32 value a widened operation's result was rounded from, or
    `value` widened (a rounding the program asked for, a cast or a store's, is kept)."""
    if value in rounded:
        return rounded[value]
    return arith.ExtFOp(_as_f32(value.type), value).result
