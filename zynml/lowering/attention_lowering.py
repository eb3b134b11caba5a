"""cir.attention -> linalg on tensors: four generics a backend can also take as one.

    S[p.., i, j] = sum_d (q[p.., i, d] * scale) * k[p.., j, d]          "scores"
    M[p.., i]    = max_j  (allowed ? S : -inf)                          "max"
    L[p.., i]    = sum_j  (allowed ? exp(S - M) : 0)                    "sum"
    O[p.., i, e] = sum_j  (allowed ? exp(S - M) / L * v[p.., j, e] : 0) "out"

computed in f32 (f64 for f64 inputs), then O is rounded to the element type ("round",
for f16 and bf16). `allowed` is the mask's bit at (p.., i, j), and with causal_offset = c
also j <= i + c (the generics read i and j with linalg.index); a row with no allowed key
sums nothing: 0, as the spec's loops give. Each generic carries
`library_call = "zynml_attention_<part>"`: linalg's way of saying "a library may run
this"; the three that apply a causal condition also carry `zynml.causal_offset = c`
(i64), so a backend taking the run as one kernel need not read their bodies. A run-time
offset (cir.attention's `offset` operand: j <= i + c + offset) is their last input, a
0-d tensor (the scalar input's own where it is one, so a kernel reads it from there at
run time), and they carry `zynml.runtime_offset`. With `kv_group` g, k and v are read at
p / g along each leading axis (an affine floordiv): the query heads of a group share
their key and value head, nothing is copied. A run-time group (cir.attention's `group`,
along `group_axis` a) cannot be a map: the scores and out generics take it as a 0-d
input (their second and fourth) and gather k and v in their bodies at p_a / group,
clamped into each one's extent (what the body raised from reads), and carry
`zynml.runtime_group = a`. IREE and the CPU run the generics; the CUDA backend finds the
run of them (zynml/backend/cuda/strategies/attention_match.py) and launches one
flash-attention kernel, so S, M and L never reach memory there.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, math, tensor

from .cir_ops import (attention_operands, defining_op, i64_array, int_attr, kv_group,
                      run_time_group)
from .linalg_emit import iterator_attr, tensor_extents

__all__ = ["CAUSAL_OFFSET", "LIBRARY_CALL_PREFIX", "RUNTIME_GROUP", "RUNTIME_OFFSET",
           "float_constant", "lower_attention", "widened"]

LIBRARY_CALL_PREFIX = "zynml_attention_"
CAUSAL_OFFSET = "zynml.causal_offset"  # on the max, sum and out generics of causal attention
RUNTIME_OFFSET = "zynml.runtime_offset"  # ... whose last input is a run-time offset (0-d)
RUNTIME_GROUP = "zynml.runtime_group"  # on scores and out: they gather k / v (i64: the axis)


def lower_attention(op: ir.Operation) -> ir.Value:
    """Emit the generics before `op`; return the value that replaces its result."""
    query, key, value, scale, mask, offset = attention_operands(op)
    groups = kv_group(op)
    mask_dims = (i64_array(op, "mask_dims") or []) if mask else []
    causal = int_attr(op, "causal_offset")
    element = ir.RankedTensorType(query.type).element_type
    acc = ir.F64Type.get() if str(element) == "f64" else ir.F32Type.get()
    n = ir.RankedTensorType(query.type).rank - 2
    with ir.InsertionPoint(op), op.location:
        q_shape, v_shape = tensor_extents(query), tensor_extents(value)
        lead, rows, keys = q_shape[:-2], q_shape[-2], tensor_extents(key)[-2]
        scale_acc = widened(scale, acc)
        kv_lead = [ir.AffineDimExpr.get(a) if g == 1 else ir.AffineExpr.get_floor_div(
            ir.AffineDimExpr.get(a), ir.AffineConstantExpr.get(g)) for a, g in enumerate(groups)]
        offset_tensor = _zero_d(offset) if offset is not None else None
        grouped_at_run_time = run_time_group(op)
        gathered = _GroupedRead(*grouped_at_run_time, n, [key, value]) \
            if grouped_at_run_time is not None else None

        def score(q, k, s):
            return arith.AddFOp(s, arith.MulFOp(arith.MulFOp(widened(q, acc), scale_acc).result,
                                                widened(k, acc)).result).result
        q_map, s_map = _dims(*range(n), n, n + 2), _dims(*range(n + 2))
        if gathered is None:
            scores = _generic("scores", [query, key], _filled(lead + [rows, keys], acc, 0.0),
                              n + 3, [q_map, kv_lead + _dims(n + 1, n + 2), s_map], n + 2,
                              score)
        else:
            scores = _generic("scores", [query, gathered.tensor],
                              _filled(lead + [rows, keys], acc, 0.0), n + 3,
                              [q_map, [], s_map], n + 2,
                              lambda q, g, s: score(q, gathered.read(key, g, n + 1, n + 2), s),
                              group_axis=gathered.axis)
        row = _dims(*range(n + 1))
        scores_map, mask_map = _dims(*range(n + 2)), _dims(*mask_dims)
        inputs, maps = [scores], [scores_map]
        if mask is not None:
            inputs, maps = inputs + [mask], maps + [mask_map]
        if offset_tensor is not None:  # read as the generics' last block argument
            inputs, maps = inputs + [offset_tensor], maps + [[]]
        run_time = [None]  # the offset's block argument in the generic being built

        def allowed(bit, key_dim, value, otherwise):
            """`value` where the mask's `bit` (None: no mask) and the causal condition
            between i (dim n) and j (dim `key_dim`) allow the score, else `otherwise`."""
            condition = _causal_condition(causal, n, key_dim, run_time[0]) \
                if causal is not None else None
            if bit is not None:
                condition = bit if condition is None else arith.AndIOp(condition, bit).result
            return value if condition is None else \
                arith.SelectOp(condition, value, otherwise).result

        bit = (lambda a: a[1]) if mask is not None else (lambda a: None)

        def reading_offset(body):
            """`body` with the offset's block argument (the one before the init) noted."""
            if offset_tensor is None:
                return body

            def wrapped(*a):
                run_time[0] = a[-2]
                return body(*a)
            return wrapped
        row_max = _generic(
            "max", inputs, _filled(lead + [rows], acc, float("-inf")), n + 2,
            maps + [row], n + 1,
            reading_offset(lambda *a: arith.MaximumFOp(
                a[-1], allowed(bit(a), n + 1, a[0], float_constant(acc, "-inf"))).result),
            causal, offset_tensor is not None)
        shifted = lambda s, m: math.ExpOp(arith.SubFOp(s, m).result).result  # noqa: E731
        row_sum = _generic(
            "sum", [scores, row_max] + inputs[1:], _filled(lead + [rows], acc, 0.0), n + 2,
            [scores_map, row] + maps[1:] + [row], n + 1,
            reading_offset(lambda *a: arith.AddFOp(a[-1], allowed(
                bit(a[1:]), n + 1, shifted(a[0], a[1]), float_constant(acc, 0.0))).result),
            causal, offset_tensor is not None)
        # (p.., i, e, j): j innermost, the reduction
        p_i_j, p_i = _dims(*range(n + 1), n + 2), _dims(*range(n + 1))
        if gathered is None:
            out_inputs = [scores, row_max, row_sum, value] + inputs[1:]
            out_maps = [p_i_j, p_i, p_i, kv_lead + _dims(n + 2, n + 1)]
        else:  # the group where V's block argument was; V gathered with it
            out_inputs = [scores, row_max, row_sum, gathered.tensor] + inputs[1:]
            out_maps = [p_i_j, p_i, p_i, []]
        if mask is not None:
            out_maps.append(_dims(*[(n + 2 if d == n + 1 else d) for d in mask_dims]))
        if offset_tensor is not None:  # the last of inputs[1:]
            out_maps.append([])
        out_maps.append(_dims(*range(n + 2)))

        def weighted(s, m, l, v, *rest):
            if gathered is not None:  # v: the group
                v = gathered.read(value, v, n + 2, n + 1)
            term = arith.MulFOp(arith.DivFOp(shifted(s, m), l).result, widened(v, acc)).result
            term = allowed(rest[0] if mask is not None else None, n + 2, term,
                           float_constant(acc, 0.0))
            return arith.AddFOp(rest[-1], term).result

        out = _generic("out", out_inputs, _filled(lead + [rows, v_shape[-1]], acc, 0.0),
                       n + 3, out_maps, n + 2, reading_offset(weighted), causal,
                       offset_tensor is not None,
                       gathered.axis if gathered is not None else None)
        if acc != element:
            out = _generic("round", [out], tensor.EmptyOp(lead + [rows, v_shape[-1]],
                                                          element).result,
                           n + 2, [_dims(*range(n + 2))] * 2, n + 2,
                           lambda o, _: arith.TruncFOp(element, o).result)
    return out


