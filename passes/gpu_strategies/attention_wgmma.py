"""Attention on Hopper's warpgroup tensor cores (sm_90a): the generics of one f16 / bf16
`cir.attention` without a mask as one flash-attention forward kernel, TMA copies into a
ring of stages and wgmma for both products (FlashAttention-3's structure, without its
ping-pong scheduling or the overlap of softmax and the next tile's product).

A block takes 64 * `warpgroups` query rows of one (p..) slice; 128 * (warpgroups + 1)
threads:

- the last warpgroup copies (and gives most of its registers to the others with
  setmaxnreg): its first thread copies, with the copy engine (`cp.async.bulk.tensor`,
  128-byte swizzle, 64-column boxes), the block's Q tile once, then each tile of
  `block_n` keys of K and V into a slot of a `stages`-slot ring in shared memory; a
  slot's copies complete on its "full" mbarrier, and it is refilled once every
  warpgroup has arrived on its "empty" mbarrier;
- warpgroup g takes query rows 64 g .. 64 g + 63. Per key tile:

      S = Q K^T              wgmma m64 n{block_n} k16, Q and K from shared memory
      m_new = max(m, rowmax(S))     a row's values lie in one quad of lanes
      P = exp2(S c - m_new c)       c = scale * log2(e) > 0
      l = l alpha + rowsum(P);  O = O alpha + P V,   alpha = exp2((m - m_new) c)
                             wgmma m64 n{e} k16, P from registers (S's accumulator
                             layout is A's register layout: no shuffles), V from shared
                             memory (MN-major: transposed)

  then out = O / l, rounded once.

S, P, m and l never leave registers. wgmma is inline PTX (hopper.py) because the
softmax reads the accumulators and P V takes A from registers. Keys past the last (the
last tile's, zero-filled by TMA) score -inf.

Takes what attention.attention_groups finds when query, key, value and out are all f16
or all bf16 and row-major, both head dims are 64 or 128, the scale is a positive
constant, and there is no mask or causal condition (those run on attention_tensor_core
or attention).
Not here yet: masks, causal tile skipping, the softmax of tile j overlapping the
product of tile j + 1 (or the two warpgroups taking turns), TMA stores of O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, builtin, gpu, memref, nvgpu, nvvm, scf, vector
from mlir.dialects import math as mmath

from ..attention_lowering import float_constant
from ..gpu_kernel_builder import delinearize, index_const, kernel_type, new_kernel
from . import Launch, TensorMap
from . import hopper
from .attention import (Group, attention_groups, operand_shape, positive_scale, quad_reduce,
                        row_major, sizes)
from .hopper import (SWIZZLE_BYTES, WARP, WARPGROUP, aligned_dynamic_shared, barrier_group,
                     equals, only_if, parity, shared, tensor_map_type, uniform_warp, wait)

NAME = "attention_wgmma"
REQUIRES_CHIPS = ("sm_90a",)  # wgmma exists only in sm_90a's PTX
ROWS_PER_WARPGROUP = 64       # wgmma's m
BOX_COLUMNS = 64              # f16 / bf16 per 128-byte swizzled row
HEAD_DIMS = (64, 128)
MAX_SHARED = 227 * 1024       # a block's dynamic shared memory on sm_90
# Registers per thread after setmaxnreg: the copying warpgroup gives its up, the others
# take them. Each of an SM's 4 quarters holds one warp of every warpgroup and 16K
# registers: 32 * (COPIER + 2 * CONSUMER) <= 16384. (Without it, 3 warps in a quarter
# could have at most 168 each: S, O and P spill.)
COPIER_REGISTERS, CONSUMER_REGISTERS = 40, 232
_ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class Params:
    block_n: int = 128     # keys per tile: S's wgmma n (a multiple of 16, <= 256)
    stages: int = 2        # K / V tiles in flight
    warpgroups: int = 2    # each takes 64 query rows
    overlap: bool = True   # tile j's S with tile j - 1's P V (FlashAttention-3's order)

    @property
    def block_m(self) -> int:
        return ROWS_PER_WARPGROUP * self.warpgroups

    def q_bytes(self, d: int) -> int:
        return self.block_m * d * 2

    def stage_bytes(self, d: int, e: int) -> int:
        return self.block_n * (d + e) * 2

    def shared_bytes(self, d: int, e: int) -> int:
        """Q's tile and the ring, plus room to align them to 1024 bytes."""
        return self.q_bytes(d) + self.stages * self.stage_bytes(d, e) + 1024


