"""fold-scalar-tensors: scalar work between 0-d tensors becomes a 0-d linalg.generic.

A 0-d result crosses cir-to-linalg as a scalar: `tensor.extract` of a 0-d tensor, scalar
arith/math (`|> sqrt()`), and `tensor.from_elements` back. On a GPU that scalar would
have to visit the host between kernels. This pass rewrites each such island into a
0-d generic, which the GPU path runs as a one-thread kernel (and folds the plain
round trip away):

    %s = tensor.extract %t[] : tensor<f32>
    %r = math.sqrt %s : f32
    %u = tensor.from_elements %r : tensor<f32>
  becomes
    %u = linalg.generic {indexing_maps = [() -> (), () -> ()], iterator_types = []}
           ins(%t : tensor<f32>) outs(%e : tensor<f32>) {
         ^bb0(%in: f32, %out: f32):
           %r = math.sqrt %in : f32
           linalg.yield %r : f32
         } -> tensor<f32>
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg, tensor

from ..lowering.cir_ops import clone_op, defining_op, ops_in

NAME = "fold-scalar-tensors"

_SCALAR_DIALECTS = ("arith.", "math.")


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    orphans: list[ir.Operation] = []  # scalar ops the rewrites may leave unused
    for op in list(ops_in(module, descend=lambda op: op.name != "linalg.generic")):
        if op.name != "tensor.from_elements" or len(op.operands) != 1 or \
                ir.RankedTensorType(op.results[0].type).rank != 0:
            continue
        island = _island(op.operands[0])
        if island is None:
            continue
        chain, leaves = island
        orphans.extend(chain + [o for o in map(defining_op, leaves) if o is not None])
        orphans.extend(o for c in chain for o in map(defining_op, c.operands)
                       if o is not None and o.name == "arith.constant")
        root = defining_op(op.operands[0])
        if root is not None and root.name == "arith.constant":
            orphans.append(root)
        source = defining_op(op.operands[0])
        if not chain and source is not None and source.name == "tensor.extract" and \
                source.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(source.operands[0])  # a plain round trip
        else:
            _replace_with_generic(op, chain, leaves)
        op.erase()
    unique: list[ir.Operation] = []
    for op in orphans:
        if not any(op == u for u in unique):
            unique.append(op)
    changed = True
    while changed:  # erase users before the values they use
        changed = False
        for op in list(unique):
            if all(not any(True for _ in r.uses) for r in op.results):
                unique.remove(op)
                op.erase()
                changed = True


def _island(root: ir.Value):
    """(ops computing `root` in order, leaf values) when `root` is arith/math over 0-d
    extracts, constants and scalar block arguments; else None."""
    chain: list[ir.Operation] = []
    leaves: list[ir.Value] = []

    def visit(value: ir.Value) -> bool:
        op = defining_op(value)
        if op is None:  # a scalar argument of the function
            if value not in leaves:
                leaves.append(value)
            return True
        if op.name == "tensor.extract" and len(op.operands) == 1:
            if value not in leaves:
                leaves.append(value)
            return True
        if op.name == "arith.constant" and not isinstance(value.type, ir.ShapedType):
            return True
        if not op.name.startswith(_SCALAR_DIALECTS) or len(op.regions) or \
                any(isinstance(v.type, ir.ShapedType) for v in op.operands):
            return False
        if all(visit(v) for v in op.operands):
            if op not in chain:
                chain.append(op)
            return True
        return False

    return (chain, leaves) if visit(root) else None


def _replace_with_generic(op: ir.Operation, chain, leaves) -> None:
    result_type = ir.RankedTensorType(op.results[0].type)
    ins = []
    for leaf in leaves:
        owner = defining_op(leaf)
        ins.append(owner.operands[0] if owner is not None else leaf)
    scalar_map = ir.AffineMapAttr.get(ir.AffineMap.get(0, 0, []))
    with ir.InsertionPoint(op), op.location:
        empty = tensor.EmptyOp([], result_type.element_type).result
        generic = linalg.GenericOp([result_type], ins, [empty],
                                   ir.ArrayAttr.get([scalar_map] * (len(ins) + 1)),
                                   ir.ArrayAttr.get([]))
        block = generic.regions[0].blocks.append(
            *[leaf.type for leaf in leaves], result_type.element_type)
    mapping = dict(zip(leaves, block.arguments))
    with ir.InsertionPoint(block), op.location:
        for inner in chain:
            for operand in inner.operands:
                constant = defining_op(operand)
                if operand not in mapping and constant is not None and \
                        constant.name == "arith.constant":
                    mapping[operand] = clone_op(constant, []).results[0]
            clone = clone_op(inner, [mapping[v] for v in inner.operands])
            for old, new in zip(inner.results, clone.results):
                mapping[old] = new
        root = op.operands[0]
        if root not in mapping:  # the island is a lone constant
            mapping[root] = clone_op(defining_op(root), []).results[0]
        linalg.YieldOp([mapping[root]])
    op.results[0].replace_all_uses_with(generic.results[0])
