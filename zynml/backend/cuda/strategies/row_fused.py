"""Row fused: consecutive generics over the same rows become one kernel, a block per row.

Softmax, layer norm and RMSNorm arrive as a few generics over the same rows: reductions
(row max, row sum, mean, variance) and elementwise maps that use their results. Run one
by one they pass over memory once each; fused, a block takes one row through every
generic in order, with a barrier between them, so a row's later passes hit the L1/L2
caches instead of DRAM:

    block b = row (the leading parallel loops):
      reduction generic:   block reduce over the row (row_reduce.emit_block_reduce)
      map over the row:    for r = tid, tid + B, ...: the generic's body at (b, r)
      map over rows only:  thread 0 (an init, a fill)
      barrier

A run of generics is fused when: they follow each other in one host block (only
allocations and constants between them), at least one is a reduction that row_reduce can
do with a row of `min_row` or more, all share the leading parallel extents of the first
reduction, and every buffer one of them writes is written and read by all of them at the
block's own row (so blocks never touch each other's data). Anything else splits the run.

Where the row fits (row_points.py), every generic gives each thread the same points of
the row and their values stay in its registers (row_registers.py): an input row is read
from memory once, a temporary the group alone uses is never written, and the loops above
become straight-line code. Longer rows take the loops, each generic reading memory. A
row whose length only run time knows gets register kernels for rows up to a few bounds
(REGISTER_CHUNKS), each launched where the length fits it and is a multiple of the
chunk's columns, and the loops elsewhere.

A row a warp holds (up to 128 f32 points) is a warp's: a block takes `warp_rows` rows,
a warp each. Where the body gathers from another chunk and that load does not depend on
the last row loop (RoPE's rotate-half angles and weight, the same for every head), a
warp takes `rows_per_warp` neighbouring rows of that loop in turn and loads it once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, scf

from ....lowering.cir_ops import defining_op
from .kernel_builder import (PARALLEL, REDUCTION, KernelScope, KernelSignature,
                                  delinearize, follows, generic_operands, index_const,
                                  indexing_maps, iterator_kinds, new_kernel)
from . import Launch
from .extents import (as_index, extent_keys, has_dynamic_extent, host_extents,
                      kernel_extents, loop_extents, product)
from .tuning import problem_key, tuned
from .pointwise import emit_point
from . import implicit_gemm, matmul, matvec, row_reduce
from .row_reduce import WARP, block_size, emit_block_reduce, shared_partials
from .row_gathers import chunk_gathers
from .row_points import plan as plan_registers
from .row_registers import RowInvariants, RowRegisters, only_if, takes_moved_gathers

NAME = "row_fused"
DYNAMIC = True  # run-time rows and row lengths (extents.py)
# A run-time row length: the register kernels' chunks of Params.vector columns per
# thread of Params.block threads (rows of at most 1024, 2048, 4096 and 8192 points at
# 256 threads of 4 columns): a chunk past the row still loads, so each row takes the
# tightest bound it fits
REGISTER_CHUNKS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Params:
    min_row: int = 32          # shorter rows: a block per row wastes threads
    min_rows: int = 64         # fewer rows leave most multiprocessors idle...
    small: int = 1 << 20       # ...which matters only above this many elements
    # Rows held in registers (row_points.py, row_registers.py):
    block: int = 256           # threads per row, at most (32: a warp per row, no barriers)
    max_points: int = 32       # values per buffer and thread; longer rows go through memory
    max_block: int = 1024      # threads a block may grow to so a row fits in registers
    wide_block: int = 512      # a row that takes max_block threads takes wide_block
    wide_points: int = 64      # threads instead where each holds at most wide_points
    #                            values (softmax backward over 32000 f32: 1024 threads of
    #                            31 in 891 us, 512 of 63 in 757 us; H200, 2026-11-29)
    vector: int = 4            # columns per 16-byte access (f32)
    warp_rows: int = 4         # rows of a block whose rows a warp each holds in registers
    warp_points: int = 32      # a row whose lanes hold at most this many values each is
    #                            a warp's, not a block's: shuffles, no barriers, and more
    #                            rows in flight (0: a warp only where the row needs no more;
    #                            GPT-2's 768-wide layer norms 1.6-2x faster, 2026-11-29)...
    warp_min_rows: int = 512   # ...where there are this many rows or a run-time count
    #                            (fewer spread over more threads a block each)
    #                            (blocks of one warp cap a multiprocessor at 32 warps)
    chunk_gathers: bool = True  # gathers within a point's own chunk read from registers
    #                             (row_gathers.py)
    moved_gathers: bool = True  # gathers that read another chunk whole: a load a chunk
    lane_gathers: bool = True  # ...from the lane holding it, where a warp holds the row
    rows_per_warp: int = 2     # rows a warp of such blocks takes in turn (row_registers'
    #                            RowInvariants: what they share is loaded once)


DEFAULT_PARAMS = Params()  # tuned by the target's params (tuning.py)


def _reduction_prefix(generic: ir.Operation, target):
    """Leading parallel extents of a reduction row_reduce can do (reductions trailing);
    contractions stay with the matmul strategies (convolutions with implicit_gemm)."""
    kinds = iterator_kinds(generic)
    if not row_reduce.fits(generic, row_reduce.Params(min_row=1)):
        return None  # (it declines contractions of run-time sizes itself)
    if not has_dynamic_extent(generic) and (matmul.matches(generic, target) or
                                            matvec.matches(generic, target) or
                                            implicit_gemm.matches(generic, target)):
        return None
    lead = kinds.index(REDUCTION)
    if PARALLEL in kinds[lead:]:
        return None
    return tuple(extent_keys(generic)[:lead])


def _row_length(generic: ir.Operation, rank: int) -> int | None:
    """The points of a row; None when only run time knows."""
    row = loop_extents(generic)[rank:]
    return None if None in row else math.prod(row)


def _dynamic(group: list, prefix) -> bool:
    return any(not isinstance(p, int) for p in prefix) or \
        any(_row_length(g, len(prefix)) is None for g in group)


def find_groups(generics: list[ir.Operation], target) -> list[list]:
    """Maximal runs of `generics` (consecutive in their host block) that fuse."""
    params = tuned(NAME, DEFAULT_PARAMS, target, "")  # the strategy's own, not a kernel's
    groups: list[list] = []
    for run in _consecutive_runs(generics):
        groups.extend(_split(run, params, target))
    return groups


def _consecutive_runs(generics: list[ir.Operation]) -> list[list]:
    runs: list[list] = []
    for generic in generics:
        if runs and follows(runs[-1][-1], generic):
            runs[-1].append(generic)
        else:
            runs.append([generic])
    return runs


def _split(run: list[ir.Operation], params: Params, target) -> list[list]:
    groups, current, prefix = [], [], None
    for generic in run:
        candidate_prefix = _reduction_prefix(generic, target)
        trial = current + [generic]
        trial_prefix = prefix or candidate_prefix
        if _fits(trial, trial_prefix, target):
            current, prefix = trial, trial_prefix
            continue
        if _worth_it(current, prefix, params, target):
            groups.append(current)
        current, prefix = [generic], candidate_prefix
        if not _fits(current, prefix, target):
            current, prefix = [], None
    if _worth_it(current, prefix, params, target):
        groups.append(current)
    return groups


def _worth_it(group: list, prefix, params: Params, target) -> bool:
    if len(group) < 2 or prefix is None:
        return False
    if _dynamic(group, prefix):  # no sizes to weigh: a reduction of these rows decides
        return any(_reduction_prefix(g, target) == prefix for g in group)
    rows = math.prod(prefix)
    largest = max(rows * _row_length(g, len(prefix)) for g in group)
    if rows < params.min_rows and largest >= params.small:
        return False
    return any(_reduction_prefix(g, target) == prefix and
               _row_length(g, len(prefix)) >= params.min_row
               for g in group)


def _fits(group: list, prefix, target) -> bool:
    if prefix is None:  # no reduction yet: only check shapes later
        return all(REDUCTION not in iterator_kinds(g) for g in group)
    rank = len(prefix)
    for generic in group:
        kinds = iterator_kinds(generic)
        if REDUCTION in kinds:
            if _reduction_prefix(generic, target) != prefix:
                return False
        elif tuple(extent_keys(generic)[:rank]) != prefix:
            return False
    return _rows_private(group, rank)


def _rows_private(group: list, rank: int) -> bool:
    """Every buffer written in the group is written and read at the block's own row."""
    written: dict = {}
    for generic in group:
        ins, outs = generic_operands(generic)
        for value, amap in zip(outs, indexing_maps(generic)[len(ins):]):
            owner = defining_op(value)
            if owner is not None and owner.name != "memref.alloc":
                return False  # a view: aliasing we do not track
            if not _row_map(amap, rank, covers=True):
                return False
            written[value] = True
    for generic in group:
        ins, outs = generic_operands(generic)
        for value, amap in zip(ins + outs, indexing_maps(generic)):
            if value in written and not _row_map(amap, rank, covers=False):
                return False
        for op in generic.regions[0].blocks[0].operations:  # gathers of written buffers
            if any(v in written for v in op.operation.operands):
                return False
    return True


