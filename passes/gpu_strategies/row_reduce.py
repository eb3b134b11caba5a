"""Row reduce: one block per output element, the reduction spread over its threads.

Matches a reduction generic with one output whose body is `combine(out, f(ins))` for an
associative `combine` (add, mul, max, min, and, or, xor) on f32 or i32, and whose first
input is contiguous along a reduction loop (row sums, row max, mean and variance of
layer norm; column reductions read strided this way, so they stay pointwise). Each
thread folds a strided slice of the row into a register, warps combine with shuffles
(`gpu.shuffle xor`), warp results meet in shared memory, and thread 0 combines the total
with the output's initial value:

    for r in tid, tid + B, ...:  acc = combine(acc, f(ins at r))       (coalesced)
    acc = combine(acc, shuffle_xor(acc, 16, 8, 4, 2, 1))
    partial[warp] = acc; barrier; warp 0 combines the partials; out = combine(out, acc)
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from ..gpu_kernel_builder import (PARALLEL, REDUCTION, KernelScope, KernelSignature,
                                  apply_map, delinearize, generic_operands, index_const,
                                  indexing_maps, iterator_kinds, loop_ranges, new_kernel)
from . import Launch

NAME = "row_reduce"

WARP = 32


@dataclass(frozen=True)
class Params:
    max_block: int = 256   # threads per block (a power of two, multiple of 32)
    min_row: int = 32      # rows shorter than this stay pointwise (a thread each)


# combine op -> its identity, as text for arith.constant (by element type).
_IDENTITY = {
    "arith.addf": {"f32": "0.0"}, "arith.mulf": {"f32": "1.0"},
    "arith.maximumf": {"f32": "0xFF800000"}, "arith.maxnumf": {"f32": "0xFF800000"},
    "arith.minimumf": {"f32": "0x7F800000"}, "arith.minnumf": {"f32": "0x7F800000"},
    "arith.addi": {"i32": "0"}, "arith.muli": {"i32": "1"}, "arith.ori": {"i32": "0"},
    "arith.xori": {"i32": "0"}, "arith.andi": {"i32": "-1"},
    "arith.maxsi": {"i32": "-2147483648"}, "arith.minsi": {"i32": "2147483647"},
    "arith.maxui": {"i32": "0"}, "arith.minui": {"i32": "-1"},
}


def _combine(generic: ir.Operation):
    """(combine op, operand index of f(ins)) when the body is yield combine(out, f)."""
    ins, outs = generic_operands(generic)
    if len(outs) != 1:
        return None
    block = generic.regions[0].blocks[0]
    out_arg = block.arguments[len(ins)]
    yield_op = list(block.operations)[-1].operation
    producer = yield_op.operands[0].owner
    producer = producer.operation if isinstance(producer, ir.OpView) else producer
    if not isinstance(producer, ir.Operation) or producer.name not in _IDENTITY:
        return None
    if str(producer.results[0].type) not in _IDENTITY[producer.name]:
        return None
    uses = list(out_arg.uses)
    if len(uses) != 1 or uses[0].owner.operation != producer:
        return None
    operands = list(producer.operands)
    if operands.count(out_arg) != 1:
        return None
    return producer, 1 - operands.index(out_arg)


def matches(generic: ir.Operation, params: Params = Params()) -> bool:
    kinds = iterator_kinds(generic)
    if REDUCTION not in kinds or _combine(generic) is None:
        return False
    ranges = loop_ranges(generic)
    row = 1
    for d, kind in enumerate(kinds):
        if kind == REDUCTION:
            row *= ranges[d]
    if row < params.min_row:
        return False
    ins, _ = generic_operands(generic)
    memref_maps = [m for v, m in zip(ins, indexing_maps(generic))
                   if isinstance(v.type, ir.MemRefType) and m.results]
    if not memref_maps:
        return False
    last = memref_maps[0].results[-1]
    return isinstance(last, ir.AffineDimExpr) and kinds[last.position] == REDUCTION


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          params: Params = Params()) -> Launch:
    combine, operand_index = _combine(generic)
    element = combine.results[0].type
    identity_text = _IDENTITY[combine.name][str(element)]
    signature = KernelSignature.of(generic)
    kinds = iterator_kinds(generic)
    ranges = loop_ranges(generic)
    parallel = [d for d, k in enumerate(kinds) if k == PARALLEL]
    reduction = [d for d, k in enumerate(kinds) if k == REDUCTION]
    points, row = 1, 1
    for d in parallel:
        points *= ranges[d]
    for d in reduction:
        row *= ranges[d]
    block = min(params.max_block, max(WARP, 1 << (row - 1).bit_length()))
    warps = block // WARP
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)

    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        shared_type = ir.MemRefType.get([warps], element, memory_space=ir.Attribute.parse(
            "#gpu.address_space<workgroup>"))
        memref.GlobalOp(f"{kernel_name}_partials", ir.TypeAttr.get(shared_type),
                        sym_visibility="private")
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        identity = arith.ConstantOp(element, ir.Attribute.parse(
            f"{identity_text} : {element}")).result
        point = gpu.block_id(gpu.Dimension.x)
        tid = gpu.thread_id(gpu.Dimension.x)
        ivs: list = [None] * len(kinds)
        for d, coord in zip(parallel, delinearize(point, [ranges[d] for d in parallel])):
            ivs[d] = coord

        def combine_values(a, b):
            return _clone(combine, [a, b] if operand_index == 1 else [b, a]).results[0]

        # each thread: acc over r = tid, tid + block, ...
        loop = scf.ForOp(tid, index_const(row), index_const(block), [identity])
        with ir.InsertionPoint(loop.body):
            here = list(ivs)
            for d, coord in zip(reduction, delinearize(loop.induction_variable,
                                                       [ranges[d] for d in reduction])):
                here[d] = coord
            loaded = [scope.load(v, apply_map(m, here)) if isinstance(v.type, ir.MemRefType)
                      else scope.value(v) for v, m in zip(ins, maps)]
            local = scope.clone_ops(generic, loaded + [None], lambda d: here[d], skip=combine)
            term = local[combine.operands[operand_index]]
            scf.YieldOp([combine_values(loop.inner_iter_args[0], term)])
        acc = _warp_reduce(loop.results[0], combine_values)

        partials = memref.get_global(shared_type, f"{kernel_name}_partials")
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        zero = index_const(0)
        first_lane = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, lane, zero).result)
        with ir.InsertionPoint(first_lane.then_block):
            memref.StoreOp(acc, partials, [warp])
            scf.YieldOp([])
        gpu.BarrierOp()
        first_warp = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, warp, zero).result)
        with ir.InsertionPoint(first_warp.then_block):
            has_partial = arith.CmpIOp(arith.CmpIPredicate.ult, lane,
                                       index_const(warps)).result
            read = scf.IfOp(has_partial, [element], has_else=True)
            with ir.InsertionPoint(read.then_block):
                scf.YieldOp([memref.LoadOp(partials, [lane]).result])
            with ir.InsertionPoint(read.else_block):
                scf.YieldOp([identity])
            total = _warp_reduce(read.results[0], combine_values)
            writer = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid, zero).result)
            with ir.InsertionPoint(writer.then_block):
                out_index = apply_map(maps[len(ins)], [iv if iv is not None else zero
                                                       for iv in ivs])
                initial = scope.load(outs[0], out_index)
                scope.store(combine_values(initial, total), outs[0], out_index)
                scf.YieldOp([])
            scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (points, 1, 1), (block, 1, 1))


def _warp_reduce(value: ir.Value, combine_values) -> ir.Value:
    """Butterfly over the 32 lanes: every lane ends with the warp's total."""
    i32 = ir.IntegerType.get_signless(32)
    width = arith.ConstantOp(i32, WARP).result
    offset = WARP // 2
    while offset:
        other = gpu.shuffle(value, arith.ConstantOp(i32, offset).result, width,
                            gpu.ShuffleMode.XOR)[0]
        value = combine_values(value, other)
        offset //= 2
    return value


def _clone(op: ir.Operation, operands):
    return ir.Operation.create(op.name, results=[r.type for r in op.results],
                               operands=operands,
                               attributes={k: op.attributes[k] for k in op.attributes},
                               loc=op.location)
