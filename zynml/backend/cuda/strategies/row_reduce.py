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

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from ....lowering.cir_ops import clone_op, defining_op
from .kernel_builder import (REDUCTION, KernelScope, KernelSignature, apply_map,
                                  delinearize, generic_operands, index_const, indexing_maps,
                                  iterator_kinds, loop_dims, new_kernel)
from . import Launch
from .extents import as_index, host_extents, kernel_extents, loop_extents, product
from .tuning import problem_key, tuned

NAME = "row_reduce"
DYNAMIC = True  # run-time rows and row lengths (extents.py): a block per row

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


def _combines(generic: ir.Operation):
    """[(combine op, operand index of f(ins))] for each output when the body yields
    combine_k(out_k, f_k(ins)) (each output used only there), else None."""
    ins, outs = generic_operands(generic)
    block = generic.regions[0].blocks[0]
    yield_op = list(block.operations)[-1].operation
    found = []
    for k, value in enumerate(yield_op.operands):
        out_arg = block.arguments[len(ins) + k]
        producer = defining_op(value)
        if producer is None or producer.name not in _IDENTITY or \
                str(producer.results[0].type) not in _IDENTITY[producer.name]:
            return None
        uses = list(out_arg.uses)
        if len(uses) != 1 or uses[0].owner.operation != producer:
            return None
        operands = list(producer.operands)
        if operands.count(out_arg) != 1 or len(list(producer.results[0].uses)) != 1:
            return None
        found.append((producer, 1 - operands.index(out_arg)))
    return found or None


def _combine(generic: ir.Operation):
    """Whether every output is a combinable reduction (see _combines)."""
    return _combines(generic)


def combinable(generic: ir.Operation) -> bool:
    """Whether every output of `generic` is combine(out, f(ins)) for an associative
    combine of the types above (its points may be folded in any grouping)."""
    return _combines(generic) is not None


def accumulator_types(generic: ir.Operation) -> list[ir.Type]:
    """Each output's accumulator type (a combinable generic's)."""
    return [op.results[0].type for op, _ in _combines(generic)]


def matches(generic: ir.Operation, target) -> bool:
    return fits(generic, tuned(NAME, Params(), target, problem_key(generic.operands)))


def fits(generic: ir.Operation, params: Params) -> bool:
    """Whether a block per output point can reduce `generic` with these Params."""
    kinds = iterator_kinds(generic)
    if REDUCTION not in kinds or _combine(generic) is None:
        return False
    length = row_length(generic)  # None: run-time (any length works, at a block per row)
    if length is not None and length < params.min_row:
        return False
    ins, _ = generic_operands(generic)
    memref_maps = [m for v, m in zip(ins, indexing_maps(generic))
                   if isinstance(v.type, ir.MemRefType) and m.results]
    if not memref_maps:
        return False
    last = memref_maps[0].results[-1]
    if length is None and len(_dims_of(memref_maps[0])) < len(kinds):
        return False  # run-time sizes and an input reused across rows: a contraction
    return isinstance(last, ir.AffineDimExpr) and kinds[last.position] == REDUCTION


def _dims_of(amap: ir.AffineMap) -> set[int]:
    return {ir.AffineDimExpr(e).position for e in amap.results
            if isinstance(e, ir.AffineDimExpr)}


def row_length(generic: ir.Operation) -> int | None:
    """The points each output combines; None when only run time knows."""
    extents, kinds = loop_extents(generic), iterator_kinds(generic)
    row = [e for e, k in zip(extents, kinds) if k == REDUCTION]
    return None if None in row else math.prod(row)


def block_size(row: int, params: Params = Params()) -> int:
    return min(params.max_block, max(WARP, 1 << (row - 1).bit_length()))


