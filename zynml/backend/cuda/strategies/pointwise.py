"""Pointwise: one thread per point of the generic's parallel loops.

The parallel loops are flattened row-major (the last loop fastest, so neighbouring threads
touch neighbouring addresses) and cut into blocks of `block` threads; a thread runs the
reduction loops, if any, sequentially. This handles every generic, so it is the fallback
strategy; the others are faster on the kernels they match. A reduction whose output a
constant fill wrote just before takes the fill too (`find_groups`): its sums start from
the constant, and the fill's kernel goes. Few outputs of long sums (a column sum's
second step) split each sum over a block's warps instead (pointwise_split.py); many
outputs along a contiguous axis (a column sum's first step) take a few neighbouring
outputs a thread, read with vector accesses (pointwise_vector_sums.py).

Without reductions, when every memref operand is read or written along the last loop
contiguously (the last loop indexes its last dimension alone, static strides: an
elementwise map, a bias broadcast over rows) or not along it at all (a per-row value),
and the last loop's extent is a multiple of W (16 bytes of the widest such operand's
element: 4 for f32, and then 4 of a bf16 operand too, 8 bytes), a thread takes `vectors`
chunks of W neighbouring points instead, `threads` chunks apart:

    chunk k of thread t: points (k * threads + t) * W + lane, lane < W   (coalesced)

loaded with one access of W elements per operand and chunk (all loads first, then the
bodies, cloned per lane, then the stores). Whether every buffer is aligned to its chunk's
bytes is checked at run time (a view or a borrowed array need not be); otherwise the
same points are read and written with scalar accesses. Anything else takes the scalar kernels.

With `blocks_per_multiprocessor`, the vector path instead loops (grid-stride): the grid
is sized at run time from the device's multiprocessor count and each thread takes
groups of `vectors` chunks, the grid's threads apart, until the end. It is off by
default: on an H100 it moved GELU 64M at 90-92% of copy against 98-99% for one chunk a
thread with a grid that covers the points (docs/performance.md, session 7).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, scf

from .kernel_builder import (REDUCTION, Group, KernelScope, KernelSignature, apply_map,
                             delinearize, fill_value, filled_products, generic_operands,
                             index_const, indexing_maps, iterator_kinds, loop_dims,
                             multiply_add_body, new_kernel)
from .extents import as_index, ceil_div, has_dynamic_extent, host_extents, kernel_extents, \
    product
from . import Launch
from .pointwise_dynamic import build_vectors
from . import pointwise_split, pointwise_vector_sums
from .chunk_access import ChunkAccess
from .tuning import problem_key, tuned
from .row_points import dims
from .row_registers import aligned, vector_type
from .simt_gemm import add_and_round, widen

NAME = "pointwise"
DYNAMIC = True  # takes run-time extents (extents.py): a thread per point


@dataclass(frozen=True)
class Params:
    block: int = 256            # threads per block
    items: int = 4              # points per thread on large loop nests without reductions
    items_from: int = 1 << 20   # "large": at least this many points
    vector_bytes: int = 16      # bytes per access on the vector path (0: scalar kernels)
    vectors: int = 1            # chunks per thread on the vector path, large loop nests
    vector_block: int = 512     # threads per block on the vector path
    # > 0: large vector-path kernels loop over their chunks (grid-stride), and the run
    # time caps their grid at this many blocks per multiprocessor (Launch)
    blocks_per_multiprocessor: int = 0
    # Reductions of at most split_outputs outputs and at least split_min_points points
    # each: a block of split_warps warps per 32 outputs, the warps splitting the points
    # (pointwise_split.py; split_warps < 2: a thread per output)
    split_outputs: int = 16384
    split_min_points: int = 64
    split_warps: int = 16
    # Other reductions along contiguous outputs: a thread takes the outputs of
    # sum_vector_bytes of the widest element (0: a thread per output), its loop over the
    # sum takes sum_unroll points a trip, in blocks of at most sum_block threads
    # (pointwise_vector_sums.py)
    sum_vector_bytes: int = 16
    sum_unroll: int = 16
    sum_block: int = 256


DEFAULT_PARAMS = Params()  # tuned per kernel by the target's params (tuning.py)


def matches(generic: ir.Operation, target) -> bool:
    return True


def find_groups(generics: list, target) -> list[Group]:
    """Each reduction that no other strategy takes, into buffers constant fills (of one
    constant) wrote just before: one kernel whose sums start from the constant, so the
    fills' kernels (and their launches) go and the outputs are not read."""
    from . import single_strategies, single_takes
    others = [s for s in single_strategies(target) if s.NAME != NAME]

    def takes(generic: ir.Operation) -> bool:
        return REDUCTION in iterator_kinds(generic) and not _writes_memory(generic) and \
            not any(single_takes(s, generic, target) for s in others)
    return filled_products(generics, takes)


