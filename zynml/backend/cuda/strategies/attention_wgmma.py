"""Attention on Hopper's warpgroup tensor cores (sm_90a): the generics of one f16 / bf16
`cir.attention` (masked, causal or neither) as one flash-attention forward kernel, TMA
copies into a ring of stages and wgmma for both products (FlashAttention-3's structure;
with `Params.overlap`, tile j's S is issued with tile j - 1's P V, its intra-warpgroup
order; without its ping-pong between warpgroups).

A work item is 64 * `warpgroups` query rows of one (p..) slice. With `Params.persistent`
the run time launches at most one block per multiprocessor (`Launch.
blocks_per_multiprocessor`) and each takes items block, block + grid, ...: the ring and
Q's tile run on across its items, so the next item's Q and first key tiles load while
the warpgroups finish this one, instead of each block paying the pipeline's fill (on
BERT's 8x12x512, 384 items of 4 key tiles). Without it, one block per item. A block has
128 * (warpgroups + 1) threads:

- the last warpgroup copies (and gives most of its registers to the others with
  setmaxnreg) Q's tile and the K and V tiles into a ring of `stages` slots in shared
  memory by TMA (attention_wgmma_ring.py: the ring, its mbarriers, the work items);
- warpgroup g takes query rows 64 g .. 64 g + 63. Per key tile (flash_skeleton.py's
  online softmax):

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

A bool mask (`Group.mask`, any of the loops (p.., i, j) as its axes; a masked score is
-inf) reaches each thread as the bytes of its own accumulators' (row, key) positions:
keys 2t, 2t + 1 of every 8 in its two rows (t = lane % 4), one 2-byte load per pair, 32
per tile of 128 keys, issued after S's wgmma and before the wait for it. Where the
mask's last axis is the keys' and its rows are a multiple of 16 bytes (BERT's
[seq, seq] of 512), the copying warpgroup stages the tile in a mask ring beside the K/V
ring (attention_wgmma_ring.py) and the warpgroups read the pairs from shared memory.
Read straight from global memory instead, each warp load touches 8 rows (8 lines of
L1) for 64 useful bytes: on the BERT row that cost 50% over the unmasked kernel (0.053
against 0.035 ms, H100), L1 throughput rather than latency. Other masks (odd rows such as 17, 131 or 300
keys, keys not the last axis) are read from global memory (L1 / L2, 2-byte loads where
rows have even length, else byte loads). At head dim 128 Q, 3 K/V slots and 3 mask
slots would exceed the 227 KB: a staged mask takes 2 stages, one product after the
other. A row whose every key is masked keeps m = -inf: its shift is taken as 0 (exp2
gives 0, not NaN) and its output is 0 (1 / l taken as 0), as the spec's loops, the
numpy reference and the other kernels give.

Causal attention (`Group.causal`: key j allowed for row i when j <= i + offset) skips
the tiles above the diagonal: the copying thread's and the warpgroups' key loops both end
at tile ceil(min(keys, the block's last row + offset + 1) / block_n) (at least 1: a
block that sees no key takes tile 0 and masks all of it). Only the tiles whose last key
lies past a warp's first row + offset (the diagonal) or past the last key compare each
key with its row's limit, min(keys - 1, row + offset), one comparison per score under a
warp-uniform branch; the tiles below the diagonal run as in the unmasked kernel. The
work items of a causal grid are numbered heaviest first (blocks start in about
linear-id order and take their items in order; the light ones then fill in at the end).

Takes the attention.attention_groups of f16 or bf16 row-major operands (the mask too),
head dims 64 or 128 and a positive constant scale; masked, causal or both; at run-time
sizes too, the plan picking a kernel per call (attention_sizes.py). The others
run on attention_tensor_core or attention. Not here: ping-pong, TMA stores of O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from mlir import ir
from mlir.dialects import arith, builtin, gpu, nvgpu, scf, vector

from ....lowering.attention_lowering import float_constant
from .attention_sizes import head_dim_cases, run_time_launch
from .extents import as_index, ceil_div, minus, product
from .kernel_builder import index_const, kernel_type, new_kernel
from . import Launch, TensorMap
from . import hopper
from .tuning import choose
from .attention_match import Group, attention_groups
from .attention_wgmma_ring import BOX_COLUMNS, RingKernel
from .flash_skeleton import (OnlineSoftmax, add, base2_factor, base2_scale, clamp,
                             common_element, frame_fields, head_dims, host_sizes,
                             inverse_sum, keys_last, mask_allows, mask_pair, only_allowed,
                             positive_scale, problem, quad_reduce, row_major,
                             run_time_scale, run_time_sizes, sizes)
from .hopper import (SWIZZLE_BYTES, WARP, WARPGROUP, equals, only_if, parity,
                     tensor_map_type, wait)

NAME = "attention_wgmma"
REQUIRES = frozenset({"wgmma", "tma", "setmaxnreg"})
DYNAMIC = True  # run-time lead, rows and keys (not with a mask): memref.dim in the kernel
ROWS_PER_WARPGROUP = 64       # wgmma's m
HEAD_DIMS = (64, 128)
MASK_PAD = 16      # bytes after each staged mask row
_ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class Params:
    block_n: int = 128     # keys per tile: S's wgmma n (a multiple of 16, <= 256)
    stages: int = 2        # K / V tiles in flight
    warpgroups: int = 2    # each takes 64 query rows
    overlap: bool = True   # tile j's S with tile j - 1's P V (FlashAttention-3's order)
    persistent: bool = True  # a block per multiprocessor loops over the work items

    @property
    def block_m(self) -> int:
        return ROWS_PER_WARPGROUP * self.warpgroups

    def q_bytes(self, d: int) -> int:
        return self.block_m * d * 2

    def stage_bytes(self, d: int, e: int) -> int:
        return self.block_n * (d + e) * 2

    @property
    def mask_pitch(self) -> int:
        """Bytes per row of a staged mask tile: its keys and 16 more, so that the 8 rows
        a warp reads at once fall in different banks."""
        return self.block_n + MASK_PAD

    def mask_bytes(self) -> int:
        """The staged mask's ring: a block_m x block_n byte tile per stage."""
        return self.stages * self.block_m * self.mask_pitch

    def shared_bytes(self, d: int, e: int, staged_mask: bool = False) -> int:
        """Q's tile and the ring (and the mask's ring), plus room to align them to 1024
        bytes."""
        return self.q_bytes(d) + self.stages * self.stage_bytes(d, e) + \
            (self.mask_bytes() if staged_mask else 0) + 1024