class _GroupedRead:
    """K and V read along `axis` at head clamp(p / group, 0, heads - 1), group a run-time
    integer and heads each tensor's own: the 0-d `tensor` a generic takes, the element
    gathered in the body."""

    def __init__(self, axis: int, group: ir.Value, n: int, sources: list):
        self.axis, self.n, self.tensor = axis, n, _zero_d(group)
        index = ir.IndexType.get()
        self.last_head = {}  # source -> its last head along axis (an index Value)
        for source in sources:
            heads = tensor_extents(source)[axis]
            self.last_head[source] = arith.ConstantOp(index, heads - 1).result \
                if isinstance(heads, int) else \
                arith.SubIOp(heads, arith.ConstantOp(index, 1).result).result

    def read(self, source: ir.Value, group: ir.Value, key_dim: int, last_dim: int) -> ir.Value:
        """source[p.. (p_axis / group, clamped), j, last] in a generic's body, `group` its
        block argument, j and last the generic's dims `key_dim` and `last_dim`."""
        index = ir.IndexType.get()
        if not isinstance(group.type, ir.IndexType):
            group = arith.IndexCastOp(index, group).result
        lead = [linalg.IndexOp(a).result for a in range(self.n)]
        head = arith.FloorDivSIOp(lead[self.axis], group).result
        head = arith.MaxSIOp(head, arith.ConstantOp(index, 0).result).result
        lead[self.axis] = arith.MinSIOp(head, self.last_head[source]).result
        return tensor.ExtractOp(source, lead + [linalg.IndexOp(key_dim).result,
                                                linalg.IndexOp(last_dim).result]).result


