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
from .kernel_builder import (dense_row_major, generic_operands, identity_layout,
                             indexing_maps, loop_ranges)
from .matmul import _body_is_multiply_add, _roles
from .tuning import choose, problem_key

NAME = "matmul_wgmma"
ROWS_PER_WARPGROUP = 64  # wgmma's m
# A k step of the ring is a 128-byte swizzled row of each operand's tile (64 f16 / bf16,
# 32 f32), one wgmma 32 bytes of it (k16, or k8 of TF32): the same bytes whatever the
# element, so the ring, its descriptors and the schedule are the element's too.
K_STEP_BYTES = 32
ELEMENTS = ("f16", "bf16")
# f32 operands where the compilation asks for TF32 (CudaTarget.tf32): the tensor cores
# read them K-major only, so B must be [N, K] (tf32_operands.py makes it so)
TF32_ELEMENT = "f32"


def itemsize(element) -> int:
    """Bytes of an f16 / bf16 / f32 element (an MLIR type or its name). The kernel's
    epilogue moves pairs of them, aligned to twice that: C's rows hold a multiple of 64
    elements and a pair starts at an even column."""
    return 4 if str(element) == "f32" else 2


def tile_k(element) -> int:
    """Elements of k a ring slot holds: one 128-byte row."""
    return SWIZZLE_BYTES // itemsize(element)


def row_elements(element) -> int:
    """The multiple a row's length must be for TMA to copy it (16 bytes)."""
    return hopper.TMA_ROW_BYTES // itemsize(element)


def wgmma_element(element) -> str:
    """wgmma's name for the operands' type: f16, bf16, or tf32 for f32."""
    return "tf32" if str(element) == TF32_ELEMENT else str(element)
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

    def stage_bytes(self) -> int:
        return (self.tile_m + self.tile_n) * SWIZZLE_BYTES  # a 128-byte row each

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


def operand_layout(generic: ir.Operation):
    """(roles, b_k_major) of a product this kernel can read: A [.., i, k] and C
    [.., i, j] row-major, B [.., k, j] (MN-major: wgmma's transposed mode) or [.., j, k]
    (K-major: `x @ w^T` of a weight w [N, K], and what TF32 needs); roles are
    (batch dims, i, j, k). None for other layouts."""
    roles = _roles(generic)
    if roles is None:
        return None
    batch, i, j, k = roles
    dims = [[ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None
             for e in amap.results] for amap in indexing_maps(generic)]
    if dims[0] != batch + [i, k] or dims[2] != batch + [i, j] or \
            dims[1] not in (batch + [k, j], batch + [j, k]):
        return None
    return roles, dims[1] == batch + [j, k]


def operand_element(generic: ir.Operation, target, b_k_major: bool):
    """A's and B's element type where this kernel multiplies them (f16 / bf16, or f32 as
    TF32 where the compilation asks and B is K-major) and C's is f16, bf16 or f32 (f32
    for TF32); else None."""
    ins, outs = generic_operands(generic)
    types = {str(ir.MemRefType(v.type).element_type) for v in ins}
    out = str(ir.MemRefType(outs[0].type).element_type)
    if len(types) != 1:
        return None
    element = types.pop()
    if element in ELEMENTS and out in ELEMENTS + ("f32",):
        return element
    if element == TF32_ELEMENT and out == TF32_ELEMENT and target.tf32 and b_k_major:
        return element
    return None


def params_for(generic: ir.Operation, target, c_written: bool = False,
               b_k_major: bool | None = None):
    """The Params of the product's kernel, or None where this strategy declines it.
    `c_written`: C is filled with a constant first, which the kernel fuses (so C is
    written, never read): run-time sizes need that. `b_k_major`: decide as if B were
    K-major (tf32_operands asks before it makes B so); None: B as it is."""
    layout = operand_layout(generic)
    if layout is None or not _body_is_multiply_add(generic):
        return None
    roles, k_major = layout
    element = operand_element(generic, target, k_major if b_k_major is None else b_k_major)
    if element is None:
        return None
    batch, i, j, k = roles
    ins, outs = generic_operands(generic)
    row = row_elements(element)
    if len(batch) > 1 or batch and not all(dense_row_major(v.type) for v in ins):
        return None  # a batched operand must collapse to a matrix (no copy)
    if has_dynamic_extent(generic):
        return _dynamic_params(generic, roles, row, target) if c_written else None
    ranges = loop_ranges(generic)
    m, n, kk = ranges[i], ranges[j], ranges[k]
    batches = ranges[batch[0]] if batch else 1
    # partial tiles where C is written through TMA (its bounds cut them), of one matrix
    # whose rows TMA copies: as with run-time sizes. At least a whole tile each way: a
    # decode step's few rows are matvec's
    partial = c_written and not batch and all(size % row == 0 for size in (m, n, kk))

    def fits(p: Params) -> bool:
        whole = m % p.tile_m == 0 and n % p.tile_n == 0 and kk % tile_k(element) == 0
        cut = partial and p.tma_store and m >= p.tile_m and n >= p.tile_n
        return (whole or cut) and batches * m * n >= p.min_mn and \
            p.shared_bytes() <= target.max_shared_per_block
    return choose(NAME, _ranked(m, n, kk, batches, target, partial), target,
                  problem_key(generic.operands), fits)


def _dynamic_params(generic: ir.Operation, roles, row: int, target):
    """Params for run-time sizes (matmul_wgmma's docstring: C written, one matrix, rows of
    identity layout, static sizes among them multiples of `row` (16 bytes) and K not 0),
    or None."""
    batch, i, j, k = roles
    extents = loop_extents(generic)
    if batch or not all(identity_layout(v.type) for v in generic.operands) or \
            any(extents[d] is not None and extents[d] % row for d in (j, k)) or \
            extents[k] == 0:
        return None

    def fits(p: Params) -> bool:
        return p.tma_store and p.shared_bytes() <= target.max_shared_per_block
    return choose(NAME, CONFIGS, target, problem_key(generic.operands), fits)