DEFAULT_PARAMS = Params(block_n=128, stages=3, overlap=True)
# What linalg-to-gpu-kernels builds with: the first entry whose head dim covers the
# larger of Q's and V's. `benchmarks/tune_attention.py --strategy attention_wgmma` timed
# block_n 64/128/192 x 2/3 stages x overlap on an H100 (2026-11-22): at head dim 128
# (1x16x4096) 128 keys, 3 stages, overlapped came first (0.244 ms, 562 TFLOP/s; with 2
# stages the overlapped order starves: 0.357 ms); at head dim 64 (8x12x512) 128 keys,
# 3 stages, one product after the other (0.044 ms; overlapped 0.047 ms). Persistent
# blocks (tune_attention --only bert, 2026-11-22, GPU time): BERT 8x12x512 unmasked
# 0.026 against 0.029 ms, masked 0.033 against 0.037 ms; 1x16x4096 d128 0.224 ms
# (session 7, not persistent: 0.223).
CONFIGS = ((64, Params(block_n=128, stages=3, overlap=False)), (128, DEFAULT_PARAMS))


def params_for(d: int, e: int, max_shared: int, staged_mask: bool = False,
               causal: bool = False) -> Params:
    """CONFIGS' entry; with a staged mask where Q, 3 K/V slots and 3 mask slots exceed
    the shared memory (head dim 128: 225 + 54 KB), 2 stages, one product after the other
    (with 2 stages the overlapped order starves; unmasked, that order is 4% slower; at
    4096 keys with a mask it timed 0.342 ms against 0.346 for 3 overlapped stages that
    read the mask from global memory), else overlapped (the mask's loads add to the
    softmax's time: at head dim 64 overlapping P V with it came first). Causal: not
    persistent, since items differ in work and the GPU's block scheduler balances them
    better than dealing them round-robin (1x16x4096 d128, H100: 0.159 ms persistent,
    0.149 not, docs/performance.md sessions 8 and 7)."""
    p = next(p for bound, p in CONFIGS if max(d, e) <= bound)
    if causal:
        p = replace(p, persistent=False)
    if staged_mask and p.shared_bytes(d, e, True) > max_shared:
        p = replace(p, stages=2, overlap=False)
    elif staged_mask:  # BERT's masked row (8x12x512, d 64, tune_attention 2026-11-22):
        p = replace(p, overlap=True)  # overlapped 0.048 ms, one after the other 0.052
    return p