def _causal_condition(offset: int, row_dim: int, key_dim: int,
                      run_time: ir.Value = None) -> ir.Value:
    """j <= i + offset [+ run_time] (signed: i + offset may be negative), i and j the
    generic's dims, run_time an integer scalar."""
    i, j = linalg.IndexOp(row_dim).result, linalg.IndexOp(key_dim).result
    if offset:
        i = arith.AddIOp(i, arith.ConstantOp(ir.IndexType.get(), offset).result).result
    if run_time is not None:
        if not isinstance(run_time.type, ir.IndexType):
            run_time = arith.IndexCastOp(ir.IndexType.get(), run_time).result
        i = arith.AddIOp(i, run_time).result
    return arith.CmpIOp(arith.CmpIPredicate.sle, j, i).result


def _zero_d(scalar: ir.Value) -> ir.Value:
    """A 0-d tensor holding `scalar`: the one it was extracted from when it is a 0-d
    input's element (a kernel then reads the input itself), else a new one."""
    source = defining_op(scalar)
    if source is not None and source.name == "tensor.extract" and len(source.operands) == 1:
        return source.operands[0]
    return tensor.FromElementsOp(ir.RankedTensorType.get([], scalar.type), [scalar]).result


def _generic(part: str, inputs: list, init: ir.Value, n_dims: int, maps: list,
             n_parallel: int, body, causal=None, runtime_offset: bool = False,
             group_axis: Optional[int] = None) -> ir.Value:
    kinds = ["parallel"] * n_parallel + ["reduction"] * (n_dims - n_parallel)
    generic = linalg.GenericOp([init.type], inputs, [init],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(
                                   ir.AffineMap.get(n_dims, 0, m)) for m in maps]),
                               ir.ArrayAttr.get([iterator_attr(k) for k in kinds]))
    generic.attributes["library_call"] = ir.StringAttr.get(LIBRARY_CALL_PREFIX + part)
    if causal is not None:
        generic.attributes[CAUSAL_OFFSET] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), causal)
    if runtime_offset:
        generic.attributes[RUNTIME_OFFSET] = ir.UnitAttr.get()
    if group_axis is not None:
        generic.attributes[RUNTIME_GROUP] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), group_axis)
    types = [ir.RankedTensorType(v.type).element_type for v in inputs + [init]]
    block = generic.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return generic.results[0]


def _dims(*positions: int) -> list:
    return [ir.AffineDimExpr.get(p) for p in positions]


def _filled(shape: list, element: ir.Type, value: float) -> ir.Value:
    empty = tensor.EmptyOp(shape, element).result
    return linalg.fill(float_constant(element, value), outs=[empty])


def float_constant(element: ir.Type, value) -> ir.Value:
    """A constant of the float type `element` (value: a number, or "-inf")."""
    return arith.ConstantOp(element, float(value)).result


def widened(value: ir.Value, to: ir.Type) -> ir.Value:
    """`value` extended to the float type `to` (itself when it has that type)."""
    if value.type == to:
        return value
    return arith.ExtFOp(to, value).result
