"""Flash-decoding's frame, shared by the decode attention strategies: the keys of each KV
head split into S parts, a block a part, and a second kernel merging the parts.

    part kernel   grid (S, batch x kv_heads): a block takes every query row that reads
                  one KV head (R = group x q_len rows) over one part of its keys; its
                  warps each keep a running state per row (max m, sum l, O not yet
                  divided by l), meet in shared memory, and write the part's state into
                  a scratch buffer the host allocates. How a warp walks its keys is the
                  strategy's (attention_decode: FMAs, attention_decode_mma: mma.sync).
    merge kernel  grid (R, batch x kv_heads), a thread per output dim:
                  out = sum_s O_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s;
                  0 where no part saw a key (the spec's loops give 0 there).

Causal attention splits the keys the rows may see, up to the last row's last allowed key
(read at run time from a run-time offset), not the whole cache: a cache that is mostly
empty still spreads over every part.

A block's rows are one KV head's query heads, so the group must be a number. A group
read at run time (`h / g`, g an input) is specialized at launch, as Triton specializes
on sizes: the kernels are built for the one group the static shapes admit with every
key head read, query heads / key heads (`as_static_group`), and run where g is that
(`Launch.when`); elsewhere the next attention strategy's flash kernel runs
(`specialized`). Nothing recompiles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant
from . import Launch, later_group_launches
from .attention_match import Group
from .flash_skeleton import (WARP, FlashFrame, base2_scale, declare_static_tiles,
                             frame_fields, head_dims, inverse_sum, kernel_entry,
                             kernel_values, sizes, spread_over_threads, static_tiles, tree)
from .kernel_builder import delinearize, index_const

__all__ = ["MAX_PARTS", "SplitKeys", "as_static_group", "build_split", "f32_constant",
           "group_rows", "kv_lead", "merge_states", "shared_bytes", "specialized",
           "split_count"]

# the merge loads every part's values at once
MAX_PARTS = 128
# the decode strategies come first in REGISTRY, this one last: the flash kernels follow
LAST_DECODE_STRATEGY = "attention_decode"


def as_static_group(group: Group) -> Group | None:
    """`group` with a run-time grouped-query group fixed at query heads / key heads along
    its axis (static extents, K's and V's equal, dividing Q's), the value `specialized`
    tests at launch; None where the shapes fix none, or the launch could not test it (a
    group in device memory). A group without one: itself."""
    found = group.run_time_group
    if found is None:
        return group
    axis, run_time = found
    q, k, v = (ir.MemRefType(x.type).shape[axis] for x in (group.query, group.key, group.value))
    if any(ir.ShapedType.is_dynamic_size(n) for n in (q, k, v)) or k != v or k < 1 or \
            q % k or isinstance(run_time.group.type, ir.ShapedType):
        return None
    kv_group = list(group.kv_group)
    kv_group[axis] = q // k
    return replace(group, kv_group=kv_group)


def specialized(group: Group, launches: list, gpu_module: ir.Operation, kernel_name: str,
                target) -> list:
    """`launches`, built for as_static_group(group), as they run: with a run-time group,
    where it equals the fixed one (`when`), and elsewhere the Launches of the first
    attention strategy after the decode ones (`otherwise`: a flash kernel)."""
    found = group.run_time_group
    if found is None:
        return launches
    axis, run_time = found
    fixed = as_static_group(group).kv_group[axis]
    with ir.InsertionPoint(group.ops[-1]), group.ops[-1].location:
        value = run_time.group
        if not isinstance(value.type, ir.IndexType):
            value = arith.IndexCastOp(ir.IndexType.get(), value).result
        launches[0].when = arith.CmpIOp(arith.CmpIPredicate.eq, value,
                                        index_const(fixed)).result
    launches[0].otherwise = later_group_launches(group.ops, LAST_DECODE_STRATEGY, gpu_module,
                                                 kernel_name, target)
    return launches


def kv_lead(group: Group) -> list[int]:
    """The KV heads' (p..) extents: Q's lead over the group sizes."""
    lead = sizes(group)[0]
    return [n // g for n, g in zip(lead, group.kv_group or [1] * len(lead))]


def group_rows(group: Group) -> int:
    """R: the query rows that read one KV head (group x q_len)."""
    lead, q_len = sizes(group)[:2]
    return q_len * math.prod(group.kv_group or [1] * len(lead))


def split_count(group: Group, blocks: int, min_trips: int, trip_keys: int,
                whole_wave: bool = False) -> int:
    """S: about `blocks` part blocks (`whole_wave`: at most that many, the blocks a wave
    of the GPU holds: a few more would make a second wave of their own), each part at
    least `min_trips` trips of its block over the keys (`trip_keys` keys a trip), at
    most MAX_PARTS."""
    keys = sizes(group)[3]
    slices = math.prod(kv_lead(group))
    wanted = blocks // slices if whole_wave else math.ceil(blocks / slices)
    return max(1, min(wanted, keys // (min_trips * trip_keys), MAX_PARTS))


def f32_constant(value: float) -> ir.Value:
    """An f32 constant: the parts' states are f32 whatever the operands."""
    return float_constant(ir.F32Type.get(), value)


def _shift(m: ir.Value) -> ir.Value:
    """What the exponents take off: m, or 0 where m is -inf (nothing seen: 2^(-inf) = 0,
    not NaN)."""
    empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, m, f32_constant(float("-inf"))).result
    return arith.SelectOp(empty, f32_constant(0.0), m).result