def _stageable(group: Group, whole_key_tiles: bool = False) -> bool:
    """Whether the mask can be staged in shared memory by cp.async: its last axis is
    the keys' (16 keys are 16 contiguous bytes) and its rows are a multiple of 16 bytes
    (each copy is 16-byte aligned): static keys that are, or run-time keys in whole key
    tiles (the kernel the plan runs for them)."""
    lead, _, _, keys, _ = sizes(group)
    rows_of_16 = whole_key_tiles if run_time_sizes(group) else keys % 16 == 0
    return group.mask is not None and keys_last(group.mask_dims, lead) and rows_of_16


def plan(group: Group, target, whole_key_tiles: bool = False,
         head_dim: Optional[int] = None) -> Optional[tuple[Params, bool]]:
    """(the Params to build with, tuned, whether the mask is staged in shared memory);
    None: Q's tile and the ring do not fit the target's shared memory. `head_dim`: the
    kernel's, where Q's and V's are run-time sizes (attention_sizes.py)."""
    d, e = head_dims(group, head_dim)
    stageable, limit = _stageable(group, whole_key_tiles), target.max_shared_per_block
    default = params_for(d, e, limit, stageable, group.causal is not None)
    p = choose(NAME, [default], target, problem(group),
               lambda p: p.shared_bytes(d, e) <= limit)
    return None if p is None else (p, stageable and p.shared_bytes(d, e, True) <= limit)


def find_groups(generics: list, target) -> list[Group]:
    """The attention runs (attention_match.attention_groups) this kernel can take."""
    return [group for group in attention_groups(generics) if matches(group, target)]


def matches(group: Group, target) -> bool:
    """f16 or bf16 throughout, row-major (the mask too), head dims 64 or 128, a positive
    constant scale; masked, causal or neither."""
    if group.mask is not None and not row_major(group.mask):
        return False
    if common_element(group) not in _ELEMENTS or \
            not all(row_major(v) for v in (group.query, group.key, group.value, group.out)):
        return False
    if not run_time_sizes(group):
        d, e = head_dims(group)
        return d in HEAD_DIMS and e in HEAD_DIMS and plan(group, target) is not None and \
            positive_scale(group) is not None
    # run-time sizes: head dims and a scale of the call too, each tested by the plan
    cases = head_dim_cases(group, HEAD_DIMS)
    static = [d for d in head_dims(group) if not ir.ShapedType.is_dynamic_size(d)]
    return bool(cases) and all(d in HEAD_DIMS for d in static) and \
        all(plan(group, target, True, d) is not None for d in cases) and \
        (run_time_scale(group) or positive_scale(group) is not None)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    if not run_time_sizes(group):
        return _build(group, gpu_module, kernel_name, target)
    # run-time sizes: a kernel per case the plan picks from per call (attention_sizes.py)
    cases = head_dim_cases(group, HEAD_DIMS)
    return run_time_launch(
        group, kernel_name, cases,
        lambda name, head_dim, whole: _build(group, gpu_module, name, target, whole,
                                             head_dim),
        block_n=plan(group, target, True, cases[0])[0].block_n, positive_scale=True)