def build(generic, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    """The kernel of a generic, or of a Group (find_groups: a fill and the reduction
    after it)."""
    params = tuned(NAME, DEFAULT_PARAMS, target, problem_key(generic.operands))
    product, initial = (generic.product, generic.initial) if isinstance(generic, Group) \
        else (generic, None)
    writes = _writes_memory(product)
    if not writes and pointwise_split.takes(product, params):
        return pointwise_split.build(product, gpu_module, kernel_name,
                                     KernelSignature.of(product), params.split_warps, initial)
    lanes = 0 if writes or _half_contraction(product) is not None else \
        pointwise_vector_sums.width(product, params.sum_vector_bytes)
    if lanes:
        return pointwise_vector_sums.build(
            product, gpu_module, kernel_name, KernelSignature.of(product), lanes,
            params.sum_unroll, params.sum_block, target.facts.multiprocessors, emit_point,
            initial)
    if isinstance(generic, Group):  # other reductions take a thread per point
        return _build_points(product, gpu_module, kernel_name, KernelSignature.of(product),
                             params.block, initial)
    signature = KernelSignature.of(generic)
    if writes:  # a scatter's atomics: a thread per point, guarded
        return _build_points(generic, gpu_module, kernel_name, signature, params.block)
    if has_dynamic_extent(generic):  # run-time extents (pointwise_dynamic.py)
        return build_vectors(generic, gpu_module, kernel_name, signature, params,
                             sys.modules[__name__]) or \
            _build_points(generic, gpu_module, kernel_name, signature, params.block)
    ranges, parallel, reduction = loop_dims(generic)
    total = math.prod(ranges[d] for d in parallel)
    large = not reduction and total >= params.items_from
    width = 0 if reduction else _vector_width(generic, ranges, params.vector_bytes)
    if width:
        return _build_vectors(generic, gpu_module, kernel_name, signature, ranges, width,
                              params.vector_block, params.vectors if large else 1,
                              params.blocks_per_multiprocessor if large else 0)
    items = params.items if large else 1
    if items > 1:
        return _build_multi(generic, gpu_module, kernel_name, signature, ranges, parallel,
                            total, params.block, items)
    return _build_points(generic, gpu_module, kernel_name, signature, params.block)


# Body ops that write memory themselves (a scatter-add's atomics). The vector and
# multi-point paths run the body of an out-of-range point at point 0 and drop only its
# stores: for these that would add point 0's value again once per idle thread.
_MEMORY_WRITES = ("memref.atomic_rmw", "memref.generic_atomic_rmw", "memref.store",
                  "llvm.atomicrmw", "llvm.store")


def _writes_memory(generic: ir.Operation) -> bool:
    found = []

    def visit(op):
        if op.operation.name in _MEMORY_WRITES:
            found.append(op)
        return ir.WalkResult.ADVANCE
    for block in generic.regions[0].blocks:
        for op in block.operations:
            op.operation.walk(visit)
    return bool(found)


def _build_points(generic, gpu_module, kernel_name, signature, block,
                  initial: float | None = None) -> Launch:
    """A thread per point, the grid covering them; extents static or run-time
    (extents.py: the grid is then host arithmetic on the operands' sizes). `initial`:
    the constant a reduction's output starts from instead of what it holds."""
    kinds = iterator_kinds(generic)
    parallel = [d for d, k in enumerate(kinds) if k != REDUCTION]
    reduction = [d for d, k in enumerate(kinds) if k == REDUCTION]
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        ranges = kernel_extents(generic, scope)
        linear = _thread_index(block)
        total = as_index(product([ranges[d] for d in parallel]))
        in_range = arith.CmpIOp(arith.CmpIPredicate.ult, linear, total).result
        guard = scf.IfOp(in_range)
        with ir.InsertionPoint(guard.then_block):
            ivs: list = [None] * len(ranges)
            for d, coord in zip(parallel, delinearize(linear, [ranges[d] for d in parallel])):
                ivs[d] = coord
            emit_point(generic, scope, ivs, reduction, ranges, initial)
            scf.YieldOp([])
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:
        host = host_extents(generic)
        grid = ceil_div(product([host[d] for d in parallel]), block)
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1))


