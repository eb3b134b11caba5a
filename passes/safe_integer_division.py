"""safe-integer-division: no integer division or remainder can trap the process.

A divisor of 0, or -1 under the smallest signed value (i64_min / -1 overflows), is
undefined in LLVM, and x86's `idiv` raises SIGFPE on both: a run of IREE's CPU code dies
(seen on scalar code, such as a one-element loop). Each division or remainder whose
divisor is not a constant that is safe gets the divisor 1 in those cases:

    %q = arith.divsi %a, %d : i64
  becomes
    %bad = (%d == 0) or ((%d == -1) and (%a == i64_min))
    %q = arith.divsi %a, (select %bad, 1, %d) : i64

so `a / 0` is `a` (the language leaves it unspecified; checked mode reports it before
this pass: cir-insert-checks), `i64_min / -1` is i64_min (the wrapped quotient) and
`i64_min % -1` is 0 (the true remainder). Ops in linalg regions are rewritten too, and
a divisor this pass made is left alone (a second run changes nothing).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith

from ..lowering.cir_ops import constant_int, defining_op, ops_in

NAME = "safe-integer-division"

_SIGNED = ("arith.divsi", "arith.floordivsi", "arith.ceildivsi", "arith.remsi")
_UNSIGNED = ("arith.divui", "arith.ceildivui", "arith.remui")


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for op in list(ops_in(module)):
        if op.name in _SIGNED or op.name in _UNSIGNED:
            _guard(op, signed=op.name in _SIGNED)


def _guard(op: ir.Operation, signed: bool) -> None:
    dividend, divisor = op.operands[0], op.operands[1]
    ty = divisor.type
    if not isinstance(ty, (ir.IntegerType, ir.IndexType)):
        return  # vectors and tensors: not made before this pass
    constant = constant_int(divisor)
    if constant is not None and constant != 0 and not (signed and constant == -1):
        return
    if _made_here(divisor, signed):
        return
    width = 64 if isinstance(ty, ir.IndexType) else ir.IntegerType(ty).width
    with ir.InsertionPoint(op), op.location:
        bad = _cmp("eq", divisor, _const(ty, 0))
        if signed and width > 1:
            overflow = arith.AndIOp(_cmp("eq", divisor, _const(ty, -1)),
                                    _cmp("eq", dividend, _const(ty, -(1 << (width - 1)))))
            bad = arith.OrIOp(bad, overflow.result).result
        op.operands[1] = arith.SelectOp(bad, _const(ty, 1), divisor).result


def _made_here(divisor: ir.Value, signed: bool) -> bool:
    """Is `divisor` this pass's `select %bad, 1, %d`? (cir-insert-checks' `d == 0 ? 1 : d`
    is not: it leaves i64_min / -1.)"""
    owner = defining_op(divisor)
    if owner is None or owner.name != "arith.select" or constant_int(owner.operands[1]) != 1:
        return False
    condition = defining_op(owner.operands[0])
    return condition is not None and \
        condition.name == ("arith.ori" if signed else "arith.cmpi")


def _const(ty: ir.Type, value: int) -> ir.Value:
    return arith.ConstantOp(ty, value).result


def _cmp(predicate: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.CmpIOp(getattr(arith.CmpIPredicate, predicate), a, b).result
