"""Attention: the generics of one `cir.attention` (passes/attention_lowering.py) run as one
flash-attention kernel, so the scores never reach memory.

A block takes `rows_per_block` query rows of one (p..) slice; `lanes` threads share a row,
each holding every lanes-th 4-wide chunk of the row's query (pre-scaled) and of its
output accumulator in registers. Keys and values pass through shared memory `block_k`
rows at a time; per tile each thread computes its rows' scores (partial dot products
summed across the row's lanes with shuffles), then the online softmax of the spec's flash
attention (flash_skeleton.py: the update, the key rule, out = O / l), its scores in base
2 from the start: log2(e) is folded into the query's scale.

Causal attention (the lowering's `zynml.causal_offset = c`: key j allowed for row i
when j <= i + c) is half the work: a block's loop over key tiles stops after its last
row's last allowed key, min(keys, last row + c + 1), so the tiles above the diagonal are
never loaded or multiplied; within the tiles it visits, each score is checked.

Takes the runs of generics attention_match.py finds (`Group`): a run-time causal offset
is loaded once and the tiles a block skips are computed from it at run time; with
grouped-query attention the query heads of a group share their key and value head
(`FlashFrame.kv_slice`, a run-time group included). f16 with head dims that are
multiples of 16 up to 128 runs on tensor cores instead (attention_tensor_core.py); here:
f32, f64, bf16 and other head dims.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant, widened
from .attention_match import Group, attention_groups
from .attention_sizes import head_dim_cases, per_head_dim
from .extents import as_index
from .kernel_builder import index_const
from . import Launch
from .tuning import choose
from .flash_skeleton import (FlashFrame, OnlineSoftmax, add, base2_scale, block_slice,
                             clamp, declare_static_tiles, frame_fields, head_dims,
                             inverse_sum, kernel_entry, kernel_values, less, mul,
                             only_allowed, problem, row_blocks_grid,
                             spread_over_threads, static_tiles, xor_reduce)


NAME = "attention"
DYNAMIC = True  # run-time sizes: memref.dim in the kernel, a kernel per head dim
RUN_TIME_HEAD_DIMS = (64, 128)  # built for where the head dims are run-time sizes


@dataclass(frozen=True)
class Params:
    rows_per_block: int = 64   # query rows per block
    block_k: int = 32          # keys per shared-memory tile
    max_per_lane: int = 32     # query / output values one thread keeps in registers


# What linalg-to-gpu-kernels builds with, tuned by the target's params (tuning.py).
DEFAULT_PARAMS = Params()


def find_groups(generics: list, target) -> list[Group]:
    """The runs of generics of one attention each that the kernel can take (its lanes
    split the head dims: built for each of RUN_TIME_HEAD_DIMS where they are run-time,
    attention_sizes.py)."""
    groups = []
    for group in attention_groups(generics):
        cases = head_dim_cases(group, RUN_TIME_HEAD_DIMS)
        if cases and all(_params_for(group, target, d) is not None for d in cases):
            groups.append(group)
    return groups


# ---------------------------------------------------------------- the kernel

def _chunk_and_lanes(d: int, e: int, params: Params):
    """(elements per vector access, threads per query row; None: rows too wide)."""
    chunk = 4 if d % 4 == 0 and e % 4 == 0 else 1
    for lanes in (1, 2, 4, 8):
        if d % (lanes * chunk) or e % (lanes * chunk):
            break
        if max(d, e) // lanes <= params.max_per_lane:
            return chunk, lanes
    return chunk, None


def _params_for(group: Group, target, head_dim: Optional[int] = None) -> Optional[Params]:
    d, e = head_dims(group, head_dim)
    return choose(NAME, [DEFAULT_PARAMS], target, problem(group),
                  lambda p: _chunk_and_lanes(d, e, p)[1] is not None)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    return per_head_dim(group, kernel_name, RUN_TIME_HEAD_DIMS,
                        lambda name, head_dim: _build(group, gpu_module, name, target,
                                                      head_dim))


def _build(group: Group, gpu_module: ir.Operation, kernel_name: str, target,
           head_dim: Optional[int] = None) -> Launch:
    params = _params_for(group, target, head_dim)
    d, e = head_dims(group, head_dim)
    chunk, lanes = _chunk_and_lanes(d, e, params)
    threads = params.rows_per_block * lanes
    element = ir.MemRefType(group.query.type).element_type
    acc = ir.F64Type.get() if str(element) == "f64" else ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    tiles = {name: ir.MemRefType.get([params.block_k, width], acc, memory_space=shared)
             for name, width in (("k", d), ("v", e))}
    declare_static_tiles(gpu_module, kernel_name, tiles, group.ops[-1].location)
    values = kernel_values(group)
    with kernel_entry(gpu_module, kernel_name, values, threads,
                      group.ops[-1].location) as args:
        kernel = _Kernel(params=params, acc=acc, chunk=chunk, lanes=lanes, threads=threads,
                         **frame_fields(group, args, head_dim))
        kernel.emit(args[group.query], args[group.key], args[group.value],
                    args.get(group.mask) if group.mask is not None else None, args[group.out],
                    base2_scale(group, args, acc), static_tiles(kernel_name, tiles))
    return Launch(kernel_name, values, row_blocks_grid(group, params.rows_per_block),
                  (threads, 1, 1))


@dataclass
class _Kernel(FlashFrame):
    params: Params
    acc: ir.Type      # the arithmetic's type: f64 for f64, else f32
    chunk: int        # elements per vector access
    lanes: int        # threads per query row
    threads: int

    def emit(self, query, key, value, mask, out, scale, tiles):
        p, causal = self.params, self.causal
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.RemUIOp(tid, index_const(self.lanes)).result
        first_row = mul(gpu.block_id(gpu.Dimension.x), p.rows_per_block)
        row = add(first_row, arith.DivUIOp(tid, index_const(self.lanes)).result)
        row_in = clamp(row, self.rows)
        slice_ivs = block_slice(self.lead)
        lane_base = arith.MulIOp(lane, index_const(self.chunk)).result
        q_regs = [arith.MulFOp(widened(memref.LoadOp(query, slice_ivs + [row_in, col]).result,
                                        self.acc), scale).result
                  for col in self._lane_columns(lane_base, self.d)]
        neg_inf = float_constant(self.acc, float("-inf"))
        zero = float_constant(self.acc, 0.0)
        out_count = self.e // self.lanes
        # causal: the block's keys end after its last row's last allowed key (the same
        # bound for all its threads: the barriers in the loop stay uniform)
        key_end = causal.key_end(first_row, p.rows_per_block, self.rows, self.keys) \
            if causal else as_index(self.keys)
        loop = scf.ForOp(index_const(0), key_end, index_const(p.block_k),
                         [neg_inf, zero] + [zero] * out_count)
        with ir.InsertionPoint(loop.body):
            kv0 = loop.induction_variable
            m, l, *o = loop.inner_iter_args
            gpu.BarrierOp()
            self._copy_tile(key, tiles["k"], self.kv_slice(slice_ivs), kv0, self.d, tid)
            self._copy_tile(value, tiles["v"], self.kv_slice(slice_ivs), kv0, self.e, tid)
            gpu.BarrierOp()
            scores = []
            for j in range(p.block_k):
                partial = zero
                for n, q in enumerate(self._row_values(tiles["k"], j, lane_base, self.d)):
                    partial = mmath.FmaOp(q_regs[n], q, partial).result
                # the lanes' partial dot products meet: each holds the whole score
                total = xor_reduce(partial, arith.AddFOp, self.lanes)
                key_at = arith.AddIOp(kv0, index_const(j)).result
                allowed = self.allowed(key_at, row_in, slice_ivs, True, mask)
                scores.append(only_allowed(allowed, total))
            # one row per thread, its scores whole
            (m_new,), (l_new,), (alpha,), (weights,) = \
                OnlineSoftmax(self.acc).update([scores], [m], [l])
            o_new = [arith.MulFOp(x, alpha).result for x in o]
            for j, w in enumerate(weights):
                for n, v in enumerate(self._row_values(tiles["v"], j, lane_base, self.e)):
                    o_new[n] = mmath.FmaOp(w, v, o_new[n]).result
            scf.YieldOp([m_new, l_new] + o_new)
        _, l_final, *o_final = loop.results
        store = scf.IfOp(less(row, self.rows))
        with ir.InsertionPoint(store.then_block):
            inverse = inverse_sum(l_final)
            out_type = ir.MemRefType(out.type).element_type
            for n, col in enumerate(self._lane_columns(lane_base, self.e)):
                result = arith.MulFOp(o_final[n], inverse).result
                if result.type != out_type:
                    result = arith.TruncFOp(out_type, result).result
                memref.StoreOp(result, out, slice_ivs + [row, col])
            scf.YieldOp([])

    def _lane_columns(self, lane_base, width):
        """The columns this lane holds: chunks lane, lane + lanes, ... of `chunk` each."""
        return [arith.AddIOp(lane_base, index_const(start + c)).result
                for start in range(0, width, self.chunk * self.lanes)
                for c in range(self.chunk)]

    def _row_values(self, tile, j, lane_base, width):
        """This lane's columns of row j of a shared tile (vector reads of `chunk`)."""
        values = []
        for start in range(0, width, self.chunk * self.lanes):
            col = arith.AddIOp(lane_base, index_const(start)).result
            if self.chunk == 1:
                values.append(memref.LoadOp(tile, [index_const(j), col]).result)
                continue
            vec = vector.LoadOp(ir.VectorType.get([self.chunk], self.acc), tile,
                                [index_const(j), col]).result
            values += [vector.ExtractOp(vec, [], [c]).result for c in range(self.chunk)]
        return values

    def _copy_tile(self, source, tile, slice_ivs, kv0, width, tid):
        """Rows kv0.. of `source` into `tile` (zeros past the last key), coalesced."""
        spread_over_threads(
            tid, self.params.block_k * width // self.chunk, self.threads,
            lambda flat: self._copy_chunk(source, tile, slice_ivs, kv0, width, flat))

    def _copy_chunk(self, source, tile, slice_ivs, kv0, width, flat):
        j = arith.DivUIOp(flat, index_const(width // self.chunk)).result
        col = arith.MulIOp(arith.RemUIOp(flat, index_const(width // self.chunk)).result,
                           index_const(self.chunk)).result
        key_at = arith.AddIOp(kv0, j).result
        key_in = clamp(key_at, self.keys)
        real = less(key_at, self.keys)
        where = slice_ivs + [key_in, col]
        if self.chunk == 1:
            loaded = widened(memref.LoadOp(source, where).result, self.acc)
            memref.StoreOp(arith.SelectOp(real, loaded, float_constant(self.acc, 0.0)).result,
                           tile, [j, col])
            return
        element = ir.MemRefType(source.type).element_type
        loaded = vector.LoadOp(ir.VectorType.get([self.chunk], element), source, where).result
        wide = ir.VectorType.get([self.chunk], self.acc)
        if element != self.acc:
            loaded = arith.ExtFOp(wide, loaded).result
        zeros = arith.ConstantOp(wide, ir.DenseElementsAttr.get_splat(
            wide, ir.FloatAttr.get(self.acc, 0.0))).result
        vector.StoreOp(arith.SelectOp(real, loaded, zeros).result, tile, [j, col])
