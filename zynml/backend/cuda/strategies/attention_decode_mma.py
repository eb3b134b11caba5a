"""Decode attention on tensor cores: flash-decoding (decode_split.py) whose part kernel
multiplies with mma.sync m16n8k16, f16 / bf16 operands and f32 accumulators.

attention_decode's FMAs take about 90 instructions a key per warp (the dot products,
their shuffles across the lanes of a key, the f16 -> f32 conversions), and at 16 x 8 KV
heads they, not memory, bound the step (on an H200, 2.8 TB/s of K and V against cuDNN's
3.5). Here a warp takes 16 keys at a time as FlashAttention-2 takes a tile, with the
block's R query rows (at most 16) as the mma's rows:

    S = Q K^T    A = Q, loaded once; B = K^T of 8 keys: lane (g = lane / 4, t = lane % 4)
                 holds key g, and K's rows are already the column-major B. The sum over
                 the head dim runs in any order, so each lane reads its 16-byte chunks
                 4c + t of key g (c < d / 32) and every k-step takes two of a chunk's
                 four words: no shuffles, no conversions; Q's fragments use the same
                 order.
    P V          A = P: S's accumulators are the A fragment of the next mma (keys 2t,
                 2t + 1, 2t + 8, 2t + 9 of the 16); B = V, row-major, so lane (g, t)
                 reads keys 2t, 2t + 1, 2t + 8, 2t + 9 at chunks 8c + g (c < d / 64) and
                 pairs the two keys' element j for instance (c, j) (a byte permute):
                 O's column 2t + u of that instance is dim 8 (8c + 2t + u) + j.

The online softmax keeps a row's max and sum across the quad of lanes that hold it
(rows g and g + 8; the second half is skipped where R <= 8, its A words zero). A warp's
keys are 16-key steps `warps` apart, `unroll` steps a trip, their K and V loaded at the
top of the trip; the warps' states meet in shared memory as attention_decode's do.

Takes what attention_decode takes in f16 / bf16 where the head dim is a multiple of 64
(at most 128: O's accumulators, d / 2 a lane) and R <= 16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from . import Launch
from .attention_match import Group, attention_groups
from .decode_split import (SplitKeys, as_static_group, build_split, f32_constant, group_rows,
                           kv_lead, shared_bytes, specialized, split_count)
from .flash_skeleton import (WARP, OnlineSoftmax, common_element, problem, quad_reduce,
                             row_major, sizes)
from .kernel_builder import delinearize, index_const
from .matvec_mma import mma_m16n8k16
from .tuning import choose

NAME = "attention_decode_mma"
REQUIRES = frozenset({"mma_sync"})
__all__ = ["NAME", "REQUIRES", "Params", "find_groups", "build", "problem"]

STEP = 16    # keys a warp takes at once: the mma's k of P V
CHUNK = 8    # f16 / bf16 elements of a 16-byte load


@dataclass(frozen=True)
class Params:
    max_rows: int = 16     # R at most this (the mma's 16 rows)
    # warps a block of the part kernel, and part blocks a multiprocessor holds at once
    # (ptxas fits the registers to them): the keys are split into as many parts as one
    # such wave takes. H200, 32 / 8 heads, d 128, f16, a 1024-key cache, the median step
    # (benchmarks/decode_attention.py), against SDPA: 8 warps, 1 block 1.20x at batch
    # 1 and 16 (16 x 8 KV heads: one part, no merge); 4 warps, 2 blocks 1.24x / 0.93x;
    # 4 warps, 3 blocks 1.23x / 0.94x; 4 warps, 1 block 1.25x / 0.97x
    warps: int = 8
    blocks_per_multiprocessor: int = 1
    min_trips: int = 2     # fewest trips of the block over its keys a part gets
    unroll: int = 1        # 16-key steps a warp loads a trip


DEFAULT_PARAMS = Params()


def find_groups(generics: list, target) -> list[Group]:
    """The attention groups this kernel takes (a run-time group where the shapes fix the
    one it is built for: decode_split.as_static_group)."""
    return [group for group in attention_groups(generics)
            if (fixed := as_static_group(group)) is not None and
            _params_for(fixed, target) is not None]


def _fits(group: Group, params: Params, target) -> bool:
    d, e = sizes(group)[2], sizes(group)[4]
    return common_element(group) in ("f16", "bf16") and group.mask is None and d == e and \
        d % 64 == 0 and d <= 128 and group_rows(group) <= min(params.max_rows, 16) and \
        all(row_major(v) for v in (group.query, group.key, group.value, group.out)) and \
        shared_bytes(params.warps, group_rows(group), d) <= \
        target.facts.max_static_shared_per_block


def _params_for(group: Group, target) -> Optional[Params]:
    """The defaults; where the KV slices alone fill the GPU's wave (one part each, no
    merge), two steps a trip first: a warp then has twice the loads in flight. H200, 16 x 8
    KV heads, a 4096-key cache, the median step (two calls): 1.005-1.021x SDPA against
    0.973-0.992x with one step; at batch 1 (several parts) two steps were 2-3% slower.
    Carrying the next trip's loads through the loop instead (236 registers) gained
    nothing (0.980-0.994x; 1.016x at batch 1)."""
    candidates = [DEFAULT_PARAMS]
    blocks = DEFAULT_PARAMS.blocks_per_multiprocessor * target.facts.multiprocessors
    if 2 * math.prod(kv_lead(group)) > blocks:
        candidates.insert(0, replace(DEFAULT_PARAMS, unroll=2))
    return choose(NAME, candidates, target, problem(group),
                  lambda p: _fits(group, p, target))


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> list[Launch]:
    fixed = as_static_group(group)
    params = _params_for(fixed, target)
    per_multiprocessor = params.blocks_per_multiprocessor
    splits = split_count(fixed, per_multiprocessor * target.facts.multiprocessors,
                         params.min_trips, params.warps * STEP * params.unroll,
                         whole_wave=True)
    launches = build_split(fixed, gpu_module, kernel_name,
                           lambda **fields: _Kernel(unroll=params.unroll, **fields),
                           params.warps, splits, per_multiprocessor)
    return specialized(group, launches, gpu_module, kernel_name, target)


def _words(vec: ir.Value) -> list[ir.Value]:
    """A 16-byte vector of 8 halves as its four i32 words (pairs of halves)."""
    i32 = ir.IntegerType.get_signless(32)
    as_words = vector.BitCastOp(ir.VectorType.get([4], i32), vec).result
    return [vector.ExtractOp(as_words, [], [w]).result for w in range(4)]


def _word(low_vec: ir.Value, high_vec: ir.Value, j: int) -> ir.Value:
    """Element j of two 8-half vectors, as one i32 (low half from low_vec)."""
    i32 = ir.IntegerType.get_signless(32)
    pair = vector.ShuffleOp(low_vec, high_vec, [j, CHUNK + j]).result
    return vector.ExtractOp(vector.BitCastOp(ir.VectorType.get([1], i32), pair).result,
                            [], [0]).result


def _packed(values: list[ir.Value], element: ir.Type) -> ir.Value:
    """Two f32 values rounded to `element` and packed into an i32 (the low one first)."""
    i32 = ir.IntegerType.get_signless(32)
    pair = vector.FromElementsOp(ir.VectorType.get([2], ir.F32Type.get()), values).result
    narrow = arith.TruncFOp(ir.VectorType.get([2], element), pair).result
    return vector.ExtractOp(vector.BitCastOp(ir.VectorType.get([1], i32), narrow).result,
                            [], [0]).result


@dataclass
class _Kernel(SplitKeys):
    unroll: int = 1

    def part(self, query, key, value, parts, scale, tiles):
        element = ir.MemRefType(key.type).element_type
        i32 = ir.IntegerType.get_signless(32)
        tid = gpu.thread_id(gpu.Dimension.x)
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        g = arith.DivUIOp(lane, index_const(4)).result
        t = arith.RemUIOp(lane, index_const(4)).result
        kv_flat, split = gpu.block_id(gpu.Dimension.y), gpu.block_id(gpu.Dimension.x)
        kv_ivs = delinearize(kv_flat, self.kv_lead) if self.kv_lead else []
        halves = 1 if self.group_rows <= 8 else 2  # rows g (and g + 8) of this lane
        rows = [arith.AddIOp(g, index_const(8 * h)).result for h in range(halves)]
        # a row past R reads row R - 1: its results are not stored
        rows_at = [self.row_of(arith.MinUIOp(r, index_const(self.group_rows - 1)).result,
                               kv_ivs) for r in rows]
        zero_word = arith.ConstantOp(i32, 0).result
        q_words = [self._chunks(query, q_slice + [i], t, self.d // 32, 4)
                   for q_slice, i in rows_at]
        # Q's A fragment of k-step s: (row g, low), (row g+8, low), (row g, high), (row
        # g+8, high); chunk c's words 0, 1 are k-step 2c's low and high, 2, 3 k-step 2c+1's
        q_frags = []
        for s in range(self.d // 16):
            c, w = divmod(s, 2)
            words = [q_words[h][c][2 * w + x] if h < halves else zero_word
                     for x in (0, 1) for h in (0, 1)]
            q_frags.append(words)
        first, last = self.part_keys(split)
        start = arith.AddIOp(first, arith.MulIOp(warp, index_const(STEP)).result).result
        stride = self.warps * STEP  # keys between a warp's steps
        neg_inf, zero = f32_constant(float("-inf")), f32_constant(0.0)
        instances = self.e // 8  # of P V: 8 columns of O each
        state = [neg_inf] * halves + [zero] * halves + [zero] * (4 * instances)
        loop = scf.ForOp(start, last, index_const(stride * self.unroll), state)
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            m, l = carried[:halves], carried[halves:2 * halves]
            o = [carried[2 * halves + 4 * n:2 * halves + 4 * n + 4] for n in range(instances)]
            bases = [arith.AddIOp(loop.induction_variable, index_const(u * stride)).result
                     for u in range(self.unroll)]
            loads = [self._step_loads(key, value, kv_ivs, base, g, t) for base in bases]
            scores, allowed = [[] for _ in rows], [[] for _ in rows]
            for base, (k_words, _) in zip(bases, loads):
                s_tiles = []
                for tile in (0, 1):
                    acc = [zero] * 4
                    for s, frag in enumerate(q_frags):
                        c, w = divmod(s, 2)
                        low_high = k_words[tile][c][2 * w:2 * w + 2]
                        acc = mma_m16n8k16(acc, frag, low_high, str(element))
                    s_tiles.append(acc)
                # S (row g + 8h, key 2t + u) of tile n: accumulator 2h + u of tile n
                keys = [arith.AddIOp(base, arith.AddIOp(
                    arith.MulIOp(t, index_const(2)).result, index_const(8 * n + u)).result
                    ).result for n in (0, 1) for u in (0, 1)]
                for h, (_, i) in enumerate(rows_at):
                    for j, (n, u) in zip(keys, [(0, 0), (0, 1), (1, 0), (1, 1)]):
                        scores[h].append(arith.MulFOp(s_tiles[n][2 * h + u], scale).result)
                        ok = arith.CmpIOp(arith.CmpIPredicate.ult, j, last).result
                        if self.causal:
                            ok = arith.AndIOp(ok, self.causal.allows(j, i)).result
                        allowed[h].append(ok)
            update = OnlineSoftmax(ir.F32Type.get(), lanes=4).update(scores, m, l, allowed)
            o = [[arith.MulFOp(x, update.alphas[v // 2]).result if v // 2 < halves else x
                  for v, x in enumerate(acc)] for acc in o]
            for u, (_, v_vecs) in enumerate(loads):
                p = [update.probs[h][4 * u:4 * u + 4] for h in range(halves)]
                # P's A fragment: (row g, keys 2t..), (row g+8, 2t..), (g, 2t+8..), (g+8, ..)
                frag = [_packed(p[h][2 * n:2 * n + 2], element) if h < halves else zero_word
                        for n in (0, 1) for h in (0, 1)]
                for n in range(instances):
                    c, j = divmod(n, CHUNK)
                    b = [_word(v_vecs[0][c], v_vecs[1][c], j),
                         _word(v_vecs[2][c], v_vecs[3][c], j)]
                    o[n] = mma_m16n8k16(o[n], frag, b, str(element))
            scf.YieldOp(update.maxima + update.sums + [x for acc in o for x in acc])
        results = list(loop.results)
        m, l = results[:halves], [quad_reduce(x, arith.AddFOp) for x in
                                  results[halves:2 * halves]]
        o = [results[2 * halves + 4 * n:2 * halves + 4 * n + 4] for n in range(instances)]
        self._store_warp_state(tiles, warp, rows, t, m, l, o)
        gpu.BarrierOp()
        self.write_parts(tiles, parts, kv_flat, split)

    def _chunks(self, buffer, index: list, first: ir.Value, count: int, apart: int) -> list:
        """The 16-byte chunks first, first + apart, .. (`count`) of one row of `buffer`,
        each as its four words."""
        element = ir.MemRefType(buffer.type).element_type
        vec = ir.VectorType.get([CHUNK], element)
        return [_words(vector.LoadOp(vec, buffer, index + [arith.MulIOp(arith.AddIOp(
            first, index_const(c * apart)).result, index_const(CHUNK)).result],
            alignment=16).result) for c in range(count)]

    def _step_loads(self, key, value, kv_ivs, base, g, t):
        """One 16-key step's loads from key `base`: K's words [tile n][chunk c] of key
        base + 8n + g, and V's vectors [key 2t, 2t+1, 2t+8, 2t+9][chunk c] (chunks
        8c + g). Keys past the last read the last one (not allowed)."""
        def at(j):
            return arith.MinUIOp(arith.AddIOp(base, j).result,
                                 index_const(self.keys - 1)).result
        k_words = [self._chunks(key, kv_ivs + [at(arith.AddIOp(g, index_const(8 * n)).result)],
                                t, self.d // 32, 4) for n in (0, 1)]
        element = ir.MemRefType(value.type).element_type
        vec = ir.VectorType.get([CHUNK], element)
        two_t = arith.MulIOp(t, index_const(2)).result
        v_vecs = [[vector.LoadOp(vec, value, kv_ivs + [
            at(arith.AddIOp(two_t, index_const(offset)).result),
            arith.MulIOp(arith.AddIOp(g, index_const(8 * c)).result,
                         index_const(CHUNK)).result], alignment=16).result
                   for c in range(self.e // 64)] for offset in (0, 1, 8, 9)]
        return k_words, v_vecs

    def _store_warp_state(self, tiles, warp, rows, t, m, l, o):
        """This warp's m, l and O of rows g (and g + 8) < R into the shared tiles:
        accumulator 2h + u of instance (c, j) is O (row g + 8h, dim 8 (8c + 2t + u) + j)."""
        for h, r in enumerate(rows):
            mine = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, r,
                                         index_const(self.group_rows)).result)
            with ir.InsertionPoint(mine.then_block):
                memref.StoreOp(m[h], tiles["m"], [warp, r])  # the quad's lanes agree
                memref.StoreOp(l[h], tiles["l"], [warp, r])
                for n, acc in enumerate(o):
                    c, j = divmod(n, CHUNK)
                    for u in (0, 1):
                        column = arith.AddIOp(arith.MulIOp(t, index_const(2)).result,
                                              index_const(8 * c + u)).result
                        dim = arith.AddIOp(arith.MulIOp(column, index_const(CHUNK)).result,
                                           index_const(j)).result
                        memref.StoreOp(acc[2 * h + u], tiles["o"], [warp, r, dim])
                scf.YieldOp([])
