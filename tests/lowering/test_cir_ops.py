"""cir_ops.constant_int folds index arithmetic as arith defines it: divsi rounds toward
zero and remsi takes the dividend's sign (not Python's floor division and modulo), and
both stay exact at any size (no float division)."""
import pytest
from mlir import ir

from zynml.lowering.cir_ops import constant_int

BIG = 2 ** 62 + 1  # past a float's 53 bits


def folded(op: str, a: int, b: int):
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(f"""
func.func @f() -> i64 {{
  %a = arith.constant {a} : i64
  %b = arith.constant {b} : i64
  %r = {op} %a, %b : i64
  return %r : i64
}}""")
        ret = list(module.body.operations[0].regions[0].blocks[0].operations)[-1]
        return constant_int(ret.operands[0])


@pytest.mark.parametrize("a,b", [(-7, 2), (7, -2), (-7, -2), (7, 2), (-6, 3), (BIG, 3),
                                 (-BIG, 7)])
def test_signed_division_and_remainder(a, b):
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    assert folded("arith.divsi", a, b) == quotient
    assert folded("arith.remsi", a, b) == a - b * quotient
    assert folded("arith.floordivsi", a, b) == a // b


def test_division_by_zero_is_not_folded():
    assert folded("arith.divsi", 5, 0) is None
    assert folded("arith.remsi", 5, 0) is None
