"""pack-loop-carried-tensors: an scf.for carrying several tensors of one shape carries
them as one tensor with a leading axis, one slice per value.

A loop run in order (the online softmax's m, l and o: zynml/lowering/
reduction_lowering.py's `sequential`) carries one tensor per value, all over the same
loop context. iree-compile 3.13, given such a loop with run-time sizes, packs the
carried tensors into one allocation and gets it wrong when two of them start from equal
fills (CSE makes them one value, which the packing then places once for two values):
l and o came back as one buffer and `out = o / l` was 1 everywhere. Carried as one
tensor, there is nothing for it to pack. IREE's input pipeline only
(zynml/backend/iree/stages.py); the CUDA backend bufferizes the loop itself.

    %r:2 = scf.for %i = %lo to %hi step %s iter_args(%a = %x, %b = %y)
             -> (tensor<?x?xf32>, tensor<?x?xf32>) { ... scf.yield %a2, %b2 }
  becomes
    %p0 = tensor.insert_slice %y into (tensor.insert_slice %x into %empty[0, 0, 0])[1, 0, 0]
    %p = scf.for %i = %lo to %hi step %s iter_args(%packed = %p0) -> tensor<2x?x?xf32> {
      %a = tensor.extract_slice %packed[0, 0, 0] [1, %d0, %d1] [1, 1, 1]  (and %b at 1)
      ...  scf.yield (%a2 and %b2 inserted into a new tensor.empty)
    %r#0, %r#1 = tensor.extract_slice %p[0 / 1, 0, 0] ...

Only loops whose carried values are all tensors of one type, every one of them a
linalg result (or fill) over one `tensor.empty` shape (the same extents, run-time ones
included) at the start and at each yield: the slices of the packed tensor then have
those extents. Other loops are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import scf, tensor

from ..lowering.cir_ops import defining_op, ops_in

NAME = "pack-loop-carried-tensors"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for loop in list(ops_in(module, "scf.for", descend=lambda op: op.name != "linalg.generic")):
        extents = _packable(loop)
        if extents is not None:
            _pack(loop, extents)


def _packable(loop: ir.Operation) -> Optional[list]:
    """The carried tensors' common `tensor.empty` extents (its operands, one per run-time
    dimension), or None when the loop is not one this pass packs."""
    inits = list(loop.operands)[3:]
    yielded = list(list(loop.regions[0].blocks[0].operations)[-1].operands)
    if len(inits) < 2 or len({str(v.type) for v in inits}) != 1 or \
            not isinstance(inits[0].type, ir.RankedTensorType):
        return None
    shapes = {_empty_shape(v) for v in inits + yielded}
    if len(shapes) != 1 or None in shapes:
        return None
    return list(shapes.pop())


def _empty_shape(value: ir.Value) -> Optional[tuple]:
    """The operands of the tensor.empty that `value` is computed into (through a chain of
    destination-passing linalg ops), as a hashable tuple; None when it is not one."""
    for _ in range(64):  # a chain of linalg ops, each written into the next one's init
        op = defining_op(value)
        if op is None:
            return None
        if op.name == "tensor.empty":
            return tuple(op.operands)
        if not op.name.startswith("linalg.") or len(op.results) != 1:
            return None
        value = list(op.operands)[-1]  # a single-result linalg op's init is its last operand
    return None


def _pack(loop: ir.Operation, extents: list) -> None:
    type_ = ir.RankedTensorType(loop.operands[3].type)
    packed_type = ir.RankedTensorType.get([len(loop.results)] + list(type_.shape),
                                          type_.element_type)
    body = loop.regions[0].blocks[0]
    terminator = list(body.operations)[-1]
    with ir.InsertionPoint(loop), loop.location:
        new_loop = scf.ForOp(loop.operands[0], loop.operands[1], loop.operands[2],
                             [_packed(list(loop.operands)[3:], packed_type, extents)])
    new_body = new_loop.body
    with ir.InsertionPoint(new_body), loop.location:
        body.arguments[0].replace_all_uses_with(new_loop.induction_variable)
        for k, arg in enumerate(list(body.arguments)[1:]):
            arg.replace_all_uses_with(_slice(new_loop.inner_iter_args[0], k, type_, extents))
    for op in list(body.operations)[:-1]:  # the body, after the slices it now reads
        new_body.append(op.operation)
    with ir.InsertionPoint(new_body), loop.location:
        scf.YieldOp([_packed(list(terminator.operands), packed_type, extents)])
    with ir.InsertionPoint(loop), loop.location:
        for k, result in enumerate(loop.results):
            result.replace_all_uses_with(_slice(new_loop.results[0], k, type_, extents))
    loop.erase()


def _sizes(type_: ir.RankedTensorType, extents: list) -> list:
    """The type's extents: numbers, and the `tensor.empty` operands for run-time ones."""
    dynamic = iter(extents)
    return [next(dynamic) if ir.ShapedType.is_dynamic_size(d) else d for d in type_.shape]


def _packed(values: list, packed_type: ir.RankedTensorType, extents: list) -> ir.Value:
    """`values` (of one type) as slices 0, 1, .. of a new tensor of `packed_type`."""
    rank = packed_type.rank
    packed = tensor.EmptyOp([len(values)] + _sizes(_slice_type(packed_type), extents),
                            packed_type.element_type).result
    for k, value in enumerate(values):
        packed = tensor.InsertSliceOp(
            value, packed, [], list(extents), [], [k] + [0] * (rank - 1),
            [1] + list(ir.RankedTensorType(value.type).shape), [1] * rank).result
    return packed


def _slice(packed: ir.Value, k: int, type_: ir.RankedTensorType, extents: list) -> ir.Value:
    """Slice k of `packed`, of `type_` (the leading axis dropped)."""
    rank = type_.rank + 1
    return tensor.ExtractSliceOp(type_, packed, [], list(extents), [],
                                 [k] + [0] * (rank - 1), [1] + list(type_.shape),
                                 [1] * rank).result


def _slice_type(packed_type: ir.RankedTensorType) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(packed_type.shape)[1:], packed_type.element_type)
