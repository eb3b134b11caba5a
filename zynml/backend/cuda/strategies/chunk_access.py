"""Loads and stores of chunks: W neighbouring points along one loop, one vector access
each where every buffer is aligned to it, else one scalar access a point.

pointwise's elementwise vector path and its many-output sums (pointwise_vector_sums.py)
both read and write this way: which buffers are aligned is known only at run time (a
view or a borrowed array need not be), so each access is a branch on one condition,
`ok`, with the vector accesses on one side and the same points' scalar accesses on the
other.
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import arith, scf, vector

from .kernel_builder import KernelScope, apply_map, index_const
from .row_registers import as_global, only_if, vector_bytes

__all__ = ["ChunkAccess"]


class ChunkAccess:
    """Chunks of `lanes` points along loop `loop`; a chunk is named by its first point
    (the loops' values there). `chunk_type(memref, map)` is an operand's vector type."""

    def __init__(self, scope: KernelScope, lanes: int, loop: int,
                 chunk_type: Callable[[ir.Value, ir.AffineMap], ir.Type]):
        self.scope, self.lanes, self.loop, self.chunk_type = scope, lanes, loop, chunk_type

    def aligned(self, operands: list, is_aligned) -> ir.Value:
        """Whether every (memref, map) of `operands` takes its vector accesses:
        `is_aligned(scope, memref, vector type)` of each, and-ed."""
        ok = None
        for value, amap in operands:
            here = is_aligned(self.scope, value, self.chunk_type(value, amap))
            ok = here if ok is None else arith.AndIOp(ok, here).result
        return ok

    def lane_index(self, point: list, d: int, lane: int) -> ir.Value:
        """Loop `d`'s value at point `lane` of the chunk that starts at `point`."""
        if d != self.loop or lane == 0:
            return point[d]
        return arith.AddIOp(point[d], index_const(lane)).result

    def lane_point(self, point: list, lane: int) -> list:
        return [self.lane_index(point, d, lane) for d in range(len(point))]

    def lanes_of(self, point: list) -> list:
        """The points of the chunk that starts at `point`, lane 0's first."""
        return [self.lane_point(point, lane) for lane in range(self.lanes)]

    def load(self, operands: list, chunks: list, ok: ir.Value) -> dict:
        """{(memref, str(map)): per chunk, its lanes' values} of `chunks` (each the
        points of its lanes, `lanes_of`), from one branch on `ok`."""
        if not operands:
            return {}
        types = [ir.MemRefType(value.type).element_type
                 for value, _ in operands for _ in chunks for _ in range(self.lanes)]
        branch = scf.IfOp(ok, types, has_else=True)
        with ir.InsertionPoint(branch.then_block):
            loaded = []
            for value, amap in operands:
                chunk_type = self.chunk_type(value, amap)
                view = as_global(self.scope.value(value))
                for points in chunks:
                    chunk = vector.LoadOp(chunk_type, view, apply_map(amap, points[0]),
                                          alignment=vector_bytes(chunk_type)).result
                    loaded += [vector.ExtractOp(chunk, [], [lane]).result
                               for lane in range(self.lanes)]
            scf.YieldOp(loaded)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([self.scope.load(value, apply_map(amap, point))
                         for value, amap in operands for points in chunks
                         for point in points])
        results, n = list(branch.results), 0
        by_operand = {}
        for value, amap in operands:
            by_operand[(value, str(amap))] = [results[n + k * self.lanes:
                                                      n + (k + 1) * self.lanes]
                                              for k in range(len(chunks))]
            n += len(chunks) * self.lanes
        return by_operand

    def store(self, values: list, operands: list, chunks: list, ok: ir.Value,
              valid: list | None = None) -> None:
        """values[k][n]: chunk k's lanes of operand n, stored at `chunks[k]` (the points
        of its lanes) where valid[k] holds (None: always)."""
        valid = valid or [None] * len(chunks)
        branch = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            for n, (value, amap) in enumerate(operands):
                chunk_type = self.chunk_type(value, amap)
                view = as_global(self.scope.value(value))
                for k, points in enumerate(chunks):
                    with only_if(valid[k]):
                        chunk = vector.FromElementsOp(chunk_type, values[k][n]).result
                        vector.StoreOp(chunk, view, apply_map(amap, points[0]),
                                       alignment=vector_bytes(chunk_type))
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            for k, points in enumerate(chunks):
                with only_if(valid[k]):
                    for lane, point in enumerate(points):
                        for n, (value, amap) in enumerate(operands):
                            self.scope.store(values[k][n][lane], value,
                                             apply_map(amap, point))
            scf.YieldOp([])