def _exp2_minus(value: ir.Value, shift: ir.Value) -> ir.Value:
    return mmath.Exp2Op(arith.SubFOp(value, shift).result).result


def merge_states(a: tuple, b: tuple) -> tuple:
    """Two (m, l, [O..]) states of one row over disjoint keys -> the state of both."""
    m = arith.MaximumFOp(a[0], b[0]).result
    shift = _shift(m)
    wa, wb = _exp2_minus(a[0], shift), _exp2_minus(b[0], shift)
    l = mmath.FmaOp(a[1], wa, arith.MulFOp(b[1], wb).result).result
    o = [mmath.FmaOp(x, wa, arith.MulFOp(y, wb).result).result for x, y in zip(a[2], b[2])]
    return m, l, o


@dataclass
class SplitKeys(FlashFrame):
    """FlashFrame's `rows` are the query rows of one head (q_len); a block holds
    group_rows of them (R: those of every query head of one KV head)."""
    group_rows: int = 1
    splits: int = 1
    kv_lead: list = None  # the KV heads' (p..) extents
    warps: int = 4

    def row_of(self, r: ir.Value, kv_ivs: list) -> tuple[list, ir.Value]:
        """Query row r of a KV head (r = g x q_len + i, g the query head within the
        group, over the grouped axes): its Q (p..) indices and i."""
        g = arith.DivUIOp(r, index_const(self.rows)).result
        i = arith.RemUIOp(r, index_const(self.rows)).result
        within = delinearize(g, self.kv_group) if self.kv_group else []
        return self.query_slice(kv_ivs, within), i

    def query_slice(self, kv_ivs: list, within: list) -> list:
        """Q's (p..) indices of the query head `within` (per axis) of the KV head kv_ivs."""
        return [arith.AddIOp(arith.MulIOp(iv, index_const(size)).result, w).result
                if size != 1 else iv for iv, size, w in zip(kv_ivs, self.kv_group, within)]

    def part_keys(self, split: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The keys [first, last) of part `split`: the keys the rows may see, 0..end,
        split into S parts of ceil(end / S)."""
        end = self.causal.key_end(index_const(0), self.rows, self.rows, self.keys) \
            if self.causal else index_const(self.keys)
        span = arith.DivUIOp(arith.AddIOp(end, index_const(self.splits - 1)).result,
                             index_const(self.splits)).result
        first = arith.MulIOp(split, span).result
        return first, arith.MinUIOp(arith.AddIOp(first, span).result, end).result

    def write_parts(self, tiles: dict, parts: ir.Value, kv_flat: ir.Value,
                    split: ir.Value) -> None:
        """The warps' states (in `tiles` after a barrier: m and l [warp, r], O [warp, r,
        dim]) merged and stored in `parts`, the block's threads sharing the R x d
        outputs; with one part, `parts` is out and takes the rows' results."""
        tid = gpu.thread_id(gpu.Dimension.x)
        spread_over_threads(tid, self.group_rows * self.e, self.warps * WARP,
                            lambda flat: self._write_part(flat, kv_flat, split, tiles,
                                                          parts))

    def _write_part(self, flat, kv_flat, split, tiles, parts):
        r = arith.DivUIOp(flat, index_const(self.e)).result
        dim = arith.RemUIOp(flat, index_const(self.e)).result
        state = None
        for w in range(self.warps):
            ww = index_const(w)
            mine = (memref.LoadOp(tiles["m"], [ww, r]).result,
                    memref.LoadOp(tiles["l"], [ww, r]).result,
                    [memref.LoadOp(tiles["o"], [ww, r, dim]).result])
            state = mine if state is None else merge_states(state, mine)
        if self.splits == 1:
            self._store_result(parts, kv_flat, r, dim, state[2][0], state[1])
            return
        row = self._part_row(kv_flat, split, r)
        memref.StoreOp(state[2][0], parts, self._o_at(row, dim))
        leader = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, dim, index_const(0)).result)
        with ir.InsertionPoint(leader.then_block):
            memref.StoreOp(state[0], parts, self._m_at(row))
            memref.StoreOp(state[1], parts, self._l_at(row))
            scf.YieldOp([])

    # The parts buffer (build_split's scratch): O of every row of every part, then their
    # m, then their l; a row is (KV head x S + part) x R + r.

    def _part_row(self, kv_flat: ir.Value, part: ir.Value, r: ir.Value) -> ir.Value:
        first = arith.MulIOp(arith.AddIOp(arith.MulIOp(kv_flat, index_const(self.splits)
                                                       ).result, part).result,
                             index_const(self.group_rows)).result
        return arith.AddIOp(first, r).result

    def _o_at(self, row: ir.Value, dim: ir.Value) -> list:
        return [arith.AddIOp(arith.MulIOp(row, index_const(self.e)).result, dim).result]

    def _m_at(self, row: ir.Value) -> list:
        return [arith.AddIOp(row, index_const(self._rows_in_all() * self.e)).result]

    def _l_at(self, row: ir.Value) -> list:
        return [arith.AddIOp(row, index_const(self._rows_in_all() * (self.e + 1))).result]

    def _rows_in_all(self) -> int:
        return math.prod(self.kv_lead) * self.splits * self.group_rows

    def merge(self, parts, out):
        dim = gpu.thread_id(gpu.Dimension.x)
        r = gpu.block_id(gpu.Dimension.x)
        kv_flat = gpu.block_id(gpu.Dimension.y)
        # every part's loads at once (independent: one round trip, not S)
        rows = [self._part_row(kv_flat, index_const(s), r) for s in range(self.splits)]
        m_s = [memref.LoadOp(parts, self._m_at(row)).result for row in rows]
        l_s = [memref.LoadOp(parts, self._l_at(row)).result for row in rows]
        o_s = [memref.LoadOp(parts, self._o_at(row, dim)).result for row in rows]
        shift = _shift(tree(m_s, arith.MaximumFOp))
        weights = [_exp2_minus(m, shift) for m in m_s]
        l_sum = tree([arith.MulFOp(x, w).result for x, w in zip(l_s, weights)], arith.AddFOp)
        o_sum = tree([arith.MulFOp(x, w).result for x, w in zip(o_s, weights)], arith.AddFOp)
        self._store_result(out, kv_flat, r, dim, o_sum, l_sum)

    def _store_result(self, out, kv_flat, r, dim, o, l) -> None:
        """out (row r of KV head kv_flat, dim) = O / l, 0 where l is (no key seen)."""
        result = arith.MulFOp(o, inverse_sum(l)).result
        out_type = ir.MemRefType(out.type).element_type
        if result.type != out_type:
            result = arith.TruncFOp(out_type, result).result
        kv_ivs = delinearize(kv_flat, self.kv_lead) if self.kv_lead else []
        query, i = self.row_of(r, kv_ivs)
        memref.StoreOp(result, out, query + [i, dim])


