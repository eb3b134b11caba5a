"""Small helpers the cir passes share: finding compute ops and their body functions,
reading attributes, and folding index values to constants."""
from __future__ import annotations

from typing import Callable, Iterator, Optional

from mlir import ir

from ..runtime.cuda.run_time_views import divsi  # arith.divsi, exact: the launch plan's too


def top_level_funcs(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func"]


def func_by_name(module: ir.Operation) -> dict[str, ir.Operation]:
    return {ir.StringAttr(f.attributes["sym_name"]).value: f for f in top_level_funcs(module)}


def is_body_function(fn: ir.Operation) -> bool:
    return "cir.body" in fn.attributes


def ops_in(op: ir.Operation, name: Optional[str] = None,
           descend: Optional[Callable[[ir.Operation], bool]] = None) -> Iterator[ir.Operation]:
    """Every op nested in `op` (pre-order), optionally only those called `name`; where
    `descend(child)` is false, the ops inside `child` are skipped (a pass that treats a
    linalg.generic or a gpu.module as one unit)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if name is None or child.name == name:
                    yield child
                if descend is None or descend(child):
                    yield from ops_in(child, name, descend)


def compute_ops(module: ir.Operation) -> list[ir.Operation]:
    """cir.compute and cir.multi_compute ops of the program functions, in order."""
    return [op for f in top_level_funcs(module) if not is_body_function(f)
            for op in ops_in(f) if op.name in ("cir.compute", "cir.multi_compute")]


def out_args(compute: ir.Operation, body: ir.Operation) -> list[ir.Value]:
    """The body function's `out` arguments: its last ones, one per result."""
    args = list(entry_block(body).arguments)
    return args[len(args) - len(compute.results):]


def body_name(compute: ir.Operation) -> Optional[str]:
    """The symbol `body` names, or None when it is missing or no symbol reference."""
    if "body" not in compute.attributes:
        return None
    attr = compute.attributes["body"]
    return attr.value if isinstance(attr, ir.FlatSymbolRefAttr) else None


def body_of(compute: ir.Operation, funcs: dict[str, ir.Operation]) -> Optional[ir.Operation]:
    name = body_name(compute)
    return funcs.get(name) if name is not None else None


class AttributeKindError(ValueError):
    """An attribute of the wrong kind on an op (IRDL checks only `kind` and `body` of
    cir.compute; the rest are discardable): input that cirgen did not make, reported at
    the op by the pass runner (passes/pipeline.py), not as a bug of the pass."""

    def __init__(self, op: ir.Operation, name: str, expected: str):
        super().__init__(f"'{op.name}' attribute '{name}' must be {expected}, not "
                         f"{op.attributes[name]}")
        self.location = op.location


def _attr(op: ir.Operation, name: str, kind: type, expected: str):
    if name not in op.attributes:
        return None
    attr = op.attributes[name]
    if not isinstance(attr, kind):
        raise AttributeKindError(op, name, expected)
    return attr


def string_attr(op: ir.Operation, name: str) -> Optional[str]:
    attr = _attr(op, name, ir.StringAttr, "a string")
    return attr.value if attr is not None else None


def int_attr(op: ir.Operation, name: str) -> Optional[int]:
    attr = _attr(op, name, ir.IntegerAttr, "an integer")
    return attr.value if attr is not None else None


def i64_array(op: ir.Operation, name: str) -> Optional[list[int]]:
    attr = _attr(op, name, ir.DenseI64ArrayAttr, "an array<i64: ...>")
    return list(attr) if attr is not None else None


def string_array(op: ir.Operation, name: str) -> Optional[list[str]]:
    attr = _attr(op, name, ir.ArrayAttr, "an array of strings")
    if attr is None:
        return None
    if not all(isinstance(a, ir.StringAttr) for a in attr):
        raise AttributeKindError(op, name, "an array of strings")
    return [a.value for a in attr]


def entry_block(fn: ir.Operation) -> ir.Block:
    return fn.regions[0].blocks[0]


def set_function_type(fn: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def defining_op(value: ir.Value) -> Optional[ir.Operation]:
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) or isinstance(owner, ir.Operation) \
        else None


def parent_op(op: ir.Operation) -> Optional[ir.Operation]:
    """The op whose region holds `op` (None at the top)."""
    parent = op.parent
    return parent.operation if parent is not None else None


def clone_op(op: ir.Operation, operands: list[ir.Value]) -> ir.Operation:
    """A copy of region-free `op` at the current insertion point, on new `operands`."""
    return ir.Operation.create(op.name, results=[r.type for r in op.results],
                               operands=operands,
                               attributes={k: op.attributes[k] for k in op.attributes},
                               loc=op.location)


def constant_int(value: ir.Value, memo: Optional[dict] = None) -> Optional[int]:
    """The integer `value` always holds, folding constants, tensor.dim of static tensors
    and index arithmetic on those; None when it is not known. Each value is folded once
    per `memo` (a dict the caller may share between calls): an operand read twice, as in
    `k = k + k` repeated, is not folded again, so the work is linear in the values."""
    memo = {} if memo is None else memo
    if value in memo:
        return memo[value]
    memo[value] = result = _fold(value, memo)
    return result


# Signed integer arithmetic as arith defines it (remsi takes the dividend's sign, not
# Python's floor modulo), for constant_int and for kernels that evaluate index math
SIGNED_FOLDS = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
                "arith.muli": lambda a, b: a * b,
                "arith.floordivsi": lambda a, b: a // b if b else None,
                "arith.divsi": lambda a, b: divsi(a, b) if b else None,
                "arith.remsi": lambda a, b: a - b * divsi(a, b) if b else None,
                "arith.maxsi": max, "arith.minsi": min}


