"""matmul_wgmma's parameters and the choice of them: the tile shape and pipeline
(`Params`), the widths the wave model ranks (`CONFIGS`, gemm_waves.py), and which
products take the kernel at which Params (`params_for`: static sizes, whole tiles or
partial ones where C is written through TMA; run-time sizes). The kernel is
matmul_wgmma.py's."""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from .. import gemm_waves
from . import hopper
from .extents import has_dynamic_extent, loop_extents
from .hopper import SWIZZLE_BYTES, WARPGROUP
from .kernel_builder import dense_row_major, generic_operands, identity_layout, loop_ranges
from .matmul import _body_is_multiply_add
from .matmul_tensor_core import _layout
from .tuning import choose, problem_key

NAME = "matmul_wgmma"
ROW_ELEMENTS = hopper.TMA_ROW_BYTES // 2  # K and N of f16 / bf16 rows TMA copies
ROWS_PER_WARPGROUP = 64  # wgmma's m
TILE_K = 64              # a 128-byte swizzled row of f16 / bf16
K_STEP = 16              # wgmma's k
ELEMENTS = ("f16", "bf16")
# C stored through TMA: each warpgroup writes its 64 rows in chunks of 128-byte rows
# (64 f16 / bf16 or 32 f32 columns) into one of two shared buffers, and one thread
# stores the chunk with the copy engine while the warpgroup goes on
STORE_BUFFERS, STORE_BUFFER_BYTES = 2, ROWS_PER_WARPGROUP * SWIZZLE_BYTES


@dataclass(frozen=True)
class Params:
    tile_n: int = 256        # columns of C per tile (wgmma's n; a multiple of 64, <= 256)
    warpgroups: int = 2      # multiplying warpgroups, 64 rows each: tile_m = 64 * warpgroups
    stages: int = 4          # k steps in flight
    min_mn: int = 4096       # smaller products stay on the other strategies
    persistent: bool = True  # grid = min(tiles, SMs), each block loops over its tiles
    group_m: int = 8         # tile rows per group of the raster order (1: row after row)
    tma_store: bool = True   # C through shared memory and TMA where C is not read first

    @property
    def tile_m(self) -> int:
        return ROWS_PER_WARPGROUP * self.warpgroups

    @property
    def threads(self) -> int:
        return WARPGROUP * (self.warpgroups + 1)  # the last warpgroup copies

    def stage_bytes(self, itemsize: int = 2) -> int:
        return (self.tile_m + self.tile_n) * TILE_K * itemsize

    def store_bytes(self) -> int:
        return self.warpgroups * STORE_BUFFERS * STORE_BUFFER_BYTES if self.tma_store else 0

    def shared_bytes(self) -> int:
        """The ring and the store buffers after it, plus room to align them to 1024
        bytes (the 128-byte swizzle's period)."""
        return self.stages * self.stage_bytes() + self.store_bytes() + 1024

    def tiles(self, m: int, n: int) -> int:
        return -(-m // self.tile_m) * -(-n // self.tile_n)  # a partial tile counts


# The widths 256, 192 and 128 in the order gemm_waves' model ranks them for the product
# (the fewest rounds of tiles, in time), then 64 where none of them tiles it (N = 64, an
# attention head's width: the attention backward's dQ, dK, dV products).
# benchmarks/tune_matmul.py on an H100 (2026-11-22), 4096 f16 (PyTorch 0.197-0.201 ms):
# these defaults 0.214-0.218 ms; one block per tile (not persistent) 0.216-0.223; group_m
# 16 0.211-0.218, 32 0.222, 1 (row after row) 0.230; 3 stages 0.226; 128-column tiles
# 0.241 (6 stages: 0.262). 8192x8192x4096: 0.848-0.920 ms persistent, 0.935-0.969 not.
CONFIGS = tuple(Params(tile_n=width) for width in (*gemm_waves.WIDTHS, 64))


def _ranked(m: int, n: int, k: int, batches: int, target, partial: bool) -> list[Params]:
    """CONFIGS of the widths gemm_waves ranks for the product, fastest first, then the
    others (64 wide, and widths that do not tile N: `fits` declines those unless
    `partial` tiles are taken)."""
    widths = gemm_waves.ranked_widths(m, n, k, target.facts.multiprocessors, batches,
                                      partial)
    first = [next(p for p in CONFIGS if p.tile_n == w) for w in widths]
    return first + [p for p in CONFIGS if p not in first]


def params_for(generic: ir.Operation, target, c_written: bool = False):
    """The Params of the product's kernel, or None where this strategy declines it.
    `c_written`: C is filled with a constant first, which the kernel fuses (so C is
    written, never read): run-time sizes need that."""
    roles = _layout(generic)
    if roles is None or not _body_is_multiply_add(generic):
        return None
    batch, i, j, k = roles
    ins, outs = generic_operands(generic)
    types = {str(ir.MemRefType(v.type).element_type) for v in ins}
    out = str(ir.MemRefType(outs[0].type).element_type)
    if len(types) != 1 or types.pop() not in ELEMENTS or out not in ELEMENTS + ("f32",):
        return None
    if len(batch) > 1 or batch and not all(dense_row_major(v.type) for v in ins):
        return None  # a batched operand must collapse to a matrix (no copy)
    if has_dynamic_extent(generic):
        return _dynamic_params(generic, roles, target) if c_written else None
    ranges = loop_ranges(generic)
    m, n, kk = ranges[i], ranges[j], ranges[k]
    batches = ranges[batch[0]] if batch else 1
    # partial tiles where C is written through TMA (its bounds cut them), of one matrix
    # whose rows TMA copies: as with run-time sizes. At least a whole tile each way: a
    # decode step's few rows are matvec's
    partial = c_written and not batch and \
        all(size % ROW_ELEMENTS == 0 for size in (m, n, kk))

    def fits(p: Params) -> bool:
        whole = m % p.tile_m == 0 and n % p.tile_n == 0 and kk % TILE_K == 0
        cut = partial and p.tma_store and m >= p.tile_m and n >= p.tile_n
        return (whole or cut) and batches * m * n >= p.min_mn and \
            p.shared_bytes() <= target.max_shared_per_block
    return choose(NAME, _ranked(m, n, kk, batches, target, partial), target,
                  problem_key(generic.operands), fits)


def _dynamic_params(generic: ir.Operation, roles, target):
    """Params for run-time sizes (matmul_wgmma's docstring: C written, one matrix, rows of
    identity layout, static sizes among them multiples of 8 and K not 0), or None."""
    batch, i, j, k = roles
    extents = loop_extents(generic)
    if batch or not all(identity_layout(v.type) for v in generic.operands) or \
            any(extents[d] is not None and extents[d] % ROW_ELEMENTS for d in (j, k)) or \
            extents[k] == 0:
        return None

    def fits(p: Params) -> bool:
        return p.tma_store and p.shared_bytes() <= target.max_shared_per_block
    return choose(NAME, CONFIGS, target, problem_key(generic.operands), fits)
