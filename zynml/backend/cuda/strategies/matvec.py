"""Matvec: a matrix product of a few rows (a decode step's tokens), at memory speed.

C[i, j] += sum_k A[i, k] * B[k, j] with M (the rows of A and C) at most `max_rows`: the
work is reading B once, so a block takes a slice of B's columns and spreads k over its
threads. Tiles made for large products (`matmul`) would compute 128 rows of which one
is used, on a few blocks; a thread per output (`pointwise`) walks k alone. Here:

    thread (r, c) of a block (C column threads, R = threads / C k-threads; C chosen
    from N: Params), block x: columns j0 .. j0 + V of B (16 bytes, V = 8 for
    f16/bf16, 4 for f32; j0 = (x * C + c) * V), rows k = (s * R + r) * KV + 0..KV-1 for
    s = 0, 1, ...: per step KV 16-byte loads of B and M 16-byte loads of A (KV
    consecutive k of each row), M * KV * V f32 FMAs into M * V accumulators
    the R k-threads' partial sums meet: shuffles within each warp, then one row of
    shared memory per warp; thread t sums the warps' partials of output t and stores
    out[i, j] = round(out[i, j] + total), once

A warp's loads of B cover contiguous 16 * C bytes of KV-row runs (whole 32-byte
sectors). Accumulation is f32 whatever the element type, rounded once at the store.

Where the chip has thread-block clusters (sm_90), k is also split over the S blocks of a
cluster (block y = s sums the rows s * K / S ..): a decode step's products have few
columns (2048 of bf16: 32 blocks of 64), and a block per column tile left most of the
GPU's memory parallelism unused (H200, one bf16 row, benchmarks/decode_products.py:
2048x8192 16.0 us in 128 blocks of 64 columns, 11.1 us in 128 x 3 blocks). Each block
sums its warps into shared memory; after a cluster barrier block s adds the S blocks'
totals (distributed shared memory, in the order 0 .. S - 1: the same bits every run)
for its S-th of the outputs and stores them.

Where C was just filled with a constant (`C = A @ B` starts from zeros), fill and product
are one kernel (`find_groups`), as in matmul_wgmma.

Matches a product generic without batch dimensions whose A [M, K], B [K, N] and C [M, N]
are plain row-major memrefs of one float type, read along k (A) and j (B), with K a
multiple of KV and N of V; anything else is left to the strategies after it.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from .clusters import (PORTABLE_CLUSTER_BLOCKS, cluster_sync, load_from_block,
                       set_cluster_shape, shared_address)
from .kernel_builder import (Group, KernelScope, KernelSignature, filled_products,
                             generic_operands, index_const, indexing_maps, loop_ranges,
                             multiply_add_body, new_kernel)
from . import Launch
from .matmul import _roles, _row_major
from .row_reduce import WARP, _warp_reduce
from .row_registers import as_global
from .simt_gemm import _fma, add_and_round
from .tuning import problem_key, tuned

NAME = "matvec"

VECTOR_BYTES = 16


@dataclass(frozen=True)
class Params:
    max_rows: int = 16       # M at most this (a step of up to 16 sequences)
    # C: threads of a block across its columns; 0: the most of 8, 4, 2 that still
    # leaves `min_blocks` blocks. Wider blocks read longer runs of each row of B: on an
    # H100 (zynml tune, 2026-11-26) 8 took the 32000-column head 1.30x (1 row) and 1.58x
    # (16 rows) faster than 2, and 16 rows of 8192 columns 1.82x; where 8 leaves few
    # blocks (2048 columns: 32), 2 was as fast or faster.
    column_threads: int = 0
    threads: int = 256       # per block; R = threads / C share k
    min_k: int = 64          # shorter sums stay with the other strategies
    min_blocks: int = 96     # for the automatic C without clusters
    # S: blocks of a cluster splitting k (1: none); 0: the fewest that make
    # `split_blocks` blocks in all, each block summing at least one full step of rows,
    # at most a portable cluster's 8, and none where a thread's registers leave room for
    # one block per multiprocessor (more blocks then only add waves: 16 bf16 rows of
    # 2048x8192 took 47 us in 3 splits against 24 us whole, H200). Automatic C with
    # splits: 8.
    splits: int = 0
    split_blocks: int = 264  # two per multiprocessor of an H100 / H200

    def __post_init__(self):
        assert self.threads % WARP == 0 and self.column_threads in (0, 1, 2, 4, 8), self
        assert 0 <= self.splits <= PORTABLE_CLUSTER_BLOCKS, self

    def columns_per_block(self, n: int, lanes: int, split: bool) -> int:
        """C: column_threads, or the automatic choice for n columns of `lanes` each (k
        split over clusters or not)."""
        if self.column_threads:
            return self.column_threads
        if split:
            return 8
        return next((c for c in (8, 4) if n // (c * lanes) >= self.min_blocks), 2)

    def split_count(self, k: int, column_blocks: int, rows_per_step: int,
                    split: bool) -> int:
        """S for a sum of k rows over `column_blocks` column tiles."""
        if not split:
            return 1
        if self.splits:
            return self.splits
        return fewest_splits(column_blocks, k // rows_per_step, self.split_blocks)


def fewest_splits(column_blocks: int, most: int, wanted_blocks: int) -> int:
    """S: the fewest blocks per cluster (at most `most`, which is at least 1 and at most a
    portable cluster's 8) that make `wanted_blocks` blocks over `column_blocks` tiles."""
    most = max(1, min(PORTABLE_CLUSTER_BLOCKS, most))
    return next((s for s in range(1, most + 1) if column_blocks * s >= wanted_blocks), most)


DEFAULT_PARAMS = Params()


@dataclass(frozen=True)
class _Shape:
    m: int
    n: int
    k: int
    element: ir.Type
    lanes: int  # elements per 16-byte load (V along j, KV along k)


def _shape(generic: ir.Operation, p: Params) -> _Shape | None:
    """The product's sizes when this strategy can build it, else None."""
    roles = _roles(generic)
    if roles is None or roles[0] or multiply_add_body(generic) is None:
        return None
    _, dim_i, dim_j, dim_k = roles
    ins, outs = generic_operands(generic)
    positions = [[ir.AffineDimExpr(e).position for e in amap.results]
                 for amap in indexing_maps(generic)]
    if positions != [[dim_i, dim_k], [dim_k, dim_j], [dim_i, dim_j]]:
        return None
    types = [ir.MemRefType(v.type) for v in ins + outs]
    element = types[0].element_type
    if str(element) not in ("f32", "f16", "bf16") or types[1].element_type != element or \
            str(types[2].element_type) not in ("f32", "f16", "bf16") or \
            not all(_row_major(t) for t in types):
        return None
    ranges = loop_ranges(generic)
    m, n, k = ranges[dim_i], ranges[dim_j], ranges[dim_k]
    lanes = VECTOR_BYTES * 8 // element.width
    if m > p.max_rows or k < p.min_k or k % lanes or n % lanes:
        return None
    return _Shape(m, n, k, element, lanes)


@dataclass(frozen=True)
class _Layout:
    """How a block covers the product: C column threads of V lanes (`columns` columns),
    R = threads / C k-threads, S blocks of a cluster over k of `split_rows` rows each."""
    column_threads: int
    columns: int
    k_threads: int
    column_blocks: int
    splits: int
    split_rows: int
    warps: int

    def shared_bytes(self, m: int) -> int:
        """The warps' partial sums, and (S > 1) the block's totals for its peers."""
        return 4 * m * self.columns * (self.warps + (self.splits > 1))


def _registers(shape: _Shape) -> int:
    """About how many registers a thread takes: m x V f32 sums, m rows of A (a 16-byte
    load each), a step's loads of B and the indices (ptxas, bf16: 32, 79, 162 and 255,
    the cap, at 1, 4, 8 and 16 rows)."""
    return shape.m * shape.lanes * 2 + 24


def _layout(shape: _Shape, p: Params, target) -> _Layout:
    facts = target.facts
    blocks_per_sm = facts.registers_per_block // (
        p.threads * min(facts.max_registers_per_thread, _registers(shape)))
    split = target.has(("clusters",)) and (p.splits > 1 or blocks_per_sm >= 2)
    column_threads = p.columns_per_block(shape.n, shape.lanes, split)
    columns = column_threads * shape.lanes
    k_threads = p.threads // column_threads
    column_blocks = -(-shape.n // columns)
    splits = p.split_count(shape.k, column_blocks, k_threads * shape.lanes, split)
    # rows of k each block sums (the last split's may be fewer): whole 16-byte loads
    split_rows = -(-shape.k // (splits * shape.lanes)) * shape.lanes
    return _Layout(column_threads, columns, k_threads, column_blocks, splits, split_rows,
                   p.threads // WARP)


def matches(generic: ir.Operation, target) -> bool:
    p = _params(generic, target)
    shape = _shape(generic, p)
    return shape is not None and _layout(shape, p, target).shared_bytes(shape.m) <= \
        target.facts.max_static_shared_per_block


def find_groups(generics: list, target) -> list[Group]:
    """C = constant, then the product into C: one kernel that starts from the constant
    (C is neither filled by a kernel of its own nor read)."""
    return filled_products(generics, lambda product: matches(product, target))


def _params(generic: ir.Operation, target) -> Params:
    return tuned(NAME, DEFAULT_PARAMS, target, problem_key(generic.operands))


def build(generic, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    """Kernel for a product generic, or for a Group (a constant fill and the product)."""
    initial = None  # None: the store reads C's initial value
    if isinstance(generic, Group):
        generic, initial = generic.product, generic.initial
    p = _params(generic, target)
    shape = _shape(generic, p)
    m, n, k, lanes = shape.m, shape.n, shape.k, shape.lanes
    layout = _layout(shape, p, target)
    column_threads, columns, k_threads = layout.column_threads, layout.columns, \
        layout.k_threads
    column_blocks, splits, split_rows, warps = layout.column_blocks, layout.splits, \
        layout.split_rows, layout.warps
    f32 = ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    partial_type = ir.MemRefType.get([warps, m * columns], f32, memory_space=shared)
    total_type = ir.MemRefType.get([m * columns], f32, memory_space=shared)
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        memref.GlobalOp(f"{kernel_name}_partial", ir.TypeAttr.get(partial_type),
                        sym_visibility="private", alignment=16)
        if splits > 1:
            memref.GlobalOp(f"{kernel_name}_total", ir.TypeAttr.get(total_type),
                            sym_visibility="private", alignment=16)
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [p.threads])
    if splits > 1:
        set_cluster_shape(func, (1, splits, 1))
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        a, b = (as_global(scope.value(v)) for v in ins)
        tid = gpu.thread_id(gpu.Dimension.x)
        column_thread = arith.RemUIOp(tid, index_const(column_threads)).result
        k_thread = arith.DivUIOp(tid, index_const(column_threads)).result
        block_col = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(columns)).result
        col = arith.AddIOp(block_col, arith.MulIOp(column_thread,
                                                   index_const(lanes)).result).result
        # a tail block's threads past N read the last columns and store nothing
        col_read = arith.MinUIOp(col, index_const(n - lanes)).result
        # block y's rows of k: k_begin .. k_end (None, k: all of them)
        split, k_begin, k_end = None, None, index_const(k)
        if splits > 1:
            split = gpu.block_id(gpu.Dimension.y)
            k_begin = arith.MulIOp(split, index_const(split_rows)).result
            k_end = arith.MinUIOp(arith.AddIOp(k_begin, index_const(split_rows)).result,
                                  index_const(k)).result
        vec = ir.VectorType.get([lanes], shape.element)
        zero = arith.ConstantOp(f32, 0.0).result
        zero_vec = arith.ConstantOp(vec, ir.DenseElementsAttr.get_splat(
            vec, ir.FloatAttr.get(shape.element, 0.0))).result
        per_step = k_threads * lanes
        loop = scf.ForOp(index_const(0), index_const(-(-split_rows // per_step)),
                         index_const(1), [zero] * (m * lanes))
        with ir.InsertionPoint(loop.body):
            step = loop.induction_variable
            k0 = arith.MulIOp(arith.AddIOp(arith.MulIOp(step, index_const(k_threads)).result,
                                           k_thread).result, index_const(lanes)).result
            if k_begin is not None:
                k0 = arith.AddIOp(k_begin, k0).result
            inside = arith.CmpIOp(arith.CmpIPredicate.ult, k0, k_end).result
            k_read = arith.MinUIOp(k0, index_const(k - lanes)).result
            # A's rows stay narrow until used: M * KV f32 values at once would not fit
            # in registers beside the M * V accumulators
            a_rows = [vector.LoadOp(vec, a, [index_const(i), k_read],
                                    alignment=VECTOR_BYTES).result for i in range(m)]
            acc = list(loop.inner_iter_args)
            for t in range(lanes):
                row = arith.AddIOp(k_read, index_const(t)).result
                loaded = vector.LoadOp(vec, b, [row, col_read], alignment=VECTOR_BYTES).result
                b_row = _lanes(arith.SelectOp(inside, loaded, zero_vec).result, lanes)
                for i in range(m):
                    a_it = _element(a_rows[i], t)
                    for v in range(lanes):
                        acc[i * lanes + v] = _fma(a_it, b_row[v], acc[i * lanes + v])
            scf.YieldOp(acc)
        # the R k-threads' sums: lanes of a warp sharing the column thread (equal modulo C)
        totals = [_warp_reduce(value, _add, column_threads) for value in loop.results]
        partial = memref.get_global(partial_type, f"{kernel_name}_partial")
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        first = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, lane,
                                      index_const(column_threads)).result)
        with ir.InsertionPoint(first.then_block):
            base = arith.MulIOp(column_thread, index_const(lanes)).result
            for i in range(m):
                for v in range(lanes):
                    slot = arith.AddIOp(base, index_const(i * columns + v)).result
                    memref.StoreOp(totals[i * lanes + v], partial, [warp, slot])
            scf.YieldOp([])
        gpu.BarrierOp()
        tile = _Tile(scope, outs[0], initial, m, n, columns, block_col)
        store_tile(tile, lambda slot: _warps_total(partial, slot, warps), tid, p.threads,
                   split, splits, total_type, f"{kernel_name}_total")
        gpu.ReturnOp([])
    grid = (column_blocks, splits, 1)
    return Launch(kernel_name, signature.values, grid, (p.threads, 1, 1))


def _lanes(vec: ir.Value, lanes: int) -> list[ir.Value]:
    """The elements of a loaded vector, as f32 scalars."""
    f32 = ir.F32Type.get()
    wide = vec
    if ir.VectorType(vec.type).element_type != f32:
        wide = arith.ExtFOp(ir.VectorType.get([lanes], f32), vec).result
    return [vector.ExtractOp(wide, [], [lane]).result for lane in range(lanes)]


def _element(vec: ir.Value, lane: int) -> ir.Value:
    """One element of a loaded vector, as an f32 scalar."""
    value = vector.ExtractOp(vec, [], [lane]).result
    return value if value.type == ir.F32Type.get() else \
        arith.ExtFOp(ir.F32Type.get(), value).result


def _add(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.AddFOp(a, b).result


@dataclass(frozen=True)
class _Tile:
    """The block's outputs: m rows x `columns` from column `block_col`, slot = row *
    columns + column (row-major)."""
    scope: KernelScope
    out: ir.Value
    initial: float | None  # a fill's constant C0, or None: C0 is out's value
    m: int
    n: int
    columns: int
    block_col: ir.Value

    def store(self, slot: ir.Value, total: ir.Value) -> None:
        """out[i, j] = round(C0 + total) for output `slot`, where it lies inside C."""
        row = arith.DivUIOp(slot, index_const(self.columns)).result
        col = arith.AddIOp(self.block_col,
                           arith.RemUIOp(slot, index_const(self.columns)).result).result
        guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, col, index_const(self.n)
                                      ).result)
        with ir.InsertionPoint(guard.then_block):
            element = ir.MemRefType(self.out.type).element_type
            start_value = self.scope.load(self.out, [row, col]) if self.initial is None \
                else arith.ConstantOp(ir.F32Type.get(), self.initial).result
            self.scope.store(add_and_round(start_value, total, element), self.out, [row, col])
            scf.YieldOp([])


def _for_slot(tid: ir.Value, start, end, body) -> None:
    """body(slot) for slot = start + tid where it is below `end` (start, end: ints or
    index values)."""
    as_value = lambda x: index_const(x) if isinstance(x, int) else x
    slot = tid if isinstance(start, int) and start == 0 else \
        arith.AddIOp(tid, as_value(start)).result
    guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, slot, as_value(end)).result)
    with ir.InsertionPoint(guard.then_block):
        body(slot)
        scf.YieldOp([])


