"""Which arguments of an IREE entry function the program only reads, told to the runtime
through the function's reflection (`zynml.read_only`, argument positions).

Why: the CPU runtime (zynml/runtime/iree_runner.py) may hand a large numpy input to IREE
without a copy only if IREE will not write into it. IREE 3.13 updates an imported
argument in place when the program uses it as a destination (`outs` of a linalg op,
`tensor.insert` / `insert_slice` into it, a scatter into it), and a returned argument (or
a view of one) is an output sharing the caller's memory. An argument is read-only here
when every use is a read: an `ins` operand of a linalg structured op, `tensor.extract`,
`tensor.dim`, the source of `tensor.insert_slice`, or a reshape/cast/slice whose
results are only read in turn. Any other use
(a call, a loop's iter_args, an op not listed) counts as a write: the runtime then copies
that input as before, so an unknown op costs speed, never correctness.

`zynml.binding_alignment` carries the byte alignment the kernels assume of their
buffers (iree-compile's `--iree-stream-resource-min-offset-alignment`, 64 by default):
the runtime imports only arrays aligned to it (a kernel with aligned vector loads
crashes the process on a less aligned buffer; measured with softmax at 16 and 4 mod 64).
"""
from __future__ import annotations

from typing import Any

__all__ = ["annotate", "read_only_arguments", "READ_ONLY_KEY", "ALIGNMENT_KEY"]

READ_ONLY_KEY = "zynml.read_only"
ALIGNMENT_KEY = "zynml.binding_alignment"

# results alias their first operand: read-only only if the results are
_VIEWS = frozenset({"tensor.expand_shape", "tensor.collapse_shape", "tensor.cast",
                    "tensor.extract_slice", "tensor.reshape", "tensor.bitcast"})
# read their first operand, alias nothing (insert_slice copies its source into its dest)
_READS = frozenset({"tensor.extract", "tensor.dim", "tensor.insert_slice"})


def _operation(owner: Any):
    return getattr(owner, "operation", owner)


def _only_read(value) -> bool:
    for use in value.uses:
        op = _operation(use.owner)
        name, index = op.name, use.operand_number
        if name in _READS and index == 0:
            continue
        if name in _VIEWS and index == 0:
            if all(_only_read(result) for result in op.results):
                continue
            return False
        if name.startswith("linalg.") and _is_input_operand(op, index):
            continue
        return False
    return True


def _is_input_operand(op, index: int) -> bool:
    """Is operand `index` of linalg op `op` one of its `ins` (DPS: ins come first)?"""
    view = op.opview
    inputs = getattr(view, "inputs", None)
    if inputs is None or not (hasattr(view, "outputs") or hasattr(view, "inits")):
        return False
    return index < len(inputs)


def read_only_arguments(func_op) -> list[int]:
    """Positions of the tensor arguments of `func_op` that the function only reads."""
    from mlir import ir
    block = func_op.regions[0].blocks[0]
    return [i for i, arg in enumerate(block.arguments)
            if isinstance(arg.type, ir.RankedTensorType) and _only_read(arg)]


def annotate(module, alignment: int) -> None:
    """Adds READ_ONLY_KEY and ALIGNMENT_KEY to the reflection of each public function of
    `module` (an MLIR module, changed in place)."""
    from mlir import ir
    with module.context:
        for op in module.body.operations:
            op = _operation(op)
            if op.name != "func.func" or _is_private(op) or not op.regions[0].blocks:
                continue
            entries = {}
            if "iree.reflection" in op.attributes:
                old = ir.DictAttr(op.attributes["iree.reflection"])
                entries = {old[i].name: old[i].attr for i in range(len(old))}
            positions = " ".join(str(i) for i in read_only_arguments(op))
            entries[READ_ONLY_KEY] = ir.StringAttr.get(positions)
            entries[ALIGNMENT_KEY] = ir.StringAttr.get(str(alignment))
            op.attributes["iree.reflection"] = ir.DictAttr.get(entries)


def _is_private(op) -> bool:
    from mlir import ir
    if "sym_visibility" not in op.attributes:
        return False
    return ir.StringAttr(op.attributes["sym_visibility"]).value != "public"
