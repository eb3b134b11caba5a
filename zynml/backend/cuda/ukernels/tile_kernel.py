"""The attention ukernels' kernel frame (FlashAttention-2's structure): a block of 128
threads, 4 warps of 16 rows (or keys), two tiles kept for the whole sweep and two
streamed through double-buffered shared memory by cp.async, the products of
tile_stage.py's stage (wgmma or mma.sync), and the key rule (causal, the keys' end)
applied only on the tiles that need it. The kernels are attention_forward_kernels.py's
and attention_backward_kernels.py's."""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func, gpu, memref, nvgpu, scf, vector
from mlir.dialects import math as mmath

from ..strategies.flash_skeleton import (LOG2E, add, clamp, declare_static_tiles, less,
                                         mul, quad_reduce, spread_over_threads,
                                         static_tiles)
from ..strategies.kernel_builder import index_const, new_kernel
from .attention_backward import BLOCK, THREADS, Problem
from ..strategies.warp_mma import MMA_N, Warp, barrier, f32_zero, lane_of
from .tile_stage import Kept, MmaStage, WgmmaStage, takes_wgmma


# BlockOrder's groups: this many blocks a multiprocessor, about four waves of blocks (a
# multiprocessor runs two or three at once). Causal bf16 forward / backward ms on an
# H200 (2026-11-29), head after head as before; every head in one group; groups of one
# wave; of four: [16, 12, 1024, 64] 0.105 / 0.266; 0.100 / 0.258; 0.106 / 0.266;
# 0.101 / 0.261. [8, 16, 2048, 128] 0.397 / 1.008; 0.420 / 1.080 (K and V out of L2);
# 0.399 / 1.037; 0.380 / 1.012. [1, 32, 4096, 128] 0.387 / 0.966; 0.357 / 0.900;
# 0.382 / 0.992; 0.347 / 0.900.
GROUP_BLOCKS = 8


def host_module(problem: Problem, target, kernel_module: str, inputs: dict, outputs: dict,
                scratch: dict, launches: list, aliases: dict | None = None) -> ir.Module:
    """The host function `main(inputs) -> outputs` and its kernels for `target` (a
    CudaTarget: wgmma products where it has them, tile_stage.py), as
    linalg-to-gpu-kernels leaves a program (the CUDA stages go on from there). `inputs`,
    `outputs` and `scratch` (buffers not returned) map names to memref types;
    `launches` is a list of (kernel name, TileKernel class, operand names, (heads,
    tiles, whether the last tile goes first)), a block a head's tile (BlockOrder);
    `aliases` names more operands, each another's buffer (q, k and v one fused qkv)."""
    el = element_type(problem)
    module = ir.Module.create()
    module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
    with ir.InsertionPoint(module.body):
        kernels = gpu.GPUModuleOp(kernel_module)
        kernels.regions[0].blocks.append()
        main = func.FuncOp("main", ir.FunctionType.get(list(inputs.values()),
                                                       list(outputs.values())))
    main.attributes["zynml.inputs"] = _strings(list(inputs))
    main.attributes["zynml.outputs"] = _strings(list(outputs))
    entry = main.add_entry_block()
    values = dict(zip(inputs, entry.arguments))
    with ir.InsertionPoint(entry):
        for name, type_ in {**outputs, **scratch}.items():
            values[name] = memref.AllocOp(type_, [], []).result
        for name, other in (aliases or {}).items():
            values[name] = values[other]
        for name, kind, operand_names, (heads, tiles, reverse) in launches:
            operands = [values[n] for n in operand_names]
            order = BlockOrder.of(heads, tiles, reverse,
                                  GROUP_BLOCKS * target.facts.multiprocessors)
            kernel = kind(problem, el, takes_wgmma(problem, target), order)
            kernel.define(kernels.operation, name, operands)
            dynamic = kernel.dynamic_shared_bytes()
            gpu.LaunchFuncOp([kernel_module, name], [index_const(n) for n in
                                                     (order.blocks, 1, 1)],
                             [index_const(THREADS), index_const(1), index_const(1)],
                             kernel_operands=operands, dynamic_shared_memory_size=arith.
                             ConstantOp(ir.IntegerType.get_signless(32), dynamic).result
                             if dynamic else None)
        func.ReturnOp([values[n] for n in outputs])
    return module


