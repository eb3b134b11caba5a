"""The random builtins as integer arith: Philox-4x32-10 (Salmon et al., SC'11; the
generator of Random123, cuRAND and JAX), then exact conversions to floats.

    rand(seed, counter)  ->  key   = (lo32(seed), hi32(seed))
                             count = (lo32(counter), hi32(counter), 0, 0)
                             x     = philox4x32_10(count, key)[0]
                             (x >> 8) * 2^-24           (exact: uitofp of 24 bits)

Only integer ops (extui, muli on i64, shrui, trunci, xori, addi) until the last
conversion, so every backend gives the same bits; docs/language.md states the mapping,
and tests/cirgen/test_random.py checks it against a numpy Philox and Random123's
known answers.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mmath

__all__ = ["MULTIPLIERS", "KEY_STEPS", "ROUNDS", "random_builtin"]

MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
KEY_STEPS = (0x9E3779B9, 0xBB67AE85)  # the golden ratio and sqrt(3) - 1, as 32-bit fractions
ROUNDS = 10


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _const(t: ir.Type, value: int) -> ir.Value:
    width = ir.IntegerType(t).width
    value &= (1 << width) - 1
    if value >= 1 << (width - 1):  # the signless attribute holds the signed reading
        value -= 1 << width
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, value)).result


def _halves(v: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(low 32 bits, high 32 bits) of an i64."""
    high = arith.ShRUIOp(v, _const(_i64(), 32)).result
    return arith.TruncIOp(_i32(), v).result, arith.TruncIOp(_i32(), high).result


def _mulhilo(multiplier: int, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(high, low) 32-bit halves of the 64-bit product multiplier * x (unsigned). The low
    half is an i32 product, not a truncation of the wide one: LLVM would otherwise do
    the rounds' xors on i64 and NVPTX lose its 32-bit mul.hi (64-bit multiplies instead)."""
    wide = arith.MulIOp(_const(_i64(), multiplier), arith.ExtUIOp(_i64(), x).result).result
    high = arith.TruncIOp(_i32(), arith.ShRUIOp(wide, _const(_i64(), 32)).result).result
    return high, arith.MulIOp(_const(_i32(), multiplier), x).result


def philox4x32_10(counter: list[ir.Value], key: list[ir.Value]) -> list[ir.Value]:
    """The four output words (i32) of Philox-4x32-10 for four i32 counter words and two
    i32 key words."""
    c, k = list(counter), list(key)
    for r in range(ROUNDS):
        if r:  # the key is bumped between rounds (Random123's philox4x32_R)
            k = [arith.AddIOp(k[n], _const(_i32(), KEY_STEPS[n])).result for n in (0, 1)]
        hi0, lo0 = _mulhilo(MULTIPLIERS[0], c[0])
        hi1, lo1 = _mulhilo(MULTIPLIERS[1], c[2])
        c = [arith.XOrIOp(arith.XOrIOp(hi1, c[1]).result, k[0]).result, lo1,
             arith.XOrIOp(arith.XOrIOp(hi0, c[3]).result, k[1]).result, lo0]
    return c


def _words(seed: ir.Value, counter: ir.Value, counter_hi: ir.Value | None) -> list[ir.Value]:
    c0, c1 = _halves(counter)
    if counter_hi is None:
        c2 = c3 = _const(_i32(), 0)
    else:
        c2, c3 = _halves(counter_hi)
    return philox4x32_10([c0, c1, c2, c3], list(_halves(seed)))


def _unit(word: ir.Value, offset: int) -> ir.Value:
    """((word >> 8) + offset) * 2^-24 as f32, exactly: [0, 1) for offset 0, (0, 1] for 1."""
    top = arith.ShRUIOp(word, _const(_i32(), 8)).result
    if offset:
        top = arith.AddIOp(top, _const(_i32(), offset)).result
    f32 = ir.F32Type.get()
    scale = arith.ConstantOp(f32, ir.FloatAttr.get(f32, 2.0 ** -24)).result
    return arith.MulFOp(arith.UIToFPOp(f32, top).result, scale).result


def _normal(w0: ir.Value, w1: ir.Value) -> ir.Value:
    """Box-Muller: sqrt(-2 log u1) cos(2 pi u2), u1 in (0, 1] (log finite), u2 in [0, 1)."""
    f32 = ir.F32Type.get()

    def c(v):
        return arith.ConstantOp(f32, ir.FloatAttr.get(f32, v)).result
    u1, u2 = _unit(w0, 1), _unit(w1, 0)
    radius = mmath.SqrtOp(arith.MulFOp(c(-2.0), mmath.LogOp(u1).result).result).result
    angle = arith.MulFOp(c(2 * math.pi), u2).result
    return arith.MulFOp(radius, mmath.CosOp(angle).result).result


def random_builtin(name: str, args: list[ir.Value], word: int | None = None) -> ir.Value:
    """`rand`, `randn` or `philox` on i64 arguments (seed, counter[, counter_hi]); `word`:
    philox's output word."""
    if name == "philox":
        return _words(args[0], args[1], args[2])[word]
    words = _words(args[0], args[1], None)
    if name == "rand":
        return _unit(words[0], 0)
    if name == "randn":
        return _normal(words[0], words[1])
    raise AssertionError(f"unknown random builtin {name}")
