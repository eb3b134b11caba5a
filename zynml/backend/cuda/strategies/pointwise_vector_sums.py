"""pointwise's reductions of many outputs: a thread takes W neighbouring outputs.

A thread per output of a column sum's first step (256 groups x 768 columns of bf16, each
output summing 64 rows) loads 2 bytes at a time, with one load of each input in flight:
that step ran at 1.8-2.9 TB/s (docs/performance.md, Session 37). Where the outputs lie
contiguously along the innermost parallel loop v, and every input either does too (v
indexes its last dimension alone, unit stride) or does not depend on v (a row's mean), a
thread takes W neighbouring outputs, W = `vector_bytes` of the widest such element (16
bytes: 4 f32 outputs, so 8-byte loads of bf16 inputs):

    thread t, chunk t:   outputs at v = W c .. W c + W - 1 (c is v's part of t, the
                         other parallel loops delinearized from t as usual)
        for r in 0 .. R - R % U step U:         (R: the reduction's extent)
            load every v-input's W elements at r .. r + U - 1 (one access each), and
            the inputs that do not depend on v once per point
            sums[lane] = body(sums[lane], inputs at lane), point after point
        the last R % U points one a trip, the same way
        store the W sums of each output (one access each)

so a thread has U x inputs loads in flight. Each sum adds the points in the order a
thread per output does: the results are the same bits. Whether every buffer is aligned
to its accesses (and its strides, where only run time knows them, multiples of W) is
checked at run time; otherwise the same elements are read and written with scalar
accesses.

Run-time extents (pointwise_dynamic.py's way): R and the trip counts are read from the
operands; where v's extent is not a multiple of W at run time, thread t takes the single
outputs t, t + T, ..., t + (W - 1) T of the grid's T threads instead (pointwise's
emit_point each). Static sizes choose the block: the largest of `block`, block / 2, ...
64 threads that still gives 4 blocks per multiprocessor (few, wide threads would leave
multiprocessors idle); run-time sizes take `block`.

Taken (`width`) for one reduction loop, v's extent a multiple of W where it is static;
the caller (pointwise.build) keeps reductions that write memory themselves (atomics)
and half-precision multiply-adds (rounded once, in f32, by pointwise) from it.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, scf

from . import Launch
from .extents import (as_index, ceil_div, has_dynamic_extent, host_extents, kernel_extents,
                      loop_extents, product)
from .kernel_builder import (REDUCTION, KernelScope, apply_map, delinearize, fill_value,
                             generic_operands, index_const, indexing_maps, iterator_kinds,
                             new_kernel)
from .pointwise_dynamic import aligned_at_run_time
from .row_points import dims
from .row_registers import only_if, vector_type
from .chunk_access import ChunkAccess

__all__ = ["width", "build"]


def width(generic: ir.Operation, vector_bytes: int) -> int:
    """W, the outputs a thread takes, or 0 where this kernel does not take `generic`."""
    kinds = iterator_kinds(generic)
    parallel = [d for d, k in enumerate(kinds) if k != REDUCTION]
    if vector_bytes <= 0 or not parallel or len(kinds) - len(parallel) != 1:
        return 0
    operands = _chunked(generic)
    if operands is None:
        return 0
    elements = [ir.MemRefType(value.type).element_type for value, _ in operands]
    if not all(isinstance(e, (ir.FloatType, ir.IntegerType)) for e in elements):
        return 0
    bits = [e.width for e in elements]
    if min(bits) < 8 or vector_bytes * 8 % max(bits):
        return 0
    lanes = vector_bytes * 8 // max(bits)
    v = parallel[-1]
    extent = loop_extents(generic)[v]
    if lanes < 2 or extent is not None and extent % lanes:
        return 0
    dynamic = has_dynamic_extent(generic)
    if any(vector_type(value, amap, lanes, run_time_strides=dynamic, loop=v) is None
           for value, amap in operands):
        return 0
    return lanes


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str, signature,
          lanes: int, unroll: int, block: int, multiprocessors: int, emit_point,
          initial: float | None = None) -> Launch:
    """The kernel (the module's doc) of `lanes` outputs a thread; `emit_point`:
    pointwise's (one output's sums, for run-time extents that do not divide into W);
    `initial`: the constant the outputs start from (a fill taken with the reduction)
    instead of what they hold."""
    kinds = iterator_kinds(generic)
    parallel = [d for d, k in enumerate(kinds) if k != REDUCTION]
    v = parallel[-1]
    static = loop_extents(generic)
    if not has_dynamic_extent(generic):
        count = product([n // lanes if d == v else n for d, n in enumerate(static)
                         if d in parallel])
        while block > 64 and -(-count // block) < 4 * multiprocessors:
            block //= 2
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        ranges = kernel_extents(generic, scope)
        linear = arith.AddIOp(arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                           index_const(block)).result,
                              gpu.thread_id(gpu.Dimension.x)).result
        if static[v] is not None:
            _chunk(generic, scope, ranges, parallel, lanes, unroll, linear, initial)
        else:  # whole chunks where v's extent divides into them, else single outputs
            divisible = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(
                ranges[v], index_const(lanes)).result, index_const(0)).result
            branch = scf.IfOp(divisible, has_else=True)
            with ir.InsertionPoint(branch.then_block):
                _chunk(generic, scope, ranges, parallel, lanes, unroll, linear, initial)
                scf.YieldOp([])
            with ir.InsertionPoint(branch.else_block):
                _single_outputs(generic, scope, ranges, parallel, lanes, block, linear,
                                emit_point, initial)
                scf.YieldOp([])
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:
        host = host_extents(generic)
        grid = ceil_div(ceil_div(product([host[d] for d in parallel]), lanes), block)
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1))


def _chunk(generic, scope, ranges, parallel, lanes, unroll, linear, initial) -> None:
    """Thread `linear`'s W outputs, if they exist: their sums (the module's doc)."""
    v, [r] = parallel[-1], [d for d in range(len(ranges)) if d not in parallel]
    chunk_shape = [ranges[d] if d != v else ranges[d] // lanes if isinstance(ranges[d], int)
                   else arith.DivUIOp(ranges[d], index_const(lanes)).result for d in parallel]
    count = as_index(product(chunk_shape))
    with only_if(arith.CmpIOp(arith.CmpIPredicate.ult, linear, count).result):
        ivs: list = [None] * len(ranges)
        for d, coord in zip(parallel, delinearize(linear, chunk_shape)):
            ivs[d] = coord
        ivs[v] = arith.MulIOp(ivs[v], index_const(lanes)).result
        ins, outs = generic_operands(generic)
        maps = indexing_maps(generic)
        chunked = {(value, str(amap)) for value, amap in _chunked(generic)}
        access = ChunkAccess(scope, lanes, v, lambda value, amap: vector_type(
            value, amap, lanes, run_time_strides=True, loop=v))
        inputs = [(x, m, (x, str(m)) in chunked) for x, m in zip(ins, maps)]
        outputs = list(zip(outs, maps[len(ins):]))
        ok = access.aligned([(x, m) for x, m, along in inputs if along] + outputs,
                            aligned_at_run_time)
        at = list(ivs)
        at[r] = index_const(0)  # outputs do not depend on the reduction loop
        at = access.lanes_of(at)
        if initial is None:
            start = access.load(outputs, [at], ok)
            sums = [start[(o, str(m))][0] for o, m in outputs]
        else:
            sums = [[fill_value(ir.MemRefType(o.type).element_type, initial)] * lanes
                    for o in outs]
        length = as_index(ranges[r])
        static = isinstance(ranges[r], int)
        main = (ranges[r] - ranges[r] % unroll) if static else arith.MulIOp(
            arith.DivUIOp(length, index_const(unroll)).result, index_const(unroll)).result
        sums = _sum_loop(generic, access, inputs, ivs, r, ok, sums, index_const(0),
                         as_index(main), unroll)
        if not static or ranges[r] % unroll:
            sums = _sum_loop(generic, access, inputs, ivs, r, ok, sums, as_index(main),
                             length, 1)
        access.store([sums], outputs, [at], ok)


def _sum_loop(generic, access, inputs, ivs, r, ok, sums, start, stop, step) -> list:
    """The sums carried through r in [start, stop), `step` points a trip (their loads
    first); returns them (per output, per lane)."""
    scope, lanes = access.scope, access.lanes
    loop = scf.ForOp(start, stop, index_const(step), [s for lane_sums in sums for s in lane_sums])
    with ir.InsertionPoint(loop.body):
        carried = list(loop.inner_iter_args)
        sums = [carried[k * lanes:(k + 1) * lanes] for k in range(len(sums))]
        points = []
        for u in range(step):
            point = list(ivs)
            point[r] = arith.AddIOp(loop.induction_variable, index_const(u)).result if u \
                else loop.induction_variable
            points.append(point)
        chunks = [access.lanes_of(p) for p in points]
        along = access.load([(x, m) for x, m, chunked in inputs if chunked], chunks, ok)
        once = {(x, str(m)): [scope.load(x, apply_map(m, p)) for p in points]
                for x, m, chunked in inputs if isinstance(x.type, ir.MemRefType) and not chunked}
        for u in range(step):
            for lane in range(lanes):
                values = [along[(x, str(m))][u][lane] if chunked
                          else once[(x, str(m))][u] if (x, str(m)) in once
                          else scope.value(x) for x, m, chunked in inputs]
                results = scope.clone_body(
                    generic, values + [lane_sums[lane] for lane_sums in sums],
                    lambda d, at=chunks[u][lane]: at[d])
                for lane_sums, result in zip(sums, results):
                    lane_sums[lane] = result
        scf.YieldOp([s for lane_sums in sums for s in lane_sums])
    results = list(loop.results)
    return [results[k * lanes:(k + 1) * lanes] for k in range(len(sums))]


def _single_outputs(generic, scope, ranges, parallel, lanes, block, linear, emit_point,
                    initial) -> None:
    """Thread `linear`'s outputs one by one, the grid's threads apart (W of them)."""
    total = as_index(product([ranges[d] for d in parallel]))
    threads = arith.MulIOp(gpu.grid_dim(gpu.Dimension.x), index_const(block)).result
    reduction = [d for d in range(len(ranges)) if d not in parallel]
    for lane in range(lanes):
        point = linear if not lane else arith.AddIOp(
            linear, arith.MulIOp(threads, index_const(lane)).result).result
        with only_if(arith.CmpIOp(arith.CmpIPredicate.ult, point, total).result):
            ivs: list = [None] * len(ranges)
            for d, coord in zip(parallel, delinearize(point, [ranges[d] for d in parallel])):
                ivs[d] = coord
            emit_point(generic, scope, ivs, reduction, ranges, initial)


def _chunked(generic: ir.Operation) -> list | None:
    """(memref, map) of the operands read or written along the innermost parallel loop
    (every output, the inputs that depend on it), or None where an output is a scalar."""
    kinds = iterator_kinds(generic)
    v = [d for d, k in enumerate(kinds) if k != REDUCTION][-1]
    ins, outs = generic_operands(generic)
    found = []
    for k, (value, amap) in enumerate(zip(ins + outs, indexing_maps(generic))):
        if not isinstance(value.type, ir.MemRefType):
            if k >= len(ins):
                return None
            continue
        if k < len(ins) and not any(v in dims(e) for e in amap.results):
            continue
        found.append((value, amap))
    return found

