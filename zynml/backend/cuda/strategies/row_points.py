"""Row points: whether a row_fused group can keep its rows in registers, and how.

A group qualifies when every generic with loops past the row walks the same row shape
(the same trailing ranges), and each buffer the group writes is accessed either only at
the block's own points (identity maps: the row, then the point in it) or only at the
row itself (maps giving the row loops alone: reduction results, fills). Then every
generic can give thread t the same points of the row (see row_registers.py), so a
point's values stay in the thread that made them:

    threads B (`block`, grown while a thread would hold more than `max_points` values,
    up to `max_block`; `wide_block` instead of `max_block` where its threads hold at most
    `wide_points`), chunk width W (4: 16-byte accesses where the row's last extent
    allows), K = ceil(L / (B W)) chunks per thread: K * W values per buffer, at most
    `max_points` (`wide_points` in such a wide block)

A point buffer's last writer in the group stores it, a row buffer's writers (thread 0)
each time; a `memref.alloc` that only the group uses, and reads only after writing, is
never stored at all (`private`). Values the group computes are read from registers, never from memory, so its generics
need no barriers between them: a reduction's one barrier is the block's only kind.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlir import ir

from ....lowering.cir_ops import defining_op
from .extents import extent_keys
from .kernel_builder import (REDUCTION, KernelSignature, generic_operands,
                                  indexing_maps, iterator_kinds)
from .row_reduce import WARP

POINT, ROW, OTHER = "point", "row", "other"
_VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.expand_shape",
          "memref.collapse_shape", "memref.view", "memref.transpose")


@dataclass
class Plan:
    rank: int             # row loops (a block per row)
    row_shape: list       # the trailing loops of every generic that has them (numbers,
    #                       or one extent key of a run-time length: `bound` is set)
    block: int            # threads B
    width: int            # W: neighbouring columns a thread takes at once
    chunks: int           # K: chunks of W per thread
    stores: set = field(default_factory=set)   # (generic index, output index) to store
    private: set = field(default_factory=set)  # buffers kept in registers only
    bound: int | None = None  # a run-time row length: at most this (B * W * K)

    @property
    def length(self) -> int:
        """The row's points, or the most a run-time row may have."""
        return self.bound if self.bound is not None else math.prod(self.row_shape)


@dataclass
class _Access:
    index: int  # of the generic in the group
    buffer: ir.Value
    kind: str
    reads: bool
    writes: bool
    map: ir.AffineMap