def build_split(group: Group, gpu_module: ir.Operation, kernel_name: str,
                kernel: Callable[..., SplitKeys], warps: int, splits: int,
                min_blocks: int = 0) -> list[Launch]:
    """The part and merge kernels and their launches. `kernel(**fields)` makes the
    strategy's SplitKeys (its own fields bound), whose `part(query, key, value, parts,
    scale, tiles)` builds the part kernel's body: the scale in base 2, tiles the shared
    m, l [warp, r] and O [warp, r, dim] of write_parts. `min_blocks`: part blocks a
    multiprocessor must hold at once (kernel_entry's). With one part, the part kernel
    writes out itself: no scratch, no merge."""
    rows, slices = group_rows(group), math.prod(kv_lead(group))
    e = head_dims(group)[1]
    location = group.ops[-1].location
    f32 = ir.F32Type.get()
    parts = group.out
    if splits > 1:  # O of every part, then the parts' m, then their l
        with ir.InsertionPoint(group.ops[-1]), location:
            parts = memref.AllocOp(ir.MemRefType.get([slices * splits * rows * (e + 2)],
                                                     f32), [], []).result
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    per_warp = [warps, rows]
    tiles = {"m": ir.MemRefType.get(per_warp, f32, memory_space=shared),
             "l": ir.MemRefType.get(per_warp, f32, memory_space=shared),
             "o": ir.MemRefType.get(per_warp + [e], f32, memory_space=shared)}
    part_name, merge_name = f"{kernel_name}_part", f"{kernel_name}_merge"
    declare_static_tiles(gpu_module, part_name, tiles, location)
    values = [v for v in kernel_values(group) if v != group.out] + [parts]
    threads = warps * WARP
    part = Launch(part_name, values, (splits, slices, 1), (threads, 1, 1))
    common = dict(group_rows=rows, splits=splits, kv_lead=kv_lead(group), warps=warps)
    with kernel_entry(gpu_module, part_name, values, threads, location,
                      min_blocks) as args:
        kernel(**common, **frame_fields(group, args)).part(
            args[group.query], args[group.key], args[group.value], args[parts],
            base2_scale(group, args, f32), static_tiles(part_name, tiles))
    if splits == 1:
        return [part]
    with kernel_entry(gpu_module, merge_name, [parts, group.out], e, location) as args:
        # the merge sees no keys: no causal rule (nor its run-time offset) to load
        kernel(**common, **frame_fields(replace(group, causal=None))).merge(
            args[parts], args[group.out])
    return [part, Launch(merge_name, [parts, group.out], (rows, slices, 1), (e, 1, 1))]


def shared_bytes(warps: int, rows: int, e: int) -> int:
    """The shared memory of the warps' states: O, m and l of each warp's rows."""
    return warps * rows * (e + 2) * 4
