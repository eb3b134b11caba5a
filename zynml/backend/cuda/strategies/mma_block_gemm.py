"""The block-level GEMM on tensor cores that `implicit_gemm_mma` builds on (not a
strategy): simt_gemm.BlockGemm's interface (staging slots, a double-buffered loop over k
fed by the strategy's `fetch` and `put`, a thread's points and the guarded epilogue),
the products on mma.sync m16n8k16 (warp_mma.Warp) with f16 or bf16 operands and f32
accumulators.

A block of warps_m x warps_n warps computes a BM x BN tile of C = A @ B; each warp a
(BM / warps_m) x (BN / warps_n) part, as 16 x 8 accumulator tiles. Shared memory (one
buffer, `<kernel>_shared`) holds two stages of A as [2 BM, BK + PAD] (a row per m, k
contiguous: ldmatrix's A layout) and of B as [2 BK, BN + PAD] (a row per k, read with
ldmatrix.trans), each stage's rows after the other's; the 16-byte PAD puts ldmatrix's
eight row reads in different banks.

The epilogue goes through the same buffer: the sums of one row of warps at a time, f32,
as [BM / warps_m, BN + 8] (64-bit stores of a lane's two columns; the 8 floats of
padding keep a half-warp's rows in different banks), then each thread takes columns
tid mod BN of rows tid / BN, tid / BN + threads / BN, ..., so that a warp reads C's
initial values and stores its sums along 32 neighbouring columns (a convolution's
pixels) instead of 8 rows of 4 pairs: a thread's `thread_m` rows and `thread_n` = 1
column, row(ii) and column(jj) as BlockGemm's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from .extents import as_index
from .kernel_builder import index_const
from .simt_gemm import delinearize_batch, staged_k_loop
from .hopper import shared
from .warp_mma import MMA_K, MMA_M, MMA_N, PAD, WARP, Warp, f32_zero

ELEMENTS = {"f16": ir.F16Type, "bf16": ir.BF16Type}
EPILOGUE_PAD = 8  # floats after each row of the staged sums


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
    # the epilogue: a thread per column of a row of warps' sums, rows shared out evenly
    assert threads % p.tile_n == 0, p


def _a_shape(p) -> list[int]:
    return [2 * p.tile_m, p.tile_k + PAD]


def _b_shape(p) -> list[int]:
    return [2 * p.tile_k, p.tile_n + PAD]


def _sums_shape(p) -> list[int]:
    return [p.tile_m // p.warps_m, p.tile_n + EPILOGUE_PAD]


def shared_bytes(p) -> int:
    """Of the buffer: the stages of A and B (16-bit elements), or the epilogue's f32
    sums of a row of warps, the larger."""
    a, b, sums = _a_shape(p), _b_shape(p), _sums_shape(p)
    return max(2 * (a[0] * a[1] + b[0] * b[1]), 4 * sums[0] * sums[1])


def declare_tiles(gpu_module: ir.Operation, kernel_name: str, p, element: ir.Type) -> None:
    """The block's shared memory, the global `<kernel>_shared` (i8)."""
    del element  # the buffer is bytes; MmaBlockGemm views it
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]):
        memref.GlobalOp(f"{kernel_name}_shared", ir.TypeAttr.get(
            shared((shared_bytes(p),), ir.IntegerType.get_signless(8))),
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
    tile_a: ir.Value      # views of the shared buffer
    tile_b: ir.Value
    sums: ir.Value

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
        raw = memref.get_global(shared((shared_bytes(p),), ir.IntegerType.get_signless(8)),
                                f"{kernel_name}_shared")
        a_shape = _a_shape(p)
        tile_a = memref.ViewOp(shared(a_shape, element), raw, index_const(0), []).result
        tile_b = memref.ViewOp(shared(_b_shape(p), element), raw,
                               index_const(2 * a_shape[0] * a_shape[1]), []).result
        sums = memref.ViewOp(shared(_sums_shape(p), ir.F32Type.get()), raw,
                             index_const(0), []).result
        zero = arith.ConstantOp(element, 0.0).result
        return cls(p, element, zero, tid, Warp(element, lane), warp_row, warp_col, row0,
                   col0, batch_ivs, tile_a, tile_b, sums)

    @property
    def frags_m(self) -> int:
        return self.p.tile_m // self.p.warps_m // MMA_M

    @property
    def frags_n(self) -> int:
        return self.p.tile_n // self.p.warps_n // MMA_N

    @property
    def _rows_a_pass(self) -> int:
        """Rows of C a thread takes from one row of warps' staged sums."""
        return self.p.tile_m // self.p.warps_m * self.p.tile_n // threads_of(self.p)

    @property
    def thread_m(self) -> int:  # rows of the thread's points in the epilogue
        return self.p.warps_m * self._rows_a_pass

    @property
    def thread_n(self) -> int:
        return 1

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
        """A[row, k] (a scalar, or a run along k) into the A tile of `stage`."""
        where = [_after(stage, self.p.tile_m, row), k]
        if isinstance(value.type, ir.VectorType):
            width = ir.VectorType(value.type).shape[0]
            vector.StoreOp(value, self.tile_a, where, alignment=2 * width)
        else:
            memref.StoreOp(value, self.tile_a, where)

    def put_b(self, stage: ir.Value, value: ir.Value, k: ir.Value, col: ir.Value) -> None:
        memref.StoreOp(value, self.tile_b, [_after(stage, self.p.tile_k, k), col])

    # ---------------------------------------------------------------- the loop over k

    def k_loop(self, kk, fetch: Callable[[ir.Value], object],
               put: Callable[[object, ir.Value], None]) -> list[ir.Value]:
        """The lane's accumulators of its warp's tiles of sums over k < kk (a number or
        an index value), for `epilogue`; `fetch` and `put` as BlockGemm's."""
        p = self.p

        def compute(stage: ir.Value, acc: list) -> list:
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
            return acc

        tiles = self.frags_m * self.frags_n
        return staged_k_loop(kk, p.tile_k, [f32_zero()] * (4 * tiles), fetch, put, compute)

    # ---------------------------------------------------------------- the thread's points

    def _row_in_pass(self, ii: int) -> ir.Value:
        """Row, among a row of warps' staged sums, of the thread's ii-th point."""
        step = threads_of(self.p) // self.p.tile_n
        first = arith.DivUIOp(self.tid, index_const(self.p.tile_n)).result
        return _plus(first, (ii % self._rows_a_pass) * step)

    def row(self, ii: int, in_pass: ir.Value | None = None) -> ir.Value:
        """Row of C of the thread's ii-th point (the epilogue's: see the module), from
        its row among the staged sums where known."""
        in_pass = self._row_in_pass(ii) if in_pass is None else in_pass
        warp_rows = ii // self._rows_a_pass * (self.p.tile_m // self.p.warps_m)
        return _plus(arith.AddIOp(self.row0, in_pass).result, warp_rows)

    def column(self, jj: int) -> ir.Value:
        assert jj == 0, jj
        return arith.AddIOp(self.col0, self._column_in_tile()).result

    def _column_in_tile(self) -> ir.Value:
        return arith.RemUIOp(self.tid, index_const(self.p.tile_n)).result

    def epilogue(self, m, n, results: list[ir.Value],
                 store: Callable[[int, int, ir.Value, ir.Value, ir.Value], None]) -> None:
        """`store(ii, 0, row, column, sum)` for each of the thread's points inside m x n
        (numbers, or index values), under a guard; `results` are k_loop's. A row of warps
        at a time stages its sums in shared memory (the module's docstring)."""
        passes, rows = self.p.warps_m, self._rows_a_pass
        column = self.column(0)
        column_inside = arith.CmpIOp(arith.CmpIPredicate.ult, column, as_index(n)).result
        in_tile = self._column_in_tile()
        wm = arith.DivUIOp(arith.DivUIOp(self.tid, index_const(WARP)).result,
                           index_const(self.p.warps_n)).result
        for stage in range(passes):
            mine = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, wm,
                                         index_const(stage)).result)
            with ir.InsertionPoint(mine.then_block):
                self._stage_sums(results)
                scf.YieldOp([])
            gpu.BarrierOp()
            for ii in range(stage * rows, (stage + 1) * rows):
                in_pass = self._row_in_pass(ii)
                gi = self.row(ii, in_pass)
                inside = arith.AndIOp(column_inside, arith.CmpIOp(
                    arith.CmpIPredicate.ult, gi, as_index(m)).result).result
                guard = scf.IfOp(inside)
                with ir.InsertionPoint(guard.then_block):
                    total = memref.LoadOp(self.sums, [in_pass, in_tile]).result
                    store(ii, 0, gi, column, total)
                    scf.YieldOp([])
            if stage + 1 < passes:
                gpu.BarrierOp()  # before the next row of warps overwrites the sums

    def _stage_sums(self, results: list[ir.Value]) -> None:
        """The warp's accumulators into the sums' rows: a lane's two columns of a tile
        row, (g, 2t) and (g, 2t + 1), by one 64-bit store."""
        pair = ir.VectorType.get([2], ir.F32Type.get())
        for fm in range(self.frags_m):
            for fn in range(self.frags_n):
                at = 4 * (fm * self.frags_n + fn)
                col = _plus(arith.AddIOp(self.warp_col, self.warp.two_t).result, fn * MMA_N)
                for half in range(2):
                    row = _plus(self.warp.g, fm * MMA_M + 8 * half)
                    values = vector.FromElementsOp(
                        pair, results[at + 2 * half: at + 2 * half + 2]).result
                    vector.StoreOp(values, self.sums, [row, col], alignment=8)


def _after(stage: ir.Value, rows: int, row: ir.Value) -> ir.Value:
    """Row `row` of stage `stage` in a tile whose stages are `rows` rows each."""
    return arith.AddIOp(arith.MulIOp(stage, index_const(rows)).result, row).result


def _plus(value: ir.Value, offset: int) -> ir.Value:
    return arith.AddIOp(value, index_const(offset)).result if offset else value