def plan(group: list[ir.Operation], rank: int, params, chunks: int | None = None
         ) -> Plan | None:
    """The register plan of `group` (rows of `rank` loops), or None: go through memory.
    `params`: row_fused.Params (block, max_points, max_block, wide_block, wide_points,
    vector). A row of run-time length (one loop) takes `chunks` chunks of
    `params.vector` columns per thread of a `params.block` block: the plan holds rows of
    at most block * vector * chunks points (`bound`), and the launch tests the length
    (that it fits, and is a multiple of the chunk's columns)."""
    shapes = {tuple(extent_keys(g)[rank:]) for g in group if len(extent_keys(g)) > rank}
    if len(shapes) != 1:
        return None
    row_shape = list(shapes.pop())
    if not all(isinstance(n, int) for n in row_shape):
        width = params.vector
        if chunks is None or len(row_shape) != 1 or chunks * width > params.max_points:
            return None
        return _finish(Plan(rank, row_shape, params.block, width, chunks,
                            bound=params.block * width * chunks), group, rank)
    length = math.prod(row_shape)
    width = params.vector if row_shape[-1] % params.vector == 0 else 1
    leading = next(keys[:rank] for keys in map(extent_keys, group) if len(keys) > rank)
    many_rows = not all(isinstance(n, int) for n in leading) or \
        math.prod(leading) >= params.warp_min_rows
    if many_rows and -(-length // (WARP * width)) * width <= params.warp_points:
        block = WARP  # a warp holds the row (row_fused: warp_rows rows a block)
    else:
        block = min(params.block, max(WARP, 1 << (-(-length // width) - 1).bit_length()))
    while -(-length // (block * width)) * width > params.max_points and \
            block < params.max_block:
        block *= 2
    limit = params.max_points
    wide = -(-length // (params.wide_block * width)) * width  # a wide block's values
    if block == params.max_block > params.wide_block and \
            params.max_points < wide <= params.wide_points:
        block, limit = params.wide_block, params.wide_points
    chunks = -(-length // (block * width))
    if chunks * width > limit:
        return None
    return _finish(Plan(rank, row_shape, block, width, chunks), group, rank)


def _finish(result: Plan, group: list[ir.Operation], rank: int) -> Plan | None:
    """`result` with what it stores and keeps private, or None where the group's
    accesses are not the block's own points and row."""
    accesses = _accesses(group, rank, rank + len(result.row_shape))
    if accesses is None:
        return None
    written = {a.buffer for a in accesses if a.writes}
    points, rows = set(), set()
    for buffer in written:
        kinds = {a.kind for a in accesses if a.buffer == buffer}
        if kinds == {POINT}:
            points.add(buffer)
        elif kinds == {ROW} and all(row_map(a.map, rank) for a in accesses
                                    if a.buffer == buffer):
            rows.add(buffer)
        else:
            return None
    if _views_of(group, written):
        return None
    result.private = {b for b in points | rows if _private(b, group, accesses)}
    last_writer = {a.buffer: a.index for a in accesses if a.writes}
    for index, generic in enumerate(group):
        _, outs = generic_operands(generic)
        for k, out in enumerate(outs):
            if out in points and out not in result.private and last_writer[out] == index:
                result.stores.add((index, k))
    return result


def kind(amap: ir.AffineMap, rank: int, point_dims: int) -> str:
    """POINT: the identity of a generic over the row and its points; ROW: only the row
    loops appear; OTHER: anything else."""
    if row_only(amap, rank):
        return ROW
    if amap.n_dims == point_dims and amap == ir.AffineMap.get_identity(point_dims):
        return POINT
    return OTHER


def row_only(amap: ir.AffineMap, rank: int) -> bool:
    """Only the row loops (d0 .. d{rank-1}) appear in `amap`: one value per row."""
    return all(d < rank for e in amap.results for d in dims(e))


def row_map(amap: ir.AffineMap, rank: int) -> bool:
    """`amap` gives the row loops themselves, d0 .. d{rank-1}, and nothing else: the
    block's own row of a per-row buffer (held in registers: row_registers.py)."""
    results = list(amap.results)
    return len(results) == rank and all(
        isinstance(e, ir.AffineDimExpr) and ir.AffineDimExpr(e).position == k
        for k, e in enumerate(results))


def _accesses(group: list, rank: int, point_dims: int) -> list[_Access] | None:
    """Every memref operand of the group; None where a generic writes in a way the
    register path does not do (a map writing per row, a reduction writing per point)."""
    found = []
    for index, generic in enumerate(group):
        ins, outs = generic_operands(generic)
        args = generic.regions[0].blocks[0].arguments
        reduction = REDUCTION in iterator_kinds(generic)
        per_point = len(iterator_kinds(generic)) > rank
        for k, (value, amap) in enumerate(zip(ins + outs, indexing_maps(generic))):
            if not isinstance(value.type, ir.MemRefType):
                continue
            output = k >= len(ins)
            access_kind = kind(amap, rank, point_dims)
            if output and per_point and access_kind != (ROW if reduction else POINT):
                return None
            used = any(True for _ in args[k].uses)
            found.append(_Access(index, value, access_kind, not output or used, output,
                                 amap))
    return found


def _private(buffer: ir.Value, group: list, accesses: list[_Access]) -> bool:
    """An allocation only the group uses, every read of it after a write."""
    owner = defining_op(buffer)
    if owner is None or owner.name != "memref.alloc":
        return False
    members = [g.operation for g in group]
    if any(use.owner.operation not in members for use in buffer.uses):
        return False
    mine = [a for a in accesses if a.buffer == buffer]
    first_write = min(a.index for a in mine if a.writes)
    return all(a.index > first_write for a in mine if a.reads)


def _views_of(group: list, written: set) -> bool:
    """Whether the group reads a view of a buffer it writes (values we would not see)."""
    for value in KernelSignature.of(group).values:
        root = value
        while defining_op(root) is not None and defining_op(root).name in _VIEWS:
            root = defining_op(root).operands[0]
        if root is not value and root in written:
            return True
    return False


def dims(expr: ir.AffineExpr) -> set[int]:
    """The loops an affine expression of loop variables uses."""
    if isinstance(expr, ir.AffineDimExpr):
        return {ir.AffineDimExpr(expr).position}
    for binary in (ir.AffineAddExpr, ir.AffineMulExpr, ir.AffineModExpr,
                   ir.AffineFloorDivExpr, ir.AffineCeilDivExpr):
        if isinstance(expr, binary):
            expr = binary(expr)
            return dims(expr.lhs) | dims(expr.rhs)
    return set()
