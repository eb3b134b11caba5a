"""The frame of attention_wgmma's kernel and the ring that feeds its warpgroups: Q's tile
and a ring of `stages` slots of K and V tiles (and of mask tiles) in dynamic shared
memory, their mbarriers, the block's work items, and the copying warpgroup that fills
the ring (attention_wgmma.py's _Kernel adds the warpgroups that consume it).

- The last warpgroup copies: its first thread, with the copy engine
  (`cp.async.bulk.tensor`, 128-byte swizzle, 64-column boxes), an item's Q tile (once
  every warpgroup has released the previous item's, after its last S), then each tile of
  `block_n` keys of K and V into the next slot of the ring; a slot's copies complete on
  its "full" mbarrier, and it is refilled once every warpgroup has arrived on its
  "empty" mbarrier.
- A staged mask (its last axis the keys', rows a multiple of 16 bytes): two warps of
  the copying warpgroup (idle otherwise) copy each key tile's block_m x block_n bytes by
  cp.async, 16 bytes a thread and 8 threads a row (coalesced), into a mask ring beside
  the K/V ring (rows padded by 16 bytes: a warp's 8 rows then fall in different banks),
  wait for their copies and arrive on the slot's full barrier, whose count includes
  them. Not TMA: it needs the global row pitch to be a multiple of 16 bytes too, and
  would need a swizzled layout to avoid the same bank conflicts; cp.async zero-fills
  the 16-key chunks past the last key as TMA would.
- Work items (64 * warpgroups query rows of one (p..) slice): a persistent block takes
  items block, block + grid, ...; the ring and Q's barriers run on across them, so the
  next item's Q and first key tiles load while the warpgroups finish this one.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvgpu, scf

from .extents import as_index, ceil_div, minus, product
from .kernel_builder import delinearize, index_const
from .flash_skeleton import FlashFrame, add
from .hopper import (SWIZZLE_BYTES, WARP, WARPGROUP, acquire_tensor_maps,
                     aligned_dynamic_shared, barrier_group, equals, free_slot, only_if,
                     shared, split_roles, uniform_warp)

BOX_COLUMNS = 64   # f16 / bf16 per 128-byte swizzled row: a TMA box's width
MASK_COPIERS = 64  # threads of the copying warpgroup (its warps 1 and 2) staging the mask


@dataclass
class RingKernel(FlashFrame):
    """attention_wgmma's kernel less its warpgroups' products: `emit` sets up the ring
    and splits the block into the copying warpgroup and the consumers, whose work the
    subclass gives (`_consume(tid, warp, out)`)."""
    p: object         # attention_wgmma.Params: tiles, stages, warpgroups, the ring's bytes
    element: ir.Type  # f16 or bf16
    c: float | ir.Value  # scale * log2(e): a number, or a run-time scale's value
    mask: Optional[ir.Value]  # the kernel's i8 mask argument
    staged: bool      # the mask reaches shared memory by cp.async (else: read directly)
    whole_key_tiles: bool = False  # run-time keys known a multiple of the tile (the
                                   # plan checks): no per-key bound check

    def emit(self, out, q_map, k_map, v_map):
        p = self.p
        self.f32 = ir.F32Type.get()
        tid = gpu.thread_id(gpu.Dimension.x)
        consumers = WARPGROUP * p.warpgroups
        self.ring = aligned_dynamic_shared(p.shared_bytes(self.d, self.e, self.staged) - 1024)
        self.full = barrier_group(p.stages)   # a slot's K and V tiles (and mask) have landed
        self.empty = barrier_group(p.stages)  # every warpgroup is done with a slot
        self.q_full = barrier_group(1)   # the item's Q tile has landed
        self.q_empty = barrier_group(1)  # every warpgroup's last S has read it
        copier = equals(tid, consumers)
        with only_if(copier):
            # the TMA thread's arrival (with the bytes it expects) and the mask copiers'
            full_count = 1 + (MASK_COPIERS if self.staged else 0)
            # each warpgroup's releasing thread (a staged mask: all its threads)
            empty_count = p.warpgroups * (WARPGROUP if self.staged else 1)
            for s in range(p.stages):
                nvgpu.mbarrier_init(self.full, index_const(full_count), index_const(s))
                nvgpu.mbarrier_init(self.empty, index_const(empty_count), index_const(s))
            nvgpu.mbarrier_init(self.q_full, index_const(1), index_const(0))
            nvgpu.mbarrier_init(self.q_empty, index_const(p.warpgroups), index_const(0))
            acquire_tensor_maps(q_map, k_map, v_map)
        gpu.BarrierOp()
        self.row_blocks = ceil_div(self.rows, p.block_m)
        self.block = gpu.block_id(gpu.Dimension.x)
        self.blocks = gpu.grid_dim(gpu.Dimension.x)
        items = product([self.row_blocks] + self.lead)
        # this block's work items: block, block + grid, ... (the grid has at most `items`)
        self.my_items = arith.DivUIOp(arith.SubIOp(
            add(self.blocks, minus(items, 1)), self.block).result, self.blocks).result
        warp = uniform_warp(tid)

        def copy():
            with only_if(copier):
                self._copy(q_map, k_map, v_map)
            if self.staged:  # warps 1 and 2 of the copying warpgroup (warp-uniform)
                first = consumers // WARP + 1
                with only_if(arith.AndIOp(
                        arith.CmpIOp(arith.CmpIPredicate.uge, warp, index_const(first)).result,
                        arith.CmpIOp(arith.CmpIPredicate.ult, warp,
                                     index_const(first + MASK_COPIERS // WARP)).result).result):
                    self._copy_mask(arith.SubIOp(tid, index_const(first * WARP)).result)
        split_roles(warp, consumers, copy, lambda: self._consume(tid, warp, out))

    @contextmanager
    def _items(self):
        """A loop over this block's work items, with `_item`'s values set for each;
        yields (the item's index among the block's, the ring steps the items before it
        took). The ring (and Q's barriers) run on across items: the copier fills the
        next item's first slots while the warpgroups finish this one."""
        counted = self.causal is not None  # items differ in key tiles: count the steps
        loop = scf.ForOp(index_const(0), self.my_items, index_const(1),
                         [index_const(0)] if counted else [])
        with ir.InsertionPoint(loop.body):
            local = loop.induction_variable
            self._item(arith.AddIOp(self.block, arith.MulIOp(
                local, self.blocks).result).result)
            steps = loop.inner_iter_args[0] if counted else \
                arith.MulIOp(local, self.tiles).result
            yield local, steps
            scf.YieldOp([arith.AddIOp(steps, self.tiles).result] if counted else [])

    def _item(self, item: ir.Value) -> None:
        """Work item `item`'s row block (row0), (p..) indices and key tiles. Items run
        row block fastest (one slice's K and V stay in L2 for its row blocks), except
        causal ones, which differ in work (row block x visits about x + 1 key tiles)
        and are numbered heaviest first: blocks start in about linear-id order and take
        their items in order, so the light ones fill in at the end."""
        row_blocks, slices = self.row_blocks, as_index(product(self.lead))
        if self.causal and (not isinstance(row_blocks, int) or row_blocks > 1):
            row_block = arith.SubIOp(as_index(minus(row_blocks, 1)), arith.DivUIOp(
                item, slices).result).result
            slice_index = arith.RemUIOp(item, slices).result
        else:
            row_block = arith.RemUIOp(item, as_index(row_blocks)).result
            slice_index = arith.DivUIOp(item, as_index(row_blocks)).result
        self.slice_ivs = delinearize(slice_index, self.lead) if self.lead else []
        self.row0 = arith.MulIOp(row_block, index_const(self.p.block_m)).result
        self.tiles = self._key_tiles()  # the copier's and the warpgroups' trip count

    def _key_tiles(self) -> ir.Value:
        """The key tiles the item visits: all, or (causal) those up to its last row's
        last allowed key; the tiles above the diagonal are neither copied nor multiplied.
        At least one: an item whose rows see no key (a negative offset) still takes tile
        0, whose scores the causal check then makes -inf (its rows store 0)."""
        tiles = self.key_tiles(self.row0, self.p.block_m, self.p.block_n)
        if self.causal and self.causal.may_be_negative:
            return arith.MaxUIOp(tiles, index_const(1)).result
        return tiles

    # ------------------------------------------------------------ the copying thread

    def _view(self, rows: int, offset: ir.Value) -> ir.Value:
        """The box of `rows` x 64 at byte `offset` of the ring (with the tensors' leading
        unit dims: the shape the TMA copy writes)."""
        shape = (1,) * len(self.lead) + (rows, BOX_COLUMNS)
        return memref.ViewOp(shared(shape, self.element), self.ring, offset, []).result

    def _coords(self, column: int, row: ir.Value, kv: bool = False) -> list:
        """TMA coordinates, innermost first: column, row, then the (p..) indices (K's and
        V's where `kv`: grouped-query attention divides them)."""
        slice_ivs = self.kv_slice(self.slice_ivs) if kv else self.slice_ivs
        return [index_const(column), row] + list(reversed(slice_ivs))

    def _copy(self, q_map, k_map, v_map):
        """Per item: Q's tile, once the previous item's Q is released, then the key
        tiles, each into the next ring slot once it is free."""
        with self._items() as (local, steps):
            self._copy_item(q_map, k_map, v_map, local, steps)

    def _copy_item(self, q_map, k_map, v_map, local, steps):
        p, box_bytes = self.p, self.p.block_n * SWIZZLE_BYTES
        free_slot(self.q_empty, local, 1)
        nvgpu.mbarrier_arrive_expect_tx(self.q_full, index_const(p.q_bytes(self.d)),
                                        index_const(0))
        for box in range(self.d // BOX_COLUMNS):
            target = self._view(p.block_m, index_const(box * p.block_m * SWIZZLE_BYTES))
            nvgpu.TmaAsyncLoadOp(target, self.q_full, q_map,
                                 self._coords(box * BOX_COLUMNS, self.row0),
                                 mbarId=index_const(0))
        loop = scf.ForOp(index_const(0), self.tiles, index_const(1))
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            slot = free_slot(self.empty, arith.AddIOp(steps, j).result, p.stages)
            nvgpu.mbarrier_arrive_expect_tx(
                self.full, index_const(p.stage_bytes(self.d, self.e)), slot)
            base = arith.AddIOp(index_const(p.q_bytes(self.d)), arith.MulIOp(
                slot, index_const(p.stage_bytes(self.d, self.e))).result).result
            key0 = arith.MulIOp(j, index_const(p.block_n)).result
            boxes = [(k_map, n) for n in range(self.d // BOX_COLUMNS)] + \
                [(v_map, n) for n in range(self.e // BOX_COLUMNS)]
            for number, (tensor_map, n) in enumerate(boxes):
                target = self._view(p.block_n, arith.AddIOp(
                    base, index_const(number * box_bytes)).result)
                nvgpu.TmaAsyncLoadOp(target, self.full, tensor_map,
                                     self._coords(n * BOX_COLUMNS, key0, kv=True),
                                     mbarId=slot)
            scf.YieldOp([])

    def _mask_view(self) -> ir.Value:
        """The staged mask's ring: [stage][row of the block][key of the tile], padded
        rows, after Q's tile and the K/V ring."""
        p = self.p
        offset = p.q_bytes(self.d) + p.stages * p.stage_bytes(self.d, self.e)
        return memref.ViewOp(shared((p.stages, p.block_m, p.mask_pitch),
                                    ir.IntegerType.get_signless(8)),
                             self.ring, index_const(offset), []).result

    def _copy_mask(self, local: ir.Value) -> None:
        """Thread `local` of MASK_COPIERS stages the mask's block_m x block_n byte tile of
        each key tile the block visits into the slot K and V take, by cp.async 16 bytes
        at a time (8 threads a 128-byte row: coalesced, where the warpgroups' own reads
        of their accumulators' bytes touch 8 rows per load). Keys past the last are
        zero-filled, rows past the last read the last row (never stored). It waits for
        its copies, then arrives on the slot's full barrier (with release semantics:
        the warpgroups, which wait on it, see the bytes); it waits for the slot's empty
        barrier like the TMA thread."""
        view = self._mask_view()
        with self._items() as (_, steps):
            self._copy_mask_item(local, view, steps)

    def _copy_mask_item(self, local, view, steps) -> None:
        p, per_row = self.p, self.p.block_n // 16
        chunks = p.block_m * per_row
        assert chunks % MASK_COPIERS == 0, p
        loop = scf.ForOp(index_const(0), self.tiles, index_const(1))
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            slot = free_slot(self.empty, arith.AddIOp(steps, j).result, p.stages)
            key0 = arith.MulIOp(j, index_const(p.block_n)).result
            # a loop, not unrolled copies: after setmaxnreg this warpgroup has 40
            # registers, fewer than 16 hoisted 64-bit source addresses need
            chunk_loop = scf.ForOp(local, index_const(chunks), index_const(MASK_COPIERS))
            with ir.InsertionPoint(chunk_loop.body):
                flat = chunk_loop.induction_variable
                row = arith.DivUIOp(flat, index_const(per_row)).result
                column = arith.MulIOp(arith.RemUIOp(flat, index_const(per_row)).result,
                                      index_const(16)).result
                source_row = arith.MinUIOp(arith.AddIOp(self.row0, row).result,
                                           as_index(minus(self.rows, 1))).result
                key = arith.AddIOp(key0, column).result
                filled = None  # run-time keys are staged in whole tiles only
                if isinstance(self.keys, int) and self.keys % p.block_n:
                    # the last tile: 16-key chunks past the end
                    real = arith.CmpIOp(arith.CmpIPredicate.ult, key,
                                        index_const(self.keys)).result
                    filled = arith.SelectOp(real, index_const(16), index_const(0)).result
                    key = arith.MinUIOp(key, index_const(self.keys - 16)).result
                nvgpu.DeviceAsyncCopyOp(
                    view, [slot, row, column], self.mask,
                    self.mask_index(self.slice_ivs, source_row, key),
                    ir.IntegerAttr.get(ir.IndexType.get(), 16), srcElements=filled,
                    bypassL1=True)
                scf.YieldOp([])
            # one group: every copy this thread issued so far
            token = nvgpu.DeviceAsyncCreateGroupOp([]).result
            nvgpu.DeviceAsyncWaitOp(token, numGroups=0)
            nvgpu.mbarrier_arrive(self.full, slot)
            scf.YieldOp([])