def _row_map(amap: ir.AffineMap, rank: int, covers: bool) -> bool:
    """The row loops (d0..d{rank-1}) appear as themselves, in order, as the leading
    results; `covers`: all of them do (a writer touches only its own row)."""
    leading = list(amap.results)[:rank]
    if len(leading) < rank:
        return False
    return all(isinstance(e, ir.AffineDimExpr) and e.position == k
               for k, e in enumerate(leading))


def problem(group: list[ir.Operation]) -> str:
    """The tuning problem of a fused run (tuning.py): what its kernel takes."""
    return problem_key(KernelSignature.of(group).values)


def build(group: list[ir.Operation], gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    params = tuned(NAME, DEFAULT_PARAMS, target, problem(group))
    prefix = next(p for p in (_reduction_prefix(g, target) for g in group) if p is not None)
    rank = len(prefix)
    leader = next(g for g in group if _reduction_prefix(g, target) is not None)
    if _row_length(leader, rank) is not None:  # rows of a known length (in registers
        registers = plan_registers(group, rank, params)  # where they fit)
        return _kernel(group, gpu_module, kernel_name, params, rank, leader, registers,
                       dynamic=_dynamic(group, prefix))
    # A run-time row length: a kernel per bound of REGISTER_CHUNKS, each launched where
    # the row fits it (the shortest first), and the loops through memory elsewhere.
    launch = _kernel(group, gpu_module, kernel_name, params, rank, leader, None,
                     dynamic=True)
    for chunks in sorted(REGISTER_CHUNKS, reverse=True):
        registers = plan_registers(group, rank, params, chunks)
        if registers is None:
            break
        held = _kernel(group, gpu_module, f"{kernel_name}_upto{registers.bound}", params,
                       rank, leader, registers, dynamic=True)
        with ir.InsertionPoint(group[-1]), group[-1].location:  # after every operand
            length = as_index(product(host_extents(leader)[rank:]))
            fits = arith.CmpIOp(arith.CmpIPredicate.ule, length,
                                index_const(registers.bound)).result
            rest = arith.RemUIOp(length, index_const(registers.width)).result
            whole = arith.CmpIOp(arith.CmpIPredicate.eq, rest, index_const(0)).result
            held.when = arith.AndIOp(fits, whole).result
        held.otherwise = [launch]
        launch = held
    return launch


def _kernel(group: list[ir.Operation], gpu_module: ir.Operation, kernel_name: str,
            params: Params, rank: int, leader: ir.Operation, registers, dynamic: bool
            ) -> Launch:
    """The group's kernel: its rows in registers (`registers`, a row_points.Plan) or
    through memory (None); `dynamic`: some extent is known at run time only."""
    block = registers.block if registers else row_reduce.Params().max_block if dynamic \
        else block_size(max(_row_length(g, rank) for g in group))
    partials = {}
    for index, generic in enumerate(group):
        if REDUCTION in iterator_kinds(generic):
            name = f"{kernel_name}_partials{index}"
            partials[index] = shared_partials(gpu_module, generic, name, block)
    signature = KernelSignature.of(group)
    if registers:  # temporaries that live in registers only take no argument
        signature.values = [v for v in signature.values if v not in registers.private]
    # a warp per row: several rows a block, a warp each (their reductions need no barrier)
    warp_rows = params.warp_rows if registers and block == WARP else 1
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block * warp_rows])
    with ir.InsertionPoint(func.regions[0].blocks[0]), group[0].location:
        scope = KernelScope(signature, func)
        extents = kernel_extents(leader, scope)
        row, tid = gpu.block_id(gpu.Dimension.x), gpu.thread_id(gpu.Dimension.x)
        last_row = None
        per_warp = _rows_per_warp(group, params, registers, warp_rows, extents, rank)
        if warp_rows > 1:
            row = arith.AddIOp(arith.MulIOp(row, index_const(warp_rows)).result,
                               arith.DivUIOp(tid, index_const(WARP)).result).result
            if per_warp > 1:
                row = arith.MulIOp(row, index_const(per_warp)).result
            tid = arith.RemUIOp(tid, index_const(WARP)).result
            rows = product(extents[:rank])
            if not isinstance(rows, int) or rows % (warp_rows * per_warp):
                # the last block's extra warps (a warp's rows are all there or none)
                last_row = arith.CmpIOp(arith.CmpIPredicate.ult, row, as_index(rows)).result
        invariants = None
        if per_warp > 1:
            invariants = RowInvariants(rank - 1, frozenset(
                out for g in group for out in generic_operands(g)[1]))
        with only_if(last_row):
            for r in range(per_warp):
                at = arith.AddIOp(row, index_const(r)).result if r else row
                _emit_rows(group, scope, extents, rank, delinearize(at, extents[:rank]),
                           tid, registers, partials, block, params, invariants)
        gpu.ReturnOp([])
    with ir.InsertionPoint(group[-1]), group[-1].location:  # after every operand
        rows = product(host_extents(leader)[:rank])
        taken = warp_rows * per_warp  # rows a block takes
        if taken > 1:
            rows = -(-rows // taken) if isinstance(rows, int) else arith.DivUIOp(
                arith.AddIOp(rows, index_const(taken - 1)).result,
                index_const(taken)).result
    return Launch(kernel_name, signature.values, (rows, 1, 1), (block * warp_rows, 1, 1))


