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

Matches the run fill/scores, fill/max, fill/sum, fill/out[, round] that the lowering
emits (`library_call = "zynml_attention_*"`) when nothing else reads S, M or L.
`Group.causal` is None, or a `Causal` (its offset) that is truthy whatever the offset:
`if group.causal:` asks whether the group is causal. A run-time offset (the lowering's
`zynml.runtime_offset`: j <= i + c + s, s a 0-d integer input) is a kernel argument that
each kernel loads once (`Causal.in_kernel`), and the tiles a block skips are computed
from it at run time. Grouped-query attention (K and V with fewer heads than Q: the
lowering's floordiv maps) reads K and V at the slice's indices divided by the groups
(`FlashFrame.kv_slice`): the query heads of a group share their key and value head.
f16 with head dims that are multiples of 16 up to 128 runs on tensor cores instead
(attention_tensor_core.py); here: f32, f64, bf16 and other head dims.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import CAUSAL_OFFSET, LIBRARY_CALL_PREFIX, \
    RUNTIME_OFFSET, float_constant, widened
from ....lowering.cir_ops import defining_op
from .attention_sizes import head_dim_cases, per_head_dim
from .extents import Extent, as_index
from .kernel_builder import generic_operands, index_const
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


@dataclass(frozen=True)
class Causal:
    """Causal attention: query row i sees key j only when j <= i + offset (and the mask,
    if there is one, allows it). 0: up to the diagonal; > 0: a KV cache's earlier keys.
    An instance is truthy, offset 0 included (no __bool__): `if group.causal:`.
    `runtime`: outside a kernel, the 0-d integer buffer whose value is added to `offset`
    at run time, or the host's integer that filled it (None: none); inside one, that
    value as an index (`in_kernel`)."""
    offset: int = 0
    runtime: Optional[ir.Value] = None

    def in_kernel(self, args: dict) -> "Causal":
        """This rule inside a kernel (`args`: kernel_values -> the kernel's arguments):
        a run-time offset loaded once, at the kernel's start (or the scalar the kernel
        is given by value)."""
        if self.runtime is None:
            return self
        loaded = args[self.runtime]
        if isinstance(loaded.type, ir.MemRefType):
            loaded = memref.LoadOp(loaded, []).result
        if not isinstance(loaded.type, ir.IndexType):
            loaded = arith.IndexCastOp(ir.IndexType.get(), loaded).result
        return Causal(self.offset, loaded)

    @property
    def may_be_negative(self) -> bool:
        """Whether row + offset may be < 0 (some rows then see no key)."""
        return self.offset < 0 or self.runtime is not None

    def shifted(self, row: ir.Value) -> ir.Value:
        """row + offset (+ the run-time offset): the row's last allowed key."""
        last = add(row, self.offset)
        return last if self.runtime is None else arith.AddIOp(last, self.runtime).result

    def allows(self, key: ir.Value, row: ir.Value) -> ir.Value:
        """key <= row + offset (an i1; signed: row + offset may be negative)."""
        return arith.CmpIOp(arith.CmpIPredicate.sle, key, self.shifted(row)).result

    def key_end(self, first_row: ir.Value, block_rows: int, rows: Extent,
                keys: Extent) -> ir.Value:
        """The keys a block of rows first_row.. (block_rows of them, `rows` in all)
        needs: 0..end, end = min(keys, its last row + offset + 1), 0 when that is < 0.
        The tiles from there on lie above the diagonal: the block skips them."""
        past_last = arith.MinSIOp(add(first_row, block_rows), as_index(rows)).result
        end = self.shifted(past_last)
        if self.may_be_negative:  # the first rows may see no key at all
            end = arith.MaxSIOp(end, index_const(0)).result
        if not isinstance(rows, int) or not isinstance(keys, int) or \
                rows + self.offset > keys or self.runtime is not None:  # the last rows: all
            end = arith.MinSIOp(end, as_index(keys)).result
        return end


@dataclass
class Group:
    ops: list                  # the generics to replace, in order (fills included)
    query: ir.Value
    key: ir.Value
    value: ir.Value
    mask: Optional[ir.Value]
    mask_dims: list = field(default_factory=list)  # mask axis -> loop of (p.., i, j)
    scale: ir.Value = None
    out: ir.Value = None
    causal: Optional[Causal] = None  # None: every key (the mask aside); see Causal
    kv_group: list = field(default_factory=list)  # per (p..) axis: K's index is p / group

    @property
    def grouped(self) -> bool:
        """Grouped-query attention: K and V have fewer heads than Q."""
        return any(g != 1 for g in self.kv_group)

    def __iter__(self):  # a run of generics, like row_fused's groups
        return iter(self.ops)


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


def attention_groups(generics: list) -> list[Group]:
    """The runs of generics of one attention each, whichever kernel takes them
    (attention_tensor_core.py asks too)."""
    groups = []
    for generic in generics:
        if _part(generic) == "out":
            group = _group(generic, generics)
            if group is not None:
                groups.append(group)
    return groups


def _part(op: ir.Operation) -> Optional[str]:
    if op.name != "linalg.generic" or "library_call" not in op.attributes:
        return None
    name = ir.StringAttr(op.attributes["library_call"]).value
    return name[len(LIBRARY_CALL_PREFIX):] if name.startswith(LIBRARY_CALL_PREFIX) else None


def _group(out_op: ir.Operation, generics: list) -> Optional[Group]:
    ins, outs = generic_operands(out_op)
    runtime = ins[-1] if RUNTIME_OFFSET in out_op.attributes else None
    ins = ins[:-1] if runtime is not None else ins
    if len(ins) not in (4, 5):
        return None
    scores, row_max, row_sum, value = ins[:4]
    mask = ins[4] if len(ins) == 5 else None
    writers = {}
    for buffer, part in ((scores, "scores"), (row_max, "max"), (row_sum, "sum")):
        writer = _writer(buffer, part, generics)
        if writer is None:
            return None
        writers[part] = writer
    query, key = generic_operands(writers["scores"])[0]
    ops, buffers, out = [], [scores, row_max, row_sum], outs[0]
    rounding = _reader(out, generics, "round")
    if rounding is not None:
        buffers.append(out)
        out = generic_operands(rounding)[1][0]
    for buffer in buffers:
        fill = _fill_of(buffer, generics)
        if fill is None or defining_op(buffer) is None or \
                defining_op(buffer).name != "memref.alloc":
            return None
        ops.append(fill)
    ops += [writers["scores"], writers["max"], writers["sum"], out_op]
    if rounding is not None:
        ops.append(rounding)
    for buffer in buffers:  # nothing outside the group may read them
        if any(use.owner.operation not in ops for use in buffer.uses):
            return None
    if rounding is None:
        fill = _fill_of(out, generics)
        if fill is None:
            return None
        ops.insert(0, fill)
    scale = _scale(writers["scores"])
    if scale is None:
        return None
    causal_ok, causal = _causal([writers["max"], writers["sum"], out_op], runtime)
    if causal_ok and runtime is not None:  # a host integer: the kernel takes it by value
        fill = _fill_of(runtime, generics)
        scalar = _filled_with(fill) if fill is not None else None
        if scalar is not None and defining_op(runtime) is not None and \
                defining_op(runtime).name == "memref.alloc" and \
                all(use.owner.operation in ops + [fill] for use in runtime.uses):
            ops.insert(0, fill)
            causal = replace(causal, runtime=scalar)
    groups = _kv_groups(query, key, value)
    if not causal_ok or groups is None or not _reads_in_order(writers["scores"], out_op, groups):
        return None
    mask_dims = []
    if mask is not None:
        maps = [ir.AffineMapAttr(a).value
                for a in ir.ArrayAttr(writers["max"].attributes["indexing_maps"])]
        mask_dims = [ir.AffineDimExpr(e).position for e in maps[1].results]
    order = {op: n for n, op in enumerate(generics)}
    ops.sort(key=lambda op: order[op])
    return Group(ops, query, key, value, mask, mask_dims, scale, out, causal, groups)


def _reads_in_order(scores: ir.Operation, out_op: ir.Operation, groups: list) -> bool:
    """The scores generic reads Q at (p.., i, d) and K at (p../g.., j, d), the out generic
    V at (p../g.., j, e), as the lowering writes them: the kernels index the buffers so
    (a transpose folded into these maps would be read wrong)."""
    n = len(groups)
    dim = ir.AffineDimExpr.get
    lead = [dim(a) if g == 1 else
            ir.AffineExpr.get_floor_div(dim(a), ir.AffineConstantExpr.get(g))
            for a, g in enumerate(groups)]

    def maps(op):
        return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    q_map, k_map = maps(scores)[:2]
    v_map = maps(out_op)[3]
    return list(q_map.results) == [dim(a) for a in range(n)] + [dim(n), dim(n + 2)] and \
        list(k_map.results) == lead + [dim(n + 1), dim(n + 2)] and \
        list(v_map.results) == lead + [dim(n + 2), dim(n + 1)]


def _kv_groups(query: ir.Value, key: ir.Value, value: ir.Value) -> Optional[list]:
    """Per (p..) axis, how many of Q's indices share one of K's and V's (the lowering
    reads them at p / group): Q's extent over K's, which must divide it."""
    q_lead = list(ir.ShapedType(query.type).shape)[:-2]
    k_lead = list(ir.ShapedType(key.type).shape)[:-2]
    dynamic = ir.ShapedType.is_dynamic_size
    if k_lead != list(ir.ShapedType(value.type).shape)[:-2] or \
            any(dynamic(q) != dynamic(k) for q, k in zip(q_lead, k_lead)):
        return None  # a run-time extent is read as is (cir-raise-attention groups static ones)
    if any(not dynamic(k) and (k < 1 or q % k) for q, k in zip(q_lead, k_lead)):
        return None
    return [1 if dynamic(k) else q // k for q, k in zip(q_lead, k_lead)]


def _causal(parts: list, runtime: Optional[ir.Value] = None) -> tuple[bool, Optional[Causal]]:
    """(taken, Causal or None) from the max, sum and out generics' zynml.causal_offset:
    the three must agree, and a body that reads linalg.index must carry one (a condition
    the kernel would not see: the run is not taken, its generics run as they are). One
    may carry it and read no index: canonicalize folds j <= i away over unit dims. A
    run-time offset (`runtime`, the out generic's last input) must be the last input of
    the three, which all carry zynml.runtime_offset."""
    offsets = set()
    for op in parts:
        if runtime is not None and (RUNTIME_OFFSET not in op.attributes or
                                    generic_operands(op)[0][-1] != runtime):
            return False, None
        offset = ir.IntegerAttr(op.attributes[CAUSAL_OFFSET]).value \
            if CAUSAL_OFFSET in op.attributes else None
        reads_index = any(inner.operation.name == "linalg.index"
                          for inner in op.regions[0].blocks[0].operations)
        if reads_index and offset is None:
            return False, None
        offsets.add(offset)
    if len(offsets) != 1:
        return False, None
    offset = offsets.pop()
    if runtime is not None and offset is None:
        return False, None
    return True, Causal(offset, runtime) if offset is not None else None


def _writer(buffer: ir.Value, part: str, generics: list):
    for op in generics:
        if _part(op) == part and generic_operands(op)[1][0] == buffer:
            return op
    return None


def _reader(buffer: ir.Value, generics: list, part: str):
    """The generic of `part` whose first input is `buffer`."""
    for op in generics:
        if _part(op) == part and generic_operands(op)[0][0] == buffer:
            return op
    return None


def _fill_of(buffer: ir.Value, generics: list):
    """The generic that fills `buffer` with one value (a generalized linalg.fill): no
    tensor inputs, a body that only yields."""
    for op in generics:
        ins, outs = generic_operands(op)
        body = list(op.regions[0].blocks[0].operations)
        if outs and outs[0] == buffer and _part(op) is None and len(body) == 1 and \
                not any(isinstance(v.type, ir.ShapedType) for v in ins):
            return op
    return None


def _filled_with(fill: ir.Operation) -> Optional[ir.Value]:
    """The host scalar a fill generic (_fill_of) writes: its scalar input, or a value
    from outside its body; None for anything else (a constant made inside it)."""
    block = fill.regions[0].blocks[0]
    value = list(block.operations)[-1].operands[0]
    for arg, operand in zip(block.arguments, fill.operands):
        if value == arg:
            value = operand
            break
    else:
        if defining_op(value) in {op.operation for op in block.operations}:
            return None
    return None if isinstance(value.type, ir.ShapedType) else value


def _scale(scores: ir.Operation) -> Optional[ir.Value]:
    """The factor the scores generic multiplies queries by (from outside its body)."""
    block = scores.regions[0].blocks[0]
    inside = set(block.arguments) | {r for op in block.operations for r in op.results}
    for op in block.operations:
        if op.operation.name == "arith.mulf":
            for operand in op.operands:
                if operand not in inside:
                    return operand
    return None


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
