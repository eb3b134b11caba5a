"""Decode attention on FMAs: a few query rows over many keys (a decode step over a KV
cache), the keys split over blocks and the parts merged by a second kernel
(flash-decoding: decode_split.py). For f16 / bf16 on chips with mma.sync,
attention_decode_mma is asked first; this kernel takes f32 and what it declines.

The flash kernels give a block 64-128 query rows of one head. A decode step has one
query row per head (a few with grouped-query attention or a short prefill), so they
would leave most of their tile empty and launch one block per head: 32 blocks for a
batch of one. Here a block takes every query row that reads one KV head (R = group x
q_len rows, in registers) and one of S parts of its keys; the keys stream past the
threads from global memory, each K and V row read once:

    part kernel   grid (S, batch x kv_heads), `warps` warps a block. L lanes read one
                  key (one aligned 16-byte load each: L = head dim / 8 in f16/bf16), a
                  warp takes 32 / L keys at a time, `unroll` times a trip; the next
                  trip's K and V are loaded before this trip's arithmetic. Each thread
                  keeps, per row, the running max m, sum l and its dims of O (the
                  online softmax in base 2 of flash_skeleton.py). The block's threads
                  meet (shuffles, then shared memory) and write the part's m, l and O.

S makes about `blocks` part blocks. Takes the attention groups of attention_match.py (no
bool mask; Q, K, V and out of one type f16, bf16 or f32, dense; Q's and V's head dims
equal) whose R rows are few (`max_rows`) and fit a thread's registers (`max_values`);
the flash kernels take the rest (and a run-time group other than the one the shapes
fix: decode_split.specialized).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import widened
from . import Launch
from .attention_match import Group, attention_groups
from .decode_split import (SplitKeys, as_static_group, build_split, f32_constant,
                           group_rows, merge_states, shared_bytes, specialized, split_count)
from .flash_skeleton import (WARP, OnlineSoftmax, common_element, problem, row_major,
                             shuffle_xor, sizes, xor_reduce)
from .kernel_builder import delinearize, index_const
from .tuning import choose

NAME = "attention_decode"
__all__ = ["NAME", "Params", "find_groups", "build", "problem"]

_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


@dataclass(frozen=True)
class Params:
    max_rows: int = 16     # R at most this: a few rows (the flash kernels take more)
    warps: int = 4         # warps a block of the part kernel
    blocks: int = 264      # part blocks to aim for (2 per H100 multiprocessor)
    min_trips: int = 2     # fewest trips of the block over its keys a part gets
    unroll: int = 4        # keys a thread loads a trip
    # values a thread keeps in registers: Q and O of its rows (2 R x dims), and K and V
    # of this trip's and the next trip's keys (4 x unroll x dims); the unroll is
    # halved until they fit, and rows that do not fit at 1 decline
    max_values: int = 192


DEFAULT_PARAMS = Params()


@dataclass(frozen=True)
class Layout:
    """How the threads hold one KV head's rows and read its keys."""
    d: int           # the head dim (Q's = V's)
    chunk: int       # elements per vector load (16 bytes where d allows)
    lanes: int       # L: lanes that read one key
    unroll: int      # keys a thread loads a trip

    @property
    def per_lane(self) -> int:
        """Dims of a key (and of each row's Q and O) one lane holds."""
        return self.d // self.lanes

    @property
    def keys_per_warp(self) -> int:
        return WARP // self.lanes


def find_groups(generics: list, target) -> list[Group]:
    """The attention groups this kernel takes (a run-time group where the shapes fix the
    one it is built for: decode_split.as_static_group)."""
    return [group for group in attention_groups(generics)
            if (fixed := as_static_group(group)) is not None and
            _params_for(fixed, target) is not None]


