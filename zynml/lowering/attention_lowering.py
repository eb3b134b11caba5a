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
(i64), so a backend taking the run as one kernel need not read their bodies. IREE and
the CPU run the generics; the CUDA backend finds the run of them
(zynml/backend/cuda/strategies/attention.py) and launches one flash-attention kernel, so S, M
and L never reach memory there.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, math, tensor

from .cir_ops import i64_array, int_attr
from .linalg_emit import iterator_attr

__all__ = ["CAUSAL_OFFSET", "LIBRARY_CALL_PREFIX", "float_constant", "lower_attention",
           "widened"]

LIBRARY_CALL_PREFIX = "zynml_attention_"
CAUSAL_OFFSET = "zynml.causal_offset"  # on the max, sum and out generics of causal attention


def lower_attention(op: ir.Operation) -> ir.Value:
    """Emit the generics before `op`; return the value that replaces its result."""
    query, key, value, scale, *rest = op.operands
    mask = rest[0] if rest else None
    mask_dims = (i64_array(op, "mask_dims") or []) if mask else []
    causal = int_attr(op, "causal_offset")
    q_shape = list(ir.RankedTensorType(query.type).shape)
    k_shape = list(ir.RankedTensorType(key.type).shape)
    v_shape = list(ir.RankedTensorType(value.type).shape)
    element = ir.RankedTensorType(query.type).element_type
    acc = ir.F64Type.get() if str(element) == "f64" else ir.F32Type.get()
    lead, rows, keys = q_shape[:-2], q_shape[-2], k_shape[-2]
    n = len(lead)
    with ir.InsertionPoint(op), op.location:
        scale_acc = widened(scale, acc)
        scores = _generic(
            "scores", [query, key], _filled(lead + [rows, keys], acc, 0.0), n + 3,
            [_dims(*range(n), n, n + 2), _dims(*range(n), n + 1, n + 2),
             _dims(*range(n + 2))], n + 2,
            lambda q, k, s: arith.AddFOp(s, arith.MulFOp(
                arith.MulFOp(widened(q, acc), scale_acc).result,
                widened(k, acc)).result).result)
        row = _dims(*range(n + 1))
        scores_map, mask_map = _dims(*range(n + 2)), _dims(*mask_dims)
        inputs, maps = [scores], [scores_map]
        if mask is not None:
            inputs, maps = inputs + [mask], maps + [mask_map]

        def allowed(bit, key_dim, value, otherwise):
            """`value` where the mask's `bit` (None: no mask) and the causal condition
            between i (dim n) and j (dim `key_dim`) allow the score, else `otherwise`."""
            condition = _causal_condition(causal, n, key_dim) if causal is not None else None
            if bit is not None:
                condition = bit if condition is None else arith.AndIOp(condition, bit).result
            return value if condition is None else \
                arith.SelectOp(condition, value, otherwise).result

        bit = (lambda a: a[1]) if mask is not None else (lambda a: None)
        row_max = _generic(
            "max", inputs, _filled(lead + [rows], acc, float("-inf")), n + 2,
            maps + [row], n + 1,
            lambda *a: arith.MaximumFOp(
                a[-1], allowed(bit(a), n + 1, a[0], float_constant(acc, "-inf"))).result,
            causal)
        shifted = lambda s, m: math.ExpOp(arith.SubFOp(s, m).result).result  # noqa: E731
        row_sum = _generic(
            "sum", [scores, row_max] + inputs[1:], _filled(lead + [rows], acc, 0.0), n + 2,
            [scores_map, row] + maps[1:] + [row], n + 1,
            lambda *a: arith.AddFOp(a[-1], allowed(bit(a[1:]), n + 1, shifted(a[0], a[1]),
                                                   float_constant(acc, 0.0))).result,
            causal)
        # (p.., i, e, j): j innermost, the reduction
        p_i_j, p_i = _dims(*range(n + 1), n + 2), _dims(*range(n + 1))
        out_inputs = [scores, row_max, row_sum, value] + inputs[1:]
        out_maps = [p_i_j, p_i, p_i, _dims(*range(n), n + 2, n + 1)]
        if mask is not None:
            out_maps.append(_dims(*[(n + 2 if d == n + 1 else d) for d in mask_dims]))
        out_maps.append(_dims(*range(n + 2)))

        def weighted(s, m, l, v, *rest):
            term = arith.MulFOp(arith.DivFOp(shifted(s, m), l).result, widened(v, acc)).result
            term = allowed(rest[0] if mask is not None else None, n + 2, term,
                           float_constant(acc, 0.0))
            return arith.AddFOp(rest[-1], term).result

        out = _generic("out", out_inputs, _filled(lead + [rows, v_shape[-1]], acc, 0.0),
                       n + 3, out_maps, n + 2, weighted, causal)
        if acc != element:
            out = _generic("round", [out], tensor.EmptyOp(lead + [rows, v_shape[-1]],
                                                          element).result,
                           n + 2, [_dims(*range(n + 2))] * 2, n + 2,
                           lambda o, _: arith.TruncFOp(element, o).result)
    return out


def _causal_condition(offset: int, row_dim: int, key_dim: int) -> ir.Value:
    """j <= i + offset (signed: i + offset may be negative), i and j the generic's dims."""
    i, j = linalg.IndexOp(row_dim).result, linalg.IndexOp(key_dim).result
    if offset:
        i = arith.AddIOp(i, arith.ConstantOp(ir.IndexType.get(), offset).result).result
    return arith.CmpIOp(arith.CmpIPredicate.sle, j, i).result


def _generic(part: str, inputs: list, init: ir.Value, n_dims: int, maps: list,
             n_parallel: int, body, causal=None) -> ir.Value:
    kinds = ["parallel"] * n_parallel + ["reduction"] * (n_dims - n_parallel)
    generic = linalg.GenericOp([init.type], inputs, [init],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(
                                   ir.AffineMap.get(n_dims, 0, m)) for m in maps]),
                               ir.ArrayAttr.get([iterator_attr(k) for k in kinds]))
    generic.attributes["library_call"] = ir.StringAttr.get(LIBRARY_CALL_PREFIX + part)
    if causal is not None:
        generic.attributes[CAUSAL_OFFSET] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), causal)
    types = [ir.RankedTensorType(v.type).element_type for v in inputs + [init]]
    block = generic.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return generic.results[0]


def _dims(*positions: int) -> list:
    return [ir.AffineDimExpr.get(p) for p in positions]


def _filled(shape: list[int], element: ir.Type, value: float) -> ir.Value:
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