def shared_partials(gpu_module: ir.Operation, generic: ir.Operation, name: str,
                    block: int) -> list[tuple[ir.Type, str]]:
    """Workgroup buffers of one partial per warp, one per output of `generic`."""
    buffers = []
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        for k, (combine, _) in enumerate(_combines(generic)):
            shared_type = ir.MemRefType.get(
                [block // WARP], combine.results[0].type,
                memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))
            memref.GlobalOp(f"{name}{k}", ir.TypeAttr.get(shared_type),
                            sym_visibility="private")
            buffers.append((shared_type, f"{name}{k}"))
    return buffers


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    params = tuned(NAME, Params(), target, problem_key(generic.operands))
    signature = KernelSignature.of(generic)
    parallel = [d for d, k in enumerate(iterator_kinds(generic)) if k != REDUCTION]
    length = row_length(generic)
    block = params.max_block if length is None else block_size(length, params)
    partials = shared_partials(gpu_module, generic, f"{kernel_name}_partials", block)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        ranges = kernel_extents(generic, scope)
        ivs: list = [None] * len(ranges)
        row = gpu.block_id(gpu.Dimension.x)
        for d, coord in zip(parallel, delinearize(row, [ranges[d] for d in parallel])):
            ivs[d] = coord
        emit_block_reduce(generic, scope, ivs, block, partials, ranges)
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:  # a block per row
        host = host_extents(generic)
        points = product([host[d] for d in parallel])
    return Launch(kernel_name, signature.values, (points, 1, 1), (block, 1, 1))


def emit_block_reduce(generic: ir.Operation, scope: KernelScope, ivs: list, block: int,
                      partials: list[tuple[ir.Type, str]], ranges: list | None = None,
                      ) -> None:
    """The block's threads reduce one output point of `generic` (its parallel loop
    variables `ivs` fixed); thread 0 combines the totals into the outputs. `ranges`:
    the loops' extents in the kernel (extents.py), when some are run-time values."""
    ranges = ranges or loop_dims(generic)[0]
    reduction = [d for d, k in enumerate(iterator_kinds(generic)) if k == REDUCTION]
    row = as_index(product([ranges[d] for d in reduction]))
    tid = gpu.thread_id(gpu.Dimension.x)
    start = identities(generic)
    accs = fold_strided(generic, scope, ivs, ranges, tid, row, block, start)
    combine_across_block(generic, scope, ivs, block, partials, accs, tid, start)


def fold_strided(generic: ir.Operation, scope: KernelScope, ivs: list, ranges: list,
                 first: ir.Value, end: ir.Value, step: int, start: list) -> list:
    """A thread's accumulators (from `start`) over the reduction's points first, first +
    step, ... < end (its flattened reduction loops; the parallel loops at `ivs`)."""
    reduction = [d for d, k in enumerate(iterator_kinds(generic)) if k == REDUCTION]
    ins, _ = generic_operands(generic)
    maps = indexing_maps(generic)
    loop = scf.ForOp(first, end, index_const(step), start)
    with ir.InsertionPoint(loop.body):
        here = list(ivs)
        for d, coord in zip(reduction, delinearize(loop.induction_variable,
                                                   [ranges[d] for d in reduction])):
            here[d] = coord
        loaded = [scope.load(v, apply_map(m, here)) if isinstance(v.type, ir.MemRefType)
                  else scope.value(v) for v, m in zip(ins, maps)]
        scf.YieldOp(fold_point(generic, scope, list(loop.inner_iter_args), loaded,
                               lambda d: here[d]))
    return list(loop.results)


def identities(generic: ir.Operation) -> list[ir.Value]:
    """Each output's combine identity (a thread's accumulators before its first point)."""
    values = []
    for combine, _ in _combines(generic):
        element = combine.results[0].type
        values.append(arith.ConstantOp(element, ir.Attribute.parse(
            f"{_IDENTITY[combine.name][str(element)]} : {element}")).result)
    return values


def fold_point(generic: ir.Operation, scope: KernelScope, accs: list[ir.Value],
               in_values: list[ir.Value], index_of) -> list[ir.Value]:
    """The accumulators after one point: combine_k(acc_k, f_k(ins at the point))."""
    combines = _combines(generic)
    _, outs = generic_operands(generic)
    local = scope.clone_ops(generic, list(in_values) + [None] * len(outs), index_of,
                            skip=[op for op, _ in combines])
    return [_combiner(op, index)(acc, local[op.operands[index]])
            for acc, (op, index) in zip(accs, combines)]


