"""How long a tiled GEMM takes when its tiles run in waves: the cost model that chooses
`matmul_wgmma`'s tile width and `kernels.training`'s split of d w over the rows.

A persistent GEMM runs one block per multiprocessor, block b taking tiles b, b + grid,
...: it lasts ceil(tiles / multiprocessors) tile times ("rounds"), and a tile takes
time in proportion to its multiply-adds, at a rate that depends on its width (a narrower
tile reads A's rows for fewer columns). Where a product has few tiles (a 4096 x 768
output over k = 50304, d w of 768 x 768 over 16384 tokens), the width that leaves
fewest multiprocessors idle in the last round wins, though its tiles are slower.

Pure Python (no MLIR): the kernel library decides its splits with it on machines that
only run artifacts.
"""
from __future__ import annotations

import math

__all__ = ["TILE_M", "WIDTHS", "tile_us", "product_us", "ranked_widths", "fastest_width"]

TILE_M = 128  # rows of a tile (two multiplying warpgroups of 64)

# A tile's rate relative to 256 columns, from GPU time per call on an H200 (bf16, 2026-11-
# 27, docs/performance.md Session 24): [4096, 50304] @ [50304, 768] took 0.485 / 0.403 /
# 0.531 ms in tiles 256 / 192 / 128 wide (96 / 128 / 192 tiles: 1, 1 and 2 rounds), and
# the 8192-row product 0.995 / 0.813 / 0.838 ms (2, 2 and 3 rounds).
WIDTHS = {256: 1.0, 192: 0.91, 128: 0.89}

# A 128 x 256 tile's time per row of k: 0.6 us per 64-row step (H100, Session 20's d w
# splits; the H200's step is within 5% of it).
ROW_US = 0.6 / 64


def tile_us(width: int, k: int) -> float:
    """Microseconds one 128 x `width` tile of C takes over k rows."""
    return k * ROW_US * width / 256 / WIDTHS[width]


def product_us(m: int, n: int, k: int, width: int, multiprocessors: int,
               batches: int = 1) -> float:
    """Microseconds of `batches` products [m, k] @ [k, n] in 128 x `width` tiles (a
    partial tile counted whole) on `multiprocessors` blocks."""
    tiles = batches * math.ceil(m / TILE_M) * math.ceil(n / width)
    return math.ceil(tiles / multiprocessors) * tile_us(width, k)


def ranked_widths(m: int, n: int, k: int, multiprocessors: int,
                  batches: int = 1, partial: bool = False) -> list[int]:
    """The widths of WIDTHS that tile the product (every width where the kernel takes
    `partial` tiles), fastest first by the model (the widest first on a tie)."""
    fitting = [w for w in WIDTHS if partial or m % TILE_M == 0 and n % w == 0]
    return sorted(fitting, key=lambda w: (product_us(m, n, k, w, multiprocessors, batches), -w))


def fastest_width(m: int, n: int, k: int, multiprocessors: int,
                  batches: int = 1) -> int | None:
    """The first of ranked_widths; None: no width tiles the product."""
    return next(iter(ranked_widths(m, n, k, multiprocessors, batches)), None)
