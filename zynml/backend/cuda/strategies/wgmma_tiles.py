"""The tile schedule of the persistent wgmma GEMM (matmul_wgmma): which tile of C each
block takes, in a grouped raster order. The same arithmetic runs on index values inside
the kernel (IndexOps; a tile count is a number, or a value for run-time sizes) and on
Python ints (IntOps: tile_origins, which the tests read). `p` is matmul_wgmma's Params
(tile_m, tile_n, group_m)."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .kernel_builder import index_const

__all__ = ["IndexOps", "IntOps", "as_index", "tile_origin", "tile_origins"]


def as_index(value) -> ir.Value:
    """An index value: a number made a constant, a value as it is."""
    return index_const(value) if isinstance(value, int) else value


def _on_index(op, on_ints):
    """An arith op on index values (a number is made a constant); on two numbers, the
    number (a static size's arithmetic folds)."""
    def apply(a, b):
        if isinstance(a, int) and isinstance(b, int):
            return on_ints(a, b)
        return op(as_index(a), as_index(b)).result
    return staticmethod(apply)


class IndexOps:
    """The arithmetic of the tile schedule on index values (in the kernel)."""
    div = _on_index(arith.DivUIOp, lambda a, b: a // b)
    rem = _on_index(arith.RemUIOp, lambda a, b: a % b)
    mul = _on_index(arith.MulIOp, lambda a, b: a * b)
    add = _on_index(arith.AddIOp, lambda a, b: a + b)
    sub = _on_index(arith.SubIOp, lambda a, b: a - b)
    min = _on_index(arith.MinUIOp, min)


class IntOps:
    """The same on Python ints (tile_origins, for tests)."""
    div = staticmethod(lambda a, b: a // b)
    rem = staticmethod(lambda a, b: a % b)
    mul = staticmethod(lambda a, b: a * b)
    add = staticmethod(lambda a, b: a + b)
    sub = staticmethod(lambda a, b: a - b)
    min = staticmethod(min)


def tile_origin(p, tiles_m, tiles_n, t, ops):
    """Batch entry, row and column of C where tile t starts. A batch entry's tiles come
    one after another; within one, tiles are counted in groups of `group_m` tile rows
    (the last group may have fewer), down a column of tiles first within a group: the
    blocks that run together read a few rows of A and columns of B. The tile counts are
    numbers, or index values (run-time sizes)."""
    per_entry = ops.mul(tiles_m, tiles_n)
    entry = ops.div(t, per_entry)
    t = ops.rem(t, per_entry)
    static = isinstance(tiles_m, int)
    group = max(1, min(p.group_m, tiles_m)) if static else p.group_m
    per_group = ops.mul(tiles_n, group)
    first = ops.mul(ops.div(t, per_group), group)
    within = ops.rem(t, per_group)
    # a full group's rows: a constant where every group is full
    rows = group if static and tiles_m % group == 0 else \
        ops.min(ops.sub(tiles_m, first), group)
    tile_row = ops.add(first, ops.rem(within, rows))
    tile_col = ops.div(within, rows)
    return entry, ops.mul(tile_row, p.tile_m), ops.mul(tile_col, p.tile_n)


def tile_origins(p, m: int, n: int, block: int, grid: int, batches: int = 1) -> list:
    """(batch entry, row, column) of C where each of block `block`'s tiles starts, in
    its order."""
    tiles_m, tiles_n = m // p.tile_m, n // p.tile_n
    return [tile_origin(p, tiles_m, tiles_n, t, IntOps)
            for t in range(block, batches * tiles_m * tiles_n, grid)]
