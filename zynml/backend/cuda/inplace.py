"""Inputs updated in place (`compute(mut x)`) written where they are, on the GPU: in the
bufferized host function, the buffer of an output that has the name of an input (the
program's `mut x`) becomes that input's own buffer, when that is safe:

* a scatter works on a copy of the input: `memref.copy %x, %a` is the input's only use,
  so `%a` can be `%x` itself (the atomics then add into the caller's array);
* an elementwise kernel reads the input and writes the output at the same point (the
  generic that writes `%a`, every loop parallel, reads `%x` and writes `%a` through
  identity maps, and nothing else reads `%x`): each point reads its old value before it
  writes the new one, so `%a` can be `%x`.

    %a = memref.alloc() : memref<37xf32>
    linalg.generic {identity maps, parallel} ins(%x, %g) outs(%a) {...}
    return %a
  becomes
    linalg.generic {identity maps, parallel} ins(%x, %g) outs(%x) {...}
    return %x

The launch plan then marks that output `updates` (launch_plan.py) and the run time hands
back the caller's array (zynml/inplace.py writes nothing more). Anything else keeps its
own output buffer, and the call copies it into the caller's array.
"""
from __future__ import annotations

from mlir import ir

from ...lowering.cir_ops import defining_op

__all__ = ["write_in_place"]


def write_in_place(module: ir.Operation) -> None:
    for fn in module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "func.func" or "zynml.inputs" not in fn.attributes or \
                not len(fn.regions[0].blocks):
            continue
        inputs = [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["zynml.inputs"])]
        outputs = [ir.StringAttr(a).value
                   for a in ir.ArrayAttr(fn.attributes["zynml.outputs"])]
        entry = fn.regions[0].blocks[0]
        terminator = list(entry.operations)[-1].operation
        for name, result in zip(outputs, list(terminator.operands)):
            if name in inputs:
                _alias(entry.arguments[inputs.index(name)], result)


def _alias(arg: ir.Value, result: ir.Value) -> None:
    alloc = defining_op(result)
    if alloc is None or alloc.name != "memref.alloc" or arg.type != result.type:
        return
    uses = [use.owner for use in arg.uses]
    if len(uses) == 1 and uses[0].name == "memref.copy" and \
            uses[0].operands[0] == arg and uses[0].operands[1] == result:
        copy = uses[0]
    elif _elementwise_update(arg, result, uses):
        copy = None
    else:
        return
    result.replace_all_uses_with(arg)
    if copy is not None:
        copy.erase()
    alloc.erase()


def _elementwise_update(arg: ir.Value, result: ir.Value, uses) -> bool:
    writers = [use.owner for use in result.uses if use.owner.name == "linalg.generic"
               and _is_output(use.owner, result)]
    if len(writers) != 1 or any(u != writers[0] for u in uses):
        return False
    generic = writers[0]
    if any(str(k) != "#linalg.iterator_type<parallel>"
           for k in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return False
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    for operand, amap in zip(generic.operands, maps):
        if (operand == arg or operand == result) and not amap.is_permutation or \
                (operand == arg or operand == result) and \
                amap != ir.AffineMap.get_identity(amap.n_dims):
            return False
    return True


def _is_output(generic: ir.Operation, value: ir.Value) -> bool:
    sizes = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])
    outs = list(generic.operands)[sizes[0]:]
    return value in outs