def _layout(group: Group, params: Params, target) -> Optional[Layout]:
    """How the threads take the group with these params on the target; None: they
    cannot (registers, the merge's thread per dim, shared memory)."""
    element = common_element(group)
    d, e = sizes(group)[2], sizes(group)[4]
    if element not in _BYTES or group.mask is not None or d != e or \
            not all(row_major(v) for v in (group.query, group.key, group.value, group.out)):
        return None
    chunk = 16 // _BYTES[element]
    while d % chunk:
        chunk //= 2
    lanes = 1
    while lanes < WARP and (d // chunk) % (2 * lanes) == 0:
        lanes *= 2
    rows, per_lane = group_rows(group), d // lanes
    unroll = params.unroll
    while unroll > 1 and (2 * rows + 4 * unroll) * per_lane > params.max_values:
        unroll //= 2
    if rows > params.max_rows or (2 * rows + 4 * unroll) * per_lane > params.max_values or \
            d > target.facts.max_threads_per_block or \
            shared_bytes(params.warps, rows, d) > target.facts.max_static_shared_per_block:
        return None
    return Layout(d, chunk, lanes, unroll)


def _params_for(group: Group, target) -> Optional[Params]:
    return choose(NAME, [DEFAULT_PARAMS], target, problem(group),
                  lambda p: _layout(group, p, target) is not None)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> list[Launch]:
    fixed = as_static_group(group)
    params = _params_for(fixed, target)
    layout = _layout(fixed, params, target)
    trip_keys = params.warps * layout.keys_per_warp * layout.unroll
    splits = split_count(fixed, params.blocks, params.min_trips, trip_keys)
    launches = build_split(fixed, gpu_module, kernel_name,
                           lambda **fields: _Kernel(layout=layout, **fields), params.warps,
                           splits)
    return specialized(group, launches, gpu_module, kernel_name, target)


@dataclass
class _Kernel(SplitKeys):
    """L lanes a key, each holding d / L dims of every row's Q and O."""
    layout: Layout = None

    def _dims(self, part: ir.Value) -> list[ir.Value]:
        """The first dim of each of this lane's vectors: chunks part, part + L, .."""
        lay = self.layout
        base = arith.MulIOp(part, index_const(lay.chunk)).result
        return [arith.AddIOp(base, index_const(start)).result
                for start in range(0, lay.d, lay.chunk * lay.lanes)]

    def _load(self, buffer: ir.Value, index: list, starts: list) -> list[ir.Value]:
        """This lane's vectors (or values, one element a chunk) of one row: `index` and
        a start each."""
        chunk = self.layout.chunk
        if chunk == 1:
            return [memref.LoadOp(buffer, index + [start]).result for start in starts]
        element = ir.MemRefType(buffer.type).element_type
        # aligned to its size (rows start at multiples of it: dense, d a multiple of the
        # chunk): one 16-byte load, not 8 loads of 2 bytes (LLVM assumes the element's
        # alignment otherwise)
        return [vector.LoadOp(ir.VectorType.get([chunk], element), buffer, index + [start],
                              alignment=chunk * _BYTES[str(element)]).result
                for start in starts]

    def _widen(self, loaded: list[ir.Value]) -> list[ir.Value]:
        """_load's vectors as their f32 values, in order."""
        f32 = ir.F32Type.get()
        if self.layout.chunk == 1:
            return [widened(x, f32) for x in loaded]
        return [widened(vector.ExtractOp(vec, [], [c]).result, f32)
                for vec in loaded for c in range(self.layout.chunk)]

    def _read(self, buffer: ir.Value, index: list, starts: list) -> list[ir.Value]:
        """This lane's values of one row, widened to f32."""
        return self._widen(self._load(buffer, index, starts))

    def part(self, query, key, value, parts, scale, tiles):
        lay = self.layout
        tid = gpu.thread_id(gpu.Dimension.x)
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        key_sub = arith.DivUIOp(lane, index_const(lay.lanes)).result
        starts = self._dims(arith.RemUIOp(lane, index_const(lay.lanes)).result)
        kv_flat, split = gpu.block_id(gpu.Dimension.y), gpu.block_id(gpu.Dimension.x)
        kv_ivs = delinearize(kv_flat, self.kv_lead) if self.kv_lead else []
        rows = [self.row_of(index_const(r), kv_ivs) for r in range(self.group_rows)]
        q = [[arith.MulFOp(x, scale).result for x in self._read(query, ivs + [i], starts)]
             for ivs, i in rows]
        first, last = self.part_keys(split)
        step = self.warps * lay.keys_per_warp  # keys the block reads at once
        # a warp's lanes run the same trips (their shuffles need all of them)
        start = arith.AddIOp(first, arith.MulIOp(warp, index_const(lay.keys_per_warp)).result
                             ).result
        neg_inf, zero = f32_constant(float("-inf")), f32_constant(0.0)

        def keys_from(trip_start):  # this thread's keys of a trip, and their K and V
            keys = [arith.AddIOp(arith.AddIOp(trip_start, index_const(u * step)).result,
                                 key_sub).result for u in range(lay.unroll)]
            # past the last key: the last one (read, then not allowed)
            inside = [arith.MinUIOp(j, index_const(self.keys - 1)).result for j in keys]
            return keys, [x for j in inside for x in self._load(key, kv_ivs + [j], starts)
                          + self._load(value, kv_ivs + [j], starts)]
        trip = step * lay.unroll
        state = [neg_inf] * self.group_rows + [zero] * self.group_rows + \
            [zero] * (self.group_rows * lay.per_lane)
        # K and V of the next trip are loaded before this trip's arithmetic (in flight
        # while it runs); the first trip's before the loop
        _, first_loads = keys_from(start)
        loop = scf.ForOp(start, last, index_const(trip), state + first_loads)
        with ir.InsertionPoint(loop.body):
            keys, _ = keys_from(loop.induction_variable)
            _, next_loads = keys_from(arith.AddIOp(loop.induction_variable,
                                                   index_const(trip)).result)
            carried = list(loop.inner_iter_args)
            m, l, o = self._unpack(carried[:len(state)])
            loaded = carried[len(state):]
            per_key = len(loaded) // lay.unroll
            k = [self._widen(loaded[u * per_key:u * per_key + per_key // 2])
                 for u in range(lay.unroll)]
            v = [self._widen(loaded[u * per_key + per_key // 2:(u + 1) * per_key])
                 for u in range(lay.unroll)]
            scores = []
            for r, (_, i) in enumerate(rows):
                row = []
                for j, k_j in zip(keys, k):
                    partial = zero
                    for qx, kx in zip(q[r], k_j):
                        partial = mmath.FmaOp(qx, kx, partial).result
                    allowed = arith.CmpIOp(arith.CmpIPredicate.ult, j, last).result
                    if self.causal:
                        allowed = arith.AndIOp(allowed,
                                               self.causal.allows(j, i)).result
                    row.append(arith.SelectOp(allowed, xor_reduce(partial, arith.AddFOp,
                                                                  lay.lanes), neg_inf).result)
                scores.append(row)
            update = OnlineSoftmax(ir.F32Type.get()).update(scores, m, l)
            o_new = []
            for r in range(self.group_rows):
                for n, ox in enumerate(o[r]):
                    acc = arith.MulFOp(ox, update.alphas[r]).result
                    for p, v_j in zip(update.probs[r], v):
                        acc = mmath.FmaOp(p, v_j[n], acc).result
                    o_new.append(acc)
            scf.YieldOp(update.maxima + update.sums + o_new + next_loads)
        m, l, o = self._unpack(list(loop.results)[:len(state)])
        # the warp's key streams meet: lanes key_sub apart hold the same dims
        states = [(m[r], l[r], o[r]) for r in range(self.group_rows)]
        offset = lay.lanes
        while offset < WARP:
            states = [merge_states(s, (shuffle_xor(s[0], offset), shuffle_xor(s[1], offset),
                                       [shuffle_xor(x, offset) for x in s[2]]))
                      for s in states]
            offset *= 2
        first_stream = arith.CmpIOp(arith.CmpIPredicate.eq, key_sub, index_const(0)).result
        write = scf.IfOp(first_stream)
        with ir.InsertionPoint(write.then_block):
            for r, (m_r, l_r, o_r) in enumerate(states):
                rr = index_const(r)
                memref.StoreOp(m_r, tiles["m"], [warp, rr])  # every lane the same value
                memref.StoreOp(l_r, tiles["l"], [warp, rr])
                for n, x in enumerate(o_r):
                    dim = arith.AddIOp(starts[n // lay.chunk], index_const(n % lay.chunk)
                                       ).result
                    memref.StoreOp(x, tiles["o"], [warp, rr, dim])
            scf.YieldOp([])
        gpu.BarrierOp()
        self.write_parts(tiles, parts, kv_flat, split)

    def _unpack(self, values):
        rows, per = self.group_rows, self.layout.per_lane
        values = list(values)
        m, l, o = values[:rows], values[rows:2 * rows], values[2 * rows:]
        return m, l, [o[r * per:(r + 1) * per] for r in range(rows)]
