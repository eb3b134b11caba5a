"""Which generics are one attention: the run fill/scores, fill/max, fill/sum, fill/out[,
round] that zynml/lowering/attention_lowering.py emits (`library_call =
"zynml_attention_*"`), when nothing else reads S, M or L, as a `Group` every attention
strategy takes (attention.py, attention_tensor_core.py, attention_wgmma.py, the decode
kernels).

`Group.causal` is None, or a `Causal` (its offset) that is truthy whatever the offset:
`if group.causal:` asks whether the group is causal. A run-time offset (the lowering's
`zynml.runtime_offset`: j <= i + c + s, s a 0-d integer input) is a kernel argument that
each kernel loads once (`Causal.in_kernel`). Grouped-query attention (K and V with fewer
heads than Q: the lowering's floordiv maps) is `Group.kv_group`, the kernels reading K
and V at the slice's indices divided by the groups (`FlashFrame.kv_slice`). A run-time
group (the lowering's `zynml.runtime_group`: scores and out gather K and V at p / group,
the group a 0-d input) is a `RunTimeGroup` there, a kernel argument too.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Optional

from mlir import ir
from mlir.dialects import arith, memref

from ....lowering.attention_lowering import CAUSAL_OFFSET, LIBRARY_CALL_PREFIX, \
    RUNTIME_GROUP, RUNTIME_OFFSET
from ....lowering.cir_ops import defining_op
from .extents import Extent, as_index
from .flash_skeleton import add
from .kernel_builder import generic_operands, index_const


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
        return Causal(self.offset, _scalar_in_kernel(args[self.runtime]))

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


@dataclass(frozen=True)
class RunTimeGroup:
    """A grouped-query group read at run time (cir.attention's `group`): K and V are read
    at head p / group along its axis. Outside a kernel `group` is the 0-d integer buffer
    (or the host's integer that filled it); inside one (`in_kernel`), the divisor as an
    index and `last`, the last head K and V both have. `head(p)`: 0 for a group below 0,
    p for 0 (safe-integer-division's p / 0), else p / group; at most `last` (a program
    reading past K's or V's heads reads out of bounds, which checked mode reports; the
    kernels stay in memory)."""
    group: ir.Value
    last: Optional[ir.Value] = None

    def in_kernel(self, args: dict, axis: int, key: ir.Value, value: ir.Value) -> "RunTimeGroup":
        """This group inside a kernel (`args`: kernel_values -> the kernel's arguments):
        its divisor loaded once, `last` from K's and V's extents along `axis` (numbers
        where static; memref.dim of those the kernel takes where not: one that takes K or
        V only through a TMA map needs no bound for it, the copy's own keeps it in memory)."""
        heads = [n for n in (ir.MemRefType(v.type).shape[axis] for v in (key, value))
                 if not ir.ShapedType.is_dynamic_size(n)]
        heads += [memref.DimOp(args[v], index_const(axis)).result for v in (key, value)
                  if ir.ShapedType.is_dynamic_size(ir.MemRefType(v.type).shape[axis]) and
                  v in args]
        last = index_const(min(heads) - 1) if all(isinstance(n, int) for n in heads) else \
            arith.SubIOp(functools.reduce(lambda a, b: arith.MinUIOp(a, b).result,
                                          [as_index(n) for n in heads]),
                         index_const(1)).result
        return RunTimeGroup(_scalar_in_kernel(args[self.group]), last)

    def head(self, p: ir.Value) -> ir.Value:
        """The key and value head query head `p` reads (an index, in a kernel)."""
        divisor = arith.MaxSIOp(self.group, index_const(1)).result
        head = arith.MinUIOp(arith.DivUIOp(p, divisor).result, self.last).result
        negative = arith.CmpIOp(arith.CmpIPredicate.slt, self.group, index_const(0)).result
        return arith.SelectOp(negative, index_const(0), head).result


def _scalar_in_kernel(argument: ir.Value) -> ir.Value:
    """A kernel's integer argument as an index: a 0-d buffer loaded, or a scalar."""
    if isinstance(argument.type, ir.MemRefType):
        argument = memref.LoadOp(argument, []).result
    if not isinstance(argument.type, ir.IndexType):
        argument = arith.IndexCastOp(ir.IndexType.get(), argument).result
    return argument


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
    # (an int, or a RunTimeGroup)

    @property
    def grouped(self) -> bool:
        """Grouped-query attention: K and V have fewer heads than Q."""
        return any(g != 1 for g in self.kv_group)

    @property
    def run_time_group(self) -> Optional[tuple[int, RunTimeGroup]]:
        """(axis, RunTimeGroup) where the group is read at run time, else None."""
        return next(((a, g) for a, g in enumerate(self.kv_group)
                     if isinstance(g, RunTimeGroup)), None)

    def __iter__(self):  # a run of generics, like row_fused's groups
        return iter(self.ops)


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
    scores, row_max, row_sum, value = ins[:4]  # value: the group where it is run-time
    mask = ins[4] if len(ins) == 5 else None
    writers = {}
    for buffer, part in ((scores, "scores"), (row_max, "max"), (row_sum, "sum")):
        writer = _writer(buffer, part, generics)
        if writer is None:
            return None
        writers[part] = writer
    query, key = generic_operands(writers["scores"])[0]
    group_buffer = None
    if RUNTIME_GROUP in out_op.attributes:  # scores and out gather K and V
        group_buffer, gathered = value, _gathered_kv(writers["scores"], out_op)
        if gathered is None:  # (it checks that scores reads the same group)
            return None
        key, value = gathered
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
    if causal_ok and runtime is not None:
        causal = replace(causal, runtime=_host_scalar(runtime, generics, ops))
    groups = _kv_groups(query, key, value, None if group_buffer is None else
                        ir.IntegerAttr(out_op.attributes[RUNTIME_GROUP]).value)
    if not causal_ok or groups is None or not _reads_in_order(writers["scores"], out_op, groups):
        return None
    if group_buffer is not None:
        groups = [RunTimeGroup(_host_scalar(group_buffer, generics, ops)) if g is None else g
                  for g in groups]
    mask_dims = []
    if mask is not None:
        maps = [ir.AffineMapAttr(a).value
                for a in ir.ArrayAttr(writers["max"].attributes["indexing_maps"])]
        mask_dims = [ir.AffineDimExpr(e).position for e in maps[1].results]
    order = {op: n for n, op in enumerate(generics)}
    ops.sort(key=lambda op: order[op])
    return Group(ops, query, key, value, mask, mask_dims, scale, out, causal, groups)


def _host_scalar(buffer: ir.Value, generics: list, ops: list) -> ir.Value:
    """A 0-d integer buffer the kernel reads (a run-time offset or group), or the host
    integer that fills it where only the group's ops use it: the kernel then takes that
    by value, and the fill joins `ops`."""
    fill = _fill_of(buffer, generics)
    scalar = _filled_with(fill) if fill is not None else None
    if scalar is not None and defining_op(buffer) is not None and \
            defining_op(buffer).name == "memref.alloc" and \
            all(use.owner.operation in ops + [fill] for use in buffer.uses):
        if fill not in ops:
            ops.insert(0, fill)
        return scalar
    return buffer


def _gathered_kv(scores: ir.Operation, out_op: ir.Operation) -> Optional[tuple]:
    """(K, V) that the scores and out generics of a run-time group gather (the lowering's
    `_GroupedRead`): one load each, at (p.. with the group's axis computed, j, d) and
    (p.., j, e); None where the generics are not that."""
    axis = [ir.IntegerAttr(op.attributes[RUNTIME_GROUP]).value
            if RUNTIME_GROUP in op.attributes else None for op in (scores, out_op)]
    n = len(ir.ShapedType(generic_operands(scores)[1][0].type).shape) - 2
    if axis[0] != axis[1] or generic_operands(scores)[0][1] != generic_operands(out_op)[0][3]:
        return None
    sources = []
    for op, last_two in ((scores, (n + 1, n + 2)), (out_op, (n + 2, n + 1))):
        loads = [inner for inner in op.regions[0].blocks[0].operations
                 if inner.operation.name == "memref.load"]
        if len(loads) != 1:
            return None
        source, *indices = loads[0].operands
        expected = [None if a == axis[0] else a for a in range(n)] + list(last_two)
        extents = ir.MemRefType(source.type).shape
        if len(indices) != n + 2 or any(
                want is not None and not _is_index_of(index, want, extent)
                for index, want, extent in zip(indices, expected, extents)):
            return None
        sources.append(source)
    return tuple(sources)


def _is_index_of(value: ir.Value, dim: int, extent: int) -> bool:
    """Whether `value` is linalg.index `dim`, or 0 along an `extent` of 1 (canonicalize
    folds the index of a unit dim)."""
    op = defining_op(value)
    if op is not None and op.name == "arith.constant" and extent == 1:
        return ir.IntegerAttr(op.attributes["value"]).value == 0
    return op is not None and op.name == "linalg.index" and \
        ir.IntegerAttr(op.attributes["dim"]).value == dim


def _reads_in_order(scores: ir.Operation, out_op: ir.Operation, groups: list) -> bool:
    """The scores generic reads Q at (p.., i, d) and K at (p../g.., j, d), the out generic
    V at (p../g.., j, e), as the lowering writes them: the kernels index the buffers so
    (a transpose folded into these maps would be read wrong). A run-time group (None in
    `groups`): K and V are gathered, their indices checked by _gathered_kv."""
    n = len(groups)
    dim = ir.AffineDimExpr.get
    lead = [dim(a) if g == 1 else
            ir.AffineExpr.get_floor_div(dim(a), ir.AffineConstantExpr.get(g))
            for a, g in enumerate(groups) if g is not None]

    def maps(op):
        return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    q_map, k_map = maps(scores)[:2]
    v_map = maps(out_op)[3]
    q_in_order = list(q_map.results) == [dim(a) for a in range(n)] + [dim(n), dim(n + 2)]
    if None in groups:
        return q_in_order
    return q_in_order and list(k_map.results) == lead + [dim(n + 1), dim(n + 2)] and \
        list(v_map.results) == lead + [dim(n + 2), dim(n + 1)]


def _kv_groups(query: ir.Value, key: ir.Value, value: ir.Value,
               run_time_axis: Optional[int] = None) -> Optional[list]:
    """Per (p..) axis, how many of Q's indices share one of K's and V's (the lowering
    reads them at p / group): Q's extent over K's, which must divide it; None at
    `run_time_axis` (the axis of a run-time group, where any extents go)."""
    q_lead = list(ir.ShapedType(query.type).shape)[:-2]
    k_lead = list(ir.ShapedType(key.type).shape)[:-2]
    v_lead = list(ir.ShapedType(value.type).shape)[:-2]
    if run_time_axis is not None:
        for lead in (q_lead, k_lead, v_lead):
            lead[run_time_axis] = 1
    dynamic = ir.ShapedType.is_dynamic_size
    if k_lead != v_lead or any(dynamic(q) != dynamic(k) for q, k in zip(q_lead, k_lead)):
        return None  # a run-time extent is read as is (cir-raise-attention groups static ones)
    if any(not dynamic(k) and (k < 1 or q % k) for q, k in zip(q_lead, k_lead)):
        return None
    return [None if a == run_time_axis else 1 if dynamic(k) else q // k
            for a, (q, k) in enumerate(zip(q_lead, k_lead))]


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
        # (out's gather of V with a run-time group reads indices too; a condition there
        # is also max's and sum's, which the three must agree on)
        reads_index = RUNTIME_GROUP not in op.attributes and any(
            inner.operation.name == "linalg.index"
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
