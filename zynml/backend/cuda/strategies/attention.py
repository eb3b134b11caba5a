"""Attention: the generics of one `cir.attention` (passes/attention_lowering.py) run as one
flash-attention kernel, so the scores never reach memory.

A block takes `rows_per_block` query rows of one (p..) slice; `lanes` threads share a row,
each holding every lanes-th 4-wide chunk of the row's query (pre-scaled) and of its
output accumulator in registers. Keys and values pass through shared memory `block_k`
rows at a time; per tile each thread computes its rows' scores (partial dot products
summed across the row's lanes with shuffles), then the online softmax of the spec's flash
attention:

    m_new = max(m, max_j s_j);  alpha = exp(m - m_new);  p_j = exp(s_j - m_new)
    (scores kept in base 2, log2(e) folded into the query's scale: exp2 is one instruction)
    l = l * alpha + sum_j p_j;  o = o * alpha + sum_j p_j * v_j
    out = o / l  (0 for a row with no allowed key)

Causal attention (the lowering's `zynml.causal_offset = c`: key j allowed for row i
when j <= i + c) is half the work: a block's loop over key tiles stops after its last
row's last allowed key, min(keys, last row + c + 1), so the tiles above the diagonal are
never loaded or multiplied; within the tiles it visits, each score is checked.

Matches the run fill/scores, fill/max, fill/sum, fill/out[, round] that the lowering
emits (`library_call = "zynml_attention_*"`) when nothing else reads S, M or L.
`Group.causal` is None, or a `Causal` (its offset) that is truthy whatever the offset:
`if group.causal:` asks whether the group is causal.
f16 with head dims that are multiples of 16 up to 128 runs on tensor cores instead
(attention_tensor_core.py); here: f32, f64, bf16 and other head dims.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import CAUSAL_OFFSET, LIBRARY_CALL_PREFIX, float_constant, \
    widened
from ....lowering.cir_ops import clone_op, defining_op
from .kernel_builder import delinearize, generic_operands, index_const, kernel_type, \
    new_kernel
from . import Launch
from .tuning import choose, problem_key

NAME = "attention"
WARP = 32


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
    An instance is truthy, offset 0 included (no __bool__): `if group.causal:`."""
    offset: int = 0

    def allows(self, key: ir.Value, row: ir.Value) -> ir.Value:
        """key <= row + offset (an i1; signed: row + offset may be negative)."""
        return arith.CmpIOp(arith.CmpIPredicate.sle, key, _plus(row, self.offset)).result

    def key_end(self, first_row: ir.Value, block_rows: int, rows: int, keys: int) -> ir.Value:
        """The keys a block of rows first_row.. (block_rows of them, `rows` in all)
        needs: 0..end, end = min(keys, its last row + offset + 1), 0 when that is < 0.
        The tiles from there on lie above the diagonal: the block skips them."""
        past_last = arith.MinSIOp(_plus(first_row, block_rows), index_const(rows)).result
        end = _plus(past_last, self.offset)
        if self.offset < 0:  # the first rows may see no key at all
            end = arith.MaxSIOp(end, index_const(0)).result
        if rows + self.offset > keys:  # the last rows see every key
            end = arith.MinSIOp(end, index_const(keys)).result
        return end


def _plus(value: ir.Value, n: int) -> ir.Value:
    return value if n == 0 else arith.AddIOp(value, index_const(n)).result


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

    def __iter__(self):  # a run of generics, like row_fused's groups
        return iter(self.ops)


def find_groups(generics: list, target) -> list[Group]:
    """The runs of generics of one attention each that the kernel can take."""
    return [group for group in attention_groups(generics)
            if _params_for(group, target) is not None]


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
    causal_ok, causal = _causal([writers["max"], writers["sum"], out_op])
    if not causal_ok:
        return None
    mask_dims = []
    if mask is not None:
        maps = [ir.AffineMapAttr(a).value
                for a in ir.ArrayAttr(writers["max"].attributes["indexing_maps"])]
        mask_dims = [ir.AffineDimExpr(e).position for e in maps[1].results]
    order = {op: n for n, op in enumerate(generics)}
    ops.sort(key=lambda op: order[op])
    return Group(ops, query, key, value, mask, mask_dims, scale, out, causal)


def _causal(parts: list) -> tuple[bool, Optional[Causal]]:
    """(taken, Causal or None) from the max, sum and out generics' zynml.causal_offset:
    the three must agree, and a body that reads linalg.index must carry one (a condition
    the kernel would not see: the run is not taken, its generics run as they are). One
    may carry it and read no index: canonicalize folds j <= i away over unit dims."""
    offsets = set()
    for op in parts:
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
    return True, Causal(offset) if offset is not None else None


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


def problem(group: Group) -> str:
    """The tuning problem of an attention (tuning.py): what its kernel takes."""
    return problem_key(kernel_values(group))


