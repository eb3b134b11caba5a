"""Where the attention ukernels' tiles sit in shared memory and how they are multiplied:
the two forms of tile_kernel.py's `stage`, a row of BLOCK-row tiles of d columns.

    MmaStage    rows of d + PAD elements (ldmatrix's eight row reads in different
                banks); each warp's products on mma.sync m16n8k16 (strategies/
                warp_mma.py). Up to head dim 64 the kept tiles become register A
                fragments and the buffers reuse their rows (4 tiles, static shared
                memory); wider they stay (6 tiles, dynamic: their fragments would not
                fit the registers beside the accumulators, dK and dV's 128 at d 128).
    WgmmaStage  (chips with wgmma, head dims 64 and 128) each tile d / 64 boxes of 64
                rows x 128 bytes in the 128-byte swizzle, what wgmma's matrix
                descriptors read; the block's 4 warps are one warpgroup and each product
                one wgmma.mma_async m64nNk16 chain (strategies/hopper.py), A from the
                kept tile's descriptor or from registers (P, dS: accumulators), B from
                the stage. 6 tiles, dynamic shared memory.

Either takes the copies of a tile (`copy_target`), makes them visible to its products
(`landed`), and gives a kept tile's rows (`kept`), S-like products of a kept tile and a
stage tile seen transposed (`product_nk`: S = Q K^T) and accumulations of register tiles
times a stage tile as it is (`accumulate_kn`: O += P V), as accumulator tiles of 16 x 8
(mma.sync's C layout, which is wgmma's per warp).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref

from ..strategies import hopper
from ..strategies.flash_skeleton import add, mul
from ..strategies.kernel_builder import index_const
from ..strategies.warp_mma import MMA_K, MMA_N, PAD, f32_zero, shared_tile
from .attention_backward import BLOCK

BOX_COLUMNS = hopper.SWIZZLE_BYTES // 2  # f16 / bf16 in a swizzled row
BOX_BYTES = BLOCK * hopper.SWIZZLE_BYTES  # a box: 64 rows of 128 bytes
WGMMA_HEAD_DIMS = (64, 128)
REGISTER_HEAD_DIM = 64  # mma.sync: up to it the kept tiles are register A fragments


@dataclass
class Kept:
    """The warp's rows of a tile kept for the whole sweep, at stage row `base`: its A
    fragments (one per 16 columns) in registers, or, None, loaded at each use."""
    base: int
    load: object = None
    fragments: list | None = None

    def fragment(self, ks: int) -> list:
        return self.load(ks) if self.fragments is None else self.fragments[ks]


def takes_wgmma(problem, target) -> bool:
    """Whether `problem`'s kernels multiply on wgmma for `target` (a CudaTarget)."""
    return target is not None and target.has({"wgmma"}) and problem.d in WGMMA_HEAD_DIMS


