"""Inputs updated in place (`compute(mut x)`) written where they are, on the GPU: in the
bufferized host function, the buffer of an output that has the name of an input the
program updates (`mut x`, listed in the function's `cir.mutated`) becomes that input's
own buffer, when that is safe:

* a scatter works on a copy of the input: `memref.copy %x, %a` is the input's only use,
  so `%a` can be `%x` itself (the atomics then add into the caller's array);
* an elementwise kernel reads the input and writes the output at the same point (the
  generic that writes `%a`, every loop parallel, reads `%x` and writes `%a` through
  identity maps, and nothing else reads `%x`): each point reads its old value before it
  writes the new one, so `%a` can be `%x`;
* nothing reads the input (the program writes all of it, `dw[c, j] = sum`): whatever
  kernels write `%a`, no value of `%x` is needed, so `%a` can be `%x`.

    %a = memref.alloc() : memref<37xf32>
    linalg.generic {identity maps, parallel} ins(%x, %g) outs(%a) {...}
    return %a
  becomes
    linalg.generic {identity maps, parallel} ins(%x, %g) outs(%x) {...}
    return %x

With run-time sizes the output's buffer is sized by another input's dimension that the
program binds to the same size (`cir.equal_dims`, checked at each call), and is copied
back into the whole input (`memref.copy %a, subview %x[0][%n][1]`); the same two cases
then write `%x` itself, and the copy goes.

The launch plan then marks that output `updates` (launch_plan.py) and the run time hands
back the caller's array (zynml/inplace.py writes nothing more). Anything else keeps its
own output buffer, and the call copies it into the caller's array.
"""
from __future__ import annotations

from mlir import ir

from ...dialects.cir import MUTATED_ATTR
from ...lowering.cir_ops import defining_op
from .launch_plan import equal_dims

__all__ = ["write_in_place"]


def write_in_place(module: ir.Operation) -> None:
    for fn in module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "func.func" or "zynml.inputs" not in fn.attributes or \
                not len(fn.regions[0].blocks):
            continue
        inputs = [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["zynml.inputs"])]
        mutated = {ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes[MUTATED_ATTR])} \
            if MUTATED_ATTR in fn.attributes else set()
        outputs = [ir.StringAttr(a).value
                   for a in ir.ArrayAttr(fn.attributes["zynml.outputs"])]
        entry = fn.regions[0].blocks[0]
        terminator = list(entry.operations)[-1].operation
        equal = _equal_sizes(fn)
        for name, result in zip(outputs, list(terminator.operands)):
            if name not in mutated:  # (an output named like an input it does not update)
                continue
            arg = entry.arguments[inputs.index(name)]
            if result == arg:  # written back through a copy into the whole input
                _alias_copied_back(arg, equal)
            else:
                _alias(arg, result)


def _alias_copied_back(arg: ir.Value, equal) -> None:
    """`memref.copy %a, %whole` where `%whole` is all of `arg` (a subview at 0 of sizes
    `equal` says are arg's own, steps 1) and `%a` is allocated for the output alone:
    the output is written into `arg` itself, as _alias does."""
    views = [use.owner for use in arg.uses if use.owner.name == "memref.subview"]
    for view in views:
        copies = [use.owner for use in view.results[0].uses]
        if len(copies) != 1 or copies[0].name != "memref.copy" or \
                copies[0].operands[1] != view.results[0] or not _whole(view, arg, equal):
            continue
        result = copies[0].operands[0]
        alloc = defining_op(result)
        if alloc is None or alloc.name != "memref.alloc" or arg.type != result.type or \
                any(use.owner != copies[0] and use.owner.name != "linalg.generic"
                    for use in result.uses):
            continue
        others = [use.owner for use in arg.uses  # (its sizes, this copy, the return)
                  if use.owner.name not in ("memref.dim", "func.return") and
                  use.owner != view]
        if others and not _elementwise_update(arg, result, others):
            continue
        copies[0].erase()
        view.erase()
        result.replace_all_uses_with(arg)
        alloc.erase()
        return


def _equal_sizes(fn: ir.Operation) -> dict:
    """(input, axis) -> the set of (input, axis) the program binds to its size."""
    found: dict = {}
    for group in equal_dims(fn.attributes):
        members = {tuple(member) for member in group}
        for member in members:
            found[member] = members
    return found


def _whole(view: ir.Operation, arg: ir.Value, equal: dict) -> bool:
    """`view` (a subview of `arg`) is all of it: offsets 0, steps 1, each size arg's
    own, or a `memref.dim` of an input that `equal` binds to that size."""
    offsets = list(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
    shape = ir.MemRefType(arg.type).shape
    if len(sizes) != len(shape) or any(offsets) or any(s != 1 for s in steps) or \
            ir.MemRefType(view.results[0].type).rank != len(shape) or \
            len(list(view.operands)) != 1 + sum(map(ir.ShapedType.is_dynamic_size, sizes)):
        return False
    given = iter(list(view.operands)[1:])
    for axis, size in enumerate(sizes):
        if not ir.ShapedType.is_dynamic_size(size):
            if size != shape[axis]:
                return False
            continue
        dim = defining_op(next(given))
        if dim is None or dim.name != "memref.dim" or \
                not isinstance(dim.operands[0], ir.BlockArgument):
            return False
        index = defining_op(dim.operands[1])
        if index is None or index.name != "arith.constant":
            return False
        source = (ir.BlockArgument(dim.operands[0]).arg_number,
                  ir.IntegerAttr(index.attributes["value"]).value)
        me = (arg.arg_number, axis)
        if source != me and source not in equal.get(me, ()):
            return False
    return True


def _alias(arg: ir.Value, result: ir.Value) -> None:
    alloc = defining_op(result)
    if alloc is None or alloc.name != "memref.alloc" or arg.type != result.type:
        return
    # (a run-time size of the input read for the output's allocation: the shape, which
    # writing in place leaves as it is)
    uses = [use.owner for use in arg.uses if use.owner.name != "memref.dim"]
    if len(uses) == 1 and uses[0].name == "memref.copy" and \
            uses[0].operands[0] == arg and uses[0].operands[1] == result:
        copy = uses[0]
    elif not uses or _elementwise_update(arg, result, uses):
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
