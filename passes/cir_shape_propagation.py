"""cir-shape-propagation: make compute results and body functions static.

cirgen emits shape-generic computes: results have dynamic extents and `out_dims` names
the operands that hold them. Once main's inputs are static (one module per shape
signature), those operands fold to constants (`tensor.dim` of a static tensor, index
arithmetic); this pass folds them, retypes each result, each body function's arguments
and `out`, replaces constant size arguments inside the body by constants, and retypes
main's results. Computes are visited in program order, so static results flow onward.

    %n = tensor.dim %x, %c0 : tensor<7xf32>
    %y = "cir.compute"(%x, %n) {out_dims = array<i64: 1>, ...}
           : (tensor<7xf32>, index) -> tensor<?xf32>
  becomes
    %y = "cir.compute"(%x, %n) {...} : (tensor<7xf32>, index) -> tensor<7xf32>
    func.func private @y_body(%x: tensor<7xf32>, %n: index, %out: tensor<7xf32>)
      // uses of %n in the body are `arith.constant 7 : index`
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith

from ..lowering.cir_ops import (body_of, compute_ops, constant_int, entry_block, func_by_name,
                      is_body_function, out_args, set_function_type,
                      top_level_funcs)

from .cir_verify import check_out_dims, verify_bodies

NAME = "cir-shape-propagation"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    verify_bodies(module)  # what this pass relies on, also when run on its own
    funcs = func_by_name(module)
    for compute in compute_ops(module):
        _specialize(compute, body_of(compute, funcs))
    for fn in top_level_funcs(module):
        if not is_body_function(fn) and len(fn.regions[0].blocks):  # not a declaration
            _retype_results(fn)


def _specialize(compute: ir.Operation, body: ir.Operation) -> None:
    tensors = [r for r in compute.results if isinstance(r.type, ir.RankedTensorType)]
    ranks = [ir.RankedTensorType(r.type).rank for r in tensors]
    # no out_dims: nothing to propagate (cir-verify requires them; hand-written
    # input for this pass alone may leave them out)
    out_dims = check_out_dims(compute, sum(ranks)) \
        if "out_dims" in compute.attributes and tensors else []
    first = 0
    for result, rank in zip(tensors, ranks):  # each result's dimensions, in turn
        tensor_type = ir.RankedTensorType(result.type)
        shape = list(tensor_type.shape)
        for d, operand_index in enumerate(out_dims[first:first + rank]):
            value = constant_int(compute.operands[operand_index])
            if value is not None:
                shape[d] = max(0, value)  # `for i in 0..n` with n < 0 writes nothing
        first += rank
        result.set_type(ir.RankedTensorType.get(shape, tensor_type.element_type))
    block = entry_block(body)
    args = list(block.arguments)
    for arg, operand in zip(args, compute.operands):
        arg.set_type(operand.type)
    for result, out in zip(compute.results, out_args(compute, body)):
        out.set_type(result.type if isinstance(result.type, ir.RankedTensorType) else
                     ir.RankedTensorType.get([], result.type))
    set_function_type(body, [a.type for a in args], [])
    _inline_constant_arguments(compute, block)


def _inline_constant_arguments(compute: ir.Operation, block: ir.Block) -> None:
    """A size argument that is constant at the call becomes a constant in the body."""
    first = block.operations[0] if len(block.operations) else None
    for arg, operand in zip(block.arguments, compute.operands):
        if not isinstance(arg.type, ir.IndexType) or not list(arg.uses):
            continue
        value = constant_int(operand)
        if value is None:
            continue
        with ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(block), \
                compute.location:
            const = arith.ConstantOp(ir.IndexType.get(), value)
        arg.replace_all_uses_with(const.result)


def _retype_results(fn: ir.Operation) -> None:
    block = entry_block(fn)
    terminator = block.operations[len(block.operations) - 1]
    set_function_type(fn, [a.type for a in block.arguments],
                      [v.type for v in terminator.operands])