def _build_multi(generic, gpu_module, kernel_name, signature, ranges, parallel, total,
                 block, items) -> Launch:
    """`items` points per thread, `threads` apart (each load instruction of a warp stays
    coalesced): every input of every point is loaded first, then each point's body runs
    and stores, so a thread has `items` loads in flight instead of one."""
    threads = -(-total // items)
    grid = -(-threads // block)
    threads = grid * block
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    block_args = list(generic.regions[0].blocks[0].arguments)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        first = _thread_index(block)
        points = []
        for k in range(items):
            linear = arith.AddIOp(first, index_const(k * threads)).result if k else first
            in_range = arith.CmpIOp(arith.CmpIPredicate.ult, linear, index_const(total)).result
            ivs: list = [None] * len(ranges)
            # out-of-range points read index 0 instead (loads stay unconditional)
            safe = arith.SelectOp(in_range, linear, index_const(0)).result
            for d, coord in zip(parallel, delinearize(safe, [ranges[d] for d in parallel])):
                ivs[d] = coord
            loaded = [scope.load(v, apply_map(m, ivs)) if isinstance(v.type, ir.MemRefType)
                      else scope.value(v) for v, m in zip(ins, maps)]
            outs_read = [scope.load(o, apply_map(m, ivs)) if _used(a) else _undef(a.type)
                         for o, m, a in zip(outs, maps[len(ins):], block_args[len(ins):])]
            points.append((in_range, ivs, loaded + outs_read))
        for in_range, ivs, values in points:
            results = scope.clone_body(generic, values, lambda d, ivs=ivs: ivs[d])
            guard = scf.IfOp(in_range)
            with ir.InsertionPoint(guard.then_block):
                for value, out, amap in zip(results, outs, maps[len(ins):]):
                    scope.store(value, out, apply_map(amap, ivs))
                scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1))


def _thread_index(block: int) -> ir.Value:
    """The thread's index in the grid (x): block id * `block` + thread id."""
    return arith.AddIOp(arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(block)).result,
                        gpu.thread_id(gpu.Dimension.x)).result


def _vector_width(generic: ir.Operation, ranges: list, size: int,
                  typer=vector_type) -> int:
    """W, the points of a chunk, when the vector path fits the generic; 0 when it does
    not. An operand read or written along the last loop moves W elements a chunk: `size`
    bytes of the widest element, fewer of a narrower one (f32 read, bf16 written: 16 and
    8 bytes, 4 points). A last extent of None (run-time) is checked by the kernel;
    `typer`: each operand's chunk type, or None (row_registers.vector_type)."""
    if size <= 0 or not ranges:
        return 0
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    last = len(ranges) - 1
    along = []  # (operand, map) read or written along the last loop
    widest = 0
    for k, (value, amap) in enumerate(zip(ins + outs, maps)):
        if not isinstance(value.type, ir.MemRefType):
            continue
        if k < len(ins) and not any(last in dims(e) for e in amap.results):
            continue  # the same value for every lane of a chunk
        element = ir.MemRefType(value.type).element_type
        bits = getattr(element, "width", 0) if isinstance(
            element, (ir.FloatType, ir.IntegerType)) else 0
        if bits < 8 or size * 8 % bits:
            return 0
        along.append((value, amap))
        widest = max(widest, bits)
    if not along:
        return 0
    width = size * 8 // widest
    if any(typer(value, amap, width) is None for value, amap in along):
        return 0
    return width if ranges[last] is None or ranges[last] % width == 0 else 0


