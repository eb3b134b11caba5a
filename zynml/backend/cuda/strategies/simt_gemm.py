"""The block-level SIMT GEMM that `matmul` and `implicit_gemm` build on (not a strategy).

A block of (BM / TM) * (BN / TN) threads computes a BM x BN tile of C = A @ B, each thread
a TM x TN sub-tile held in registers. The tile numbers come from the strategy's Params
(tile_m, tile_n, tile_k, thread_m, thread_n, warp_m).

Shared memory holds two stages of A (transposed, [BK][BM + 4]) and B ([BK][BN]). `k_loop`
runs one barrier per step of BK: it fetches the next step's elements from global memory
into registers (`fetch`, the strategy's), computes on the current stage, then stores the
fetched elements into the other stage (`put`) and waits at the barrier; the last step's
fetch reads past K, masked to 0, and is dropped.

Thread layout (warp tiling): the 32 threads of a warp are warp_m x (32 / warp_m) along
(m, n); a thread's TM rows are TM / 4 runs of 4 at distance 4 * warp_m (its TN columns the
same with 4 * (32 / warp_m)), so a warp covers (warp_m * TM) x ((32 / warp_m) * TN) of C
and its 16-byte shared reads of one k are a contiguous 64 / 128 bytes each (A: broadcast
to the threads of a row; B: conflict-free). The A stage's rows are padded by 4 floats so
that the transposed stores of a warp (k fastest in global memory) hit distinct banks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from .extents import as_index, minus
from .kernel_builder import delinearize, index_const

WARP = 32
A_PAD = 4  # floats after each k row of the A stage (a 16-byte multiple keeps v4 reads)


def threads_of(p) -> int:
    return (p.tile_m // p.thread_m) * (p.tile_n // p.thread_n)


def check_params(p) -> None:
    """The constraints of the thread layout on a Params."""
    threads = threads_of(p)
    lanes_m = p.warp_m
    lanes_n = WARP // lanes_m
    assert p.thread_m % 4 == 0 and p.thread_n % 4 == 0, p  # 16-byte shared reads
    assert WARP % lanes_m == 0 and threads % WARP == 0, p
    assert p.tile_m % (lanes_m * p.thread_m) == 0, p
    assert p.tile_n % (lanes_n * p.thread_n) == 0, p
    assert (p.tile_m * p.tile_k) % threads == 0 and (p.tile_n * p.tile_k) % threads == 0, p
    assert p.tile_k % 4 == 0, p


def tile_types(p) -> tuple[ir.Type, ir.Type]:
    f32 = ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    return (ir.MemRefType.get([2, p.tile_k, p.tile_m + A_PAD], f32, memory_space=shared),
            ir.MemRefType.get([2, p.tile_k, p.tile_n], f32, memory_space=shared))


def shared_bytes(p) -> int:
    return 2 * p.tile_k * (p.tile_m + A_PAD + p.tile_n) * 4


def declare_tiles(gpu_module: ir.Operation, kernel_name: str, p) -> None:
    """The shared-memory stages of A and B, as globals `<kernel>_a`, `<kernel>_b`."""
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
    a_base: ir.Value      # the thread's first row in the block's tile (of its first run)
    b_base: ir.Value      # the thread's first column in the block's tile
    row0: ir.Value        # first row of C of the block (block_id y)
    col0: ir.Value        # first column of C of the block (block_id x)
    batch_ivs: list       # the batch dims' coordinates (block_id z, delinearized)
    tile_a: ir.Value
    tile_b: ir.Value

    @classmethod
    def start(cls, p, kernel_name: str, batch_sizes: list[int]) -> "BlockGemm":
        check_params(p)
        zero = arith.ConstantOp(ir.F32Type.get(), 0.0).result
        lanes_m = p.warp_m
        lanes_n = WARP // lanes_m
        warps_n = p.tile_n // (lanes_n * p.thread_n)
        tid = gpu.thread_id(gpu.Dimension.x)
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        wy = arith.DivUIOp(warp, index_const(warps_n)).result
        wx = arith.RemUIOp(warp, index_const(warps_n)).result
        ly = arith.DivUIOp(lane, index_const(lanes_n)).result
        lx = arith.RemUIOp(lane, index_const(lanes_n)).result
        a_base = arith.AddIOp(arith.MulIOp(wy, index_const(lanes_m * p.thread_m)).result,
                              arith.MulIOp(ly, index_const(4)).result).result
        b_base = arith.AddIOp(arith.MulIOp(wx, index_const(lanes_n * p.thread_n)).result,
                              arith.MulIOp(lx, index_const(4)).result).result
        row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result
        col0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result
        batch_ivs = delinearize_batch(gpu.block_id(gpu.Dimension.z), batch_sizes)
        a_type, b_type = tile_types(p)
        tile_a = memref.get_global(a_type, f"{kernel_name}_a")
        tile_b = memref.get_global(b_type, f"{kernel_name}_b")
        return cls(p, zero, tid, a_base, b_base, row0, col0, batch_ivs, tile_a, tile_b)

    @property
    def thread_m(self) -> int:  # rows of the thread's points
        return self.p.thread_m

    @property
    def thread_n(self) -> int:
        return self.p.thread_n

    @staticmethod
    def operand(value: ir.Value) -> ir.Value:
        """A staged element as the products take it: f32."""
        return widen(value)

    # ---------------------------------------------------------------- staging helpers

    def a_slot(self, r: int, width: int = 1) -> tuple[ir.Value, ir.Value]:
        """(row, k) in the A tile of this thread's r-th staged element, or run of `width`
        along k (k fastest)."""
        per_row = self.p.tile_k // width
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        k = arith.RemUIOp(e, index_const(per_row)).result
        return (arith.DivUIOp(e, index_const(per_row)).result,
                arith.MulIOp(k, index_const(width)).result if width > 1 else k)

    def b_slot(self, r: int, width: int = 1) -> tuple[ir.Value, ir.Value]:
        """(k, column) in the B tile of this thread's r-th staged element, or run of
        `width` along the columns (columns fastest)."""
        per_row = self.p.tile_n // width
        e = arith.AddIOp(self.tid, index_const(r * threads_of(self.p))).result
        col = arith.RemUIOp(e, index_const(per_row)).result
        return (arith.DivUIOp(e, index_const(per_row)).result,
                arith.MulIOp(col, index_const(width)).result if width > 1 else col)

    def a_slots(self, width: int = 1) -> int:
        """Staged elements (runs of `width`) of A per thread per step; 0 when the
        threads do not share them out evenly."""
        return _share(self.p.tile_m * self.p.tile_k, width * threads_of(self.p))

    def b_slots(self, width: int = 1) -> int:
        return _share(self.p.tile_n * self.p.tile_k, width * threads_of(self.p))

    def put_a(self, stage: ir.Value, value: ir.Value, row: ir.Value, k: ir.Value) -> None:
        """A[row, k] (a scalar, or a vector along k) into the A tile of `stage`."""
        if isinstance(value.type, ir.VectorType):
            for lane in range(ir.VectorType(value.type).shape[0]):
                element = vector.ExtractOp(value, [], [lane]).result
                kl = arith.AddIOp(k, index_const(lane)).result if lane else k
                memref.StoreOp(element, self.tile_a, [stage, kl, row])
        else:
            memref.StoreOp(value, self.tile_a, [stage, k, row])

    def put_b(self, stage: ir.Value, value: ir.Value, k: ir.Value, col: ir.Value) -> None:
        """B[k, col] (a scalar, or a vector along the columns) into the B tile."""
        if isinstance(value.type, ir.VectorType):
            vector.StoreOp(value, self.tile_b, [stage, k, col], alignment=16)
        else:
            memref.StoreOp(value, self.tile_b, [stage, k, col])

    # ---------------------------------------------------------------- the loop over k

    def k_loop(self, kk, fetch: Callable[[ir.Value], object],
               put: Callable[[object, ir.Value], None]) -> list[ir.Value]:
        """The thread's TM * TN sums over k < kk (a number or an index value), row-major. `fetch(k0)` reads the
        elements A[:, k0 : k0 + BK] and B[k0 : k0 + BK, :] that this thread stages (0 at
        k >= kk) into values; `put(values, stage)` stores them in the tiles of `stage`
        (an index, 0 or 1)."""
        p = self.p

        def compute(stage: ir.Value, acc: list) -> list:
            lanes_m = p.warp_m
            lanes_n = WARP // lanes_m
            for step in range(p.tile_k):
                a_vals = _read_runs(self.tile_a, stage, step, self.a_base, p.thread_m,
                                    4 * lanes_m)
                b_vals = _read_runs(self.tile_b, stage, step, self.b_base, p.thread_n,
                                    4 * lanes_n)
                for ii in range(p.thread_m):
                    for jj in range(p.thread_n):
                        idx = ii * p.thread_n + jj
                        acc[idx] = _fma(a_vals[ii], b_vals[jj], acc[idx])
            return acc

        return staged_k_loop(kk, p.tile_k, [self.zero] * (p.thread_m * p.thread_n), fetch,
                             put, compute)

    # ---------------------------------------------------------------- the thread's points

    def row_in_tile(self, ii: int) -> ir.Value:
        return arith.AddIOp(self.a_base, index_const(
            (ii // 4) * 4 * self.p.warp_m + ii % 4)).result

    def column_in_tile(self, jj: int) -> ir.Value:
        return arith.AddIOp(self.b_base, index_const(
            (jj // 4) * 4 * (WARP // self.p.warp_m) + jj % 4)).result

    def row(self, ii: int) -> ir.Value:
        """Row of C of the thread's ii-th row of sub-tile points."""
        return arith.AddIOp(self.row0, self.row_in_tile(ii)).result

    def column(self, jj: int) -> ir.Value:
        return arith.AddIOp(self.col0, self.column_in_tile(jj)).result

    def epilogue(self, m, n, results: list[ir.Value],
                 store: Callable[[int, int, ir.Value, ir.Value, ir.Value], None]) -> None:
        """`store(ii, jj, row, column, sum)` for each of the thread's points inside
        m x n (numbers, or index values: run-time sizes), under a guard."""
        p = self.p
        for ii in range(p.thread_m):
            gi = self.row(ii)
            for jj in range(p.thread_n):
                gj = self.column(jj)
                inside = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.ult, gi, as_index(m)).result,
                    arith.CmpIOp(arith.CmpIPredicate.ult, gj, as_index(n)).result).result
                guard = scf.IfOp(inside)
                with ir.InsertionPoint(guard.then_block):
                    store(ii, jj, gi, gj, results[ii * p.thread_n + jj])
                    scf.YieldOp([])