def _params_for(group: Group, target) -> Optional[Params]:
    d, e = operand_shape(group.query)[-1], operand_shape(group.value)[-1]
    return choose(NAME, [DEFAULT_PARAMS], target, problem(group),
                  lambda p: _chunk_and_lanes(d, e, p)[1] is not None)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    params = _params_for(group, target)
    lead, rows, d, keys, e = sizes(group)
    chunk, lanes = _chunk_and_lanes(d, e, params)
    threads = params.rows_per_block * lanes
    element = ir.MemRefType(group.query.type).element_type
    acc = ir.F64Type.get() if str(element) == "f64" else ir.F32Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    tiles = {name: ir.MemRefType.get([params.block_k, width], acc, memory_space=shared)
             for name, width in (("k", d), ("v", e))}
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), group.ops[-1].location:
        for name, type_ in tiles.items():
            memref.GlobalOp(f"{kernel_name}_{name}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)
    values = kernel_values(group)
    func = new_kernel(gpu_module, kernel_name, [kernel_type(v.type) for v in values],
                      [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), group.ops[-1].location:
        args = dict(zip(values, func.regions[0].blocks[0].arguments))
        scale = scale_in_kernel(group, args)
        kernel = _Kernel(params, acc, chunk, lanes, threads, d, e, keys, rows)
        # scores in base 2: exp(x) = exp2(x * log2(e)), one ex2 instruction each
        log2e = float_constant(acc, math.log2(math.e))
        kernel.emit(args[group.query], args[group.key], args[group.value],
                    args.get(group.mask) if group.mask is not None else None,
                    group.mask_dims, group.causal, args[group.out],
                    arith.MulFOp(widened(scale, acc), log2e).result, lead,
                    {name: memref.get_global(t, f"{kernel_name}_{name}")
                     for name, t in tiles.items()})
        gpu.ReturnOp([])
    grid = (math.ceil(rows / params.rows_per_block), math.prod(lead), 1)
    return Launch(kernel_name, values, grid, (threads, 1, 1))


@dataclass
class _Kernel:
    params: Params
    acc: ir.Type
    chunk: int
    lanes: int
    threads: int
    d: int
    e: int
    keys: int
    rows: int

    def emit(self, query, key, value, mask, mask_dims, causal, out, scale, lead, tiles):
        p = self.params
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.RemUIOp(tid, index_const(self.lanes)).result
        first_row = arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                 index_const(p.rows_per_block)).result
        row = arith.AddIOp(first_row, arith.DivUIOp(tid, index_const(self.lanes)).result).result
        row_in = arith.MinUIOp(row, index_const(self.rows - 1)).result
        slice_ivs = delinearize(gpu.block_id(gpu.Dimension.y), lead) if lead else []
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
            if causal else index_const(self.keys)
        loop = scf.ForOp(index_const(0), key_end, index_const(p.block_k),
                         [neg_inf, zero] + [zero] * out_count)
        with ir.InsertionPoint(loop.body):
            kv0 = loop.induction_variable
            m, l, *o = loop.inner_iter_args
            gpu.BarrierOp()
            self._copy_tile(key, tiles["k"], slice_ivs, kv0, self.d, tid)
            self._copy_tile(value, tiles["v"], slice_ivs, kv0, self.e, tid)
            gpu.BarrierOp()
            scores = []
            for j in range(p.block_k):
                partial = zero
                for n, q in enumerate(self._row_values(tiles["k"], j, lane_base, self.d)):
                    partial = mmath.FmaOp(q_regs[n], q, partial).result
                total = self._sum_lanes(partial)
                key_at = arith.AddIOp(kv0, index_const(j)).result
                allowed = arith.CmpIOp(arith.CmpIPredicate.ult, key_at,
                                       index_const(self.keys)).result
                if mask is not None:
                    key_in = arith.MinUIOp(key_at, index_const(self.keys - 1)).result
                    loops = slice_ivs + [row_in, key_in]
                    bit = memref.LoadOp(mask, [loops[k] for k in mask_dims]).result
                    set_ = arith.CmpIOp(arith.CmpIPredicate.ne, bit,
                                        arith.ConstantOp(bit.type, 0).result).result
                    allowed = arith.AndIOp(allowed, set_).result
                if causal:
                    allowed = arith.AndIOp(allowed, causal.allows(key_at, row_in)).result
                scores.append(arith.SelectOp(allowed, total, neg_inf).result)
            m_new = m
            for s in scores:
                m_new = arith.MaximumFOp(m_new, s).result
            # a row with no allowed key yet: m_new = -inf; shift by 0 so exp gives 0, not NaN
            empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, m_new, neg_inf).result
            shift = arith.SelectOp(empty, zero, m_new).result
            alpha = mmath.Exp2Op(arith.SubFOp(m, shift).result).result
            weights = [mmath.Exp2Op(arith.SubFOp(s, shift).result).result for s in scores]
            l_new = arith.MulFOp(l, alpha).result
            for w in weights:
                l_new = arith.AddFOp(l_new, w).result
            o_new = [arith.MulFOp(x, alpha).result for x in o]
            for j, w in enumerate(weights):
                for n, v in enumerate(self._row_values(tiles["v"], j, lane_base, self.e)):
                    o_new[n] = mmath.FmaOp(w, v, o_new[n]).result
            scf.YieldOp([m_new, l_new] + o_new)
        _, l_final, *o_final = loop.results
        inside = arith.CmpIOp(arith.CmpIPredicate.ult, row, index_const(self.rows)).result
        store = scf.IfOp(inside)
        with ir.InsertionPoint(store.then_block):
            some = arith.CmpFOp(arith.CmpFPredicate.OGT, l_final, zero).result
            inverse = arith.DivFOp(float_constant(self.acc, 1.0), l_final).result
            out_type = ir.MemRefType(out.type).element_type
            for n, col in enumerate(self._lane_columns(lane_base, self.e)):
                result = arith.SelectOp(some, arith.MulFOp(o_final[n], inverse).result,
                                        zero).result
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

    def _sum_lanes(self, value):
        i32 = ir.IntegerType.get_signless(32)
        offset = 1
        while offset < self.lanes:
            other = gpu.shuffle(value, arith.ConstantOp(i32, offset).result,
                                arith.ConstantOp(i32, WARP).result, gpu.ShuffleMode.XOR)[0]
            value = arith.AddFOp(value, other).result
            offset *= 2
        return value

    def _copy_tile(self, source, tile, slice_ivs, kv0, width, tid):
        """Rows kv0.. of `source` into `tile` (zeros past the last key), coalesced."""
        chunks = self.params.block_k * width // self.chunk
        for first in range(0, chunks, self.threads):
            flat = arith.AddIOp(tid, index_const(first)).result
            if first + self.threads <= chunks:
                self._copy_chunk(source, tile, slice_ivs, kv0, width, flat)
                continue
            guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, flat,
                                          index_const(chunks)).result)
            with ir.InsertionPoint(guard.then_block):
                self._copy_chunk(source, tile, slice_ivs, kv0, width, flat)
                scf.YieldOp([])

    def _copy_chunk(self, source, tile, slice_ivs, kv0, width, flat):
        j = arith.DivUIOp(flat, index_const(width // self.chunk)).result
        col = arith.MulIOp(arith.RemUIOp(flat, index_const(width // self.chunk)).result,
                           index_const(self.chunk)).result
        key_at = arith.AddIOp(kv0, j).result
        key_in = arith.MinUIOp(key_at, index_const(self.keys - 1)).result
        real = arith.CmpIOp(arith.CmpIPredicate.ult, key_at, index_const(self.keys)).result
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


# ---------------------------------------------------------------- shared by the kernels
# (attention_tensor_core, attention_wgmma, attention_simt_tiled ask these of a group)

def operand_shape(value: ir.Value) -> list[int]:
    return list(ir.MemRefType(value.type).shape)


def sizes(group: Group) -> tuple[list, int, int, int, int]:
    """(lead, rows, d, keys, e): the (p..) loops' sizes, the queries, Q's and K's head
    dim, the keys, V's head dim."""
    q_shape = operand_shape(group.query)
    return (q_shape[:-2], q_shape[-2], q_shape[-1], operand_shape(group.key)[-2],
            operand_shape(group.value)[-1])


def _constant_scale(group: Group):
    op = defining_op(group.scale)
    return op if op is not None and op.name == "arith.constant" else None


def kernel_values(group: Group) -> list:
    """What a kernel that reads its operands itself takes, in order: query, key, value,
    the mask if any, out, and the scale unless it is a constant (cloned in instead)."""
    return [group.query, group.key, group.value] + \
        ([group.mask] if group.mask is not None else []) + [group.out] + \
        ([] if _constant_scale(group) is not None else [group.scale])


def scale_in_kernel(group: Group, args: dict) -> ir.Value:
    """The scale inside the kernel: the constant cloned, or its argument (`args`: the
    kernel_values -> the kernel's arguments)."""
    constant = _constant_scale(group)
    return clone_op(constant, []).results[0] if constant is not None else args[group.scale]


def row_major(value: ir.Value) -> bool:
    """Dense row-major from the buffer's start (16-byte copies stay aligned)."""
    type_ = ir.MemRefType(value.type)
    strides, offset = type_.get_strides_and_offset()
    expected, step = [], 1
    for extent in reversed(type_.shape):
        expected.append(step)
        step *= extent
    return offset == 0 and list(strides) == list(reversed(expected))


def positive_scale(group: Group) -> Optional[float]:
    """The scale when it is a constant > 0 (the kernels' max and exp2 trick needs c > 0)."""
    op = defining_op(group.scale)
    if op is None or op.name != "arith.constant":
        return None
    value = ir.FloatAttr(op.attributes["value"]).value
    return value if value > 0 and math.isfinite(value) else None


def quad_reduce(value: ir.Value, op) -> ir.Value:
    """`op` over the 4 lanes of a quad (xor shuffles 1, 2): an mma accumulator row's
    values lie in one quad."""
    i32 = ir.IntegerType.get_signless(32)
    for offset in (1, 2):
        other = gpu.shuffle(value, arith.ConstantOp(i32, offset).result,
                            arith.ConstantOp(i32, WARP).result, gpu.ShuffleMode.XOR)[0]
        value = op(value, other).result
    return value