def _warps_total(partial: ir.Value, at: ir.Value, warps: int) -> ir.Value:
    """The block's total of the output at `at` in each warp's row of `partial`: the
    warps' partial sums added in order."""
    total = memref.LoadOp(partial, [index_const(0), at]).result
    for w in range(1, warps):
        total = arith.AddFOp(total, memref.LoadOp(partial, [index_const(w), at]).result
                             ).result
    return total


def store_tile(tile: _Tile, block_total, tid: ir.Value, threads: int, split, splits: int,
               total_type: ir.Type, total_name: str) -> None:
    """The block's outputs stored, `block_total(slot)` being its sum of output `slot`:
    as they are (S = 1), or added over the cluster's S blocks (block y = `split`) through
    the shared buffer `total_name` of `total_type` (`_store_split`)."""
    if splits > 1:
        _store_split(tile, block_total, total_type, total_name, tid, split, splits, threads)
        return
    slots = tile.m * tile.columns
    for start in range(0, slots, threads):
        _for_slot(tid, start, slots, lambda slot: tile.store(slot, block_total(slot)))


def _store_split(tile: _Tile, block_total, total_type: ir.Type, total_name: str,
                 tid: ir.Value, split: ir.Value, splits: int, threads: int) -> None:
    """The cluster's S blocks' totals added: each block publishes its total of every
    output (`block_total(slot)`) in shared memory; block s then adds the S totals (block
    0's first) of its S-th of the outputs and stores them."""
    slots = tile.m * tile.columns
    total = memref.get_global(total_type, total_name)
    for start in range(0, slots, threads):
        _for_slot(tid, start, slots, lambda slot: memref.StoreOp(
            block_total(slot), total, [slot]))
    cluster_sync()
    i32 = ir.IntegerType.get_signless(32)
    base = shared_address(total)
    share = -(-slots // splits)
    first = arith.MulIOp(split, index_const(share)).result
    end = arith.MinUIOp(arith.AddIOp(first, index_const(share)).result,
                        index_const(slots)).result

    def add_blocks(slot: ir.Value) -> None:
        byte = arith.IndexCastOp(i32, arith.MulIOp(slot, index_const(4)).result).result
        address = arith.AddIOp(base, byte).result
        values = [load_from_block(address, arith.ConstantOp(i32, s).result)
                  for s in range(splits)]
        sum_ = values[0]
        for value in values[1:]:
            sum_ = arith.AddFOp(sum_, value).result
        tile.store(slot, sum_)

    for start in range(0, share, threads):
        _for_slot(tid, arith.AddIOp(first, index_const(start)).result if start else first,
                  end, add_blocks)
    # a block's shared memory lives while its peers read it
    cluster_sync()
