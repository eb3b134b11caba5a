"""Decode attention: a few query rows over many keys (a decode step over a KV cache),
the keys split over blocks and the parts merged by a second kernel (flash-decoding).

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
                  meet (shuffles, then shared memory) and write the part's m, l and O,
                  not yet divided by l, into a scratch buffer the host allocates.
    merge kernel  grid (R, batch x kv_heads), a thread per output dim:
                  out = sum_s O_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s;
                  0 where no part saw a key (the spec's loops give 0 there).

S makes about `blocks` part blocks. Causal attention splits the keys the rows may see,
up to the last row's last allowed key (read at run time from a run-time offset), not the
whole cache: a cache that is mostly empty still spreads over every part.

Takes the attention groups of attention.py (no bool mask; Q, K, V and out of one type
f16, bf16 or f32, dense; Q's and V's head dims equal) whose R rows are few (`max_rows`)
and fit a thread's registers (`max_values`); the flash kernels take the rest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant, widened
from . import Launch
from .attention import Group, attention_groups
from .flash_skeleton import (WARP, FlashFrame, OnlineSoftmax, base2_scale, common_element,
                             declare_static_tiles, frame_fields, inverse_sum, kernel_entry,
                             kernel_values, problem, row_major, shuffle_xor, sizes,
                             spread_over_threads, static_tiles, tree, xor_reduce)
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


# the merge loads every part's values at once
MAX_PARTS = 128


DEFAULT_PARAMS = Params()


@dataclass(frozen=True)
class Layout:
    """How the threads hold one KV head's rows and read its keys."""
    group_rows: int  # R: the query rows that read one KV head (group x q_len)
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
    return [group for group in attention_groups(generics)
            if _params_for(group, target) is not None]