DEFAULT_PARAMS = Params(block_n=128, stages=3, overlap=True)
# What linalg-to-gpu-kernels builds with: the first entry whose head dim covers the
# larger of Q's and V's. `benchmarks/tune_attention.py --strategy attention_wgmma` timed
# block_n 64/128/192 x 2/3 stages x overlap on an H100 (2026-11-22): at head dim 128
# (1x16x4096) 128 keys, 3 stages, overlapped came first (0.244 ms, 562 TFLOP/s; with 2
# stages the overlapped order starves: 0.357 ms); at head dim 64 (8x12x512) 128 keys,
# 3 stages, one product after the other (0.044 ms; overlapped 0.047 ms).
CONFIGS = ((64, Params(block_n=128, stages=3, overlap=False)), (128, DEFAULT_PARAMS))


def params_for(d: int, e: int) -> Params:
    return next(p for bound, p in CONFIGS if max(d, e) <= bound)


def find_groups(generics: list, params: Optional[Params] = None) -> list[Group]:
    """The attention runs (attention.attention_groups) this kernel can take."""
    return [group for group in attention_groups(generics) if matches(group, params)]


def matches(group: Group, params: Optional[Params] = None) -> bool:
    if group.causal is not None or group.mask is not None:
        return False
    values = (group.query, group.key, group.value, group.out)
    elements = {str(ir.MemRefType(v.type).element_type) for v in values}
    if len(elements) != 1 or elements.pop() not in _ELEMENTS or \
            not all(row_major(v) for v in values):
        return False
    d, e = operand_shape(group.query)[-1], operand_shape(group.value)[-1]
    if d not in HEAD_DIMS or e not in HEAD_DIMS:
        return False
    p = params or params_for(d, e)
    return p.shared_bytes(d, e) <= MAX_SHARED and positive_scale(group) is not None