def _build_vectors(generic, gpu_module, kernel_name, signature, ranges, width, block,
                   vectors, blocks_per_multiprocessor=0) -> Launch:
    """`vectors` chunks of `width` points per thread (see the module's docstring); with
    `blocks_per_multiprocessor`, a thread loops over such groups of chunks, all the
    grid's threads apart (grid-stride), so the run time can size the grid from the
    device's multiprocessor count and every block works until the end."""
    count = math.prod(ranges) // width  # chunks in all
    threads = -(-count // vectors)
    grid = -(-threads // block)
    threads = grid * block
    func = new_kernel(gpu_module, kernel_name, signature.types(), [block])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        first = _thread_index(block)
        if not blocks_per_multiprocessor:
            _vector_chunks(generic, scope, ranges, width, vectors, count, first, None,
                           threads)
        else:
            stride = arith.MulIOp(gpu.grid_dim(gpu.Dimension.x), index_const(block)).result
            step = arith.MulIOp(stride, index_const(vectors)).result
            loop = scf.ForOp(first, index_const(count), step)
            with ir.InsertionPoint(loop.body):
                _vector_chunks(generic, scope, ranges, width, vectors, count,
                               loop.induction_variable, stride, None)
                scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (grid, 1, 1), (block, 1, 1),
                  blocks_per_multiprocessor=blocks_per_multiprocessor)


def _vector_chunks(generic, scope, ranges, width, vectors, count, first, stride,
                   static_stride, typer=vector_type, is_aligned=aligned) -> None:
    """Chunks first, first + stride, ... (`vectors` of them) of one thread: all loads,
    then the bodies, then the stores. `static_stride`: the stride as a number when it is
    one (then chunks that are always in range skip the range check), else None."""
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    out_maps = maps[len(ins):]
    args = list(generic.regions[0].blocks[0].arguments)
    last = len(ranges) - 1
    chunk_shape = ranges[:-1] + [ranges[-1] // width if isinstance(ranges[-1], int) else
                                 arith.DivUIOp(ranges[-1], index_const(width)).result]
    chunks = []  # (valid, or None when always; ivs of lane 0)
    for k in range(vectors):
        linear = first
        if k:
            offset = index_const(k * static_stride) if static_stride is not None else \
                arith.MulIOp(stride, index_const(k)).result
            linear = arith.AddIOp(first, offset).result
        # chunk 0 of a grid-stride loop is in range (the loop's bound)
        check = k > 0 if static_stride is None else (k + 1) * static_stride > count
        valid = None
        if check:  # out-of-range chunks read chunk 0, store nothing
            valid = arith.CmpIOp(arith.CmpIPredicate.ult, linear, index_const(count)).result
            linear = arith.SelectOp(valid, linear, index_const(0)).result
        ivs = delinearize(linear, chunk_shape)
        ivs[last] = arith.MulIOp(ivs[last], index_const(width)).result
        chunks.append((valid, ivs))
    access = ChunkAccess(scope, width, last, lambda value, amap: typer(value, amap, width))
    points = [access.lane_point(ivs, lane) for _, ivs in chunks for lane in range(width)]
    # operands: (memref, map) read per lane; per chunk; or one value
    read = [(v, m) for v, m in zip(ins, maps)] + \
        [(o, m) for o, m, a in zip(outs, out_maps, args[len(ins):]) if _used(a)]
    vector_reads = [(v, m) for v, m in read if isinstance(v.type, ir.MemRefType) and
                    any(last in dims(e) for e in m.results)]
    written = list(zip(outs, out_maps))
    # each buffer's alignment checked once
    ok = access.aligned(list(dict(vector_reads + written).items()), is_aligned)
    lane_points = [points[k * width:(k + 1) * width] for k in range(len(chunks))]
    by_lane = {key: [value for lanes in chunk_lanes for value in lanes] for key, chunk_lanes
               in access.load(vector_reads, lane_points, ok).items()}
    per_chunk = {}
    for value, amap in read:
        if isinstance(value.type, ir.MemRefType) and (value, str(amap)) not in by_lane:
            per_chunk[(value, str(amap))] = [scope.load(value, apply_map(amap, ivs))
                                             for _, ivs in chunks]

    def at(value, amap, p):
        if not isinstance(value.type, ir.MemRefType):
            return scope.value(value)
        if (value, str(amap)) in by_lane:
            return by_lane[(value, str(amap))][p]
        return per_chunk[(value, str(amap))][p // width]

    results = []
    for p, ivs in enumerate(points):
        values = [at(v, m, p) for v, m in zip(ins, maps)] + \
            [at(o, m, p) if _used(a) else _undef(a.type)
             for o, m, a in zip(outs, out_maps, args[len(ins):])]
        results.append(scope.clone_body(generic, values, lambda d, ivs=ivs: ivs[d]))
    access.store([[[results[p][n] for p in range(k * width, (k + 1) * width)]
                   for n in range(len(outs))] for k in range(len(chunks))],
                 written, lane_points, ok, [valid for valid, _ in chunks])


def emit_point(generic: ir.Operation, scope: KernelScope, ivs: list, reduction: list[int],
               ranges: list[int], initial: float | None = None) -> None:
    """Compute and store the generic's outputs at one point of its parallel loops
    (`ivs` set for the parallel dims), looping over the reduction dims in order; the
    reduction of one output starts from `initial` where given, else from the output."""
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    out_maps = maps[len(ins):]
    block_args = list(generic.regions[0].blocks[0].arguments)

    def read_ins(points) -> list[ir.Value]:
        values = []
        for value, amap in zip(ins, maps):
            if isinstance(value.type, ir.MemRefType):
                values.append(scope.load(value, apply_map(amap, points)))
            else:
                values.append(scope.value(value))
        return values

    if not reduction:
        out_values = [scope.load(buf, apply_map(amap, ivs)) if _used(arg) else _undef(arg.type)
                      for buf, amap, arg in zip(outs, out_maps, block_args[len(ins):])]
        results = scope.clone_body(generic, read_ins(ivs) + out_values, lambda d: ivs[d])
    else:
        # Outputs do not depend on reduction loops: read them once, carry them through.
        partial = [scope.load(buf, apply_map(amap, _zero_unset(ivs))) if initial is None
                   else fill_value(ir.MemRefType(buf.type).element_type, initial)
                   for buf, amap in zip(outs, out_maps)]
        contraction = _half_contraction(generic)
        if contraction is None:
            results = _reduction_loops(generic, scope, ivs, reduction, ranges, partial,
                                       lambda point, carried: scope.clone_body(
                                           generic, read_ins(point) + carried,
                                           lambda d: point[d]))
        else:  # as the GEMM strategies: products summed in f32, rounded once
            f32 = ir.F32Type.get()
            zero = arith.ConstantOp(f32, ir.FloatAttr.get(f32, 0.0)).result
            total = _reduction_loops(generic, scope, ivs, reduction, ranges, [zero],
                                     lambda point, carried: _add_product(
                                         generic, scope, contraction, read_ins(point),
                                         point, carried[0]))
            results = [add_and_round(partial[0], total[0], partial[0].type)]
    for value, buf, amap in zip(results, outs, out_maps):
        scope.store(value, buf, apply_map(amap, _zero_unset(ivs)))


def _zero_unset(ivs: list) -> list:
    """Loop variables with the reduction loops' (unused by output maps) set to 0."""
    return [iv if iv is not None else index_const(0) for iv in ivs]


def _reduction_loops(generic, scope, ivs, reduction, ranges, carried, step):
    """The reduction loops around `step(point, carried) -> new carried values`."""
    if not reduction:
        return step(ivs, carried)
    dim, rest = reduction[0], reduction[1:]
    loop = scf.ForOp(index_const(0), as_index(ranges[dim]), index_const(1), carried)
    with ir.InsertionPoint(loop.body):
        inner = list(ivs)
        inner[dim] = loop.induction_variable
        results = _reduction_loops(generic, scope, inner, rest, ranges,
                                   list(loop.inner_iter_args), step)
        scf.YieldOp(results)
    return list(loop.results)


def _half_contraction(generic: ir.Operation):
    """(mulf, addf) of a multiply-add body with an f16 / bf16 output, else None: such a
    sum keeps 8 (bf16) or 11 (f16) bits per addition where a GEMM strategy keeps f32's
    24, so the same program would round differently by the strategy its shape chose."""
    found = multiply_add_body(generic)
    out = generic.regions[0].blocks[0].arguments[-1]
    return found if found is not None and str(out.type) in ("f16", "bf16") else None


def _add_product(generic, scope: KernelScope, contraction, inputs: list, point: list,
                 total: ir.Value) -> list[ir.Value]:
    """[total + a * b] in f32, a and b the body's factors at `point`, widened."""
    mul, add = contraction
    local = scope.clone_ops(generic, inputs + [None], lambda d: point[d], skip=[mul, add])
    a, b = (widen(local[v]) for v in mul.operands)
    return [arith.AddFOp(total, arith.MulFOp(a, b).result).result]


def _used(arg: ir.Value) -> bool:
    return any(True for _ in arg.uses)


def _undef(type_: ir.Type) -> ir.Value:
    """A stand-in for an output block argument the body never reads."""
    from mlir.dialects import ub
    return ub.PoisonOp(type_).result
