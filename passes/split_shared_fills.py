"""split-shared-fills: a fill that initializes several accumulators becomes one fill each.

Reductions that start from the same value (a layer norm's sum and sum of squares, both
0.0) share one `linalg.fill` after CSE. One-shot bufferization then gives the fill one
buffer and, because every reduction writes its init in place, copies that buffer once per
extra reduction: on the GPU a fill kernel and a copy per accumulator before the kernel
that uses them. Each init use after the first gets its own fill (of its own
`tensor.empty`) instead, which bufferizes to its own buffer and fuses into the kernel
that reads it (row_fused takes a fill over its rows as the row's init):

    %e = tensor.empty() : tensor<64xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
    %r:2 = linalg.generic {...} ins(%x : tensor<64x4096xf32>)
                                outs(%f, %f : tensor<64xf32>, tensor<64xf32>) {...}
  becomes
    %e = tensor.empty() : tensor<64xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
    %e1 = tensor.empty() : tensor<64xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
    %r:2 = linalg.generic {...} ins(%x : tensor<64x4096xf32>)
                                outs(%f, %f1 : tensor<64xf32>, tensor<64xf32>) {...}

Only fills of a `tensor.empty` (static shape) are split, and only their uses as the init
(`outs`) of a linalg op; a fill used as an input stays shared. Runs before bufferization
(and before CSE, which would merge the copies again).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from ..lowering.cir_ops import defining_op, ops_in

NAME = "split-shared-fills"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    ops = list(ops_in(module, descend=lambda op: not op.name.startswith("linalg.")))
    for fill in [op for op in ops if op.name == "linalg.fill"]:
        empty = defining_op(fill.operands[1])
        if empty is None or empty.name != "tensor.empty" or empty.operands:
            continue
        inits = sorted(((_position(ops, use.owner), use.operand_number, use.owner.operation)
                        for use in fill.results[0].uses
                        if _is_init(use.owner.operation, use.operand_number)),
                       key=lambda init: init[:2])  # the first in program order keeps it
        anchor = fill
        for _, number, user in inits[1:]:
            copy_empty = empty.clone(ir.InsertionPoint(fill))
            copy_fill = fill.clone(ir.InsertionPoint(fill))
            copy_empty.move_after(anchor)
            copy_fill.move_after(copy_empty)
            copy_fill.operands[1] = copy_empty.results[0]
            user.operands[number] = copy_fill.results[0]
            anchor = copy_fill


def _position(ops: list[ir.Operation], op) -> int:
    return next(k for k, other in enumerate(ops) if other == op.operation)


def _is_init(op: ir.Operation, number: int) -> bool:
    """Is operand `number` of `op` one of a linalg op's `outs`?"""
    if not op.name.startswith("linalg.") or "operandSegmentSizes" not in op.attributes:
        return False
    inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
    return number >= inputs