def build(group: Group, gpu_module: ir.Operation, kernel_name: str,
          params: Optional[Params] = None) -> Launch:
    lead, rows, d, keys, e = sizes(group)
    p = params or params_for(d, e)
    element = ir.MemRefType(group.query.type).element_type
    ones = (1,) * len(lead)
    q_box, kv_box = ones + (p.block_m, BOX_COLUMNS), ones + (p.block_n, BOX_COLUMNS)
    q_map_type, kv_map_type = tensor_map_type(q_box, element), tensor_map_type(kv_box, element)
    threads = WARPGROUP * (p.warpgroups + 1)  # the last warpgroup copies
    pointer = ir.Type.parse("!llvm.ptr")  # how a kernel takes a descriptor's address
    func = new_kernel(gpu_module, kernel_name,
                      [kernel_type(group.out.type), pointer, pointer, pointer], [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), group.ops[-1].location:
        out, *maps = func.regions[0].blocks[0].arguments
        maps = [builtin.UnrealizedConversionCastOp([t], [arg]).results[0]
                for t, arg in zip((q_map_type, kv_map_type, kv_map_type), maps)]
        kernel = _Kernel(p, d, e, rows, keys, lead, element,
                         positive_scale(group) * math.log2(math.e))
        kernel.emit(out, *maps)
        gpu.ReturnOp([])
    grid = (math.ceil(rows / p.block_m), math.prod(lead), 1)
    operands = [group.out, TensorMap(group.query, q_map_type, q_box),
                TensorMap(group.key, kv_map_type, kv_box),
                TensorMap(group.value, kv_map_type, kv_box)]
    return Launch(kernel_name, operands, grid, (threads, 1, 1), p.shared_bytes(d, e))


# ---------------------------------------------------------------- the kernel

def _tree(values: list, op) -> ir.Value:
    """op over `values` as a balanced tree (independent steps the GPU can overlap)."""
    while len(values) > 1:
        values = [op(a, b).result for a, b in zip(values[::2], values[1::2])] + \
            ([values[-1]] if len(values) % 2 else [])
    return values[0]


@dataclass
class _Kernel:
    p: Params
    d: int            # query / key head dim
    e: int            # value / out head dim
    rows: int         # queries
    keys: int
    lead: list        # the (p..) loops' sizes
    element: ir.Type  # f16 or bf16
    c: float          # scale * log2(e)

    def emit(self, out, q_map, k_map, v_map):
        p = self.p
        self.f32 = ir.F32Type.get()
        tid = gpu.thread_id(gpu.Dimension.x)
        consumers = WARPGROUP * p.warpgroups
        self.ring = aligned_dynamic_shared(p.shared_bytes(self.d, self.e) - 1024)
        self.full = barrier_group(p.stages)   # a slot's K and V tiles have landed
        self.empty = barrier_group(p.stages)  # every warpgroup is done with a slot
        self.q_full = barrier_group(1)
        copier = equals(tid, consumers)
        with only_if(copier):
            for s in range(p.stages):
                nvgpu.mbarrier_init(self.full, index_const(1), index_const(s))
                nvgpu.mbarrier_init(self.empty, index_const(p.warpgroups), index_const(s))
            nvgpu.mbarrier_init(self.q_full, index_const(1), index_const(0))
            for tensor_map in (q_map, k_map, v_map):
                nvgpu.tma_prefetch_descriptor(tensor_map)
        gpu.BarrierOp()
        self.slice_ivs = delinearize(gpu.block_id(gpu.Dimension.y), self.lead) \
            if self.lead else []
        self.row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.block_m)).result
        self.tiles = math.ceil(self.keys / p.block_n)
        warp = uniform_warp(tid)
        role = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.uge, warp,
                                     index_const(consumers // WARP)).result, has_else=True)
        with ir.InsertionPoint(role.then_block):
            nvvm.SetMaxRegisterOp(COPIER_REGISTERS, nvvm.SetMaxRegisterAction.decrease)
            with only_if(copier):
                self._copy(q_map, k_map, v_map)
            scf.YieldOp([])
        with ir.InsertionPoint(role.else_block):
            nvvm.SetMaxRegisterOp(CONSUMER_REGISTERS, nvvm.SetMaxRegisterAction.increase)
            self._consume(tid, warp, out)
            scf.YieldOp([])

    # ------------------------------------------------------------ the copying thread

    def _view(self, rows: int, offset: ir.Value) -> ir.Value:
        """The box of `rows` x 64 at byte `offset` of the ring (with the tensors' leading
        unit dims: the shape the TMA copy writes)."""
        shape = (1,) * len(self.lead) + (rows, BOX_COLUMNS)
        return memref.ViewOp(shared(shape, self.element), self.ring, offset, []).result

    def _coords(self, column: int, row: ir.Value) -> list:
        """TMA coordinates, innermost first: column, row, then the (p..) indices."""
        return [index_const(column), row] + list(reversed(self.slice_ivs))

    def _copy(self, q_map, k_map, v_map):
        p, box_bytes = self.p, self.p.block_n * SWIZZLE_BYTES
        nvgpu.mbarrier_arrive_expect_tx(self.q_full, index_const(p.q_bytes(self.d)),
                                        index_const(0))
        for box in range(self.d // BOX_COLUMNS):
            target = self._view(p.block_m, index_const(box * p.block_m * SWIZZLE_BYTES))
            nvgpu.TmaAsyncLoadOp(target, self.q_full, q_map,
                                 self._coords(box * BOX_COLUMNS, self.row0),
                                 mbarId=index_const(0))
        loop = scf.ForOp(index_const(0), index_const(self.tiles), index_const(1))
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            slot = arith.RemUIOp(j, index_const(p.stages)).result
            with only_if(arith.CmpIOp(arith.CmpIPredicate.uge, j,
                                      index_const(p.stages)).result):
                wait(self.empty, slot, parity(j, p.stages, previous=True))
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
                                     self._coords(n * BOX_COLUMNS, key0), mbarId=slot)
            scf.YieldOp([])

    # ------------------------------------------------------------ the warpgroups

    def _consume(self, tid, warp, out):
        p = self.p
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        self.quad = arith.RemUIOp(lane, index_const(4)).result
        warpgroup = arith.DivUIOp(warp, index_const(WARPGROUP // WARP)).result
        first_row = arith.AddIOp(arith.AddIOp(self.row0, arith.MulIOp(
            warp, index_const(16)).result).result,
            arith.DivUIOp(lane, index_const(4)).result).result
        self.my_rows = [first_row, _add(first_row, 8)]  # rows 16 w + lane / 4 (+ 8)
        i64 = ir.IntegerType.get_signless(64)
        # wgmma descriptors: Q's boxes have block_m rows, K's and V's block_n; this
        # warpgroup's Q rows start 64 rows (8 KB) further per warpgroup.
        q_desc = arith.AddIOp(hopper.descriptor_base(self.ring, p.block_m), arith.MulIOp(
            arith.IndexCastOp(i64, warpgroup).result,
            arith.ConstantOp(i64, ROWS_PER_WARPGROUP * SWIZZLE_BYTES >> 4).result
        ).result).result
        kv_desc = hopper.descriptor_base(self.ring, p.block_n)
        speaker = equals(arith.RemUIOp(tid, index_const(WARPGROUP)).result, 0)
        wait(self.q_full, 0, arith.ConstantOp(ir.IntegerType.get_signless(1), 0).result)

        self.q_desc, self.kv_desc, self.speaker = q_desc, kv_desc, speaker
        state = self._overlapped() if p.overlap else self._serial()
        self._store(out, state[2:4], state[4:4 + self.e // 2])

    def _slot(self, j, wait_full: bool = True):
        """Key tile j's slot and the descriptor of its K box (V's boxes follow)."""
        p, i64 = self.p, ir.IntegerType.get_signless(64)
        slot = arith.RemUIOp(j, index_const(p.stages)).result
        if wait_full:
            wait(self.full, slot, parity(j, p.stages))
        desc = arith.AddIOp(self.kv_desc, arith.MulIOp(
            arith.IndexCastOp(i64, slot).result,
            arith.ConstantOp(i64, p.stage_bytes(self.d, self.e) >> 4).result).result).result
        return slot, hopper.at(desc, p.q_bytes(self.d))

    def _release(self, slot) -> None:
        with only_if(self.speaker):
            nvgpu.mbarrier_arrive(self.empty, slot)

    def _initial_state(self) -> list:
        f32 = self.f32
        neg_inf, zero = float_constant(f32, float("-inf")), float_constant(f32, 0.0)
        return [neg_inf, neg_inf, zero, zero] + [zero] * (self.e // 2)

    def _serial(self) -> list:
        """Per tile: S, softmax, P V, each waiting for the one before."""
        loop = scf.ForOp(index_const(0), index_const(self.tiles), index_const(1),
                         self._initial_state())
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            state = list(loop.inner_iter_args)
            m, l, o = state[:2], state[2:4], state[4:]
            slot, desc = self._slot(j)
            hopper.fence([])
            scores = self._masked_tail(j, hopper.wait_group(0, self._scores(desc)))
            m, l, alphas, probs = self._softmax(scores, m, l)
            o = [arith.MulFOp(x, alphas[v % 4 // 2]).result for v, x in enumerate(o)]
            a_regs = self._registers(probs)
            fenced = hopper.fence(o + a_regs)
            o = hopper.wait_group(0, self._weighted_values(
                fenced[:len(o)], fenced[len(o):], desc))
            self._release(slot)
            scf.YieldOp(m + l + o)
        return list(loop.results)

    def _overlapped(self) -> list:
        """FlashAttention-3's pipelining within a warpgroup: tile j's S = Q K^T and tile
        j - 1's O += P V are in flight together; the softmax of tile j runs while P V
        still does. So O * alpha_j waits for P V of tile j - 1, and P V of the last
        tile follows the loop."""
        _, desc = self._slot(index_const(0))
        hopper.fence([])
        scores = self._masked_tail(index_const(0), hopper.wait_group(0, self._scores(desc)))
        start = self._initial_state()
        m, l, _, probs = self._softmax(scores, start[:2], start[2:4])
        a_regs = self._registers(probs)
        loop = scf.ForOp(index_const(1), index_const(self.tiles), index_const(1),
                         m + l + start[4:] + a_regs)
        count = self.e // 2
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            state = list(loop.inner_iter_args)
            m, l, o, a_regs = state[:2], state[2:4], state[4:4 + count], state[4 + count:]
            slot, desc = self._slot(j)
            previous = arith.SubIOp(j, index_const(1)).result
            previous_slot, previous_desc = self._slot(previous, wait_full=False)
            fenced = hopper.fence(o + a_regs)
            o, a_regs = fenced[:count], fenced[count:]
            scores = self._scores(desc)
            o = self._weighted_values(o, a_regs, previous_desc)
            scores = self._masked_tail(j, hopper.wait_group(1, scores))
            m, l, alphas, probs = self._softmax(scores, m, l)
            new_regs = self._registers(probs)
            # P of tile j - 1 stays live (an operand of the wait) until P V has read it
            o = hopper.wait_group(0, o + a_regs)[:count]
            self._release(previous_slot)
            o = [arith.MulFOp(x, alphas[v % 4 // 2]).result for v, x in enumerate(o)]
            scf.YieldOp(m + l + o + new_regs)
        state = list(loop.results)
        m, l, o, a_regs = state[:2], state[2:4], state[4:4 + count], state[4 + count:]
        last_slot, last_desc = self._slot(index_const(self.tiles - 1), wait_full=False)
        fenced = hopper.fence(o + a_regs)
        o = hopper.wait_group(0, self._weighted_values(fenced[:count], fenced[count:],
                                                       last_desc) + fenced[count:])[:count]
        self._release(last_slot)
        return m + l + o

    def _scores(self, slot_desc) -> list:
        """Issue S = Q K^T (block_n / 2 accumulators per thread) as one wgmma group; the
        caller waits. Q (K-major): box kk // 4 of its tile, 32 bytes per 16 columns
        within; K likewise, in the slot."""
        p, element = self.p, str(self.element)
        s = None
        for kk in range(self.d // 16):
            box, within = divmod(kk, BOX_COLUMNS // 16)
            a = hopper.at(self.q_desc, box * p.block_m * SWIZZLE_BYTES + within * 32)
            b = hopper.at(slot_desc, box * p.block_n * SWIZZLE_BYTES + within * 32)
            s = hopper.mma(s, a, b, p.block_n, element, trans_b=False,
                           accumulate=s is not None)
        hopper.commit()
        return s

    def _key_columns(self, v: int) -> int:
        """The key (within the tile) of this lane's accumulator v, less 2 (lane % 4)."""
        return 8 * (v // 4) + v % 2

    def _masked_tail(self, j, scores: list) -> list:
        """Scores of keys past the last (the last tile's) are -inf."""
        p = self.p
        if self.keys % p.block_n == 0:
            return scores
        last = arith.CmpIOp(arith.CmpIPredicate.eq, j, index_const(self.tiles - 1)).result
        branch = scf.IfOp(last, [s.type for s in scores], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            neg_inf = float_constant(self.f32, float("-inf"))
            real = self.keys - (self.tiles - 1) * p.block_n  # keys in the last tile
            quad2 = arith.MulIOp(self.quad, index_const(2)).result
            masked = []
            for v, s in enumerate(scores):
                key = _add(quad2, self._key_columns(v))
                inside = arith.CmpIOp(arith.CmpIPredicate.ult, key, index_const(real)).result
                masked.append(arith.SelectOp(inside, s, neg_inf).result)
            scf.YieldOp(masked)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(scores)
        return list(branch.results)

    def _softmax(self, scores, m_old, l_old):
        """Per row r (accumulators v with v % 4 // 2 == r): the new max, the new partial
        sum (this lane's columns), alpha, and P (f32, in the accumulators' order)."""
        f32 = self.f32
        c = float_constant(f32, self.c)
        m_new, l_new, alphas = [], [], []
        probs = [None] * len(scores)
        for r in (0, 1):
            mine = [v for v in range(len(scores)) if v % 4 // 2 == r]
            row_max = _tree([m_old[r]] + [scores[v] for v in mine], arith.MaximumFOp)
            row_max = quad_reduce(row_max, arith.MaximumFOp)
            neg_shift = arith.NegFOp(arith.MulFOp(row_max, c).result).result
            alpha = mmath.Exp2Op(mmath.FmaOp(m_old[r], c, neg_shift).result).result
            for v in mine:
                probs[v] = mmath.Exp2Op(mmath.FmaOp(scores[v], c, neg_shift).result).result
            total = _tree([arith.MulFOp(l_old[r], alpha).result] + [probs[v] for v in mine],
                          arith.AddFOp)
            m_new.append(row_max)
            l_new.append(total)
            alphas.append(alpha)
        return m_new, l_new, alphas, probs

    def _pack(self, low, high) -> ir.Value:
        """Two f32 rounded to the element type, as one i32 register (low half first)."""
        pair = vector.FromElementsOp(ir.VectorType.get([2], self.element), [
            arith.TruncFOp(self.element, x).result for x in (low, high)]).result
        word = vector.BitCastOp(ir.VectorType.get([1], ir.IntegerType.get_signless(32)),
                                pair).result
        return vector.ExtractOp(word, [], [0]).result

    def _registers(self, probs) -> list:
        """P as wgmma's A registers: the accumulators of keys 16 kk.. (v = 8 kk .. 8 kk +
        7) are those of k-step kk: (row, 2t..), (row + 8, 2t..), (row, 2t + 8..),
        (row + 8, 2t + 8..), two values rounded to the element type per register."""
        regs = []
        for v0 in range(0, self.p.block_n // 2, 8):
            regs += [self._pack(probs[v0 + i], probs[v0 + i + 1]) for i in (0, 2, 4, 6)]
        return regs

    def _weighted_values(self, o, a_regs, slot_desc) -> list:
        """Issue O += P V as one wgmma group; the caller waits. V (MN-major): 16 keys of
        128-byte rows per k-step; its next 64 columns are a box further (the
        descriptor's leading offset)."""
        p = self.p
        v_base = self.d * p.block_n * 2  # V's boxes follow K's in the slot
        for kk in range(p.block_n // 16):
            b = hopper.at(slot_desc, v_base + kk * 16 * SWIZZLE_BYTES)
            o = hopper.mma(o, a_regs[4 * kk:4 * kk + 4], b, self.e, str(self.element),
                           trans_b=True)
        hopper.commit()
        return o

    def _store(self, out, sums, o):
        """out = O / l, rounded once, where the row exists."""
        f32 = self.f32
        one = float_constant(f32, 1.0)
        pair = ir.VectorType.get([2], self.element)
        quad2 = arith.MulIOp(self.quad, index_const(2)).result
        for r, row in enumerate(self.my_rows):
            inverse = arith.DivFOp(one, quad_reduce(sums[r], arith.AddFOp)).result
            guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, row,
                                          index_const(self.rows)).result)
            with ir.InsertionPoint(guard.then_block):
                for j in range(self.e // 8):
                    values = [arith.TruncFOp(self.element, arith.MulFOp(
                        o[4 * j + 2 * r + c], inverse).result).result for c in (0, 1)]
                    vector.StoreOp(vector.FromElementsOp(pair, values).result, out,
                                   self.slice_ivs + [row, _add(quad2, 8 * j)], alignment=4)
                scf.YieldOp([])


def _add(a: ir.Value, b: int) -> ir.Value:
    return a if b == 0 else arith.AddIOp(a, index_const(b)).result