def _build(group: Group, gpu_module: ir.Operation, kernel_name: str, target,
           whole_key_tiles: bool = False, head_dim: Optional[int] = None) -> Launch:
    lead, rows, _, keys, _ = sizes(group)
    d, e = head_dims(group, head_dim)
    p, staged = plan(group, target, whole_key_tiles, head_dim)
    element = ir.MemRefType(group.query.type).element_type
    ones = (1,) * len(lead)
    q_box, kv_box = ones + (p.block_m, BOX_COLUMNS), ones + (p.block_n, BOX_COLUMNS)
    q_map_type, kv_map_type = tensor_map_type(q_box, element), tensor_map_type(kv_box, element)
    threads = WARPGROUP * (p.warpgroups + 1)  # the last warpgroup copies
    pointer = ir.Type.parse("!llvm.ptr")  # how a kernel takes a descriptor's address
    # arguments: out, the mask if any (read by the warpgroups themselves), a run-time
    # causal offset and group if any (0-d buffers or integers), three maps
    runtime = group.causal.runtime if group.causal is not None else None
    run_time_group = [group.run_time_group[1].group] if group.run_time_group else []
    dynamic = run_time_sizes(group)  # K's buffer too, for its extent (memref.dim)
    plain = [group.out] + ([group.mask] if group.mask is not None else []) + \
        ([runtime] if runtime is not None else []) + run_time_group + \
        ([group.key] if dynamic else []) + ([group.scale] if run_time_scale(group) else [])
    func = new_kernel(gpu_module, kernel_name,
                      [kernel_type(v.type) for v in plain] + [pointer] * 3, [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), group.ops[-1].location:
        arguments = list(func.regions[0].blocks[0].arguments)
        out, mask = arguments[0], (arguments[1] if group.mask is not None else None)
        maps = [builtin.UnrealizedConversionCastOp([t], [arg]).results[0]
                for t, arg in zip((q_map_type, kv_map_type, kv_map_type), arguments[-3:])]
        args = dict(zip(plain, arguments))
        c = base2_scale(group, args, ir.F32Type.get()) if run_time_scale(group) else \
            base2_factor(group)
        kernel = _Kernel(p=p, element=element, c=c, mask=mask, staged=staged,
                         whole_key_tiles=whole_key_tiles,
                         **frame_fields(group, args, head_dim))
        kernel.emit(out, *maps)
        gpu.ReturnOp([])
    # one block per (row block, slice); persistent: the run time launches at most one
    # per multiprocessor and each loops over its share (_Kernel.emit)
    with ir.InsertionPoint(group.ops[-1]), group.ops[-1].location:  # the grid, on the host
        lead, rows, _ = host_sizes(group)
        grid = (product([ceil_div(rows, p.block_m)] + lead), 1, 1)
    operands = plain + [TensorMap(group.query, q_map_type, q_box),
                        TensorMap(group.key, kv_map_type, kv_box),
                        TensorMap(group.value, kv_map_type, kv_box)]
    return Launch(kernel_name, operands, grid, (threads, 1, 1),
                  p.shared_bytes(d, e, staged),
                  blocks_per_multiprocessor=1 if p.persistent else 0)


# ---------------------------------------------------------------- the kernel

class _Kernel(RingKernel):
    """The warpgroups' part (the ring and the copier: attention_wgmma_ring.py)."""

    @property
    def may_be_empty(self) -> bool:
        """Whether a row can have no allowed key (its max stays -inf, its sum 0): with a
        mask, or causal with a negative offset (with offset >= 0 row i sees key 0)."""
        return self.mask is not None or (self.causal is not None and
                                         self.causal.may_be_negative)

    def _consume(self, tid, warp, out):
        p = self.p
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        self.quad = arith.RemUIOp(lane, index_const(4)).result
        warpgroup = arith.DivUIOp(warp, index_const(WARPGROUP // WARP)).result
        warp_rows = arith.MulIOp(warp, index_const(16)).result  # the warp's, in the block
        my_rows = arith.AddIOp(warp_rows, arith.DivUIOp(lane, index_const(4)).result).result
        self.mask_view = self._mask_view() if self.staged else None
        i64 = ir.IntegerType.get_signless(64)
        # wgmma descriptors: Q's boxes have block_m rows, K's and V's block_n; this
        # warpgroup's Q rows start 64 rows (8 KB) further per warpgroup.
        q_desc = arith.AddIOp(hopper.descriptor_base(self.ring, p.block_m), arith.MulIOp(
            arith.IndexCastOp(i64, warpgroup).result,
            arith.ConstantOp(i64, ROWS_PER_WARPGROUP * SWIZZLE_BYTES >> 4).result
        ).result).result
        kv_desc = hopper.descriptor_base(self.ring, p.block_n)
        speaker = equals(arith.RemUIOp(tid, index_const(WARPGROUP)).result, 0)
        self.q_desc, self.kv_desc, self.speaker = q_desc, kv_desc, speaker
        with self._items() as (local, steps):
            self.steps = steps  # ring steps before this item's first key tile
            first_row = arith.AddIOp(self.row0, my_rows).result
            self.my_rows = [first_row, add(first_row, 8)]  # rows 16 w + lane / 4 (+ 8)
            self.warp_row0 = arith.AddIOp(self.row0, warp_rows).result  # warp-uniform
            # the mask's row of a row past the end: the last
            self.rows_in = [clamp(r, self.rows) for r in self.my_rows]
            wait(self.q_full, 0, parity(local, 1))
            state = self._overlapped() if p.overlap else self._serial()
            self._store(out, state[2:4], state[4:4 + self.e // 2])

    def _release_q(self) -> None:
        """This warpgroup's S products of the item are done: the copier may load the
        next item's Q."""
        with only_if(self.speaker):
            nvgpu.mbarrier_arrive(self.q_empty, index_const(0))

    def _slot(self, j, wait_full: bool = True):
        """The item's key tile j's slot and the descriptor of its K box (V's boxes
        follow)."""
        p, i64 = self.p, ir.IntegerType.get_signless(64)
        step = arith.AddIOp(self.steps, j).result
        slot = arith.RemUIOp(step, index_const(p.stages)).result
        if wait_full:
            wait(self.full, slot, parity(step, p.stages))
        desc = arith.AddIOp(self.kv_desc, arith.MulIOp(
            arith.IndexCastOp(i64, slot).result,
            arith.ConstantOp(i64, p.stage_bytes(self.d, self.e) >> 4).result).result).result
        return slot, hopper.at(desc, p.q_bytes(self.d))

    def _release(self, slot) -> None:
        """Arrive on the slot's empty barrier: one thread per warpgroup (its wgmmas have
        read K and V), or, with a staged mask, every thread (each has read its bytes
        of the mask tile with its own loads: its arrival orders them before the
        copiers' next writes to the slot)."""
        if self.staged:
            nvgpu.mbarrier_arrive(self.empty, slot)
            return
        with only_if(self.speaker):
            nvgpu.mbarrier_arrive(self.empty, slot)

    def _initial_state(self) -> list:
        f32 = self.f32
        neg_inf, zero = float_constant(f32, float("-inf")), float_constant(f32, 0.0)
        return [neg_inf, neg_inf, zero, zero] + [zero] * (self.e // 2)

    def _serial(self) -> list:
        """Per tile: S, softmax, P V, each waiting for the one before."""
        loop = scf.ForOp(index_const(0), self.tiles, index_const(1), self._initial_state())
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            state = list(loop.inner_iter_args)
            m, l, o = state[:2], state[2:4], state[4:]
            slot, desc = self._slot(j)
            hopper.fence([])
            scores = self._scores(desc)
            bits = self._mask_bits(j, slot)  # loads in flight with the wgmma
            scores = self._masked(j, hopper.wait_group(0, scores), bits)
            m, l, alphas, probs = self._softmax(scores, m, l)
            o = [arith.MulFOp(x, alphas[v % 4 // 2]).result for v, x in enumerate(o)]
            a_regs = self._registers(probs)
            fenced = hopper.fence(o + a_regs)
            o = hopper.wait_group(0, self._weighted_values(
                fenced[:len(o)], fenced[len(o):], desc))
            self._release(slot)
            scf.YieldOp(m + l + o)
        self._release_q()
        return list(loop.results)

    def _overlapped(self) -> list:
        """FlashAttention-3's pipelining within a warpgroup: tile j's S = Q K^T and tile
        j - 1's O += P V are in flight together; the softmax of tile j runs while P V
        still does. So O * alpha_j waits for P V of tile j - 1, and P V of the last
        tile follows the loop."""
        slot, desc = self._slot(index_const(0))
        hopper.fence([])
        scores = self._scores(desc)
        bits = self._mask_bits(index_const(0), slot)
        scores = self._masked(index_const(0), hopper.wait_group(0, scores), bits)
        start = self._initial_state()
        m, l, _, probs = self._softmax(scores, start[:2], start[2:4])
        a_regs = self._registers(probs)
        loop = scf.ForOp(index_const(1), self.tiles, index_const(1),
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
            bits = self._mask_bits(j, slot)
            scores = self._masked(j, hopper.wait_group(1, scores), bits)
            m, l, alphas, probs = self._softmax(scores, m, l)
            new_regs = self._registers(probs)
            # P of tile j - 1 stays live (an operand of the wait) until P V has read it
            o = hopper.wait_group(0, o + a_regs)[:count]
            self._release(previous_slot)
            o = [arith.MulFOp(x, alphas[v % 4 // 2]).result for v, x in enumerate(o)]
            scf.YieldOp(m + l + o + new_regs)
        state = list(loop.results)
        self._release_q()  # the item's every S is done; its last P V follows
        m, l, o, a_regs = state[:2], state[2:4], state[4:4 + count], state[4 + count:]
        last_slot, last_desc = self._slot(arith.SubIOp(self.tiles, index_const(1)).result,
                                          wait_full=False)
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

    def _mask_bits(self, j, slot) -> Optional[list]:
        """The mask's verdicts (i1) on this thread's scores of key tile j, in the
        accumulators' order; None without a mask. Each accumulator pair (v, v + 1) is the
        keys 2t, 2t + 1 (t = lane % 4) of one row and 8 keys: one 2-byte load, from the
        staged tile in the slot (bank-conflict free: padded rows), or from global memory
        where the mask's rows are its last axis and have even length, else two byte
        loads. Issued before the wait for S, so they arrive while the wgmma runs."""
        if self.mask is None:
            return None
        pair_type = ir.VectorType.get([2], ir.IntegerType.get_signless(8))
        quad2 = arith.MulIOp(self.quad, index_const(2)).result
        bits = [None] * (self.p.block_n // 2)
        for r in (0, 1):
            for n in range(self.p.block_n // 8):
                if self.staged:
                    local_row = arith.SubIOp(self.my_rows[r], self.row0).result
                    pair = vector.LoadOp(pair_type, self.mask_view,
                                         [slot, local_row, add(quad2, 8 * n)],
                                         alignment=2).result
                    values = [vector.ExtractOp(pair, [], [c]).result for c in (0, 1)]
                else:
                    values = self._global_mask_pair(j, r, quad2, n)
                for c, value in enumerate(values):
                    bits[4 * n + 2 * r + c] = mask_allows(value)
        return bits

    def _global_mask_pair(self, j, r: int, quad2, n: int) -> list:
        """The mask's bytes of keys j block_n + 8n + 2t (+ 1) of row r, read straight
        from global memory (L1 / L2: a [seq, seq] mask is shared by every head): one
        2-byte load where the mask's rows are its last axis and have even length, else
        two. Rows and keys past the end read the last one's (the limit check drops
        those keys)."""
        key0 = add(arith.AddIOp(arith.MulIOp(j, index_const(self.p.block_n)).result,
                                quad2).result, 8 * n)
        row = self.rows_in[r]
        if isinstance(self.keys, int):  # the last tile reaches past the keys
            bounds, pairs = self.keys % self.p.block_n != 0, self.mask_pairs
        else:  # whole tiles of run-time keys: rows of even length, none past the end
            bounds = not self.whole_key_tiles
            pairs = self.whole_key_tiles and keys_last(self.mask_dims, self.lead)
        return mask_pair(self.mask, lambda key: self.mask_index(self.slice_ivs, row, key),
                         key0, self.keys, pairs, bounds)

    def _needs_limit(self, j) -> Optional[ir.Value]:
        """Whether key tile j needs the per-key limit check (an i1, warp-uniform; None:
        never): the last tile when it reaches past the keys, and (causal) a tile whose
        last key some row of this warp may not see: last key > the warp's first row +
        offset (the tiles on the diagonal; those below it are whole)."""
        block_n, conditions = self.p.block_n, []
        if not isinstance(self.keys, int):  # the last tile, unless the plan knows it whole
            if not self.whole_key_tiles:
                conditions.append(arith.CmpIOp(arith.CmpIPredicate.eq, j, as_index(
                    minus(ceil_div(self.keys, block_n), 1))).result)
        elif self.keys % block_n:
            conditions.append(equals(j, math.ceil(self.keys / block_n) - 1))
        if self.causal:
            last_key = add(arith.MulIOp(j, index_const(block_n)).result, block_n - 1)
            conditions.append(arith.CmpIOp(arith.CmpIPredicate.sgt, last_key,
                                           self.causal.shifted(self.warp_row0)).result)
        if not conditions:
            return None
        return conditions[0] if len(conditions) == 1 else \
            arith.OrIOp(conditions[0], conditions[1]).result

    def _masked(self, j, scores: list, bits: Optional[list]) -> list:
        """Scores the mask forbids (`bits`), of keys past the last and (causal) of keys
        past a row's last allowed key are -inf. The last two are one comparison per
        score, in the tiles that need it: column (within the tile, less 2t) <= the
        row's limit, min(keys, row + offset + 1) - 1 - (first key + 2t)."""
        if bits is not None:
            scores = [only_allowed(bit, s) for bit, s in zip(bits, scores)]
        check = self._needs_limit(j)
        if check is None:
            return scores
        branch = scf.IfOp(check, [s.type for s in scores], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            first = arith.AddIOp(arith.MulIOp(j, index_const(self.p.block_n)).result,
                                 arith.MulIOp(self.quad, index_const(2)).result).result
            last_key = as_index(minus(self.keys, 1))
            limits = []
            for row in self.my_rows:
                last = last_key
                if self.causal:
                    last = arith.MinSIOp(self.causal.shifted(row), last_key).result
                limits.append(arith.SubIOp(last, first).result)
            masked = []
            for v, s in enumerate(scores):
                inside = arith.CmpIOp(arith.CmpIPredicate.sle, index_const(self._key_columns(v)),
                                      limits[v % 4 // 2]).result
                masked.append(only_allowed(inside, s))
            scf.YieldOp(masked)
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp(scores)
        return list(branch.results)

    def _softmax(self, scores, m_old, l_old):
        """Per row r (accumulators v with v % 4 // 2 == r): the new max, the new partial
        sum (this lane's columns), alpha, and P (f32, in the accumulators' order). The
        rows' 32 or 64 values as balanced trees: short dependency chains."""
        mine = [[v for v in range(len(scores)) if v % 4 // 2 == r] for r in (0, 1)]
        update = OnlineSoftmax(self.f32, lanes=4, scale=self.c, balanced=True,
                               may_be_empty=self.may_be_empty).update(
            [[scores[v] for v in row] for row in mine], m_old, l_old)
        probs = [None] * len(scores)
        for row, row_probs in zip(mine, update.probs):
            for v, p in zip(row, row_probs):
                probs[v] = p
        return update.maxima, update.sums, update.alphas, probs

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
        """out = O / l, rounded once, where the row exists; 0 for a row with no allowed
        key (l = 0 and O = 0, as the spec's loops and the other kernels give)."""
        pair = ir.VectorType.get([2], self.element)
        quad2 = arith.MulIOp(self.quad, index_const(2)).result
        for r, row in enumerate(self.my_rows):
            inverse = inverse_sum(quad_reduce(sums[r], arith.AddFOp), self.may_be_empty)
            guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, row,
                                          as_index(self.rows)).result)
            with ir.InsertionPoint(guard.then_block):
                for j in range(self.e // 8):
                    values = [arith.TruncFOp(self.element, arith.MulFOp(
                        o[4 * j + 2 * r + c], inverse).result).result for c in (0, 1)]
                    vector.StoreOp(vector.FromElementsOp(pair, values).result, out,
                                   self.slice_ivs + [row, add(quad2, 8 * j)], alignment=4)
                scf.YieldOp([])