def _layout(group: Group, params: Params, target) -> Optional[Layout]:
    """How the threads take the group with these params on the target; None: they
    cannot (registers, the merge's thread per dim, shared memory)."""
    element = common_element(group)
    lead, q_len, d, _, e = sizes(group)
    if element not in _BYTES or group.mask is not None or d != e or \
            not all(row_major(v) for v in (group.query, group.key, group.value, group.out)):
        return None
    chunk = 16 // _BYTES[element]
    while d % chunk:
        chunk //= 2
    lanes = 1
    while lanes < WARP and (d // chunk) % (2 * lanes) == 0:
        lanes *= 2
    rows, per_lane = q_len * math.prod(group.kv_group or [1] * len(lead)), d // lanes
    unroll = params.unroll
    while unroll > 1 and (2 * rows + 4 * unroll) * per_lane > params.max_values:
        unroll //= 2
    # the blocks' states meet in shared memory: O, m and l of each warp
    shared = params.warps * rows * (d + 2) * 4
    if rows > params.max_rows or (2 * rows + 4 * unroll) * per_lane > params.max_values or \
            d > target.facts.max_threads_per_block or \
            shared > target.facts.max_static_shared_per_block:
        return None
    return Layout(rows, d, chunk, lanes, unroll)


def _params_for(group: Group, target) -> Optional[Params]:
    return choose(NAME, [DEFAULT_PARAMS], target, problem(group),
                  lambda p: _layout(group, p, target) is not None)


def _kv_lead(group: Group) -> list[int]:
    lead = sizes(group)[0]
    return [n // g for n, g in zip(lead, group.kv_group or [1] * len(lead))]


def split_count(group: Group, params: Params, layout: Layout) -> int:
    """S: about params.blocks part blocks, each part at least min_trips trips of its
    block over the keys, at most MAX_PARTS."""
    keys = sizes(group)[3]
    trip = params.warps * layout.keys_per_warp * layout.unroll  # keys a block trip reads
    wanted = math.ceil(params.blocks / math.prod(_kv_lead(group)))
    return max(1, min(wanted, keys // (params.min_trips * trip), MAX_PARTS))


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> list[Launch]:
    params = _params_for(group, target)
    layout = _layout(group, params, target)
    splits = split_count(group, params, layout)
    slices = math.prod(_kv_lead(group))
    location = group.ops[-1].location
    f32 = ir.F32Type.get()
    # O of every part, then the parts' m, then their l
    with ir.InsertionPoint(group.ops[-1]), location:
        parts = memref.AllocOp(ir.MemRefType.get(
            [slices * splits * layout.group_rows * (layout.d + 2)], f32), [], []).result
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    per_warp = [params.warps, layout.group_rows]
    tiles = {"m": ir.MemRefType.get(per_warp, f32, memory_space=shared),
             "l": ir.MemRefType.get(per_warp, f32, memory_space=shared),
             "o": ir.MemRefType.get(per_warp + [layout.d], f32, memory_space=shared)}
    part_name, merge_name = f"{kernel_name}_part", f"{kernel_name}_merge"
    declare_static_tiles(gpu_module, part_name, tiles, location)
    values = [v for v in kernel_values(group) if v != group.out] + [parts]
    threads = params.warps * WARP
    with kernel_entry(gpu_module, part_name, values, threads, location) as args:
        kernel = _Kernel(layout=layout, splits=splits, kv_lead=_kv_lead(group),
                         warps=params.warps, **frame_fields(group, args))
        kernel.part(args[group.query], args[group.key], args[group.value], args[parts],
                    base2_scale(group, args, f32), static_tiles(part_name, tiles))
    with kernel_entry(gpu_module, merge_name, [parts, group.out], layout.d,
                      location) as args:
        # the merge sees no keys: no causal rule (nor its run-time offset) to load
        kernel = _Kernel(layout=layout, splits=splits, kv_lead=_kv_lead(group),
                         warps=params.warps, **frame_fields(replace(group, causal=None)))
        kernel.merge(args[parts], args[group.out])
    return [Launch(part_name, values, (splits, slices, 1), (threads, 1, 1)),
            Launch(merge_name, [parts, group.out], (layout.group_rows, slices, 1),
                   (layout.d, 1, 1))]


def _c(value: float) -> ir.Value:
    return float_constant(ir.F32Type.get(), value)


def _shift(m: ir.Value) -> ir.Value:
    """What the exponents take off: m, or 0 where m is -inf (nothing seen: 2^(-inf) = 0,
    not NaN)."""
    empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, m, _c(float("-inf"))).result
    return arith.SelectOp(empty, _c(0.0), m).result


def _exp2_minus(value: ir.Value, shift: ir.Value) -> ir.Value:
    return mmath.Exp2Op(arith.SubFOp(value, shift).result).result


def _merge(a: tuple, b: tuple) -> tuple:
    """Two (m, l, [O..]) states of one row over disjoint keys -> the state of both."""
    m = arith.MaximumFOp(a[0], b[0]).result
    shift = _shift(m)
    wa, wb = _exp2_minus(a[0], shift), _exp2_minus(b[0], shift)
    l = mmath.FmaOp(a[1], wa, arith.MulFOp(b[1], wb).result).result
    o = [mmath.FmaOp(x, wa, arith.MulFOp(y, wb).result).result for x, y in zip(a[2], b[2])]
    return m, l, o


@dataclass
class _Kernel(FlashFrame):
    """FlashFrame's `rows` are the query rows of one head (q_len); a block holds
    layout.group_rows of them (R: those of every query head of one KV head)."""
    layout: Layout = None
    splits: int = 1
    kv_lead: list = None  # the KV heads' (p..) extents
    warps: int = 4

    def _row(self, r: int, kv_ivs: list) -> tuple[list, int]:
        """Query row r of a KV head: its Q slice indices and its row (r = g x q_len + i,
        g the query head within the group, over the grouped axes)."""
        g, i = divmod(r, self.rows)
        within = []
        for size in reversed(self.kv_group):
            g, offset = divmod(g, size)
            within.insert(0, index_const(offset))
        return self._query_slice(kv_ivs, within), i

    def _query_slice(self, kv_ivs: list, within: list) -> list:
        """Q's (p..) indices of the query head `within` (per axis) of the KV head kv_ivs."""
        return [arith.AddIOp(arith.MulIOp(iv, index_const(size)).result, w).result
                if size != 1 else iv for iv, size, w in zip(kv_ivs, self.kv_group, within)]

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
        rows = [self._row(r, kv_ivs) for r in range(lay.group_rows)]
        q = [[arith.MulFOp(x, scale).result for x in self._read(query, ivs + [index_const(i)],
                                                                 starts)]
             for ivs, i in rows]
        # the keys the rows may see: 0..end, split into S parts of `span` keys
        end = self.causal.key_end(index_const(0), self.rows, self.rows, self.keys) \
            if self.causal else index_const(self.keys)
        span = arith.DivUIOp(arith.AddIOp(end, index_const(self.splits - 1)).result,
                             index_const(self.splits)).result
        first = arith.MulIOp(split, span).result
        last = arith.MinUIOp(arith.AddIOp(first, span).result, end).result
        step = self.warps * lay.keys_per_warp  # keys the block reads at once
        # a warp's lanes run the same trips (their shuffles need all of them)
        start = arith.AddIOp(first, arith.MulIOp(warp, index_const(lay.keys_per_warp)).result
                             ).result
        neg_inf, zero = _c(float("-inf")), _c(0.0)

        def keys_from(trip_start):  # this thread's keys of a trip, and their K and V
            keys = [arith.AddIOp(arith.AddIOp(trip_start, index_const(u * step)).result,
                                 key_sub).result for u in range(lay.unroll)]
            # past the last key: the last one (read, then not allowed)
            inside = [arith.MinUIOp(j, index_const(self.keys - 1)).result for j in keys]
            return keys, [x for j in inside for x in self._load(key, kv_ivs + [j], starts)
                          + self._load(value, kv_ivs + [j], starts)]
        trip = step * lay.unroll
        state = [neg_inf] * lay.group_rows + [zero] * lay.group_rows + \
            [zero] * (lay.group_rows * lay.per_lane)
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
                                               self.causal.allows(j, index_const(i))).result
                    row.append(arith.SelectOp(allowed, xor_reduce(partial, arith.AddFOp,
                                                                  lay.lanes), neg_inf).result)
                scores.append(row)
            update = OnlineSoftmax(ir.F32Type.get()).update(scores, m, l)
            o_new = []
            for r in range(lay.group_rows):
                for n, ox in enumerate(o[r]):
                    acc = arith.MulFOp(ox, update.alphas[r]).result
                    for p, v_j in zip(update.probs[r], v):
                        acc = mmath.FmaOp(p, v_j[n], acc).result
                    o_new.append(acc)
            scf.YieldOp(update.maxima + update.sums + o_new + next_loads)
        m, l, o = self._unpack(list(loop.results)[:len(state)])
        # the warp's key streams meet: lanes key_sub apart hold the same dims
        states = [(m[r], l[r], o[r]) for r in range(lay.group_rows)]
        offset = lay.lanes
        while offset < WARP:
            states = [_merge(s, (shuffle_xor(s[0], offset), shuffle_xor(s[1], offset),
                                 [shuffle_xor(x, offset) for x in s[2]])) for s in states]
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
        spread_over_threads(tid, lay.group_rows * lay.d, self.warps * WARP,
                            lambda flat: self._write_part(flat, kv_flat, split, tiles, parts))

    def _write_part(self, flat, kv_flat, split, tiles, parts):
        """Output (r, dim) of the block: the warps' states merged, stored in `parts`."""
        lay = self.layout
        r = arith.DivUIOp(flat, index_const(lay.d)).result
        dim = arith.RemUIOp(flat, index_const(lay.d)).result
        state = None
        for w in range(self.warps):
            ww = index_const(w)
            mine = (memref.LoadOp(tiles["m"], [ww, r]).result,
                    memref.LoadOp(tiles["l"], [ww, r]).result,
                    [memref.LoadOp(tiles["o"], [ww, r, dim]).result])
            state = mine if state is None else _merge(state, mine)
        row = self._part_row(kv_flat, split, r)
        memref.StoreOp(state[2][0], parts, self._o_at(row, dim))
        leader = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, dim, index_const(0)).result)
        with ir.InsertionPoint(leader.then_block):
            memref.StoreOp(state[0], parts, self._m_at(row))
            memref.StoreOp(state[1], parts, self._l_at(row))
            scf.YieldOp([])

    # The parts buffer (build's scratch): O of every row of every part, then their m,
    # then their l; a row is (KV head x S + part) x R + r.

    def _part_row(self, kv_flat: ir.Value, part: ir.Value, r: ir.Value) -> ir.Value:
        first = arith.MulIOp(arith.AddIOp(arith.MulIOp(kv_flat, index_const(self.splits)
                                                       ).result, part).result,
                             index_const(self.layout.group_rows)).result
        return arith.AddIOp(first, r).result

    def _o_at(self, row: ir.Value, dim: ir.Value) -> list:
        return [arith.AddIOp(arith.MulIOp(row, index_const(self.layout.d)).result,
                             dim).result]

    def _m_at(self, row: ir.Value) -> list:
        return [arith.AddIOp(row, index_const(self._rows_in_all() * self.layout.d)).result]

    def _l_at(self, row: ir.Value) -> list:
        return [arith.AddIOp(row, index_const(self._rows_in_all() * (self.layout.d + 1))
                             ).result]

    def _rows_in_all(self) -> int:
        return math.prod(self.kv_lead) * self.splits * self.layout.group_rows

    def _unpack(self, values):
        rows, per = self.layout.group_rows, self.layout.per_lane
        values = list(values)
        m, l, o = values[:rows], values[rows:2 * rows], values[2 * rows:]
        return m, l, [o[r * per:(r + 1) * per] for r in range(rows)]

    def merge(self, parts, out):
        dim = gpu.thread_id(gpu.Dimension.x)
        r = gpu.block_id(gpu.Dimension.x)
        kv_flat = gpu.block_id(gpu.Dimension.y)
        kv_ivs = delinearize(kv_flat, self.kv_lead) if self.kv_lead else []
        # every part's loads at once (independent: one round trip, not S)
        rows = [self._part_row(kv_flat, index_const(s), r) for s in range(self.splits)]
        m_s = [memref.LoadOp(parts, self._m_at(row)).result for row in rows]
        l_s = [memref.LoadOp(parts, self._l_at(row)).result for row in rows]
        o_s = [memref.LoadOp(parts, self._o_at(row, dim)).result for row in rows]
        shift = _shift(tree(m_s, arith.MaximumFOp))
        weights = [_exp2_minus(m, shift) for m in m_s]
        l_sum = tree([arith.MulFOp(x, w).result for x, w in zip(l_s, weights)], arith.AddFOp)
        o_sum = tree([arith.MulFOp(x, w).result for x, w in zip(o_s, weights)], arith.AddFOp)
        result = arith.MulFOp(o_sum, inverse_sum(l_sum)).result
        out_type = ir.MemRefType(out.type).element_type
        if result.type != out_type:
            result = arith.TruncFOp(out_type, result).result
        # row r of the KV head: query head g = r / q_len of its group, row i = r % q_len
        g = arith.DivUIOp(r, index_const(self.rows)).result
        i = arith.RemUIOp(r, index_const(self.rows)).result
        within = delinearize(g, self.kv_group) if self.kv_group else []
        memref.StoreOp(result, out, self._query_slice(kv_ivs, within) + [i, dim])