class MmaStage:
    """Padded rows and each warp's mma.sync products (the module's doc)."""

    def __init__(self, d: int, element: ir.Type):
        self.d, self.el = d, element
        self.kept_in_shared = d > REGISTER_HEAD_DIM
        self.rows = (6 if self.kept_in_shared else 4) * BLOCK
        self.type = shared_tile(self.rows, d, element)
        self.static_type = None if self.kept_in_shared else self.type
        self.kept_rows = 2 * BLOCK if self.kept_in_shared else 0

    def dynamic_bytes(self) -> int:
        return 0 if self.static_type is not None else \
            self.rows * (self.d + PAD) * self.el.width // 8

    def enter(self, warp, warp16, static_memory) -> None:
        """In the kernel: the lane's Warp, its warp's first row, the static tile (None
        where the stage is dynamic)."""
        self.w, self.warp16 = warp, warp16
        self.memory = static_memory if static_memory is not None else \
            _dynamic(self.type)

    def copy_target(self, row, col) -> tuple:
        return self.memory, [row, col]

    def landed(self) -> None:
        """mma.sync reads through ldmatrix, as the copies wrote: nothing to order."""

    def kept(self, base: int) -> Kept:
        load = lambda ks: self.w.a_fragment(self.memory, add(self.warp16, base),
                                            index_const(ks * MMA_K))
        if self.kept_in_shared:
            return Kept(base, load)
        return Kept(base, load, [load(ks) for ks in range(self.d // MMA_K)])

    def finish(self, tiles: list, pending: int) -> list:
        return tiles  # mma.sync's results are there when it returns

    def product_nk(self, kept: Kept, base, wait: bool = True) -> list:
        acc = [[f32_zero()] * 4 for _ in range(BLOCK // MMA_N)]
        for ks in range(self.d // MMA_K):
            a = kept.fragment(ks)
            for n0 in range(0, BLOCK, 16):
                pair = self.w.b_fragments_nk(self.memory, add(base, n0),
                                             index_const(ks * MMA_K))
                for half, b in enumerate(pair):
                    acc[n0 // 8 + half] = self.w.mma(acc[n0 // 8 + half], a, b)
        return acc

    def accumulate_kn(self, acc: list, left: list, base, wait: bool = True) -> list:
        acc = list(acc)
        for kk in range(BLOCK // MMA_K):
            a = self.w.a_from_accumulators(left[2 * kk], left[2 * kk + 1])
            for n0 in range(0, self.d, 16):
                pair = self.w.b_fragments_kn(self.memory, add(base, kk * MMA_K),
                                             index_const(n0))
                for half, b in enumerate(pair):
                    acc[n0 // 8 + half] = self.w.mma(acc[n0 // 8 + half], a, b)
        return acc


class WgmmaStage:
    """Swizzled boxes and one warpgroup's wgmma products (the module's doc)."""

    def __init__(self, d: int, element: ir.Type):
        assert d in WGMMA_HEAD_DIMS, d
        self.d, self.el = d, element
        self.name = "bf16" if isinstance(element, ir.BF16Type) else "f16"
        self.rows, self.kept_rows, self.static_type = 6 * BLOCK, 2 * BLOCK, None
        self.tile_bytes = d // BOX_COLUMNS * BOX_BYTES

    def dynamic_bytes(self) -> int:
        return self.rows // BLOCK * self.tile_bytes + hopper.SWIZZLE_PERIOD  # + alignment

    def enter(self, warp, warp16, static_memory) -> None:
        self.w = warp
        raw = hopper.aligned_dynamic_shared(self.rows // BLOCK * self.tile_bytes)
        elements = self.rows // BLOCK * self.tile_bytes * 8 // self.el.width
        self.memory = memref.ViewOp(hopper.shared((elements,), self.el), raw,
                                    index_const(0), []).result
        self.descriptor = hopper.descriptor_base(raw, BLOCK)  # boxes of BLOCK rows

    def _tile_bytes_at(self, base):
        """The byte offset of the tile at stage row `base` (a multiple of BLOCK)."""
        if isinstance(base, int):
            return base // BLOCK * self.tile_bytes
        return mul(arith.DivUIOp(base, index_const(BLOCK)).result, self.tile_bytes)

    def copy_target(self, row, col) -> tuple:
        """Element (row, col) of the stage (16-byte chunks: col % 8 == 0): its tile, its
        box of 64 columns, the swizzled chunk in the box's row."""
        tile = arith.DivUIOp(row, index_const(BLOCK)).result
        box = arith.DivUIOp(col, index_const(BOX_COLUMNS)).result
        byte = add(add(mul(tile, self.tile_bytes), mul(box, BOX_BYTES)), hopper.swizzled(
            arith.RemUIOp(row, index_const(BLOCK)).result,
            mul(arith.RemUIOp(col, index_const(BOX_COLUMNS)).result, 2)))
        return self.memory, [arith.DivUIOp(byte, index_const(2)).result]

    def landed(self) -> None:
        """cp.async wrote through the generic proxy; wgmma reads through the async one."""
        hopper.fence_shared_for_async()

    def kept(self, base: int) -> Kept:
        return Kept(base)

    def _descriptor(self, base) -> ir.Value:
        offset = self._tile_bytes_at(base)
        if isinstance(offset, int):
            return hopper.at(self.descriptor, offset)
        i64 = ir.IntegerType.get_signless(64)
        shifted = arith.IndexCastOp(i64, arith.DivUIOp(offset, index_const(16)).result)
        return arith.AddIOp(self.descriptor, shifted.result).result

    def finish(self, tiles: list, pending: int) -> list:
        """The tiles once at most `pending` wgmma groups are still running (each product
        commits one): tying them to the wait keeps their reads after it."""
        return _tiles(hopper.wait_group(pending, [x for tile in tiles for x in tile]))

    def _done(self, values: list, wait: bool) -> list:
        hopper.commit()
        return self.finish(_tiles(values), 0) if wait else _tiles(values)

    def product_nk(self, kept: Kept, base, wait: bool = True) -> list:
        """S = A B^T, A the kept tile's 64 rows and B the stage tile at `base`, both
        K-major (rows of d): d / 16 wgmmas of n = BLOCK, K steps of 32 bytes in a box."""
        a, b = self._descriptor(kept.base), self._descriptor(base)
        hopper.fence([])
        acc = None
        for ks in range(self.d // MMA_K):
            step = ks * MMA_K // BOX_COLUMNS * BOX_BYTES + ks * MMA_K % BOX_COLUMNS * 2
            acc = hopper.mma(acc, hopper.at(a, step), hopper.at(b, step), BLOCK, self.name,
                             trans_b=False, accumulate=ks > 0)
        return self._done(acc, wait)

    def accumulate_kn(self, acc: list, left: list, base, wait: bool = True) -> list:
        """acc + L B, L the register tiles (64 x BLOCK) and B the stage tile at `base`
        as it is, MN-major (its rows are L's columns): BLOCK / 16 wgmmas of n = d, K
        steps of 16 rows (2 KB) in the swizzled boxes, d / 64 boxes apart."""
        b = self._descriptor(base)
        fragments = [self.w.a_from_accumulators(left[2 * kk], left[2 * kk + 1])
                     for kk in range(BLOCK // MMA_K)]
        values = hopper.fence([x for tile in acc for x in tile] +
                              [x for fragment in fragments for x in fragment])
        flat, words = values[:self.d // 2], values[self.d // 2:]
        for kk in range(BLOCK // MMA_K):
            flat = hopper.mma(flat, words[4 * kk:4 * kk + 4],
                              hopper.at(b, kk * MMA_K * hopper.SWIZZLE_BYTES), self.d,
                              self.name, trans_b=True)
        return self._done(flat, wait)


def _tiles(values: list) -> list:
    return [values[i:i + 4] for i in range(0, len(values), 4)]


def _dynamic(tile: ir.MemRefType) -> ir.Value:
    """The dynamic shared memory seen as `tile` (its launch asks for the bytes)."""
    i8 = ir.IntegerType.get_signless(8)
    raw = gpu.dynamic_shared_memory(hopper.shared((ir.ShapedType.get_dynamic_size(),), i8))
    return memref.ViewOp(tile, raw, index_const(0), []).result
