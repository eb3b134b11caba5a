"""Matvec on tensor cores: a product of 5-16 rows of f16/bf16 (a batched decode step).

C[i, j] += sum_k A[i, k] * B[k, j] with B [K, N] read once, as `matvec`, but with
mma.sync m16n8k16 instead of FMAs: at 16 rows matvec's threads do 128 FMAs per 16-byte
load of B and the product is bound by them (2-4x cuBLAS's time on an H200), not by
memory. The product runs transposed, C^T = B^T A^T: B's columns are the mma's 16 rows
(A operand) and A's rows its 8 columns (B operand, one mma per 8 rows).

A warp takes 128 columns of B and a 16-row step of k at a time. Lane (g = lane / 4,
t = lane % 4) loads B[k + {2t, 2t+1, 2t+8, 2t+9}, j0 + 64h + 8g .. + 7] for h = 0, 1
(eight 16-byte loads: each load instruction of the warp reads four 128-byte runs of
rows). Element e of those loads is, for mma "instance" e, the A fragment's
(row g + 8h, k pairs) the mma layout asks of that lane: instance e's row r stands for
column j0 + 8 (r % 8) + e + 64 (r / 8). So eight mmas per 8 rows of A, each with the
B operand A[i0 + g, k + 2t ..] (two 4-byte loads). Accumulators: D's (row g + 8h,
column 2t + c) = C^T[column of row, i0 + 2t + c].

The block's W warps split the block's k (warp w: steps w, w + W, .. of `unroll` steps at
a time, loads of all of them first); their sums meet in shared memory (4 warps' rows,
the other warps adding into them in turn), and, where the chip has clusters, the S
blocks of a cluster split k further and add their totals as matvec's do
(`matvec.store_tile`). Accumulation in f32, one rounding at the store.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, scf, vector

from . import Launch
from .clusters import PORTABLE_CLUSTER_BLOCKS, set_cluster_shape
from .hopper import _struct, _unpack
from .kernel_builder import (Group, KernelScope, KernelSignature, filled_products,
                             index_const, new_kernel, generic_operands)
from .matvec import VECTOR_BYTES, _shape, _Tile, _warps_total, fewest_splits, store_tile
from .matvec import Params as _MatvecParams
from .row_reduce import WARP
from .row_registers import as_global
from .tuning import problem_key, tuned

NAME = "matvec_mma"
REQUIRES = frozenset({"mma_sync"})

COLUMNS = 128  # of B, per warp (and block): 16 rows of 8 mma instances
# a row of A's partial sums in shared memory: 128 columns and one word of padding, so
# that a warp's stores of one accumulator (rows 2t + c, columns 8g + ..) meet at most
# two to a bank (without it: 8, every t and every other g on one bank)
PITCH = COLUMNS + 1
K_STEP = 16    # mma m16n8k16
LANES = 8      # f16 / bf16 elements per 16-byte load


@dataclass(frozen=True)
class Params:
    min_rows: int = 5        # fewer go to matvec: memory-bound there already
    max_rows: int = 16
    # per block, splitting k; their sums meet in shared memory `partial_rows` warps at
    # a time (48 KB holds 5 warps' rows of 16 x 128 f32). H200, 16 bf16 rows: 4 warps
    # took 2048x8192 in 15.3 us, 8 in 26.5, 12 in 30.0, 16 in 31.4
    warps: int = 4
    partial_rows: int = 4
    # k-steps a warp loads before its mmas (H200, 16 rows: 1 was as fast or faster than
    # 2 and 4 at every decode shape; 2048x32000 37.8 us against 52.9)
    unroll: int = 1
    splits: int = 0          # S (clusters); 0: the fewest making `split_blocks` blocks
    split_blocks: int = 264

    def __post_init__(self):
        assert self.warps >= 1 and self.unroll >= 1 and self.partial_rows >= 1, self
        assert 0 <= self.splits <= PORTABLE_CLUSTER_BLOCKS, self


DEFAULT_PARAMS = Params()


def _params(generic: ir.Operation, target) -> Params:
    return tuned(NAME, DEFAULT_PARAMS, target, problem_key(generic.operands))


@dataclass(frozen=True)
class _Layout:
    m: int
    n: int
    k: int
    element: ir.Type
    column_tiles: int
    splits: int
    split_rows: int   # rows of k per block (a multiple of 16)
    halves: int       # mmas per instance: 8 rows of A each

    @property
    def padded_rows(self) -> int:
        return 8 * self.halves

    def shared_bytes(self, partial_rows: int) -> int:
        """The warps' partial sums, and (S > 1) the block's totals for its peers."""
        return 4 * (partial_rows * self.padded_rows * PITCH +
                    (self.m * COLUMNS if self.splits > 1 else 0))


def _layout(generic: ir.Operation, p: Params, target) -> _Layout | None:
    shape = _shape(generic, _MatvecParams(max_rows=p.max_rows))
    if shape is None or str(shape.element) not in ("f16", "bf16") or \
            shape.m < p.min_rows or shape.k % K_STEP:
        return None
    tiles = -(-shape.n // COLUMNS)
    steps = shape.k // K_STEP
    splits = 1
    if target.has(("clusters",)):
        splits = p.splits or fewest_splits(tiles, steps // (p.warps * p.unroll),
                                           p.split_blocks)
    split_rows = -(-steps // splits) * K_STEP
    return _Layout(shape.m, shape.n, shape.k, shape.element, tiles, splits, split_rows,
                   -(-shape.m // 8))


def matches(generic: ir.Operation, target) -> bool:
    p = _params(generic, target)
    layout = _layout(generic, p, target)
    return layout is not None and \
        layout.shared_bytes(_partial_rows(p)) <= target.facts.max_static_shared_per_block


def _partial_rows(p: Params) -> int:
    return min(p.warps, p.partial_rows)


def find_groups(generics: list, target) -> list[Group]:
    """C = constant, then the product into C: one kernel (as matvec's)."""
    return filled_products(generics, lambda product: matches(product, target))


def build(generic, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    initial = None  # None: the store reads C's initial value
    if isinstance(generic, Group):
        generic, initial = generic.product, generic.initial
    p = _params(generic, target)
    layout = _layout(generic, p, target)
    f32 = ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    rows = _partial_rows(p)
    partial_type = ir.MemRefType.get([rows, layout.padded_rows * PITCH], f32,
                                     memory_space=shared)
    total_type = ir.MemRefType.get([layout.m * COLUMNS], f32, memory_space=shared)
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        memref.GlobalOp(f"{kernel_name}_partial", ir.TypeAttr.get(partial_type),
                        sym_visibility="private", alignment=16)
        if layout.splits > 1:
            memref.GlobalOp(f"{kernel_name}_total", ir.TypeAttr.get(total_type),
                            sym_visibility="private", alignment=16)
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    threads = p.warps * WARP
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    if layout.splits > 1:
        set_cluster_shape(func, (1, layout.splits, 1))
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        a, b = (as_global(scope.value(v)) for v in ins)
        kernel = _Kernel(layout, p, a, b)
        sums = kernel.products()
        partial = memref.get_global(partial_type, f"{kernel_name}_partial")
        kernel.store_partials(sums, partial, rows)
        tile = _Tile(scope, outs[0], initial, layout.m, layout.n, COLUMNS, kernel.block_col)
        store_tile(tile, lambda slot: _warps_total(partial, _padded(slot), rows),
                   gpu.thread_id(gpu.Dimension.x), threads, kernel.split, layout.splits,
                   total_type, f"{kernel_name}_total")
        gpu.ReturnOp([])
    grid = (layout.column_tiles, layout.splits, 1)
    return Launch(kernel_name, signature.values, grid, (threads, 1, 1))


class _Kernel:
    """The per-thread index values and the main loop of one kernel."""

    def __init__(self, layout: _Layout, p: Params, a: ir.Value, b: ir.Value):
        self.layout, self.p, self.a, self.b = layout, p, a, b
        self.i32 = ir.IntegerType.get_signless(32)
        tid = gpu.thread_id(gpu.Dimension.x)
        self.warp = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        self.g = arith.DivUIOp(lane, index_const(4)).result
        self.t = arith.RemUIOp(lane, index_const(4)).result
        self.block_col = arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                      index_const(COLUMNS)).result
        # the columns this lane loads (h = 0, 1); a tail tile's lanes past N read the
        # last columns and their sums are not stored
        eight_g = arith.MulIOp(self.g, index_const(LANES)).result
        self.b_cols = [arith.MinUIOp(
            arith.AddIOp(self.block_col, arith.AddIOp(eight_g, index_const(64 * h)).result
                         ).result, index_const(layout.n - LANES)).result for h in (0, 1)]
        self.split = gpu.block_id(gpu.Dimension.y) if layout.splits > 1 else None
        self.k_begin = arith.MulIOp(self.split, index_const(layout.split_rows)).result \
            if self.split is not None else index_const(0)
        self.k_end = arith.MinUIOp(arith.AddIOp(self.k_begin, index_const(layout.split_rows)
                                                ).result, index_const(layout.k)).result
        # A's rows this lane feeds the mma (g and 8 + g), clamped; rows past m give 0
        self.a_rows = [arith.AddIOp(self.g, index_const(8 * q)).result
                       for q in range(layout.halves)]
        self.a_row_valid = [arith.CmpIOp(arith.CmpIPredicate.ult, row,
                                         index_const(layout.m)).result
                            for row in self.a_rows]
        self.a_rows = [arith.MinUIOp(row, index_const(layout.m - 1)).result
                       for row in self.a_rows]

    def products(self) -> list:
        """The loop over k: [instance e][half q] accumulators (4 f32 each), summed over
        the warp's steps."""
        layout, p = self.layout, self.p
        f32 = ir.F32Type.get()
        zero = arith.ConstantOp(f32, 0.0).result
        per_trip = p.warps * p.unroll * K_STEP
        trips = -(-layout.split_rows // per_trip)
        count = LANES * layout.halves * 4
        loop = scf.ForOp(index_const(0), index_const(trips), index_const(1), [zero] * count)
        with ir.InsertionPoint(loop.body):
            acc = list(loop.inner_iter_args)
            first_step = arith.MulIOp(arith.AddIOp(
                arith.MulIOp(loop.induction_variable, index_const(p.warps)).result,
                self.warp).result, index_const(p.unroll)).result
            steps = []
            for u in range(p.unroll):
                k0 = arith.AddIOp(self.k_begin, arith.MulIOp(
                    arith.AddIOp(first_step, index_const(u)).result,
                    index_const(K_STEP)).result).result
                steps.append(self._load_step(k0))
            for b_loads, a_regs in steps:
                acc = self._mmas(acc, b_loads, a_regs)
            scf.YieldOp(acc)
        return list(loop.results)

    def _load_step(self, k0: ir.Value):
        """One k-step's loads: B's eight 16-byte vectors [row role][h] and A's operand
        registers [half q] (two i32 each, zero past m or past the block's k)."""
        layout = self.layout
        inside = arith.CmpIOp(arith.CmpIPredicate.ult, k0, self.k_end).result
        k_read = arith.MinUIOp(k0, index_const(layout.k - K_STEP)).result
        two_t = arith.MulIOp(self.t, index_const(2)).result
        row0 = arith.AddIOp(k_read, two_t).result
        vec = ir.VectorType.get([LANES], layout.element)
        # rows past the block's k read as zeros (not just times a zero of A: 0 * inf)
        zeros = arith.ConstantOp(vec, ir.DenseElementsAttr.get_splat(
            vec, ir.FloatAttr.get(layout.element, 0.0))).result
        b_loads = [[arith.SelectOp(inside, vector.LoadOp(
            vec, self.b, [arith.AddIOp(row0, index_const(dk)).result, self.b_cols[h]],
            alignment=VECTOR_BYTES).result, zeros).result for h in (0, 1)]
            for dk in (0, 1, 8, 9)]
        pair = ir.VectorType.get([2], layout.element)
        one_i32 = ir.VectorType.get([1], self.i32)
        zero = arith.ConstantOp(self.i32, 0).result
        a_regs = []
        for q in range(layout.halves):
            use = arith.AndIOp(inside, self.a_row_valid[q]).result
            regs = []
            for dk in (0, 8):
                loaded = vector.LoadOp(pair, self.a, [self.a_rows[q],
                                                      arith.AddIOp(row0, index_const(dk)
                                                                   ).result],
                                       alignment=4).result
                bits = vector.ExtractOp(vector.BitCastOp(one_i32, loaded).result, [],
                                        [0]).result
                regs.append(arith.SelectOp(use, bits, zero).result)
            a_regs.append(regs)
        return b_loads, a_regs

    def _mmas(self, acc: list, b_loads, a_regs) -> list:
        """acc[e][q] += mma(instance e's fragment of B^T, A's rows 8q ..)."""
        acc = list(acc)
        one_i32 = ir.VectorType.get([1], self.i32)
        for e in range(LANES):
            # (row g, k 2t..), (row g+8, k 2t..), (row g, k 2t+8..), (row g+8, k 2t+8..)
            fragment = []
            for low, high in ((0, 1), (2, 3)):
                for h in (0, 1):
                    packed = vector.ShuffleOp(b_loads[low][h], b_loads[high][h],
                                              [e, LANES + e]).result
                    fragment.append(vector.ExtractOp(
                        vector.BitCastOp(one_i32, packed).result, [], [0]).result)
            for q in range(self.layout.halves):
                at = (e * self.layout.halves + q) * 4
                acc[at:at + 4] = mma_m16n8k16(acc[at:at + 4], fragment, a_regs[q],
                                              str(self.layout.element))
        return acc

    def store_partials(self, sums: list, partial: ir.Value, rows: int) -> None:
        """The warps' sums into `partial`'s `rows` rows: warp w into row w % rows, the
        first `rows` warps storing, the others adding in turn (a barrier after each
        turn). At row of A * PITCH + column of the tile; D (row g + 8h, column 2t + c)
        of instance e is column 8g + e + 64h, row of A 8q + 2t + c."""
        two_t = arith.MulIOp(self.t, index_const(2)).result
        row_of_warp = arith.RemUIOp(self.warp, index_const(rows)).result
        turn_of_warp = arith.DivUIOp(self.warp, index_const(rows)).result
        for turn in range(-(-self.p.warps // rows)):
            mine = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, turn_of_warp,
                                         index_const(turn)).result)
            with ir.InsertionPoint(mine.then_block):
                for e in range(LANES):
                    for q in range(self.layout.halves):
                        for v in range(4):
                            h, c = divmod(v, 2)
                            row = arith.AddIOp(two_t, index_const(8 * q + c)).result
                            col = arith.AddIOp(
                                arith.MulIOp(self.g, index_const(LANES)).result,
                                index_const(e + 64 * h)).result
                            slot = arith.AddIOp(arith.MulIOp(row, index_const(PITCH)
                                                             ).result, col).result
                            value = sums[(e * self.layout.halves + q) * 4 + v]
                            if turn:
                                value = arith.AddFOp(memref.LoadOp(
                                    partial, [row_of_warp, slot]).result, value).result
                            memref.StoreOp(value, partial, [row_of_warp, slot])
                scf.YieldOp([])
            gpu.BarrierOp()


def _padded(slot: ir.Value) -> ir.Value:
    """Where output `slot` (row of A * 128 + column) sits in a row of partial sums."""
    return arith.AddIOp(slot, arith.DivUIOp(slot, index_const(COLUMNS)).result).result


def mma_m16n8k16(acc: list, a: list, b: list, element: str) -> list:
    """D = A B + D, mma.sync m16n8k16 (row.col), f32 accumulators: `a` four i32 (two
    `element`s each), `b` two."""
    f32 = ir.F32Type.get()
    text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{element}.{element}.f32 "
            "{$0, $1, $2, $3}, {$8, $9, $10, $11}, {$12, $13}, {$0, $1, $2, $3};")
    constraints = "=f,=f,=f,=f,0,1,2,3,r,r,r,r,r,r"
    op = llvm.InlineAsmOp(_struct(4, "f32"), list(acc) + list(a) + list(b), text,
                          constraints)
    return _unpack(op.result, 4, f32)