def _rows_per_warp(group: list, params: Params, registers, warp_rows: int, extents: list,
                   rank: int) -> int:
    """Rows a warp of a warp-per-row block takes one after the other. They differ in the
    last row loop only, whose extent they divide, so what does not depend on that loop
    is loaded once (row_registers.RowInvariants). Taken where that saves a gather's
    loads of another chunk (RoPE's rotate-half angles and weight across heads): without
    one, the rows measured up to 2% slower on an H200 (docs/performance.md, Session 33)."""
    last = extents[rank - 1]
    per_warp = params.rows_per_warp
    if warp_rows == 1 or per_warp == 1 or not isinstance(last, int) or last % per_warp \
            or not takes_moved_gathers(registers, params.chunk_gathers,
                                       params.moved_gathers):
        return 1
    for generic in group:
        for gather in chunk_gathers(generic, rank, loop_extents(generic), registers.width,
                                    moved=True):
            if not gather.own and rank - 1 not in gather.dims:
                return per_warp
    return 1


def _emit_rows(group: list, scope: KernelScope, extents: list, rank: int, row_ivs: list,
               tid: ir.Value, registers, partials: dict, block: int, params: Params,
               invariants: RowInvariants | None = None) -> None:
    """The group's generics at the block's row (`row_ivs`), thread `tid` of `block`."""
    held = None
    if registers:
        length = as_index(product(extents[rank:])) if registers.bound else None
        held = RowRegisters(registers, scope, row_ivs, tid, length, params.chunk_gathers,
                            params.moved_gathers, invariants, params.lane_gathers)
    for index, generic in enumerate(group):
        if held:  # (a run-time extent may be a private temporary's, never passed)
            held.emit(index, generic, partials.get(index))
            continue
        ranges = kernel_extents(generic, scope)
        ivs: list = list(row_ivs) + [None] * (len(ranges) - rank)
        if index in partials:
            emit_block_reduce(generic, scope, ivs, block, partials[index], ranges)
        elif len(ranges) == rank:  # one point per row
            first = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid,
                                          index_const(0)).result)
            with ir.InsertionPoint(first.then_block):
                emit_point(generic, scope, ivs, [], ranges)
                scf.YieldOp([])
        else:
            loop = scf.ForOp(tid, as_index(product(ranges[rank:])), index_const(block))
            with ir.InsertionPoint(loop.body):
                for k, coord in enumerate(delinearize(loop.induction_variable,
                                                      ranges[rank:])):
                    ivs[rank + k] = coord
                emit_point(generic, scope, ivs, [], ranges)
                scf.YieldOp([])
        if index + 1 < len(group):  # (held values stay in registers: no barrier)
            gpu.BarrierOp()