def combine_across_block(generic: ir.Operation, scope: KernelScope, ivs: list, block: int,
                         partials: list[tuple[ir.Type, str]], accs: list[ir.Value],
                         tid: ir.Value, start: list[ir.Value]) -> None:
    """Each thread's accumulators `accs` -> the block's totals (shuffles within warps,
    warp results through shared memory); thread 0 combines them into the outputs.
    `tid`: the thread id; `start`: the identities (see `identities`)."""
    combiners = [_combiner(op, index) for op, index in _combines(generic)]
    accs = [_warp_reduce(acc, combiner) for acc, combiner in zip(accs, combiners)]
    warps = block // WARP
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    buffers = [memref.get_global(type_, name) for type_, name in partials]
    lane, warp = _store_warp_partials(accs, buffers, tid)
    zero = index_const(0)
    first_warp = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, warp, zero).result)
    with ir.InsertionPoint(first_warp.then_block):
        totals = [_warp_reduce(v, c) for v, c in
                  zip(_read_warp_partials(buffers, lane, warps, start), combiners)]
        writer = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid, zero).result)
        with ir.InsertionPoint(writer.then_block):
            point = [iv if iv is not None else zero for iv in ivs]
            for out, amap, total, combiner in zip(outs, maps[len(ins):], totals, combiners):
                out_index = apply_map(amap, point)
                scope.store(combiner(scope.load(out, out_index), total), out, out_index)
            scf.YieldOp([])
        scf.YieldOp([])


def block_totals(generic: ir.Operation, block: int, partials: list[tuple[ir.Type, str]],
                 accs: list[ir.Value], tid: ir.Value, start: list[ir.Value]) -> list[ir.Value]:
    """Each thread's accumulators `accs` -> the block's totals, in every thread: shuffles
    within warps; with more than one warp, each warp's total through shared memory (one
    barrier), and every warp combines them itself. No thread writes the outputs."""
    combiners = combiners_of(generic)
    accs = [_warp_reduce(acc, combiner) for acc, combiner in zip(accs, combiners)]
    warps = block // WARP
    if warps == 1:
        return accs
    buffers = [memref.get_global(type_, name) for type_, name in partials]
    lane, _ = _store_warp_partials(accs, buffers, tid)
    return [_warp_reduce(v, c) for v, c in
            zip(_read_warp_partials(buffers, lane, warps, start), combiners)]


def _store_warp_partials(accs: list, buffers: list, tid: ir.Value) -> tuple:
    """Each warp's lane 0 stores its (warp-reduced) accumulators at [warp] of the shared
    `buffers`; a barrier then makes them visible. Returns (lane, warp)."""
    lane = arith.RemUIOp(tid, index_const(WARP)).result
    warp = arith.DivUIOp(tid, index_const(WARP)).result
    first_lane = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, lane, index_const(0)).result)
    with ir.InsertionPoint(first_lane.then_block):
        for acc, buffer in zip(accs, buffers):
            memref.StoreOp(acc, buffer, [warp])
        scf.YieldOp([])
    gpu.BarrierOp()
    return lane, warp


def _read_warp_partials(buffers: list, lane: ir.Value, warps: int, start: list) -> list:
    """Lane k's copy of warp k's partials (the identities `start` past the last warp)."""
    has_partial = arith.CmpIOp(arith.CmpIPredicate.ult, lane, index_const(warps)).result
    read = scf.IfOp(has_partial, [i.type for i in start], has_else=True)
    with ir.InsertionPoint(read.then_block):
        scf.YieldOp([memref.LoadOp(buffer, [lane]).result for buffer in buffers])
    with ir.InsertionPoint(read.else_block):
        scf.YieldOp(start)
    return list(read.results)


def combiners_of(generic: ir.Operation):
    """Each output's combine as a function of two values."""
    return [_combiner(op, index) for op, index in _combines(generic)]


def _combiner(combine: ir.Operation, operand_index: int):
    def combine_values(a, b):
        return clone_op(combine, [a, b] if operand_index == 1 else [b, a]).results[0]
    return combine_values


def _warp_reduce(value: ir.Value, combine_values, down_to: int = 1) -> ir.Value:
    """Butterfly over the 32 lanes: every lane ends with the warp's total (with `down_to`
    k > 1: the total of the lanes equal to it modulo k, k a power of two)."""
    i32 = ir.IntegerType.get_signless(32)
    width = arith.ConstantOp(i32, WARP).result
    offset = WARP // 2
    while offset >= down_to:
        other = gpu.shuffle(value, arith.ConstantOp(i32, offset).result, width,
                            gpu.ShuffleMode.XOR)[0]
        value = combine_values(value, other)
        offset //= 2
    return value


