"""The block-level GEMM on tensor cores that `implicit_gemm_mma` builds on (not a
strategy): simt_gemm.BlockGemm's interface (staging slots, a double-buffered loop over k
fed by the strategy's `fetch` and `put`, a thread's points and the guarded epilogue),
the products on mma.sync m16n8k16 (warp_mma.Warp) with f16 or bf16 operands and f32
accumulators.

A block of warps_m x warps_n warps computes a BM x BN tile of C = A @ B; each warp a
(BM / warps_m) x (BN / warps_n) part, as 16 x 8 accumulator tiles. Shared memory holds
two stages of A as [2 BM, BK + PAD] (a row per m, k contiguous: ldmatrix's A layout) and
of B as [2 BK, BN + PAD] (a row per k, read with ldmatrix.trans), each stage's rows after
the other's; the 16-byte PAD puts ldmatrix's eight row reads in different banks.

A thread holds, per 16 x 8 tile, the points (g, 2t), (g, 2t + 1), (g + 8, 2t),
(g + 8, 2t + 1) (lane = 4 g + t): its `thread_m` = 2 frags_m rows and `thread_n` =
2 frags_n columns, row(ii) and column(jj) as BlockGemm's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from .extents import as_index
from .kernel_builder import index_const
from .simt_gemm import delinearize_batch
from .warp_mma import MMA_K, MMA_M, MMA_N, PAD, WARP, Warp, f32_zero

ELEMENTS = {"f16": ir.F16Type, "bf16": ir.BF16Type}


def threads_of(p) -> int:
    return WARP * p.warps_m * p.warps_n


def check_params(p) -> None:
    """The constraints of the warp layout on a Params (tile_m, tile_n, tile_k, warps_m,
    warps_n)."""
    threads = threads_of(p)
    assert p.tile_m % (p.warps_m * MMA_M) == 0, p
    assert p.tile_n % (p.warps_n * 2 * MMA_N) == 0, p  # B fragments come in pairs
    assert p.tile_k % MMA_K == 0, p
    assert (p.tile_m * p.tile_k) % threads == 0 and (p.tile_n * p.tile_k) % threads == 0, p


def tile_types(p, element: ir.Type) -> tuple[ir.Type, ir.Type]:
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return (ir.MemRefType.get([2 * p.tile_m, p.tile_k + PAD], element, memory_space=shared),
            ir.MemRefType.get([2 * p.tile_k, p.tile_n + PAD], element, memory_space=shared))


def shared_bytes(p) -> int:
    return 2 * 2 * (p.tile_m * (p.tile_k + PAD) + p.tile_k * (p.tile_n + PAD))


def declare_tiles(gpu_module: ir.Operation, kernel_name: str, p, element: ir.Type) -> None:
    """The shared-memory stages of A and B, as globals `<kernel>_a`, `<kernel>_b`."""
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]):
        for suffix, type_ in zip("ab", tile_types(p, element)):
            memref.GlobalOp(f"{kernel_name}_{suffix}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)


@dataclass
class MmaBlockGemm:
    """One block's tile of C, inside a kernel being built."""
    p: object
    element: ir.Type      # of the staged operands (f16 or bf16)
    zero: ir.Value        # a masked-out operand: 0 of `element`
    tid: ir.Value
    warp: Warp
    warp_row: ir.Value    # the warp's first row in the block's tile
    warp_col: ir.Value    # the warp's first column in the block's tile
    row0: ir.Value        # first row of C of the block (block_id y)
    col0: ir.Value        # first column of C of the block (block_id x)
    batch_ivs: list       # the batch dims' coordinates (block_id z, delinearized)
    tile_a: ir.Value
    tile_b: ir.Value

    @classmethod
    def start(cls, p, kernel_name: str, batch_sizes: list, element: ir.Type) -> "MmaBlockGemm":
        check_params(p)
        tid = gpu.thread_id(gpu.Dimension.x)
        warp_index = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        wm = arith.DivUIOp(warp_index, index_const(p.warps_n)).result
        wn = arith.RemUIOp(warp_index, index_const(p.warps_n)).result
        warp_row = arith.MulIOp(wm, index_const(p.tile_m // p.warps_m)).result
        warp_col = arith.MulIOp(wn, index_const(p.tile_n // p.warps_n)).result
        row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result
        col0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result
        batch_ivs = delinearize_batch(gpu.block_id(gpu.Dimension.z), batch_sizes)
        a_type, b_type = tile_types(p, element)
        tile_a = memref.get_global(a_type, f"{kernel_name}_a")
        tile_b = memref.get_global(b_type, f"{kernel_name}_b")
        zero = arith.ConstantOp(element, 0.0).result
        return cls(p, element, zero, tid, Warp(element, lane), warp_row, warp_col, row0,
                   col0, batch_ivs, tile_a, tile_b)

    @property
    def frags_m(self) -> int:
        return self.p.tile_m // self.p.warps_m // MMA_M

    @property
    def frags_n(self) -> int:
        return self.p.tile_n // self.p.warps_n // MMA_N

    @property
    def thread_m(self) -> int:
        return 2 * self.frags_m

    @property
    def thread_n(self) -> int:
        return 2 * self.frags_n

    def operand(self, value: ir.Value) -> ir.Value:
        """A staged element as the products take it (`value` is of `element` already:
        implicit_gemm_mma takes only such bodies)."""
        assert value.type == self.element, value.type
        return value

    # ---------------------------------------------------------------- staging helpers

    def a_slot(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(row, k) in the A tile of this thread's r-th staged element (k fastest)."""
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        return (arith.DivUIOp(e, index_const(self.p.tile_k)).result,
                arith.RemUIOp(e, index_const(self.p.tile_k)).result)

    def b_slot(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(k, column) in the B tile of this thread's r-th staged element (columns
        fastest)."""
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        return (arith.DivUIOp(e, index_const(self.p.tile_n)).result,
                arith.RemUIOp(e, index_const(self.p.tile_n)).result)

    def put_a(self, stage: ir.Value, value: ir.Value, row: ir.Value, k: ir.Value) -> None:
        memref.StoreOp(value, self.tile_a, [_after(stage, self.p.tile_m, row), k])

    def put_b(self, stage: ir.Value, value: ir.Value, k: ir.Value, col: ir.Value) -> None:
        memref.StoreOp(value, self.tile_b, [_after(stage, self.p.tile_k, k), col])

    # ---------------------------------------------------------------- the loop over k

    def k_loop(self, kk, fetch: Callable[[ir.Value], object],
               put: Callable[[object, ir.Value], None]) -> list[ir.Value]:
        """The thread's thread_m * thread_n sums over k < kk (a number or an index
        value), row-major by (row(ii), column(jj)); `fetch` and `put` as BlockGemm's."""
        p = self.p
        put(fetch(index_const(0)), index_const(0))
        gpu.BarrierOp()
        tiles = self.frags_m * self.frags_n
        loop = scf.ForOp(index_const(0), as_index(kk), index_const(p.tile_k),
                         [f32_zero()] * (4 * tiles))
        with ir.InsertionPoint(loop.body):
            k0 = loop.induction_variable
            stage = arith.RemUIOp(arith.DivUIOp(k0, index_const(p.tile_k)).result,
                                  index_const(2)).result
            following = fetch(arith.AddIOp(k0, index_const(p.tile_k)).result)
            acc = list(loop.inner_iter_args)
            a_rows = _after(stage, p.tile_m, self.warp_row)
            for ks in range(0, p.tile_k, MMA_K):
                b_row = _after(stage, p.tile_k, index_const(ks))
                a_frags = [self.warp.a_fragment(self.tile_a, _plus(a_rows, fm * MMA_M),
                                                index_const(ks))
                           for fm in range(self.frags_m)]
                b_frags = []
                for pair in range(self.frags_n // 2):
                    b_frags += self.warp.b_fragments_kn(
                        self.tile_b, b_row, _plus(self.warp_col, pair * 2 * MMA_N))
                for fm in range(self.frags_m):
                    for fn in range(self.frags_n):
                        at = 4 * (fm * self.frags_n + fn)
                        acc[at:at + 4] = self.warp.mma(acc[at:at + 4], a_frags[fm],
                                                       b_frags[fn])
            put(following, arith.SubIOp(index_const(1), stage).result)
            gpu.BarrierOp()
            scf.YieldOp(acc)
        results = list(loop.results)
        # row-major by the thread's points: tile (fm, fn)'s [c0, c1, c2, c3] are points
        # (2 fm, 2 fn), (2 fm, 2 fn + 1), (2 fm + 1, 2 fn), (2 fm + 1, 2 fn + 1)
        return [results[4 * ((ii // 2) * self.frags_n + jj // 2) + 2 * (ii % 2) + jj % 2]
                for ii in range(self.thread_m) for jj in range(self.thread_n)]

    # ---------------------------------------------------------------- the thread's points

    def row(self, ii: int) -> ir.Value:
        """Row of C of the thread's ii-th row of points: g (+ 8) of tile row ii / 2."""
        offset = (ii // 2) * MMA_M + (ii % 2) * 8
        return _plus(arith.AddIOp(arith.AddIOp(self.row0, self.warp_row).result,
                                  self.warp.g).result, offset)

    def column(self, jj: int) -> ir.Value:
        """Column of C of the thread's jj-th column of points: 2t (+ 1) of tile jj / 2."""
        offset = (jj // 2) * MMA_N + jj % 2
        return _plus(arith.AddIOp(arith.AddIOp(self.col0, self.warp_col).result,
                                  self.warp.two_t).result, offset)

    def epilogue(self, m, n, results: list[ir.Value],
                 store: Callable[[int, int, ir.Value, ir.Value, ir.Value], None]) -> None:
        """`store(ii, jj, row, column, sum)` for each of the thread's points inside
        m x n (numbers, or index values), under a guard."""
        rows = [self.row(ii) for ii in range(self.thread_m)]
        columns = [self.column(jj) for jj in range(self.thread_n)]
        for ii, gi in enumerate(rows):
            row_inside = arith.CmpIOp(arith.CmpIPredicate.ult, gi, as_index(m)).result
            for jj, gj in enumerate(columns):
                inside = arith.AndIOp(row_inside, arith.CmpIOp(
                    arith.CmpIPredicate.ult, gj, as_index(n)).result).result
                guard = scf.IfOp(inside)
                with ir.InsertionPoint(guard.then_block):
                    store(ii, jj, gi, gj, results[ii * self.thread_n + jj])
                    scf.YieldOp([])


def _after(stage: ir.Value, rows: int, row: ir.Value) -> ir.Value:
    """Row `row` of stage `stage` in a tile whose stages are `rows` rows each."""
    return arith.AddIOp(arith.MulIOp(stage, index_const(rows)).result, row).result


def _plus(value: ir.Value, offset: int) -> ir.Value:
    return arith.AddIOp(value, index_const(offset)).result if offset else value
