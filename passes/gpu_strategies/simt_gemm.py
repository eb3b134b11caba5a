"""The block-level SIMT GEMM that `matmul` and `implicit_gemm` build on (not a strategy).

A block of (BM / TM) * (BN / TN) threads computes a BM x BN tile of C = A @ B, each thread
a TM x TN sub-tile held in registers. Per step of BK along k the strategy stages A
(transposed, [BK][BM]) and B ([BK][BN]) in shared memory, its own way; `k_loop` then has
each thread do TM * TN FMAs per TM + TN shared reads (16-byte vector reads), and
`epilogue` visits the thread's points of C that lie inside M x N. The tile numbers come
from the strategy's Params (tile_m, tile_n, tile_k, thread_m, thread_n).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from ..gpu_kernel_builder import delinearize, index_const


def threads_of(p) -> int:
    return (p.tile_m // p.thread_m) * (p.tile_n // p.thread_n)


def tile_types(p) -> tuple[ir.Type, ir.Type]:
    f32 = ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return (ir.MemRefType.get([p.tile_k, p.tile_m], f32, memory_space=shared),
            ir.MemRefType.get([p.tile_k, p.tile_n], f32, memory_space=shared))


def declare_tiles(gpu_module: ir.Operation, kernel_name: str, p) -> None:
    """The shared-memory tiles of A and B, as globals `<kernel>_a`, `<kernel>_b`."""
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]):
        for suffix, type_ in zip("ab", tile_types(p)):
            memref.GlobalOp(f"{kernel_name}_{suffix}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)


@dataclass
class BlockGemm:
    """One block's tile of C, inside a kernel being built."""
    p: object
    zero: ir.Value        # f32 0
    tid: ir.Value
    tx: ir.Value          # the thread's column of sub-tiles
    ty: ir.Value          # the thread's row of sub-tiles
    row0: ir.Value        # first row of C of the block (block_id y)
    col0: ir.Value        # first column of C of the block (block_id x)
    batch_ivs: list       # the batch dims' coordinates (block_id z, delinearized)
    tile_a: ir.Value
    tile_b: ir.Value

    @classmethod
    def start(cls, p, kernel_name: str, batch_sizes: list[int]) -> "BlockGemm":
        zero = arith.ConstantOp(ir.F32Type.get(), 0.0).result
        threads_n = p.tile_n // p.thread_n
        tid = gpu.thread_id(gpu.Dimension.x)
        tx = arith.RemUIOp(tid, index_const(threads_n)).result
        ty = arith.DivUIOp(tid, index_const(threads_n)).result
        row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result
        col0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result
        batch_ivs = delinearize_batch(gpu.block_id(gpu.Dimension.z), batch_sizes)
        a_type, b_type = tile_types(p)
        tile_a = memref.get_global(a_type, f"{kernel_name}_a")
        tile_b = memref.get_global(b_type, f"{kernel_name}_b")
        return cls(p, zero, tid, tx, ty, row0, col0, batch_ivs, tile_a, tile_b)

    def a_slot(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(row, k) in the A tile of this thread's r-th staged element (k fastest)."""
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        return (arith.DivUIOp(e, index_const(self.p.tile_k)).result,
                arith.RemUIOp(e, index_const(self.p.tile_k)).result)

    def b_slot(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(k, column) in the B tile of this thread's r-th staged element (column fastest)."""
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        return (arith.DivUIOp(e, index_const(self.p.tile_n)).result,
                arith.RemUIOp(e, index_const(self.p.tile_n)).result)

    def k_loop(self, kk: int, stage: Callable[[ir.Value], None]) -> list[ir.Value]:
        """The thread's TM * TN sums over k < kk, row-major; `stage(k0)` fills the tiles
        with A[:, k0 : k0 + BK] and B[k0 : k0 + BK, :] (zeros past kk)."""
        p = self.p
        accumulators = [self.zero] * (p.thread_m * p.thread_n)
        loop = scf.ForOp(index_const(0), index_const(kk), index_const(p.tile_k), accumulators)
        with ir.InsertionPoint(loop.body):
            stage(loop.induction_variable)
            gpu.BarrierOp()
            acc = list(loop.inner_iter_args)
            a_base = arith.MulIOp(self.ty, index_const(p.thread_m)).result
            b_base = arith.MulIOp(self.tx, index_const(p.thread_n)).result
            for step in range(p.tile_k):
                a_vals = _read_row(self.tile_a, step, a_base, p.thread_m)
                b_vals = _read_row(self.tile_b, step, b_base, p.thread_n)
                for ii in range(p.thread_m):
                    for jj in range(p.thread_n):
                        idx = ii * p.thread_n + jj
                        acc[idx] = _fma(a_vals[ii], b_vals[jj], acc[idx])
            gpu.BarrierOp()
            scf.YieldOp(acc)
        return list(loop.results)

    def row(self, ii: int) -> ir.Value:
        """Row of C of the thread's ii-th row of sub-tile points."""
        return arith.AddIOp(self.row0, arith.AddIOp(arith.MulIOp(
            self.ty, index_const(self.p.thread_m)).result, index_const(ii)).result).result

    def column(self, jj: int) -> ir.Value:
        return arith.AddIOp(self.col0, arith.AddIOp(arith.MulIOp(
            self.tx, index_const(self.p.thread_n)).result, index_const(jj)).result).result

    def epilogue(self, m: int, n: int, results: list[ir.Value],
                 store: Callable[[int, int, ir.Value, ir.Value, ir.Value], None]) -> None:
        """`store(ii, jj, row, column, sum)` for each of the thread's points inside
        m x n, under a guard."""
        p = self.p
        for ii in range(p.thread_m):
            gi = self.row(ii)
            for jj in range(p.thread_n):
                gj = self.column(jj)
                inside = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.ult, gi, index_const(m)).result,
                    arith.CmpIOp(arith.CmpIPredicate.ult, gj, index_const(n)).result).result
                guard = scf.IfOp(inside)
                with ir.InsertionPoint(guard.then_block):
                    store(ii, jj, gi, gj, results[ii * p.thread_n + jj])
                    scf.YieldOp([])


def delinearize_batch(linear: ir.Value, sizes: list[int]) -> list[ir.Value]:
    return delinearize(linear, sizes) if sizes else []


def widen(value: ir.Value) -> ir.Value:
    """`value` as f32 (extf from f16 / bf16)."""
    f32 = ir.F32Type.get()
    return value if value.type == f32 else arith.ExtFOp(f32, value).result


def add_and_round(initial: ir.Value, total: ir.Value, element: ir.Type) -> ir.Value:
    """initial + total in f32, rounded once to `element`."""
    total = arith.AddFOp(widen(initial), total).result
    return total if total.type == element else arith.TruncFOp(element, total).result


def clamp(index, bound: int):
    if index is None:
        return index_const(0)
    return arith.MinUIOp(index, index_const(bound - 1)).result


def _read_row(tile: ir.Value, step: int, base: ir.Value, count: int) -> list[ir.Value]:
    """tile[step][base : base + count] as scalars, read 4 at a time (16-byte loads)."""
    f32 = ir.F32Type.get()
    values = []
    for chunk in range(0, count, 4):
        start = arith.AddIOp(base, index_const(chunk)).result
        vec = vector.LoadOp(ir.VectorType.get([4], f32), tile, [index_const(step), start],
                            alignment=16).result
        values += [vector.ExtractOp(vec, [], [lane]).result for lane in range(4)]
    return values


def _fma(a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    from mlir.dialects import math
    return math.FmaOp(a, b, c).result