@dataclass(frozen=True)
class Operand:
    """How the kernels index a [slices, rows, d] operand: the array itself (`heads` 0),
    or token-major rows, slice = b * heads + h: [batch, seq, heads, d] (`part` None) or
    a fused projection's [batch, seq, parts, heads, d] at part `part`."""
    array: ir.Value
    heads: int = 0
    part: int | None = None

    def at(self, slice_index, row, col) -> list:
        if not self.heads:
            return [slice_index, row, col]
        b = arith.DivUIOp(slice_index, index_const(self.heads)).result
        h = arith.RemUIOp(slice_index, index_const(self.heads)).result
        part = [] if self.part is None else [index_const(self.part)]
        return [b, row, *part, h, col]


def element_type(problem: Problem) -> ir.Type:
    return ir.BF16Type.get() if problem.element == "bf16" else ir.F16Type.get()


def _strings(names: list) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])


@dataclass(frozen=True)
class BlockOrder:
    """Which (head, tile) each block of a kernel's one-dimensional grid takes. The heads
    go in groups of `group`, a few waves of blocks (`of`); a group's blocks take tile
    after tile over its heads, the last tile first where `reverse`, and the groups come
    one after another. Where causal a block's work changes with its tile (1 to 64 at
    4096 keys): the longest blocks of a group start first and the short ones fill its
    tail, while the group's heads keep their K and V in L2 as head after head did. A GQA
    backward's dK / dV kernel, 1.9 waves of such blocks, left multiprocessors idle
    (device_ops' 1x32x4096x128: 1.18 -> 0.91 ms with every head in one group; with
    every head in one group [8, 16, 2048, 128]'s forward lost 6%: its K and V no longer
    fit in L2)."""
    heads: int
    tiles: int
    group: int
    reverse: bool

    @staticmethod
    def of(heads: int, tiles: int, reverse: bool, blocks: int) -> "BlockOrder":
        """Groups of about `blocks` blocks (whole heads' tiles, at least one head)."""
        return BlockOrder(heads, tiles, max(1, min(heads, -(-blocks // tiles))), reverse)

    @property
    def blocks(self) -> int:
        return self.heads * self.tiles

    def at(self, linear: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(head, tile) of block `linear`."""
        span = self.group * self.tiles
        first = mul(arith.DivUIOp(linear, index_const(span)).result, self.group)
        within = arith.RemUIOp(linear, index_const(span)).result
        size = arith.MinUIOp(index_const(self.group),  # the last group's may be fewer
                             arith.SubIOp(index_const(self.heads), first).result).result
        rank = arith.DivUIOp(within, size).result
        head = add(first, arith.RemUIOp(within, size).result)
        tile = arith.SubIOp(index_const(self.tiles - 1), rank).result if self.reverse \
            else rank
        return head, tile


class TileKernel:
    """What the attention ukernels' kernels share: the problem, the element type, shared
    memory, copies, the products and the double-buffered sweep.

    Shared memory is one `stage` of BLOCK-row tiles: a kernel first copies the tiles it
    keeps for the whole sweep (Q; Q and dO; K and V) into rows 0..2 BLOCK (`kept`), and
    then streams its other tiles through two buffers of 2 BLOCK rows each, tile j + 1's
    copies in flight while tile j is multiplied. Where the kept tiles are taken into
    registers (mma.sync up to head dim 64) the buffers reuse their rows; elsewhere the
    buffers follow them (`kept_rows`; tile_stage.py)."""

    def __init__(self, problem: Problem, element: ir.Type, wgmma: bool = False,
                 order: BlockOrder | None = None):
        self.p, self.el, self.order = problem, element, order
        self.f32 = ir.F32Type.get()
        self.c = problem.scale * LOG2E  # scores * c: base 2
        self.stage = (WgmmaStage if wgmma else MmaStage)(problem.d, element)

    def define(self, gpu_module: ir.Operation, name: str, operands: list) -> None:
        static = self.stage.static_type
        types = {} if static is None else {"stage": static}
        types.update(self.stat_tiles())
        declare_static_tiles(gpu_module, name, types, ir.Location.unknown())
        kernel = new_kernel(gpu_module, name, [v.type for v in operands], [THREADS])
        block = kernel.regions[0].blocks[0]
        with ir.InsertionPoint(block):
            self.tid = gpu.thread_id(gpu.Dimension.x)
            warp, lane = lane_of(self.tid)
            self.warp16 = mul(warp, 16)
            self.w = Warp(self.el, lane)
            tiles = static_tiles(name, types)
            self.stage.enter(self.w, self.warp16, tiles.pop("stage", None))
            self.emit(list(block.arguments), tiles)
            gpu.ReturnOp([])

    def dynamic_shared_bytes(self) -> int:
        """The launch's dynamic shared memory: the stage where it is not static."""
        return self.stage.dynamic_bytes()

    @property
    def kept_rows(self) -> int:
        """Stage rows before the buffers: the kept tiles', where they stay there."""
        return self.stage.kept_rows

    def buffer_row(self, j: ir.Value) -> ir.Value:
        """The stage row of tile j's buffer (its first of 2 BLOCK rows)."""
        return add(mul(arith.RemUIOp(j, index_const(2)).result, 2 * BLOCK), self.kept_rows)

    def buffer_index(self, base: ir.Value) -> ir.Value:
        """0 or 2 BLOCK: which buffer starts at stage row `base`, as an offset."""
        return arith.SubIOp(base, index_const(self.kept_rows)).result if self.kept_rows \
            else base

    def stat_tiles(self) -> dict:
        return {}

    def operand(self, array: ir.Value, part: int | None = None) -> "Operand":
        """A kernel argument as a [slices, rows, d] operand: itself in the "heads"
        layout; in the "tokens" layout a view of token-major rows, part `part` of a
        fused projection (q 0, k 1, v 2) or, None, of one [batch, seq, heads, d]."""
        per_batch = self.p.heads // self.p.batch if self.p.layout == "tokens" else 0
        return Operand(array, per_batch, part)

    def query_block(self) -> tuple:
        """(head, kv_head, row0, first, rows) of a block of BLOCK query rows: its query
        slice and tile (`order`), the key slice it reads, its first row, the warp's
        first row and the lane's two rows (accumulator rows g and g + 8)."""
        head, tile = self.order.at(gpu.block_id(gpu.Dimension.x))
        kv_head = arith.DivUIOp(head, index_const(self.p.group)).result
        row0 = mul(tile, BLOCK)
        first = add(row0, self.warp16)
        rows = [add(add(first, self.w.g), 8 * h) for h in (0, 1)]
        return head, kv_head, row0, first, rows

    def sweep_keys(self, k, v, kv_head, row0, state: list, step) -> list:
        """Sweep the key tiles the BLOCK rows from row0 see, each tile's K (and V, unless
        None) through the stage (K at `base`, V at base + BLOCK): step(kv0, base, state,
        masked) -> the next state, `masked` where the tile needs the key rule."""
        def issue(j, base):
            self.copy_rows(k, kv_head, mul(j, BLOCK), self.p.keys, base)
            if v is not None:
                self.copy_rows(v, kv_head, mul(j, BLOCK), self.p.keys, add(base, BLOCK))

        def compute(j, base, carried):
            kv0 = mul(j, BLOCK)
            return self.by_mask(self.crosses(kv0, row0, True), carried,
                                lambda masked: step(kv0, base, carried, masked))
        return self.sweep(self.key_tiles(row0), state, issue, compute)

    def store_row_values(self, head, rows: list, stores: list) -> None:
        """target[head, row] = the lane's value of each row, for each (target, the two
        rows' values) of `stores` (f32 [slices, rows] targets), by the quad's first lane,
        for the rows below the end."""
        first_lane = arith.CmpIOp(arith.CmpIPredicate.eq, self.w.t, index_const(0)).result
        for h, row in enumerate(rows):
            guard = scf.IfOp(arith.AndIOp(first_lane, less(row, self.p.rows)).result)
            with ir.InsertionPoint(guard.then_block):
                for target, values in stores:
                    memref.StoreOp(values[h], target, [head, row])
                scf.YieldOp([])

    # ------------------------------------------------------------ copies

    def copy_rows(self, source: "Operand", slice_index, row0, extent: int, base) -> None:
        """cp.async BLOCK rows row0.. of source[slice_index] into stage rows base..,
        16 bytes a thread and step; rows past `extent` land as zeros."""
        per_row = self.p.d // 8

        def chunk(flat):
            r = arith.DivUIOp(flat, index_const(per_row)).result
            col = mul(arith.RemUIOp(flat, index_const(per_row)).result, 8)
            row = add(row0, r)
            count = arith.SelectOp(less(row, extent), index_const(8), index_const(0)).result
            memory, at = self.stage.copy_target(add(base, r), col)
            return nvgpu.DeviceAsyncCopyOp(
                memory, at, source.array,
                source.at(slice_index, clamp(row, extent), col),
                ir.IntegerAttr.get(ir.IndexType.get(), 8), srcElements=count,
                bypassL1=True).result
        spread_over_threads(self.tid, BLOCK * per_row, THREADS, chunk)

    def wait_copies(self) -> None:
        """Every copy this thread issued has landed, for every thread."""
        nvgpu.DeviceAsyncWaitOp(nvgpu.DeviceAsyncCreateGroupOp([]).result, numGroups=0)
        self.stage.landed()
        barrier()

    def sweep(self, count: ir.Value, state: list, issue, compute) -> list:
        """for j in 0..count: compute(j, base, state) -> state, base the stage row of
        the buffer that holds tile j; issue(j, base) copies tile j there, one iteration
        ahead (cp.async groups: each iteration commits one, perhaps empty, and waits for
        all but that newest one)."""
        some = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ugt, count, index_const(0)).result)
        with ir.InsertionPoint(some.then_block):
            issue(index_const(0), index_const(self.kept_rows))
            scf.YieldOp([])
        nvgpu.DeviceAsyncCreateGroupOp([])

        def body(j, carried):
            after = add(j, 1)
            more = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, after, count).result)
            with ir.InsertionPoint(more.then_block):
                issue(after, self.buffer_row(after))
                scf.YieldOp([])
            nvgpu.DeviceAsyncWaitOp(nvgpu.DeviceAsyncCreateGroupOp([]).result, numGroups=1)
            self.stage.landed()
            barrier()  # tile j is here, for every thread
            carried = compute(j, self.buffer_row(j), carried)
            barrier()  # every warp is done with tile j's buffer before it is refilled
            return carried
        return loop(index_const(0), count, state, body)

    # ------------------------------------------------------------ products

    def kept(self, base: int) -> Kept:
        """The warp's rows of the kept tile at stage row `base` (0 or BLOCK)."""
        return self.stage.kept(base)

    def product_nk(self, kept: Kept, base, wait: bool = True) -> list:
        """A (the kept tile's rows) times stage rows base..base + BLOCK as B^T: the
        warp's BLOCK / 8 accumulator tiles (S = Q K^T and its kin). `wait` False: the
        tiles may be still in the making (wgmma): `finish` them before reading."""
        return self.stage.product_nk(kept, base, wait)

    def accumulate_kn(self, acc: list, left: list, base, wait: bool = True) -> list:
        """acc + L B, L the warp's 16 x BLOCK accumulator tiles `left` and B stage rows
        base..base + BLOCK as they are (P V and its kin): d / 8 accumulator tiles
        (`wait` as product_nk's)."""
        return self.stage.accumulate_kn(acc, left, base, wait)

    def finish(self, tiles: list, pending: int) -> list:
        """`tiles` of a product made with wait=False, once at most `pending` of the
        products issued since are still running (wgmma.wait_group)."""
        return self.stage.finish(tiles, pending)

    def store_rows(self, target: "Operand", slice_index, first_row, acc: list,
                   factor: float, extent: int) -> None:
        """target[slice, first_row + g (+ 8), ..] = acc * factor in the element type,
        for the rows below `extent`."""
        pair = ir.VectorType.get([2], self.el)
        factor = arith.ConstantOp(self.f32, factor).result
        for h in (0, 1):
            row = add(add(first_row, self.w.g), 8 * h)
            guard = scf.IfOp(less(row, extent))
            with ir.InsertionPoint(guard.then_block):
                for n, tile in enumerate(acc):
                    values = [arith.TruncFOp(self.el, arith.MulFOp(x, factor).result).result
                              for x in tile[2 * h:2 * h + 2]]
                    vector.StoreOp(vector.FromElementsOp(pair, values).result, target.array,
                                   target.at(slice_index, row, add(self.w.two_t, n * MMA_N)),
                                   alignment=4)
                scf.YieldOp([])

    def allowed(self, key, row):
        """May `row` see `key` (None: every key of every tile is there and seen)."""
        verdict = less(key, self.p.keys) if self.p.keys % BLOCK else None
        if self.p.causal:
            below = self.causal_allows(key, row)
            verdict = below if verdict is None else arith.AndIOp(verdict, below).result
        return verdict

    def key_tiles(self, row0: ir.Value) -> ir.Value:
        """How many key tiles the BLOCK rows from row0 see: causal, up to the block's
        last row's last key."""
        p = self.p
        if not p.causal:
            return index_const(math.ceil(p.keys / BLOCK))
        last = arith.MinUIOp(add(row0, BLOCK), index_const(p.rows)).result
        end = arith.MinUIOp(add(last, p.offset), index_const(p.keys)).result
        return ceil_div(end, BLOCK)

    def scores_by_row(self, s: list, kv0, rows: list, masked: bool) -> tuple:
        """The accumulator tiles `s` of scores of keys kv0.. as each of the lane's two
        rows' values, and per row the key rule's verdict per value (None: unmasked)."""
        values, allowed = [[], []], [[], []]
        for n, tile in enumerate(s):
            for i, score in enumerate(tile):
                h, col = divmod(i, 2)
                values[h].append(score)
                key = add(add(kv0, self.w.two_t), n * MMA_N + col)
                allowed[h].append(self.allowed(key, rows[h]) if masked else None)
        return values, (None if allowed[0][0] is None else allowed)

    def softmax_start(self) -> list:
        """The online softmax's running maxima (-inf) and partial sums (0) of two rows."""
        return [arith.ConstantOp(self.f32, float("-inf")).result] * 2 + [f32_zero()] * 2

    def lse2_of(self, maxima: list, partial_sums: list) -> tuple[list, list]:
        """(lse2, sums) of the lane's two rows from the online softmax's state: lse2 =
        max * c + log2(sum), +inf for a row that saw no key (its P is then 0); the sums
        are the quad's lanes' added."""
        inf = float("inf")
        lse2, sums = [], []
        for row_max, partial in zip(maxima, partial_sums):
            total = quad_reduce(partial, arith.AddFOp)
            value = arith.AddFOp(arith.MulFOp(row_max, arith.ConstantOp(
                self.f32, self.c).result).result, mmath.Log2Op(total).result).result
            empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, row_max,
                                 arith.ConstantOp(self.f32, -inf).result).result
            lse2.append(arith.SelectOp(empty, arith.ConstantOp(self.f32, inf).result,
                                       value).result)
            sums.append(total)
        return lse2, sums

    def causal_allows(self, key: ir.Value, row: ir.Value) -> ir.Value:
        """key <= row + offset (signed)."""
        return arith.CmpIOp(arith.CmpIPredicate.sle, key,
                            add(row, self.p.offset)).result

    def by_mask(self, needs_mask, state: list, step) -> list:
        """step(masked) -> the next state, built twice: with the key rule where
        `needs_mask` holds (a tile across the causal diagonal or the keys' end), without
        it for the others, whose every row sees every key (most tiles; the rule's
        compare and select per score cost the dQ kernel 6%)."""
        if needs_mask is None:
            return step(True)
        branch = scf.IfOp(needs_mask, [v.type for v in state], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp(step(True))
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(step(False))
        return list(branch.results)

    def crosses(self, first_key, first_row, key_end_too: bool):
        """Does the BLOCK x BLOCK tile of keys first_key.. and rows first_row.. need
        the key rule: some key after some row's last (causal), or, with `key_end_too`,
        past the keys' end. None: no tile does."""
        p, verdict = self.p, None
        if p.causal:
            verdict = arith.CmpIOp(arith.CmpIPredicate.sgt, add(first_key, BLOCK - 1),
                                   add(first_row, p.offset)).result
        if key_end_too and p.keys % BLOCK:
            past = arith.CmpIOp(arith.CmpIPredicate.ugt, add(first_key, BLOCK),
                                index_const(p.keys)).result
            verdict = past if verdict is None else arith.OrIOp(verdict, past).result
        return verdict

    def prob(self, score, lse2, allowed=None):
        """exp2(score * c - lse2), 0 where not `allowed` (None: allowed)."""
        prob = mmath.Exp2Op(mmath.FmaOp(score, arith.ConstantOp(self.f32, self.c).result,
                                        arith.NegFOp(lse2).result).result).result
        return prob if allowed is None else \
            arith.SelectOp(allowed, prob, f32_zero()).result


def loop(lower: ir.Value, upper: ir.Value, state: list, body) -> list:
    """scf.for lower..upper carrying `state`; body(iv, state) -> the next state."""
    loop = scf.ForOp(lower, upper, index_const(1), state)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def flat(tiles: list) -> list:
    return [x for tile in tiles for x in tile]


def accumulator_tiles(values: list) -> list:
    return [values[i:i + 4] for i in range(0, len(values), 4)]


def ceil_div(value: ir.Value, divisor: int) -> ir.Value:
    return arith.DivUIOp(add(value, divisor - 1), index_const(divisor)).result
