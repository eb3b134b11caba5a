"""Row registers: a row_fused group's generics on the points of the row each thread owns.

With a plan (row_points.py), thread t of block B takes the same points in every generic
of the group, K chunks of W neighbouring columns:

    chunk k of thread t: columns (k * B + t) * W + lane, lane < W   (coalesced)

so each generic's values at the thread's points are SSA values the later generics use
directly. A buffer is loaded once per thread at its first read (16-byte loads of a
chunk when the buffer is aligned, checked at run time; scalar loads otherwise) and
stored once, by its last writer, unless it is private to the group. For the softmax
over rows of 2048 (B = 256, W = 4):

    x: 2 vector loads -> 8 values per thread     (read once from DRAM)
    max: fold the 8, block reduce; exp: 8 values, kept; sum: fold them, block reduce
    divide: 8 values -> 2 vector stores          (the exp values never reach memory)

A per-row buffer the group writes (a reduction's result, a fill, a scale computed from
them) is held too: every thread computes a fill, and a reduction's total reaches every
thread (row_reduce.block_totals: shuffles, one barrier and shared memory between warps,
none for a warp per row); thread 0 stores it unless it is private. So no generic reads
what another thread wrote, and the group needs no barriers between generics.

A body's gathers that read a chunk whole (row_gathers.py) take the values the thread
holds (its own chunk), those another lane of the warp holds (a shuffle), or one load of
the chunk read; such a load that does not depend on the row loop a warp's rows differ in
is made once for them (RowInvariants).

The last chunk of a row whose length is no multiple of B * W is guarded: its loads read
column 0 instead, reductions skip it, stores do not happen. A row of run-time length
(a plan with a `bound`) guards every chunk against the length the kernel is given, which
the launch found a multiple of W.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, ub, vector

from .kernel_builder import (REDUCTION, KernelScope, apply_map, delinearize,
                                  generic_operands, identity_layout, index_const,
                                  indexing_maps, iterator_kinds, kernel_type)
from . import row_reduce
from .extents import loop_extents
from .body_slices import backward_slice
from .row_gathers import chunk_gathers
from .row_points import Plan, dims, row_map, row_only
from .row_reduce import WARP


@dataclass
class RowInvariants:
    """What a thread loads once for several rows that differ in one row loop only
    (`varying`): the loads of buffers the group does not write whose indices do not
    use that loop (a weight, RoPE's angle tables across heads)."""
    varying: int
    written: frozenset
    values: dict = field(default_factory=dict)  # load key -> its values at the points

    def cache(self, buffer: ir.Value, loops: set) -> dict | None:
        """Where a load of `buffer` at indices using `loops` is kept, or None."""
        return None if self.varying in loops or buffer in self.written else self.values


class RowRegisters:
    """Emits generics of a planned group at the thread's points; holds their values."""

    def __init__(self, plan: Plan, scope: KernelScope, row_ivs: list[ir.Value], tid: ir.Value,
                 length: ir.Value | None = None, chunk_gathers: bool = True,
                 moved_gathers: bool = True, invariants: RowInvariants | None = None,
                 lane_gathers: bool = True):
        """`length`: the row's run-time length, for a plan with a `bound`;
        `chunk_gathers`: take gathers within a point's own chunk from registers;
        `moved_gathers`: and load those that read another chunk whole by chunks;
        `invariants`: loads shared with the other rows the thread takes;
        `lane_gathers`: take a moved gather's chunk from the lane holding it."""
        self.plan, self.scope, self.row_ivs, self.tid = plan, scope, list(row_ivs), tid
        self.invariants = invariants
        self.chunk_gathers = chunk_gathers and holds_chunks(plan)
        self.moved_gathers = takes_moved_gathers(plan, chunk_gathers, moved_gathers)
        self.lane_gathers = lane_gathers
        width, block = plan.width, plan.block
        first = arith.MulIOp(tid, index_const(width)).result if width > 1 else tid
        self.chunks: list[tuple] = []  # (valid, or None when always; ivs of lane 0)
        for k in range(plan.chunks):
            start = arith.AddIOp(first, index_const(k * block * width)).result if k else first
            valid = None
            if plan.bound is not None or (k + 1) * block * width > plan.length:
                limit = length if plan.bound is not None else index_const(plan.length)
                valid = arith.CmpIOp(arith.CmpIPredicate.ult, start, limit).result
                start = arith.SelectOp(valid, start, index_const(0)).result
            self.chunks.append((valid, self.row_ivs + delinearize(start, plan.row_shape)))
        self.points: list[tuple] = [(valid, point) for valid, ivs in self.chunks
                                    for point in self._lanes(ivs)]  # chunk by chunk
        self.values: dict = {}  # (buffer, map text) -> its value at each point
        self.rows: dict = {}  # row buffer -> its value at the block's row

    def emit(self, index: int, generic: ir.Operation, partials) -> None:
        if REDUCTION in iterator_kinds(generic):
            self._reduce(generic, partials)
        elif len(iterator_kinds(generic)) == self.plan.rank:
            self._row_map(generic)
        else:
            self._map(index, generic)

    def _reduce(self, generic: ir.Operation, partials) -> None:
        ins, outs = generic_operands(generic)
        maps = indexing_maps(generic)
        at_points = self._operands(ins, maps)
        start = row_reduce.identities(generic)
        accs = start
        for p, (valid, ivs) in enumerate(self.points):
            folded = row_reduce.fold_point(generic, self.scope, accs,
                                           [values[p] for values in at_points],
                                           lambda d, ivs=ivs: ivs[d])
            accs = folded if valid is None else \
                [arith.SelectOp(valid, new, old).result for new, old in zip(folded, accs)]
        # the outputs' values before this reduction, read before the block's totals
        # (their shuffles and barrier): read after them, a thread could see the value
        # thread 0 has already stored (an accumulator the group did not fill itself)
        before = [self._row_value(out, amap) for out, amap in zip(outs, maps[len(ins):])]
        totals = row_reduce.block_totals(generic, self.plan.block, partials, accs, self.tid,
                                         start)
        for out, amap, old, total, combine in zip(outs, maps[len(ins):], before, totals,
                                                  row_reduce.combiners_of(generic)):
            self._set_row(out, amap, combine(old, total))

    def _row_map(self, generic: ir.Operation) -> None:
        """A generic over the row loops alone (a fill, a per-row scale): every thread
        computes the row's value."""
        ins, outs = generic_operands(generic)
        maps = indexing_maps(generic)
        args = generic.regions[0].blocks[0].arguments[len(ins):]
        values = [self._row_value(v, m) for v, m in zip(ins, maps)]
        values += [self._row_value(o, m) if any(True for _ in a.uses)
                   else ub.PoisonOp(a.type).result
                   for o, m, a in zip(outs, maps[len(ins):], args)]
        results = self.scope.clone_body(generic, values, lambda d: self.row_ivs[d])
        for out, amap, value in zip(outs, maps[len(ins):], results):
            self._set_row(out, amap, value)

    def _row_value(self, value: ir.Value, amap: ir.AffineMap) -> ir.Value:
        """`value` (a scalar, or a buffer under a map of the row loops alone) at the
        block's row: held when the group computed it, else loaded."""
        if not isinstance(value.type, ir.MemRefType):
            return self.scope.value(value)
        if row_map(amap, self.plan.rank) and value in self.rows:
            return self.rows[value]
        return self.scope.load(value, apply_map(amap, self.row_ivs +
                                                [index_const(0)] * len(self.plan.row_shape)))

    def _set_row(self, buffer: ir.Value, amap: ir.AffineMap, value: ir.Value) -> None:
        """Hold a row buffer's new value; thread 0 stores it unless it is private."""
        self.rows[buffer] = value  # (the plan: written row buffers are at the row only)
        if buffer in self.plan.private:
            return
        first = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, self.tid,
                                      index_const(0)).result)
        with ir.InsertionPoint(first.then_block):
            self.scope.store(value, buffer, apply_map(amap, self.row_ivs +
                                                      [index_const(0)] *
                                                      len(self.plan.row_shape)))
            scf.YieldOp([])

    def _map(self, index: int, generic: ir.Operation) -> None:
        ins, outs = generic_operands(generic)
        maps = indexing_maps(generic)
        out_maps = maps[len(ins):]
        args = generic.regions[0].blocks[0].arguments[len(ins):]
        at_points = self._operands(ins, maps)
        for out, amap, arg in zip(outs, out_maps, args):
            used = any(True for _ in arg.uses)
            at_points.append(self._at_points(out, amap) if used
                             else [ub.PoisonOp(arg.type).result] * len(self.points))
        gathered = self._gathered(generic) if self.chunk_gathers else {}
        results = [self.scope.clone_body(generic, [values[p] for values in at_points],
                                         lambda d, ivs=ivs: ivs[d],
                                         known={r: v[p] for r, v in gathered.items()})
                   for p, (_, ivs) in enumerate(self.points)]
        for k, (out, amap) in enumerate(zip(outs, out_maps)):
            values = [result[k] for result in results]
            self.values[(out, str(amap))] = values
            if (index, k) in self.plan.stores:
                self._store(out, amap, values)

    def _gathered(self, generic: ir.Operation) -> dict:
        """The body's gathers that read a chunk whole (row_gathers.py): each one's value
        at each point, from the buffer's values the thread holds at its points (the
        point's own chunk) or from a load of the chunk read."""
        width, rank = self.plan.width, self.plan.rank
        found = {}
        for gather in chunk_gathers(generic, rank, loop_extents(generic), width,
                                    moved=self.moved_gathers):
            layout = ir.AffineMap.get(rank + 1, 0, [ir.AffineDimExpr.get(d) for d in
                                                    gather.dims + (rank,)])
            if gather.own:
                held = self._at_points(gather.buffer, layout)
            elif self._from_lanes(gather, layout):
                held = self._shuffled(generic, gather, layout)
            else:
                held = self._shared(gather.buffer, set(gather.dims), gather.load.results[0],
                                    lambda: self._load_moved(generic, gather, layout))
            found[gather.load.results[0]] = [held[k * width + lane]
                                             for k in range(self.plan.chunks)
                                             for lane in gather.lanes]
        return found

    def _from_lanes(self, gather, layout: ir.AffineMap) -> bool:
        """Whether the chunk a moved gather reads is held by another lane of the warp
        (which holds the whole row, a chunk a lane): the buffer's values at the
        thread's points are held already (32-bit)."""
        element = ir.MemRefType(gather.buffer.type).element_type
        return self.lane_gathers and element.width == 32 and \
            (gather.buffer, str(layout)) in self.values

    def _shuffled(self, generic: ir.Operation, gather, layout: ir.AffineMap
                  ) -> list[ir.Value]:
        """The chunk a moved gather reads, from the lane holding it (a shuffle a value
        the gather uses)."""
        own = self.values[(gather.buffer, str(layout))]
        i32 = ir.IntegerType.get_signless(32)
        start = self._moved_starts(generic, gather)[0][-1]
        lane = arith.IndexCastOp(i32, arith.DivUIOp(
            start, index_const(self.plan.width)).result).result
        warp = arith.ConstantOp(i32, WARP).result
        return [gpu.ShuffleOp(value, lane, warp, gpu.ShuffleMode.IDX).results[0]
                if j in gather.lanes else value for j, value in enumerate(own)]

    def _shared(self, buffer: ir.Value, loops: set, key, load) -> list[ir.Value]:
        """`load()`, or its values from an earlier row where they are the same."""
        cache = self.invariants.cache(buffer, loops) if self.invariants else None
        if cache is None:
            return load()
        if key not in cache:
            cache[key] = load()
        return cache[key]

    def _load_moved(self, generic: ir.Operation, gather, layout: ir.AffineMap
                    ) -> list[ir.Value]:
        """The chunk each of the thread's chunks reads through `gather` (not its own),
        lane by lane, loaded."""
        starts = self._moved_starts(generic, gather)
        points = [point for ivs in starts for point in self._lanes(ivs)]
        return self._load_chunks(gather.buffer, layout, starts, points)

    def _lanes(self, ivs: list) -> list[list]:
        """The loop values of the W points of the chunk whose first point is `ivs`."""
        return [ivs[:-1] + [arith.AddIOp(ivs[-1], index_const(lane)).result
                            if lane else ivs[-1]] for lane in range(self.plan.width)]

    def _moved_starts(self, generic: ir.Operation, gather) -> list[list[ir.Value]]:
        """Per chunk of the thread, the loop values of the first point of the chunk
        `gather` reads: the gather's last index at the chunk's first point, less the
        lane that point reads."""
        ops, _ = backward_slice(generic, [gather.last_index])
        starts = []
        for _, ivs in self.chunks:
            first = self.scope.clone_slice(ops, {}, lambda d, ivs=ivs: ivs[d])
            start = first[gather.last_index]
            if gather.lanes[0]:
                start = arith.SubIOp(start, index_const(gather.lanes[0])).result
            starts.append(ivs[:-1] + [start])
        return starts

    def _operands(self, values: list[ir.Value], maps: list[ir.AffineMap]) -> list[list]:
        """Each operand's value at each point: held, loaded, or the same for the row."""
        found = []
        count = len(self.points)
        for value, amap in zip(values, maps):
            if not isinstance(value.type, ir.MemRefType):
                found.append([self.scope.value(value)] * count)
            elif row_only(amap, self.plan.rank):  # held or loaded once, not at each point
                found.append([self._row_value(value, amap)] * count)
            else:
                found.append(self._at_points(value, amap))
        return found

    def _at_points(self, buffer: ir.Value, amap: ir.AffineMap) -> list[ir.Value]:
        key = (buffer, str(amap))
        if key not in self.values:
            loops = {d for e in amap.results for d in dims(e)}
            self.values[key] = self._shared(buffer, loops, key,
                                            lambda: self._load(buffer, amap))
        return self.values[key]

    def _load(self, buffer: ir.Value, amap: ir.AffineMap) -> list[ir.Value]:
        return self._load_chunks(buffer, amap, [ivs for _, ivs in self.chunks],
                                 [ivs for _, ivs in self.points])

    def _load_chunks(self, buffer: ir.Value, amap: ir.AffineMap, starts: list,
                     points: list) -> list[ir.Value]:
        """`buffer` under `amap` at `points` (loop values), W neighbours from each of
        `starts` (a chunk's first point): one vector load a chunk where aligned."""
        width = self.plan.width

        def scalars():
            return [self.scope.load(buffer, apply_map(amap, ivs)) for ivs in points]
        vec = self._vector_type(buffer, amap)
        if vec is None:
            return scalars()
        element = ir.MemRefType(buffer.type).element_type
        branch = scf.IfOp(self._aligned(buffer, vec), [element] * (len(starts) * width),
                          has_else=True)
        with ir.InsertionPoint(branch.then_block):
            aligned = as_global(self.scope.value(buffer))
            values = []
            for ivs in starts:
                loaded = vector.LoadOp(vec, aligned, apply_map(amap, ivs),
                                       alignment=vector_bytes(vec)).result
                values += [vector.ExtractOp(loaded, [], [lane]).result
                           for lane in range(width)]
            scf.YieldOp(values)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(scalars())
        return list(branch.results)

    def _store(self, buffer: ir.Value, amap: ir.AffineMap, values: list[ir.Value]) -> None:
        width = self.plan.width

        def scalars():
            for k, (valid, _) in enumerate(self.chunks):
                with only_if(valid):
                    for p in range(k * width, (k + 1) * width):
                        self.scope.store(values[p], buffer, apply_map(amap, self.points[p][1]))
        vec = self._vector_type(buffer, amap)
        if vec is None:
            scalars()
            return
        branch = scf.IfOp(self._aligned(buffer, vec), [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            aligned = as_global(self.scope.value(buffer))
            for k, (valid, ivs) in enumerate(self.chunks):
                with only_if(valid):
                    chunk = vector.FromElementsOp(vec, values[k * width:(k + 1) * width])
                    vector.StoreOp(chunk.result, aligned, apply_map(amap, ivs),
                                   alignment=vector_bytes(vec))
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            scalars()
            scf.YieldOp([])

    def _vector_type(self, buffer: ir.Value, amap: ir.AffineMap):
        # a run-time row length: the launch found it a multiple of the width, so a
        # row-major buffer's run-time strides are too (a view's may not be)
        return vector_type(buffer, amap, self.plan.width,
                           run_time_strides=self.plan.bound is not None and
                           identity_layout(buffer.type))

    def _aligned(self, buffer: ir.Value, vec: ir.Type) -> ir.Value:
        return aligned(self.scope, buffer, vec)


def holds_chunks(plan: Plan) -> bool:
    """Whether gathers of a point's own chunk may come from the registers holding it: a
    static row of one loop, in chunks of several columns."""
    return plan.bound is None and plan.width > 1 and len(plan.row_shape) == 1


def takes_moved_gathers(plan: Plan, chunk_gathers: bool, moved_gathers: bool) -> bool:
    """Whether gathers of another whole chunk are taken by chunks (with `chunk_gathers`
    and `moved_gathers`, row_fused's Params): where a warp holds the row, a chunk a
    lane. (Loading another chunk lost to the 4-byte gathers where no lane held it and
    no row shared the load: 0.089 against 0.084 ms on an H200, Session 28.)"""
    return chunk_gathers and moved_gathers and holds_chunks(plan) and \
        plan.block == WARP and plan.chunks == 1


def vector_type(buffer: ir.Value, amap: ir.AffineMap, width: int,
                run_time_strides: bool = False, loop: int | None = None):
    """vector<`width` x element> when a chunk of `buffer` under `amap` is `width`
    contiguous elements at a multiple of `width` (the chunk's loop, `loop` or else the
    last, indexes the last dimension, alone; static strides, or with `run_time_strides`
    strides and offset the kernel checks: pointwise_dynamic.py); None otherwise."""
    memref_type = ir.MemRefType(buffer.type)
    element = memref_type.element_type
    if width == 1 or kernel_type(buffer.type) != buffer.type or \
            memref_type.memory_space is not None or \
            not isinstance(element, (ir.FloatType, ir.IntegerType)):
        return None
    bits = element.width
    results = list(amap.results)
    last = amap.n_dims - 1 if loop is None else loop
    if bits < 8 or width * bits > 128 or not results or \
            not isinstance(results[-1], ir.AffineDimExpr) or \
            ir.AffineDimExpr(results[-1]).position != last or \
            any(last in dims(e) for e in results[:-1]):
        return None
    strides, offset = memref_type.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if strides[-1] != 1 or any((not run_time_strides if s == dynamic else s % width)
                               for s in strides[:-1] + [offset]):
        return None
    return ir.VectorType.get([width], element)


def aligned(scope: KernelScope, buffer: ir.Value, vec: ir.Type) -> ir.Value:
    """Whether the kernel's `buffer` starts at a multiple of a chunk's bytes (a view
    or a borrowed array need not)."""
    pointer = memref.ExtractAlignedPointerAsIndexOp(scope.value(buffer)).result
    rest = arith.RemUIOp(pointer, index_const(vector_bytes(vec))).result
    return arith.CmpIOp(arith.CmpIPredicate.eq, rest, index_const(0)).result


def as_global(buffer: ir.Value) -> ir.Value:
    """`buffer` in the global address space: LLVM splits a vector load read lane by
    lane into scalar loads, and would then merge them with the unaligned branch's, losing
    their alignment; loads from another address space stay apart (and 16 bytes wide)."""
    memref_type = ir.MemRefType(buffer.type)
    space = ir.Attribute.parse("#gpu.address_space<global>")
    cast_type = ir.MemRefType.get(memref_type.shape, memref_type.element_type,
                                  memref_type.layout, space)
    return memref.MemorySpaceCastOp(cast_type, buffer).result


def vector_bytes(vec: ir.Type) -> int:
    vec = ir.VectorType(vec)
    return vec.shape[0] * vec.element_type.width // 8


@contextmanager
def only_if(condition):
    if condition is None:
        yield
        return
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        yield
        scf.YieldOp([])