def _fold(value: ir.Value, memo: dict) -> Optional[int]:
    op = defining_op(value)
    if op is None:
        return None
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None
    if op.name == "tensor.dim":
        source, dim = op.operands[0], constant_int(op.operands[1], memo)
        shaped = ir.RankedTensorType(source.type) if isinstance(source.type, ir.RankedTensorType) else None
        if shaped is None or dim is None or shaped.is_dynamic_dim(dim):
            return None
        return shaped.get_dim_size(dim)
    if op.name in SIGNED_FOLDS:
        a, b = constant_int(op.operands[0], memo), constant_int(op.operands[1], memo)
        return None if a is None or b is None else SIGNED_FOLDS[op.name](a, b)
    if op.name == "arith.index_cast":
        return constant_int(op.operands[0], memo)
    return None


def attention_operands(op: ir.Operation) -> tuple:
    """cir.attention's (query, key, value, scale, mask or None, offset or None), its
    optional operands told apart by `operandSegmentSizes` (the group: run_time_group)."""
    query, key, value, scale, *rest = op.operands
    sizes = _attention_segments(op, len(rest))
    mask = rest[0] if sizes[4] else None
    offset = rest[sizes[4]] if sizes[5] else None
    return query, key, value, scale, mask, offset


def run_time_group(op: ir.Operation) -> Optional[tuple[int, ir.Value]]:
    """cir.attention's (group_axis, group) where a grouped-query group is read at run
    time (its `group` operand), else None."""
    rest = list(op.operands)[4:]
    sizes = _attention_segments(op, len(rest))
    if not sizes[6]:
        return None
    return int_attr(op, "group_axis"), rest[sizes[4] + sizes[5]]


def _attention_segments(op: ir.Operation, optional: int) -> list[int]:
    """cir.attention's seven operand segment sizes (without the attribute: a mask if
    there is a fifth operand)."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])) \
        if "operandSegmentSizes" in op.attributes else [1, 1, 1, 1, optional, 0, 0]
    return sizes + [0] * (7 - len(sizes))


def kv_group(op: ir.Operation) -> list[int]:
    """cir.attention's `kv_group`: per leading axis, how many query heads share a key head
    (all 1 when absent)."""
    rank = ir.RankedTensorType(op.operands[0].type).rank
    return i64_array(op, "kv_group") or [1] * (rank - 2)  # run_time_group's axis: 1