def staged_k_loop(kk, tile_k: int, accumulators: list, fetch: Callable, put: Callable,
                  compute: Callable[[ir.Value, list], list]) -> list[ir.Value]:
    """The loop over k < kk in steps of tile_k on two shared-memory stages, one barrier a
    step: `put(fetch(0), 0)` before it; in it, `fetch` the next step's elements into
    registers, `compute(stage, accumulators)` on the current stage (an index, 0 or 1),
    `put` the fetched elements into the other stage, then the barrier. The last step's
    fetch reads past kk (masked by `fetch`) and is dropped. The accumulators' results."""
    put(fetch(index_const(0)), index_const(0))
    gpu.BarrierOp()
    loop = scf.ForOp(index_const(0), as_index(kk), index_const(tile_k), accumulators)
    with ir.InsertionPoint(loop.body):
        k0 = loop.induction_variable
        stage = arith.RemUIOp(arith.DivUIOp(k0, index_const(tile_k)).result,
                              index_const(2)).result
        following = fetch(arith.AddIOp(k0, index_const(tile_k)).result)
        acc = compute(stage, list(loop.inner_iter_args))
        put(following, arith.SubIOp(index_const(1), stage).result)
        gpu.BarrierOp()
        scf.YieldOp(acc)
    return list(loop.results)


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


def clamp(index, bound):
    """min(index, bound - 1) (index 0 where None); `bound` a number or an index value
    (a run-time size)."""
    if index is None:
        return index_const(0)
    return arith.MinUIOp(index, as_index(minus(bound, 1))).result


def _share(elements: int, per_round: int) -> int:
    return elements // per_round if elements % per_round == 0 else 0


def _read_runs(tile: ir.Value, stage: ir.Value, step: int, base: ir.Value, count: int,
               distance: int) -> list[ir.Value]:
    """tile[stage][step][base + r * distance + (0..3)] for r < count / 4, as scalars, read
    4 at a time (16-byte loads)."""
    f32 = ir.F32Type.get()
    values = []
    for run in range(count // 4):
        start = arith.AddIOp(base, index_const(run * distance)).result if run else base
        vec = vector.LoadOp(ir.VectorType.get([4], f32), tile,
                            [stage, index_const(step), start], alignment=16).result
        values += [vector.ExtractOp(vec, [], [lane]).result for lane in range(4)]
    return values


def _fma(a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    from mlir.dialects import math
    return math.FmaOp(a, b, c).result
